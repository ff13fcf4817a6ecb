// Setting up a research in the real VS Code, from a Python that lacks the autopilot's packages:
// 1. the extension offers once to install them; the user clicks Install (pip installs from the
//    test's wheelhouse: PIP_NO_INDEX=1, PIP_FIND_LINKS) and the server restarts with them;
// 2. New Research walks through folder, instruction, context text and a web page ($DR_PAGE_URL,
//    on loopback), and opens the message document beside the prompt;
// 3. Run Autopilot against the scripted model ($DR_MODEL_URL) finishes the research, and offers
//    the final report (Show Final Report opens it);
// 4. Continue Research… reopens it with a new instruction (no attachments: Continue);
// 5. the Explorer's context menu attaches a folder to it (its notes.md; its picture skipped, and said);
// 6. Compile Report as Word without pandoc offers the export packages; Install puts them in the
//    private environment (from the same wheelhouse) and the report is written.
// Screenshots go to $DR_SCREENSHOTS. Exit code: 0 passed, 1 failed, 2 the environment is missing.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { log, openWorkbench, runPaletteCommand, screenshot, tail, waitFor } from './lib.mjs';

const { DR_MODEL_URL: MODEL_URL, DR_PAGE_URL: PAGE_URL, DR_WHEELHOUSE: WHEELHOUSE, DR_BARE_PYTHON: BARE_PYTHON } = process.env;
if (!MODEL_URL || !PAGE_URL || !WHEELHOUSE || !BARE_PYTHON) {
  console.error('DR_MODEL_URL, DR_PAGE_URL, DR_WHEELHOUSE and DR_BARE_PYTHON are set by tests/vscode/test_vscode.py');
  process.exit(2);
}
const FOLDER = 'gpu study';

function findFile(dir, name) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile() && entry.name === name) return path.join(entry.parentPath ?? entry.path, entry.name);
  }
  return undefined;
}

