// Extension-host test suite: runs inside a real VS Code extension host (code-server's
// VS Code, see vscode-client/test/drivers/exthost.mjs) against the real `vscode` API,
// the extension from this repo and the Python language server it starts.
// No test framework: a small sequential runner with per-test deadlines; results go to
// $DR_TEST_RESULT as JSON, progress lines to $DR_TEST_LOG.
'use strict';

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const vscode = require('vscode');
const { waitFor } = require('../wait.js');

const EXT_ID = 'deep-research.deep-research';
const WS = process.env.DR_TEST_WORKSPACE;
const RESEARCH = process.env.DR_TEST_RESEARCH;
const PYTHON = process.env.DR_TEST_PYTHON || 'python3';
const MESSAGE = RESEARCH && path.join(RESEARCH, 'message.dr');
const PROMPT = RESEARCH && path.join(RESEARCH, '.deep-research', 'prompt.md');
const TITLE = 'Cache-friendly matrix multiplication';
const SUB = 'Compare tiling strategies';
const SUBSUB = 'Measure cache sizes';

// ---------------------------------------------------------------------------- helpers

function progress(line) {
  if (process.env.DR_TEST_LOG) fs.appendFileSync(process.env.DR_TEST_LOG, line + '\n');
}

function api() {
  return vscode.extensions.getExtension(EXT_ID).exports;
}

async function show(file, column = vscode.ViewColumn.One) {
  const doc = await vscode.workspace.openTextDocument(vscode.Uri.file(file));
  return vscode.window.showTextDocument(doc, { viewColumn: column, preview: false });
}

async function setText(editor, text) {
  const doc = editor.document;
  const all = new vscode.Range(doc.positionAt(0), doc.positionAt(doc.getText().length));
  assert.ok(await editor.edit((b) => b.replace(all, text)), 'the edit was not applied');
}

/** Types a message into the message editor and saves it (what a user does). */
async function writeAndSave(text) {
  const editor = await show(MESSAGE);
  await setText(editor, text);
  assert.ok(await editor.document.save(), 'save failed');
  return editor;
}

function labels(list) {
  return (list.items || list).map((i) => (typeof i.label === 'string' ? i.label : i.label.label));
}

function promptEditor() {
  return vscode.window.visibleTextEditors.find((e) => e.document.uri.fsPath === PROMPT);
}

async function config(key, value) {
  await vscode.workspace.getConfiguration('deepResearch').update(key, value, vscode.ConfigurationTarget.Workspace);
}

function criteriaDescription(item) {
  return (item.description.match(/\[\d+\/\d+\]/) || [''])[0];
}

// ---------------------------------------------------------------------------- tests

const tests = [];
const test = (name, fn, timeoutMs = 30000) => tests.push({ name, fn, timeoutMs });

// -- the extension alone (no language server needed) ----------------------------------

test('extension is installed and activates', async () => {
  const ext = vscode.extensions.getExtension(EXT_ID);
  assert.ok(ext, `extension ${EXT_ID} not found`);
  await ext.activate();
  assert.ok(ext.isActive);
  assert.equal(typeof ext.exports.ready, 'function');
});

test('.dr documents get the language deep-research', async () => {
  assert.ok((await vscode.languages.getLanguages()).includes('deep-research'));
  const editor = await show(MESSAGE);
  assert.equal(editor.document.languageId, 'deep-research');
});

test('contributions: palette commands, settings and execute-on-save default', async () => {
  const all = await vscode.commands.getCommands(true);
  for (const id of ['deep-research.newResearch', 'deep-research.executeMessage', 'deep-research.showPrompt', 'deep-research.restartServer',
    'deep-research.undoMessage', 'deep-research.exportDossier', 'deep-research.compileReport', 'deep-research.continueResearch', 'deep-research.attachToResearch',
    'deep-research.addAsContext', 'deep-research.installPackages', 'deep-research.showReport']) {
    assert.ok(all.includes(id), `command ${id} missing`);
  }
  const cfg = vscode.workspace.getConfiguration('deepResearch');
  assert.equal(cfg.inspect('approvalMode').defaultValue, 'update');
  assert.equal(cfg.inspect('executeOnSave').defaultValue, false);
  assert.equal(cfg.inspect('showPromptAfterExecute').defaultValue, true);
  assert.equal(cfg.inspect('server.pythonPath').defaultValue, '');
  const onSave = vscode.workspace.getConfiguration('editor', { languageId: 'deep-research' }).get('codeActionsOnSave');
  assert.deepEqual(onSave, { 'source.deepResearch.execute': 'explicit' });
});

