// Parallel research with the autopilot in the real VS Code: the research is defined and broken
// down (by the command line); a scripted model on loopback ($DR_MODEL_URL, one script per
// researcher) plays the model. Run Autopilot (deepResearch.parallel 2, approvalMode create):
// main delegates both subproblems, both researchers write at once, each into its own
// document, and each message above the approval mode waits there. The user approves each in
// its own document (one opened from the Research Problems view, one from Deep Research:
// Researchers, main's from the notification's button) until the research finishes.
// Exit code: 0 passed, 1 failed, 2 the environment or the .vsix is missing.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { log, openWorkbench, reportFailure, researchCli, runPaletteCommand, screenshot, waitFor } from './lib.mjs';

const MODEL_URL = process.env.DR_MODEL_URL;
const PLAN = process.env.DR_PLAN ? JSON.parse(process.env.DR_PLAN) : null;
if (!MODEL_URL || !PLAN) {
  console.error('DR_MODEL_URL and DR_PLAN: the scripted model and the plan are missing (run this through pytest)');
  process.exit(2);
}

let bench;
let exitCode = 1;
const step = (s) => log(`step: ${s}`);
try {
  bench = await openWorkbench('parallel', {
    machineSettings: {
      'deepResearch.baseUrl': MODEL_URL, 'deepResearch.model': 'scripted-model',
      'deepResearch.approvalMode': 'create', 'deepResearch.parallel': 2,
    },
    before: (dirs) => {
      const message = path.join(dirs.ws, 'research', 'message.dr');
      for (const text of PLAN) {
        fs.writeFileSync(message, text);
        researchCli('execute', message);
      }
    },
  });
  const { page, research, dirs } = bench;
  const doc = (title) => path.join(research, 'Subproblems', title, 'message.dr');
  const editor = page.locator('.editor-group-container .monaco-editor .view-lines').first();
  const toast = (text) => page.locator('.notification-toast', { hasText: text }).first();
  const approve = async () => {
    await editor.click();
    await runPaletteCommand(page, 'Source Action...');
    const action = page.locator('.action-widget .monaco-list-row', { hasText: 'approve and execute' }).first();
    await action.waitFor({ timeout: 20000 });
    await action.click();
  };
  const closeToasts = async () => {
    await page.keyboard.press('Escape');
    for (const close of await page.locator('.notification-toast .codicon-notifications-clear').all()) {
      await close.click().catch(() => undefined);
    }
  };
  await page.locator('.statusbar-item', { hasText: '[0/2]' }).first().waitFor({ timeout: 30000 });

  step('Run Autopilot: main delegates; both researchers write at once, each waits for approval in its own document');
  await runPaletteCommand(page, 'Deep Research: Run Autopilot');
  await toast('waits for approval in research/Subproblems/Cache sizes/message.dr').waitFor({ timeout: 60000 });
  await toast('waits for approval in research/Subproblems/Loop order/message.dr').waitFor({ timeout: 60000 });
  await page.locator('.statusbar-item', { hasText: 'Autopilot waits for approval' }).first().waitFor({ timeout: 30000 });
  await page.locator('.statusbar-item', { hasText: '3 researchers' }).first().waitFor({ timeout: 30000 });
  for (const title of ['Cache sizes', 'Loop order']) {
    if (!fs.readFileSync(doc(title), 'utf8').includes('///focus_up')) throw new Error(`${title}'s reply is not in its document`);
  }
  await screenshot(page, dirs, 'parallel-1-waiting');
  await closeToasts();

  step('the tree opens Cache sizes\' document; "approve and execute" there runs it as Cache sizes');
  const header = page.locator('.pane-header', { hasText: 'Research Problems' }).first();
  if ((await header.getAttribute('aria-expanded')) !== 'true') await header.click();
  const problems = page.locator('.pane', { has: page.locator('.pane-header', { hasText: 'Research Problems' }) }).first();
  const row = (title) => problems.locator('.monaco-list-row', { has: page.locator('.label-name', { hasText: new RegExp(`^${title}$`) }) }).first();
  await row('Cache sizes').locator('.label-description', { hasText: 'researcher working' }).waitFor();
  await row('Cache sizes').click();
  await editor.locator('.view-line', { hasText: 'Names the L1 size' }).first().waitFor();
  await approve();
  await waitFor('Cache sizes to end (its report written)', () =>
    fs.existsSync(path.join(research, 'Subproblems', 'Cache sizes', 'Report 3 Pager.md')), 30000);
  await row('Cache sizes').locator('.label-description', { hasText: 'researcher' }).waitFor({ state: 'detached', timeout: 30000 });

  step('Loop order still waits (the run went on and stopped there again); Researchers opens its document');
  await toast('waits for approval in research/Subproblems/Loop order/message.dr').waitFor({ timeout: 60000 });
  await closeToasts();
  await runPaletteCommand(page, 'Deep Research: Researchers');
  const pick = page.locator('.quick-input-list .monaco-list-row', { hasText: 'Loop order' }).first();
  await pick.waitFor();
  await pick.click();
  await editor.locator('.view-line', { hasText: 'Names the loop order' }).first().waitFor();
  await approve();

  step('main\'s last message waits in main\'s document; its button opens it; approving it finishes the research');
  const mainToast = toast('The main researcher\'s message waits for approval in research/message.dr');
  await mainToast.waitFor({ timeout: 60000 });
  await mainToast.locator('.monaco-button', { hasText: 'Open It' }).click();
  await editor.locator('.view-line', { hasText: 'Conclusion: 16x16 tiles.' }).first().waitFor();
  await approve();
  await page.locator('.statusbar-item', { hasText: 'Autopilot finished' }).first().waitFor({ timeout: 60000 });
  const state = JSON.parse(fs.readFileSync(path.join(research, '.deep-research', 'state.json'), 'utf8'));
  if (state.phase !== 'finished') throw new Error(`the research is ${state.phase}, not finished`);
  await screenshot(page, dirs, 'parallel-2-finished');

  log('parallel autopilot UI test: 1 passed, 0 failed');
  exitCode = 0;
} catch (e) {
  await reportFailure(bench, e);
  log('parallel autopilot UI test: 0 passed, 1 failed');
} finally {
  await bench?.close(exitCode === 0);
}
process.exit(exitCode);
