// Parallel research in the real VS Code: the research's root delegated L1 and L2 (by the
// command line, before the workbench opens). The status bar counts the researchers, the
// Research Problems view shows each delegated problem with its researcher's state, a click
// opens that researcher's message document, and there a message above the approval mode
// (`read`) waits on save until the user approves it (Source Action… "approve and execute"):
// it runs as L1. "Deep Research: Researchers" opens another researcher's document.
// Exit code: 0 passed, 1 failed, 2 the environment or the .vsix is missing.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { editorText, log, openWorkbench, reportFailure, researchCli, runPaletteCommand, screenshot, waitFor } from './lib.mjs';

const PLAN = [
  '<<< define_problem', '///title', 'Cache study', '///content', 'Which tile sizes fit the caches?', '>>>',
  ...['L1', 'L2', 'L3'].flatMap((t) => ['<<< add_subproblem', '///title', t, '///content', `The ${t} cache.`, '>>>']),
  '///delegate L1', '///delegate L2', '',
].join('\n');
const CRITERION = 'Names the L1 size of two CPUs';

let bench;
let exitCode = 1;
const step = (s) => log(`step: ${s}`);
try {
  bench = await openWorkbench('researchers', {
    machineSettings: { 'deepResearch.approvalMode': 'read' },
    before: (dirs) => {
      const message = path.join(dirs.ws, 'research', 'message.dr');
      fs.writeFileSync(message, PLAN);
      researchCli('execute', message);
    },
  });
  const { page, research, dirs } = bench;
  const l1 = path.join(research, 'Subproblems', 'L1');

  step('the status bar counts the researchers');
  await page.locator('.statusbar-item', { hasText: 'Cache study [0/0] · 3 researchers · approval: read' }).first()
    .waitFor({ timeout: 30000 });

  step('the Research Problems view shows each delegated problem with its researcher\'s state');
  const header = page.locator('.pane-header', { hasText: 'Research Problems' }).first();
  await header.waitFor();
  if ((await header.getAttribute('aria-expanded')) !== 'true') await header.click();
  const problems = page.locator('.pane', { has: page.locator('.pane-header', { hasText: 'Research Problems' }) }).first();
  const row = (title) => problems.locator('.monaco-list-row', { has: page.locator('.label-name', { hasText: new RegExp(`^${title}$`) }) }).first();
  await row('L1').locator('.label-description', { hasText: 'researcher working' }).waitFor();
  await row('L2').locator('.label-description', { hasText: 'researcher working' }).waitFor();
  const l3 = await row('L3').locator('.label-description').innerText();
  if (l3.includes('researcher')) throw new Error(`L3 is not delegated, yet its row says: ${l3}`);
  await screenshot(page, dirs, 'researchers-1-tree');

  step('a click on L1 opens its researcher\'s message document; a message above the approval mode waits on save');
  await row('L1').click();
  await page.locator('.tab.active', { hasText: 'message.dr' }).waitFor();
  // The message's editor, wherever it is: once executed, the prompt opens in a group of its
  // own, and its transcript holds the message too.
  const editor = page.locator('.editor-group-container', { has: page.locator('.tab.active', { hasText: 'message.dr' }) })
    .locator('.monaco-editor .view-lines').first();
  const breadcrumbs = page.locator('.breadcrumbs-control').first();
  await waitFor('the breadcrumbs to show L1\'s folder', async () => /L1/.test(await breadcrumbs.innerText()), 15000);
  await editor.click();
  await page.locator('.editor-group-container .monaco-editor.focused').first().waitFor(); // keys go where the focus is
  await page.keyboard.insertText(`///add_criteria ${CRITERION}\n`);
  await page.keyboard.press('Escape');
  // Saving before the typing has landed in L1's editor would save nothing (or another document).
  await waitFor('the criterion typed into L1\'s document', async () =>
    (await editorText(editor)).includes(CRITERION) && /L1/.test(await breadcrumbs.innerText()), 15000);
  await page.keyboard.press('Control+S');
  await waitFor('the message saved in L1\'s document', () =>
    fs.readFileSync(path.join(l1, 'message.dr'), 'utf8').includes(CRITERION), 30000);
  await page.locator('.notification-toast', { hasText: 'approval mode' }).first().waitFor({ timeout: 20000 });
  if (fs.readFileSync(path.join(l1, 'Criteria of Definition of Done.md'), 'utf8').includes(CRITERION)) {
    throw new Error('the message ran on save although it needs approval');
  }

  step('"approve and execute" runs it, as L1');
  await editor.click();
  await runPaletteCommand(page, 'Source Action...');
  const approve = page.locator('.action-widget .monaco-list-row', { hasText: 'approve and execute' }).first();
  await approve.waitFor({ timeout: 20000 });
  await approve.click();
  await waitFor('L1\'s criterion on disk', () =>
    fs.readFileSync(path.join(l1, 'Criteria of Definition of Done.md'), 'utf8').includes(CRITERION), 30000);
  await waitFor('L1\'s message cleared in the editor', async () => !(await editorText(editor)).includes(CRITERION), 15000);
  // L1's prompt opens beside its message, as main's does (the message's tab stays active in its group)
  const promptGroup = page.locator('.editor-group-container', { has: page.locator('.tab.active', { hasText: 'prompt.md' }) });
  await promptGroup.first().waitFor();
  if ((await promptGroup.locator('.tab', { hasText: 'message.dr' }).count()) !== 0) throw new Error('L1\'s prompt did not open beside the message');
  await editor.waitFor();
  if (fs.readFileSync(path.join(research, 'Criteria of Definition of Done.md'), 'utf8').includes(CRITERION)) {
    throw new Error('the message ran as main');
  }
  await row('L1').locator('.label-description', { hasText: '[0/1]' }).waitFor({ timeout: 20000 });

  step('Deep Research: Researchers lists them; choosing L2 opens its document');
  await runPaletteCommand(page, 'Deep Research: Researchers');
  const picks = page.locator('.quick-input-list .monaco-list-row');
  await picks.filter({ hasText: 'L2' }).first().waitFor();
  const names = (await picks.locator('.label-name').allInnerTexts()).filter((n) => !n.includes('/')); // not the details (paths)
  if (names.join(',') !== 'main,L1,L2') throw new Error(`the researchers offered: ${names.join(', ')}`);
  await screenshot(page, dirs, 'researchers-2-pick');
  await picks.filter({ hasText: 'L2' }).first().click();
  await waitFor('the breadcrumbs to show L2\'s folder', async () =>
    /L2/.test(await page.locator('.breadcrumbs-control').first().innerText()), 15000);

  log('researchers UI test: 1 passed, 0 failed');
  exitCode = 0;
} catch (e) {
  await reportFailure(bench, e, bench && {
    "main's message.dr": path.join(bench.research, 'message.dr'),
    "L1's message.dr": path.join(bench.research, 'Subproblems', 'L1', 'message.dr'),
  });
  log('researchers UI test: 0 passed, 1 failed');
} finally {
  await bench?.close(exitCode === 0);
}
process.exit(exitCode);