test('snippets for block commands come from the snippet file', async () => {
  const file = path.join(WS, 'snippets.dr');
  fs.writeFileSync(file, 'add_sub');
  const doc = await vscode.workspace.openTextDocument(vscode.Uri.file(file));
  const list = await vscode.commands.executeCommand('vscode.executeCompletionItemProvider', doc.uri, new vscode.Position(0, 7));
  const snippet = list.items.find((i) => i.kind === vscode.CompletionItemKind.Snippet && labels([i])[0] === 'add_subproblem');
  assert.ok(snippet, `no add_subproblem snippet among ${labels(list).join(', ')}`);
  const body = snippet.insertText.value || String(snippet.insertText);
  assert.match(body, /^<<< add_subproblem\n\/\/\/title\n/);
});

// -- with the language server ----------------------------------------------------------

test('the server starts with the configured Python', async () => {
  const client = await api().ready();
  const found = api().python() && api().python().found;
  assert.ok(client, `server did not start: state ${api().serverState()}, python ${JSON.stringify(api().python())}`);
  assert.equal(api().serverState(), 'running');
  assert.ok(found && found.command[0] === PYTHON, `python ${JSON.stringify(found)}`);
});

test('diagnostic for a misspelt command suggests the right one', async () => {
  const editor = await show(MESSAGE);
  await setText(editor, 'Thinking first.\n///focus_upp\n');
  const uri = editor.document.uri;
  const diag = await waitFor('a diagnostic on line 2', () =>
    vscode.languages.getDiagnostics(uri).find((d) => d.range.start.line === 1),
  );
  assert.match(diag.message, /focus_up\b/);
  assert.equal(diag.severity, vscode.DiagnosticSeverity.Error);
  assert.equal(diag.range.start.line, 1);
  await setText(editor, '');
  await waitFor('the diagnostic to go', () => vscode.languages.getDiagnostics(uri).length === 0);
});

test('completion before a problem exists offers define_problem', async () => {
  const editor = await show(MESSAGE);
  await setText(editor, '<<< ');
  const list = await vscode.commands.executeCommand('vscode.executeCompletionItemProvider', editor.document.uri, new vscode.Position(0, 4), ' ');
  assert.ok(labels(list).some((l) => l.includes('define_problem')), `items: ${labels(list).join(', ')}`);
  await setText(editor, '');
});

test('status bar before a problem exists', async () => {
  await show(MESSAGE);
  await api().refresh();
  const bar = api().statusBar();
  assert.ok(bar.visible, 'status bar item hidden');
  assert.match(bar.text, /No problem defined/);
  assert.match(bar.text, /approval: update/);
});

test('saving executes the message: document cleared, files written, prompt opened beside', async () => {
  const before = fs.statSync(PROMPT).mtimeMs;
  const editor = await writeAndSave(
    `Let me define the problem.\n<<< define_problem\n///title\n${TITLE}\n///content\nWhich loop orders and tile sizes make matrix multiplication cache friendly?\n>>>\n`,
  );
  const doc = editor.document;
  await waitFor('the message to be cleared', () => doc.getText().trim() === '');
  assert.equal(fs.readFileSync(MESSAGE, 'utf8').trim(), '', 'the saved file still holds the message');
  assert.ok(!doc.isDirty, 'the message is dirty after save');
  const definition = path.join(RESEARCH, 'Problem Definition.md');
  await waitFor('Problem Definition.md', () => fs.existsSync(definition));
  assert.match(fs.readFileSync(definition, 'utf8'), /loop orders/);
  await waitFor('prompt.md to be rewritten', () => fs.statSync(PROMPT).mtimeMs > before);
  assert.match(fs.readFileSync(PROMPT, 'utf8'), new RegExp(`# Current Problem: ${TITLE}`));
  const prompt = await waitFor('the prompt editor', promptEditor);
  assert.notEqual(prompt.viewColumn, editor.viewColumn, 'the prompt is not beside the message');
  assert.equal(vscode.window.activeTextEditor && vscode.window.activeTextEditor.document.uri.fsPath, MESSAGE, 'focus left the message');
  // The prompt opens at what is new: a new session started, so at its first system note.
  const line = prompt.selection.active.line;
  assert.equal(prompt.document.lineAt(line).text, '<message from="system">', `the prompt opened at line ${line + 1}`);
  assert.ok(prompt.visibleRanges[0].start.line <= line && line <= prompt.visibleRanges[0].end.line, 'the new part is not visible');
});

