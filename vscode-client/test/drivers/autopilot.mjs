// The autopilot in the real VS Code: a scripted OpenAI-compatible server on loopback
// ($DR_MODEL_URL, started by tests/vscode/test_vscode.py) plays the model. The user runs
// "Deep Research: Run Autopilot" from the palette, watches the model's text appear in
// the editor, the status bar follow the rounds and the Research Problems view grow, then
// stops the run with the status bar's stop button.
// Exit code: 0 passed, 1 failed, 2 the environment or the .vsix is missing.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { log, openWorkbench, reportFailure, runPaletteCommand, waitFor } from './lib.mjs';

const MODEL_URL = process.env.DR_MODEL_URL;
if (!MODEL_URL) {
  console.error('DR_MODEL_URL: the scripted model server is missing (run this through pytest)');
  process.exit(2);
}
const HELD = 'The model is still writing this message';
const API_KEY = process.env.DR_API_KEY || 'sk-test-key-from-the-secret-storage';

/** Every file under `dir`. */
function filesUnder(dir) {
  return fs.readdirSync(dir, { withFileTypes: true, recursive: true }).filter((e) => e.isFile())
    .map((e) => path.join(e.parentPath ?? e.path, e.name));
}

let bench;
let exitCode = 1;
const step = (s) => log(`step: ${s}`);
try {
  bench = await openWorkbench('autopilot', {
    machineSettings: { 'deepResearch.baseUrl': MODEL_URL, 'deepResearch.model': 'scripted-model' },
  });
  const { page, research } = bench;
  await page.locator('.statusbar-item', { hasText: 'No problem defined' }).first().waitFor({ timeout: 30000 });

  step('set the API key: it goes to the secret storage and the server\'s environment, never to settings');
  await runPaletteCommand(page, 'Deep Research: Set API Key');
  await page.locator('.quick-input-widget input[type="password"]').waitFor();
  await page.keyboard.type(API_KEY);
  await page.keyboard.press('Enter');
  await page.locator('.statusbar-item', { hasText: 'API key stored' }).first().waitFor({ timeout: 30000 });
  await page.locator('.statusbar-item', { hasText: 'No problem defined' }).first().waitFor({ timeout: 30000 });
  const settingsFiles = ['User', 'Machine'].map((d) => path.join(bench.dirs.userData, d, 'settings.json'));
  const leaked = [...settingsFiles, ...filesUnder(bench.dirs.ws)].filter((f) => fs.existsSync(f) && fs.readFileSync(f, 'utf8').includes(API_KEY));
  if (leaked.length) throw new Error(`the API key was written to ${leaked.join(', ')}`);

  step('run the autopilot from the palette');
  await runPaletteCommand(page, 'Deep Research: Run Autopilot');

  step('the model defines the problem and breaks it down: the problem tree grows');
  const header = page.locator('.pane-header', { hasText: 'Research Problems' }).first();
  await header.waitFor();
  if ((await header.getAttribute('aria-expanded')) !== 'true') await header.click();
  const root = page.locator('.monaco-list-row', { hasText: 'Tiled matrix multiplication' }).first();
  await root.waitFor({ timeout: 60000 });
  await page.locator('.statusbar-item', { hasText: '[0/2]' }).first().waitFor({ timeout: 30000 }); // two criteria added
  const child = page.locator('.monaco-list-row', { hasText: 'Cache sizes' }).first();
  await waitFor('the new subproblem in the tree', async () => {
    if (await child.isVisible()) return true;
    if ((await root.getAttribute('aria-expanded')) === 'false') await root.locator('.monaco-tl-twistie').click();
    await child.waitFor({ timeout: 2000 });
    return true;
  }, 30000);

  step('the third reply streams into the editor while the status bar shows the round');
  const editorGroup = page.locator('.editor-group-container', { has: page.locator('.tab.active', { hasText: 'message.dr' }) }).first();
  await editorGroup.locator('.view-lines', { hasText: HELD }).first().waitFor({ timeout: 30000 });
  await page.locator('.statusbar-item', { hasText: 'Autopilot: round 3' }).first().waitFor();
  const stop = page.locator('.statusbar-item', { hasText: /^\s*Stop\s*$/ }).first();
  await stop.waitFor();

  step('the stop button stops it; the partial reply stays in the editor, unexecuted');
  await stop.click();
  await page.locator('.statusbar-item', { hasText: 'Autopilot stopped' }).first().waitFor({ timeout: 20000 });
  await waitFor('the stop button to go', async () => !(await stop.isVisible()), 10000);
  await editorGroup.locator('.view-lines', { hasText: HELD }).first().waitFor();
  const journal = fs.readFileSync(path.join(research, '.deep-research', 'journal.jsonl'), 'utf8')
    .split('\n').filter(Boolean).map((l) => JSON.parse(l)).filter((r) => r.record === 'round');
  const inResearch = filesUnder(bench.dirs.ws).filter((f) => fs.readFileSync(f, 'utf8').includes(API_KEY));
  if (inResearch.length) throw new Error(`the API key was written to ${inResearch.join(', ')}`);
  const outcomes = journal.map((r) => r.outcome).join(',');
  if (outcomes !== 'executed,executed,cancelled') throw new Error(`unexpected rounds in the journal: ${outcomes}`);

  await page.screenshot({ path: path.join(bench.dirs.root, 'final.png') });
  log('autopilot UI test: 1 passed, 0 failed');
  exitCode = 0;
} catch (e) {
  await reportFailure(bench, e);
  log('autopilot UI test: 0 passed, 1 failed');
} finally {
  await bench?.close(exitCode === 0);
}
process.exit(exitCode);
