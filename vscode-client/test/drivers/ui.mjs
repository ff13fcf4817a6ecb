// UI test driver ("test mode A"): installs the packaged .vsix into code-server, opens a
// fresh research in headless chromium and works as a user does: types a command, sees
// the suggestion widget and a squiggle, checks the grammar's scopes with VS Code's token
// inspector, writes a message, saves, and sees the prompt open beside the message.
// Exit code: 0 passed, 1 failed, 2 the environment or the .vsix is missing.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { log, openWorkbench, reportFailure, waitFor } from './lib.mjs';

const TITLE = 'Cache-friendly matrix multiplication';
const SUB = 'Compare tiling strategies';
const SUBSUB = 'Measure cache sizes';

let bench;
let exitCode = 1;
const step = (s) => log(`step: ${s}`);
try {
  bench = await openWorkbench('ui');
  const { page, research, message, prompt, dirs, editor } = bench;

  step('the extension is active: status bar shows the research');
  const status = page.locator('.statusbar-item', { hasText: 'No problem defined' });
  await status.first().waitFor({ timeout: 30000 });

  step('type a command: the suggestion widget offers define_problem');
  await editor.click();
  await page.keyboard.type('<<< def');
  const suggestion = page.locator('.suggest-widget .monaco-list-row', { hasText: 'define_problem' }).first();
  await waitFor('the define_problem suggestion', async () => {
    if (await suggestion.isVisible()) return true;
    await page.keyboard.press('Control+Space'); // if the widget did not open by itself
    await suggestion.waitFor({ timeout: 2000 });
    return true;
  }, 20000);
  await page.keyboard.press('Escape');

  step('a misspelt command gets a squiggle');
  await page.keyboard.press('Control+A');
  await page.keyboard.press('Delete');
  await page.keyboard.type('///focus_upp');
  await page.keyboard.press('Escape');
  await page.locator('.editor-group-container .monaco-editor .squiggly-error').first().waitFor();

  step('the grammar scopes the command (Developer: Inspect Editor Tokens and Scopes)');
  await page.keyboard.press('Home');
  for (let i = 0; i < 5; i++) await page.keyboard.press('ArrowRight');
  await page.keyboard.press('F1');
  await page.locator('.quick-input-widget input').waitFor();
  await page.keyboard.type('Inspect Editor Tokens and Scopes');
  await page.locator('.quick-input-list .monaco-list-row', { hasText: 'Inspect Editor Tokens' }).first().waitFor();
  await page.keyboard.press('Enter');
  const inspector = page.locator('.token-inspect-widget');
  await waitFor('the token inspector to show our scope', async () => /keyword\.control\.command\.deep-research/.test(await inspector.innerText()), 15000);
  await page.keyboard.press('Escape');

  step('write a message and save: it executes, the prompt opens beside it');
  await editor.click();
  await page.keyboard.press('Control+A');
  await page.keyboard.press('Delete');
  await page.keyboard.insertText(
    `Defining the problem.\n<<< define_problem\n///title\n${TITLE}\n///content\nWhich loop orders and tile sizes make it cache friendly?\n>>>\n`,
  );
  await page.keyboard.press('Escape');
  await waitFor('no squiggles for a valid message', async () => (await page.locator('.editor-group-container .monaco-editor .squiggly-error').count()) === 0, 15000);
  await page.keyboard.press('Control+S');
  await page.locator('.tab', { hasText: 'prompt.md' }).first().waitFor({ timeout: 30000 });
  // beside: the prompt's editor group is not the message's
  const promptGroup = page.locator('.editor-group-container', { has: page.locator('.tab', { hasText: 'prompt.md' }) });
  // it opens at what is new (here the new session's first note), not at the fixed introduction
  await promptGroup.locator('.view-lines', { hasText: 'The research problem is defined. This is the first session' }).first().waitFor();
  if ((await promptGroup.locator('.tab', { hasText: 'message.dr' }).count()) !== 0) throw new Error('the prompt did not open beside the message');
  await page.locator('.editor-group-container', { has: page.locator('.tab', { hasText: 'message.dr' }) }).first().waitFor();
  await waitFor('the message file to be cleared on disk', () => fs.readFileSync(message, 'utf8').trim() === '', 10000);
  if (!fs.existsSync(path.join(research, 'Problem Definition.md'))) throw new Error('Problem Definition.md was not written');
  if (!fs.readFileSync(prompt, 'utf8').includes(`# Current Problem: ${TITLE}`)) throw new Error('prompt.md was not rewritten');

  step('status bar and problem tree show the focused problem');
  await page.locator('.statusbar-item', { hasText: `${TITLE} [0/0]` }).first().waitFor();
  const header = page.locator('.pane-header', { hasText: 'Research Problems' }).first();
  await header.waitFor();
  if ((await header.getAttribute('aria-expanded')) !== 'true') await header.click();
  const row = page.locator('.monaco-list-row', { hasText: TITLE }).filter({ hasText: '[0/0]' }).first();
  await row.waitFor();

  step('clicking the problem opens its definition');
  await row.click();
  await page.locator('.tab.active', { hasText: 'Problem Definition.md' }).first().waitFor();

  step('clicking the status bar item shows the prompt');
  const promptTab = page.locator('.tab', { hasText: 'prompt.md' }).first();
  await promptTab.click({ button: 'middle' }); // closes the tab
  await waitFor('the prompt tab to close', async () => (await page.locator('.tab', { hasText: 'prompt.md' }).count()) === 0, 10000);
  await page.locator('.tab', { hasText: 'message.dr' }).first().click();
  await page.locator('.statusbar-item', { hasText: `${TITLE} [0/0]` }).first().click();
  await page.locator('.tab', { hasText: 'prompt.md' }).first().waitFor();

  step('expanding a collapsed problem in the tree shows its children (fetched when expanded)');
  const save = async (text, done) => {
    await page.locator('.tab', { hasText: 'message.dr' }).first().click();
    await editor.click();
    await page.keyboard.press('Control+A');
    await page.keyboard.press('Delete');
    await page.keyboard.insertText(text);
    await page.keyboard.press('Escape');
    await page.keyboard.press('Control+S');
    await waitFor(done, () => fs.readFileSync(message, 'utf8').trim() === '', 30000);
  };
  await save(`<<< add_subproblem\n///title\n${SUB}\n///content\nWhich tile sizes fit?\n>>>\n///focus_down ${SUB}\n`, 'the focus-down message to run');
  await page.locator('.statusbar-item', { hasText: `${SUB} [0/0]` }).first().waitFor();
  await save(`<<< add_subproblem\n///title\n${SUBSUB}\n///content\nL1 and L2.\n>>>\n///focus_up\n`, 'the focus-up message to run');
  const problems = page.locator('.pane', { has: page.locator('.pane-header', { hasText: 'Research Problems' }) }).first();
  const subRow = problems.locator('.monaco-list-row', { hasText: SUB }).filter({ hasText: '[0/0]' }).first();
  await subRow.waitFor();
  // back at the root: the subproblem is collapsed, its child not in the view yet
  await waitFor('the subproblem to be collapsed', async () => (await subRow.getAttribute('aria-expanded')) === 'false', 20000);
  if ((await problems.locator('.monaco-list-row', { hasText: SUBSUB }).count()) !== 0) throw new Error('the child is shown before expanding');
  await subRow.locator('.monaco-tl-twistie').click();
  await problems.locator('.monaco-list-row', { hasText: SUBSUB }).first().waitFor();
  if ((await subRow.getAttribute('aria-expanded')) !== 'true') throw new Error('the subproblem did not expand');

  await page.screenshot({ path: path.join(dirs.root, 'final.png') });
  log('UI test: 1 passed, 0 failed');
  exitCode = 0;
} catch (e) {
  await reportFailure(bench, e);
  log('UI test: 0 passed, 1 failed');
} finally {
  await bench?.close(exitCode === 0);
}
process.exit(exitCode);