test('saving the same (empty) message again executes nothing', async () => {
  const state = fs.readFileSync(path.join(RESEARCH, '.deep-research', 'state.json'), 'utf8');
  const editor = await show(MESSAGE);
  assert.ok(await editor.document.save());
  assert.equal(fs.readFileSync(path.join(RESEARCH, '.deep-research', 'state.json'), 'utf8'), state);
});

test('tree view data after the first execution', async () => {
  await api().refresh();
  const items = api().treeItems();
  assert.equal(items.length, 1);
  const root = items[0];
  assert.equal(root.label, TITLE);
  assert.equal(criteriaDescription(root), '[0/0]');
  assert.ok(root.focused && /focus/.test(root.description), `root not highlighted as focus: ${JSON.stringify(root)}`);
  assert.equal(root.icon, 'target');
  assert.ok(root.definitionUri && vscode.Uri.parse(root.definitionUri).fsPath === path.join(RESEARCH, 'Problem Definition.md'), root.definitionUri);
  const view = await vscode.commands.executeCommand('deepResearch.tree', vscode.Uri.file(MESSAGE).toString());
  assert.equal(view.phase, 'in_focus');
  assert.equal(view.focus.title, TITLE);
});

test('completion in focus: ///ad offers add_criteria', async () => {
  const editor = await show(MESSAGE);
  await setText(editor, '///ad');
  const list = await vscode.commands.executeCommand('vscode.executeCompletionItemProvider', editor.document.uri, new vscode.Position(0, 5));
  const names = labels(list);
  assert.ok(names.some((l) => l.includes('add_criteria')), `items: ${names.join(', ')}`);
  assert.ok(!names.some((l) => l.includes('define_problem')), 'define_problem offered although a problem exists');
  await setText(editor, '');
});

test('hover on a command shows its documentation', async () => {
  const editor = await show(MESSAGE);
  await setText(editor, '///add_criteria Something to check\n');
  const hovers = await waitFor('a hover', async () => {
    const h = await vscode.commands.executeCommand('vscode.executeHoverProvider', editor.document.uri, new vscode.Position(0, 6));
    return h && h.length ? h : undefined;
  });
  const text = hovers.flatMap((h) => h.contents.map((c) => c.value || String(c))).join('\n');
  assert.match(text, /add_criteria/);
  await setText(editor, '');
});

test('criteria and a subproblem: status bar text and tree refresh after execution', async () => {
  const editor = await writeAndSave(
    `///add_criteria The answer names a loop order\n///add_criteria The answer gives tile sizes\n<<< add_subproblem\n///title\n${SUB}\n///content\nWhich tile sizes fit the L1 cache?\n>>>\n`,
  );
  await waitFor('the message to be cleared', () => editor.document.getText().trim() === '');
  const bar = await waitFor('the status bar to show [0/2]', () => {
    const b = api().statusBar();
    return b.text.includes('[0/2]') ? b : undefined;
  });
  assert.ok(bar.text.includes(TITLE), bar.text);
  assert.match(bar.text, /approval: update/);
  const root = api().treeItems()[0];
  assert.equal(criteriaDescription(root), '[0/2]');
  assert.equal(root.children.length, 1);
  assert.equal(root.children[0].label, SUB);
  assert.equal(criteriaDescription(root.children[0]), '[0/0]');
  assert.equal(root.children[0].status, 'open');
  assert.equal(root.children[0].icon, 'circle-large-outline');
  assert.ok(!root.children[0].focused);
});