let bench;
let exitCode = 1;
const step = (s) => log(`step: ${s}`);
try {
  bench = await openWorkbench('setup', {
    machineSettings: {
      'deepResearch.server.pythonPath': BARE_PYTHON, // a Python with nothing installed: no openai, no trafilatura
      'deepResearch.baseUrl': MODEL_URL,
      'deepResearch.model': 'scripted-model',
      'deepResearch.fetch.allowPrivateNetworks': true, // the page is served on loopback
    },
    env: { PIP_NO_INDEX: '1', PIP_FIND_LINKS: WHEELHOUSE, PIP_DISABLE_PIP_VERSION_CHECK: '1', OPENAI_API_KEY: 'sk-test' },
    before: (dirs) => {
      fs.mkdirSync(path.join(dirs.ws, 'sources'));
      fs.writeFileSync(path.join(dirs.ws, 'sources', 'notes.md'), '# Notes\nTiles of 64 were slow on the old laptop.\n');
      fs.writeFileSync(path.join(dirs.ws, 'sources', 'photo.png'), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0]));
    },
  });
  const { page, dirs } = bench;
  const shot = (name) => screenshot(page, dirs, name);
  const quickTitle = (text) => page.locator('.quick-input-widget .quick-input-title', { hasText: text }).first().waitFor();
  const choose = async (titleText, row) => {
    await quickTitle(titleText);
    await page.locator('.quick-input-list .monaco-list-row', { hasText: row }).first().click();
  };
  const answer = async (titleText, text) => {
    await quickTitle(titleText);
    await page.locator('.quick-input-widget input').first().fill(text);
    await page.keyboard.press('Enter');
  };

  step('the extension offers once to install the missing packages; Install');
  const offer = page.locator('.notification-toast', { hasText: 'Install them into a private environment' }).first();
  await offer.waitFor({ timeout: 60000 });
  if (!/openai/.test(await offer.innerText())) throw new Error(`the offer does not name openai: ${await offer.innerText()}`);
  await shot('setup-01-install-offer');
  await offer.locator('.monaco-button', { hasText: /^Install$/ }).click();
  await page.locator('.notification-toast', { hasText: 'installing Python packages' }).first().waitFor({ timeout: 20000 });
  await shot('setup-02-installing');
  await waitFor('the private environment', () => findFile(dirs.userData, 'deep-research-env.json'), 240000, 250);
  await page.locator('.statusbar-item', { hasText: 'Python packages installed' }).first().waitFor({ timeout: 30000 });
  const marker = findFile(dirs.userData, 'deep-research-env.json');
  const envPython = path.join(path.dirname(marker), 'bin', 'python');
  if (!fs.existsSync(path.join(path.dirname(marker), 'lib'))) throw new Error(`no environment beside ${marker}`);
  log(`private environment: ${path.dirname(marker)} (python ${envPython})`);

  step('New Research: folder, instruction, context text, a web page');
  await runPaletteCommand(page, 'Deep Research: New Research');
  await choose('(1/4)', 'New folder in ws');
  await answer('(1/4)', FOLDER);
  await quickTitle('(2/4)');
  await page.locator('.quick-input-widget input').first().fill('Which tile size makes matmul clearest for students?');
  await shot('setup-03-instruction');
  await page.keyboard.press('Enter');
  await choose('(3/4): context, shown', 'Type context text');
  await answer('(3/4): context text', 'The course uses C and 16x16 matrices.');
  await page.locator('.quick-input-list .monaco-list-row', { hasText: '1 added' }).first().waitFor();
  await choose('(3/4): context, shown', 'Continue');
  await choose('(4/4): attachments', 'Attach a web page');
  await answer('(4/4): attachments, for defining the problem: a web page', PAGE_URL);
  await page.locator('.quick-input-list .monaco-list-row', { hasText: '1 added' }).first().waitFor();
  await shot('setup-04-attachments');
  await choose('(4/4): attachments', 'Continue');

  step('the message document opens beside the prompt');
  const study = path.join(dirs.ws, FOLDER);
  const promptFile = path.join(study, '.deep-research', 'prompt.md');
  await page.locator('.tab.active', { hasText: 'message.dr' }).first().waitFor({ timeout: 60000 });
  const promptGroup = page.locator('.editor-group-container', { has: page.locator('.tab', { hasText: 'prompt.md' }) }).first();
  await promptGroup.waitFor();
  if ((await promptGroup.locator('.tab', { hasText: 'message.dr' }).count()) !== 0) throw new Error('the prompt is not beside the message');
  const prompt = fs.readFileSync(promptFile, 'utf8');
  for (const expected of ['Which tile size makes matmul clearest', 'The course uses C and 16x16 matrices.', `source="${PAGE_URL}"`, 'Blocking a loop nest']) {
    if (!prompt.includes(expected)) throw new Error(`the prompt lacks ${expected}`);
  }
  // trafilatura (installed) kept the article and dropped the navigation the fallback would keep
  if (prompt.includes('Log in')) throw new Error('the page was extracted without trafilatura');
  await page.locator('.statusbar-item', { hasText: 'No problem defined' }).first().waitFor({ timeout: 30000 });
  await shot('setup-05-new-research-opened');

  step('Run Autopilot with the installed packages: the scripted model finishes the research');
  // the new research's message document is the active editor (the first research's is open too)
  await runPaletteCommand(page, 'Deep Research: Run Autopilot');
  await page.locator('.statusbar-item', { hasText: 'Autopilot finished' }).first().waitFor({ timeout: 90000 });
  const state = JSON.parse(fs.readFileSync(path.join(study, '.deep-research', 'state.json'), 'utf8'));
  if (state.phase !== 'finished') throw new Error(`the research is ${state.phase}, not finished`);
  if (!fs.readFileSync(path.join(study, 'Attachments', 'Cache blocking.md'), 'utf8').includes(`source: "${PAGE_URL}"`)) {
    throw new Error('the page did not reach the root problem with its source');
  }
  await shot('setup-06-autopilot-finished');

  step('the autopilot offers the answer: Show Final Report opens the root problem\'s report');
  const finished = page.locator('.notification-toast', { hasText: 'research is finished' }).first();
  await finished.waitFor({ timeout: 30000 });
  await finished.locator('.monaco-button', { hasText: 'Show Final Report' }).click();
  await page.locator('.tab.active', { hasText: 'Report 3 Pager.md' }).first().waitFor({ timeout: 30000 });
  await page.locator('.editor-group-container .view-lines', { hasText: 'Conclusion: teach the 16x16 tiled loop nest.' })
    .first().waitFor({ timeout: 30000 });
  await shot('setup-06b-final-report');

  step('Continue Research… reopens it with a new instruction');
  await runPaletteCommand(page, 'Deep Research: Continue Research…');
  await answer('Continue Research', 'Now compare 32x32 tiles too.');
  await choose('Continue Research: attachments', 'Continue');
  await page.locator('.statusbar-item', { hasText: 'research reopened' }).first().waitFor({ timeout: 30000 });
  await waitFor('the new instruction in the prompt', () => fs.readFileSync(promptFile, 'utf8').includes('Now compare 32x32 tiles too.'), 10000);
  if (!fs.readFileSync(promptFile, 'utf8').includes('The user reopened the research')) throw new Error('not reopened');

  step('Explorer: right-click a folder, Attach to Research');
  await page.keyboard.press('Control+Shift+E');
  const row = page.locator('.explorer-folders-view .monaco-list-row', { hasText: 'sources' }).first();
  await row.waitFor();
  await row.click({ button: 'right' });
  const item = page.locator('.monaco-menu .action-item', { hasText: 'Attach to Research' }).first();
  await item.waitFor();
  await shot('setup-07-explorer-menu');
  await item.click();
  const attached = path.join(study, 'Attachments', 'notes.md');
  await waitFor('notes.md among the root problem\'s attachments', () => fs.existsSync(attached) && fs.readFileSync(attached, 'utf8').includes('Tiles of 64'), 20000);
  await waitFor('the attachment in the prompt', () => fs.readFileSync(promptFile, 'utf8').includes('Tiles of 64 were slow'), 10000);
  await page.locator('.notification-toast', { hasText: '1 file attached; skipped photo.png' }).first().waitFor({ timeout: 10000 });
  await shot('setup-08-attached');

  step('Compile Report as Word: pandoc is missing, the export packages are installed on request, the report is written');
  await runPaletteCommand(page, 'Deep Research: Compile Report');
  await choose('Deep Research: Compile Report', 'Word');
  const exportOffer = page.locator('.notification-toast', { hasText: 'Install the export packages' }).first();
  await exportOffer.waitFor({ timeout: 60000 });
  if (/pip install/.test(await exportOffer.innerText())) throw new Error(`the offer tells a pip line: ${await exportOffer.innerText()}`);
  await shot('setup-09-export-offer');
  await exportOffer.locator('.monaco-button', { hasText: /^Install$/ }).click();
  const docx = path.join(study, 'report.docx');
  await waitFor('report.docx, compiled once pandoc is installed', () => fs.existsSync(docx) && fs.statSync(docx).size > 0, 300000, 250);
  if (fs.readFileSync(docx).subarray(0, 2).toString('latin1') !== 'PK') throw new Error('report.docx is not a Word file');
  const held = JSON.parse(fs.readFileSync(findFile(dirs.userData, 'deep-research-env.json'), 'utf8'));
  if (!(held.extras ?? []).includes('export')) throw new Error(`the private environment does not record the export extra: ${JSON.stringify(held)}`);

  log('setup UI test: 1 passed, 0 failed');
  exitCode = 0;
} catch (e) {
  log(`ERROR: ${e.stack || e}`);
  if (bench?.page) await screenshot(bench.page, bench.dirs, 'setup-failure').catch(() => undefined);
  log(`--- code-server log (tail) ---\n${tail(bench?.server?.logFile)}`);
  log('setup UI test: 0 passed, 1 failed');
} finally {
  await bench?.close(exitCode === 0);
}
process.exit(exitCode);