test('expanding a problem in the tree view asks the server for its children', async () => {
  let editor = await writeAndSave(`///focus_down ${SUB}\n`);
  await waitFor('the message to be cleared', () => editor.document.getText().trim() === '');
  await waitFor('the focus in the subproblem', () => (api().view()?.focusPath || []).length === 1);
  editor = await writeAndSave(`<<< add_subproblem\n///title\n${SUBSUB}\n///content\nL1 and L2.\n>>>\n///focus_up\n`);
  await waitFor('the message to be cleared', () => editor.document.getText().trim() === '');
  // back at the root: the subproblem is off the focus path, so the server lists it collapsed
  const sub = await waitFor('the subproblem collapsed, with children', () => {
    const view = api().view();
    const found = view && view.focusPath && view.focusPath.length === 0 && api().treeItems()[0].children.find((c) => c.label === SUB);
    return found && found.hasChildren ? found : undefined;
  });
  assert.equal(sub.children.length, 0, 'its children were listed before it was expanded');
  assert.equal(sub.status, 'done');
  await api().expand(sub.path);
  const child = await waitFor('its child, asked of the server when VS Code expanded it', () => {
    const found = api().treeItems()[0].children.find((c) => c.label === SUB);
    return found && found.children.find((c) => c.label === SUBSUB);
  });
  assert.deepEqual(child.path, [...sub.path, SUBSUB]);
  assert.equal(criteriaDescription(child), '[0/0]');
  assert.ok(!child.hasChildren && !child.focused);
});

test('mark_criteria_as_done updates [x/y]', async () => {
  const editor = await writeAndSave('///mark_criteria_as_done 1\n');
  await waitFor('the message to be cleared', () => editor.document.getText().trim() === '');
  await waitFor('[1/2] in the tree', () => criteriaDescription(api().treeItems()[0]) === '[1/2]');
  assert.ok(api().statusBar().text.includes('[1/2]'), api().statusBar().text);
});

test('a stale report: marked in the tree view, and the report file shows what changed', async () => {
  const editor = await writeAndSave(
    '<<< write_report\n///content\nSummarized problem definition: tiles.\nQ1: Which?\nA1: 32.\nConclusion: 32.\n>>>\n'
    + '<<< append_to_problem_definition\n///content\nAlso GPUs.\n>>>\n',
  );
  await waitFor('the message to be cleared', () => editor.document.getText().trim() === '');
  await waitFor('“stale report” on the root in the tree view', () => /stale report/.test(api().treeItems()[0].description));
  const report = await vscode.workspace.openTextDocument(path.join(RESEARCH, 'Report 3 Pager.md'));
  await vscode.window.showTextDocument(report);
  const found = await waitFor('the check finding on the report file', () => {
    const d = vscode.languages.getDiagnostics(report.uri);
    return d.length ? d : undefined;
  });
  assert.match(found[0].message, /the report is out of date\. Since this report was written, the problem's definition changed\./);
  await vscode.commands.executeCommand('workbench.action.closeActiveEditor');
});

test('Undo Last Message takes the message back into its document and the tree back', async () => {
  const message = '///add_criteria Taken back\n';
  const editor = await writeAndSave(message);
  await waitFor('the message to be cleared', () => editor.document.getText().trim() === '');
  await waitFor('[1/3] in the tree', () => criteriaDescription(api().treeItems()[0]) === '[1/3]');
  const result = await vscode.commands.executeCommand('deep-research.undoMessage', editor.document.uri);
  assert.ok(result && result.undone && result.putBack, `not undone: ${JSON.stringify(result)}`);
  assert.equal(editor.document.getText(), message);
  await waitFor('[1/2] in the tree again', () => criteriaDescription(api().treeItems()[0]) === '[1/2]');
  assert.doesNotMatch(fs.readFileSync(path.join(RESEARCH, 'Criteria of Definition of Done.md'), 'utf8'), /Taken back/);
  await setText(editor, '');
  assert.ok(await editor.document.save(), 'save failed');
});

test('Export Dossier writes the research as one HTML file', async () => {
  const result = await vscode.commands.executeCommand('deep-research.exportDossier', vscode.Uri.file(MESSAGE));
  assert.ok(result && result.uri, JSON.stringify(result));
  const file = vscode.Uri.parse(result.uri).fsPath;
  assert.equal(file, path.join(RESEARCH, 'dossier.html'));
  const html = fs.readFileSync(file, 'utf8');
  assert.ok(html.startsWith('<!DOCTYPE html>') && html.includes(TITLE) && html.includes(SUB) && html.includes(SUBSUB), 'titles missing');
  assert.equal(result.problems, 3);
  assert.equal(result.opened, false, 'a web workbench cannot open a file of the server in the browser');
});

test('Compile Report writes the research as one report and opens the markdown', async () => {
  const result = await vscode.commands.executeCommand('deep-research.compileReport', vscode.Uri.file(MESSAGE), 'md');
  assert.ok(result && result.uri && result.opened, JSON.stringify(result));
  const file = vscode.Uri.parse(result.uri).fsPath;
  assert.equal(file, path.join(RESEARCH, 'report.md'));
  assert.equal(vscode.window.activeTextEditor.document.uri.fsPath, file, 'the report is not the active editor');
  const text = fs.readFileSync(file, 'utf8');
  assert.ok(text.startsWith(`# ${TITLE}`) && text.includes(SUB) && text.includes('## Citation check'), text.slice(0, 400));
  const html = await vscode.commands.executeCommand('deep-research.compileReport', vscode.Uri.file(MESSAGE), 'html');
  assert.equal(vscode.Uri.parse(html.uri).fsPath, path.join(RESEARCH, 'report.html'));
  assert.equal(html.opened, false, 'a web workbench cannot open a file of the server in the browser');
  await vscode.commands.executeCommand('workbench.action.closeActiveEditor');
});

test('approval mode: save does not run kinds above it; Execute Message does', async () => {
  await config('approvalMode', 'read');
  try {
    await waitFor('the status bar to show the mode', () => api().statusBar().text.includes('approval: read'));
    const editor = await writeAndSave('///add_criteria Needs approval\n');
    assert.match(editor.document.getText(), /Needs approval/, 'the message was consumed although its kind is above the mode');
    await api().refresh();
    assert.equal(criteriaDescription(api().treeItems()[0]), '[1/2]');
    const result = await vscode.commands.executeCommand('deep-research.executeMessage', editor.document.uri);
    assert.ok(result && result.executed, `not executed: ${JSON.stringify(result)}`);
    await waitFor('the message to be cleared', () => editor.document.getText().trim() === '');
    await waitFor('[1/3] in the tree', () => criteriaDescription(api().treeItems()[0]) === '[1/3]');
  } finally {
    await config('approvalMode', undefined);
  }
  await waitFor('approval: update again', () => api().statusBar().text.includes('approval: update'));
});

test('Show Prompt opens the prompt beside the message', async () => {
  await vscode.commands.executeCommand('workbench.action.closeAllEditors');
  await show(MESSAGE);
  const result = await vscode.commands.executeCommand('deep-research.showPrompt');
  assert.ok(result && result.uri, JSON.stringify(result));
  const prompt = await waitFor('the prompt editor', promptEditor);
  assert.notEqual(prompt.viewColumn, vscode.ViewColumn.One);
  assert.match(prompt.document.getText(), /# Deep Research Interface/);
});

test('Show Final Report opens the root problem\'s report, and says it is stale', async () => {
  await vscode.commands.executeCommand('workbench.action.closeAllEditors');
  await show(MESSAGE);
  const result = await vscode.commands.executeCommand('deep-research.showReport');
  assert.ok(result && result.exists && result.uri, JSON.stringify(result));
  assert.equal(vscode.Uri.parse(result.uri).fsPath, path.join(RESEARCH, 'Report 3 Pager.md'));
  assert.equal(result.title, TITLE);
  const report = await waitFor('the report in the active editor', () => {
    const active = vscode.window.activeTextEditor;
    return active && active.document.uri.fsPath === path.join(RESEARCH, 'Report 3 Pager.md') ? active : undefined;
  });
  assert.match(report.document.getText(), /Conclusion: 32\./);
  assert.ok(result.notes.some((n) => /stale/.test(n)), 'the report is stale: said');
  await vscode.commands.executeCommand('workbench.action.closeAllEditors');
});

test('Restart Server restarts it and features work again', async () => {
  const ok = await vscode.commands.executeCommand('deep-research.restartServer');
  assert.equal(ok, true);
  assert.equal(api().serverState(), 'running');
  const editor = await show(MESSAGE);
  await setText(editor, '///focus_upp\n');
  await waitFor('a diagnostic after the restart', () => vscode.languages.getDiagnostics(editor.document.uri).length > 0);
  await setText(editor, '');
  await editor.document.save();
});

test('New Research makes a research folder and opens its message beside the prompt', async () => {
  const dir = path.join(WS, 'second research');
  const notes = path.join(WS, 'notes.md');
  fs.writeFileSync(notes, 'L1 is 32 KiB.');
  const result = await vscode.commands.executeCommand('deep-research.newResearch', vscode.Uri.file(dir), {
    instruction: 'Cover ARM too.', contextText: ['One week.'], attachments: [vscode.Uri.file(notes).toString()],
  });
  assert.ok(result && result.created && result.document, JSON.stringify(result));
  const prompt = fs.readFileSync(path.join(dir, '.deep-research', 'prompt.md'), 'utf8');
  assert.match(prompt, /Cover ARM too\./);
  assert.match(prompt.split('# Context')[1], /One week\./);
  assert.match(prompt, /L1 is 32 KiB\./);
  const active = vscode.window.activeTextEditor;
  assert.ok(active && active.document.languageId === 'deep-research', 'the new message is not open');
  assert.equal(path.dirname(active.document.uri.fsPath), dir);
  const beside = vscode.window.visibleTextEditors.find((e) => e.document.uri.fsPath === path.join(dir, '.deep-research', 'prompt.md'));
  assert.ok(beside && beside.viewColumn !== active.viewColumn, 'the prompt is not open beside the message');
  await waitFor('the status bar for the new research', () => /No problem defined/.test(api().statusBar().text));
});

test('Continue Research… replaces the instruction; Add as Context and Attach to Research take Explorer files', async () => {
  const dir = path.join(WS, 'second research');
  const result = await vscode.commands.executeCommand('deep-research.continueResearch', vscode.Uri.file(dir), { instruction: 'Only x86 after all.' });
  assert.ok(result && result.created === false, JSON.stringify(result));
  const read = () => fs.readFileSync(path.join(dir, '.deep-research', 'prompt.md'), 'utf8');
  assert.match(read(), /Only x86 after all\./);
  assert.doesNotMatch(read(), /Cover ARM too/);
  const a = path.join(WS, 'bench.csv');
  const b = path.join(WS, 'paper.md');
  fs.writeFileSync(a, 'tile,gflops\n32,19\n');
  fs.writeFileSync(b, '# A paper on tiling');
  // the Explorer passes the clicked file and the whole selection; the research is the current message's
  await vscode.commands.executeCommand('deep-research.attachToResearch', vscode.Uri.file(a), [vscode.Uri.file(a), vscode.Uri.file(b)]);
  await vscode.commands.executeCommand('deep-research.addAsContext', vscode.Uri.file(b), [vscode.Uri.file(b)]);
  const attachments = read().split('# Attachments')[1].split('# Context')[0];
  assert.match(attachments, /tile,gflops/);
  assert.match(attachments, /A paper on tiling/);
  assert.match(read().split('# Context')[1], /A paper on tiling/);
  // a file outside the workspace: the server's sentence, nothing attached
  const outside = path.join(path.dirname(WS), 'outside.txt');
  fs.writeFileSync(outside, 'not in the workspace');
  const refused = await vscode.commands.executeCommand('deep-research.attachToResearch', vscode.Uri.file(outside));
  assert.equal(refused, undefined);
  assert.doesNotMatch(read(), /not in the workspace/);
});

test('Install Python Packages: a failed pip is a plain message, its output in the log, the server unchanged', async () => {
  assert.ok(await api().ready(), 'the server is not running');
  const before = api().python().found.executable;
  const installed = await vscode.commands.executeCommand('deep-research.installPackages');
  assert.equal(installed, false);
  const logs = path.dirname(process.env.DR_TEST_LOG);
  const channel = fs.readdirSync(logs, { recursive: true }).map(String).find((f) => f.endsWith('Deep Research.log'));
  assert.ok(channel, 'no log of the Deep Research output channel');
  const text = fs.readFileSync(path.join(logs, channel), 'utf8');
  // exactly the lock's versions and files (bundled/on-request.txt), never whatever is newest
  assert.match(text, /-m pip install --disable-pip-version-check --no-input --require-hashes -r \S*bundled\/on-request\.txt/);
  assert.match(text, /No matching distribution found for \S+==/); // pip's own words
  assert.match(text, /The install failed: pip exited with 1/);
  assert.equal(api().serverState(), 'running');
  assert.equal(api().python().found.executable, before);
}, 120000);

test('no suitable Python: clear state, then recovery when the setting is fixed', async () => {
  // a "Python 3.8" (a script answering the version probe), then one that does not exist
  const old = path.join(WS, 'python3.8');
  fs.writeFileSync(old, '#!/bin/sh\necho 3.8.18\necho /opt/python3.8/bin/python3\n', { mode: 0o755 });
  try {
    await config('server.pythonPath', old);
    await waitFor('state no-python for Python 3.8', () => api().serverState() === 'no-python');
    assert.match(api().python().rejected[0].reason, /3\.8\.18 is older than 3\.10/);
    assert.match(api().statusBar().text, /no Python/);
    await config('server.pythonPath', path.join(WS, 'no-such-python'));
    await waitFor('the missing interpreter to be reported', () =>
      api().serverState() === 'no-python' && api().python().rejected.some((r) => /not found/.test(r.reason)),
    );
  } finally {
    await config('server.pythonPath', PYTHON);
  }
  await waitFor('the server to run again', () => api().serverState() === 'running', 20000);
});

// -- agents: the MCP server the extension registers -------------------------------------

test('the MCP server definition is registered and VS Code starts it: its tools answer', async () => {
  // Headless, VS Code's own command starts the servers of every registered definition ('*') and
  // waits for their tools; MCP tools then show up in vscode.lm.tools as mcp_<server>_<tool>.
  assert.equal(typeof vscode.lm.registerMcpServerDefinitionProvider, 'function', 'this VS Code has no MCP API');
  assert.ok(await api().ready(), 'the language server (and with it the Python) is not ready');
  await vscode.commands.executeCommand('workbench.mcp.startServer', '*', { waitForLiveTools: true, autoTrustChanges: true });
  const names = ['new_research', 'get_prompt', 'execute_message', 'research_tree', 'undo_message', 'export_dossier'];
  const tools = await waitFor('the MCP server tools in vscode.lm.tools', () => {
    const found = names.map((n) => vscode.lm.tools.find((t) => t.name.endsWith(`_${n}`) && (t.tags || []).includes('mcp')));
    return found.every(Boolean) && found;
  }, 60000);
  const prompt = tools[1];
  const result = await vscode.lm.invokeTool(prompt.name, { input: { research: 'research' }, toolInvocationToken: undefined });
  const text = result.content.map((part) => part.value || '').join('');
  assert.equal(text, fs.readFileSync(PROMPT, 'utf8'), 'get_prompt through VS Code is not the research\'s prompt');
}, 120000);

// ---------------------------------------------------------------------------- runner

async function run() {
  const results = [];
  const filter = process.env.DR_TEST_FILTER;
  let error;
  try {
    for (const t of tests) {
      if (filter && !t.name.includes(filter) && !t.name.startsWith('extension is installed')) {
        results.push({ name: t.name, ok: false, skipped: true, ms: 0 });
        continue;
      }
      const started = Date.now();
      let timer;
      try {
        await Promise.race([
          t.fn(),
          new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`test timed out after ${t.timeoutMs} ms`)), t.timeoutMs))),
        ]);
        results.push({ name: t.name, ok: true, ms: Date.now() - started });
        progress(`ok   ${t.name} (${Date.now() - started} ms)`);
      } catch (e) {
        results.push({ name: t.name, ok: false, ms: Date.now() - started, error: e && e.stack ? e.stack : String(e) });
        progress(`FAIL ${t.name}: ${e && e.message}`);
      } finally {
        clearTimeout(timer);
      }
    }
  } catch (e) {
    error = e && e.stack ? e.stack : String(e);
  }
  const ok = !error && results.every((r) => r.ok || r.skipped);
  fs.writeFileSync(process.env.DR_TEST_RESULT, JSON.stringify({ ok, tests: results, error }, null, 2));
}

module.exports = { run };
