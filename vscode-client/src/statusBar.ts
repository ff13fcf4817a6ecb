// The status bar item: the focused problem, its criteria count, how many researchers work
// (once the research delegates) and the approval mode. Clicking it shows the prompt.
import * as vscode from 'vscode';
import { ResearchModel } from './model';
import { ApprovalMode, ClientCommand, LANGUAGE_ID, ResearchView } from './protocol';
import { ServerManager, ServerState } from './server';
import { criteriaText } from './tree';

const MAX_TITLE = 40;

function shorten(title: string): string {
  return title.length > MAX_TITLE ? `${title.slice(0, MAX_TITLE - 1)}…` : title;
}

/** The item's text; exported for tests. */
export function statusText(state: ServerState, view: ResearchView | undefined, mode: ApprovalMode, researchers = 0): string {
  if (state === 'no-python') {
    return '$(error) Deep Research: no Python 3.10+';
  }
  if (state === 'failed') {
    return '$(error) Deep Research: server failed';
  }
  if (state === 'starting') {
    return `$(sync~spin) Deep Research · ${mode}`;
  }
  // once the research delegates: how many researchers work on it
  const approval = `${researchers > 1 ? `${researchers} researchers · ` : ''}approval: ${mode}`;
  if (!view) {
    return `$(beaker) Deep Research · ${approval}`;
  }
  if (view.focus) {
    const f = view.focus;
    const icon = view.phase === 'finished' ? '$(pass)' : view.phase === 'shut_down' ? '$(circle-slash)' : '$(target)';
    return `${icon} ${shorten(f.title)} ${criteriaText(f.criteriaMet, f.criteriaTotal)} · ${approval}`;
  }
  switch (view.phase) {
    case 'no_problem':
      return `$(beaker) No problem defined · ${approval}`;
    case 'finished':
      return `$(pass) Research finished · ${approval}`;
    case 'shut_down':
      return `$(circle-slash) Research shut down · ${approval}`;
    default:
      return `$(beaker) Deep Research · ${approval}`;
  }
}

export class StatusBar implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  private readonly disposables: vscode.Disposable[] = [];
  private _visible = false;

  constructor(
    private readonly model: ResearchModel,
    private readonly server: ServerManager,
  ) {
    this.item = vscode.window.createStatusBarItem('deepResearch.status', vscode.StatusBarAlignment.Left, 100);
    this.item.name = 'Deep Research';
    this.item.command = ClientCommand.showPrompt;
    this.disposables.push(
      this.item,
      model.onDidChange(() => this.update()),
      server.onDidChangeState(() => this.update()),
      vscode.workspace.onDidChangeConfiguration((e) => e.affectsConfiguration('deepResearch.approvalMode') && this.update()),
    );
    this.update();
  }

  get text(): string {
    return this.item.text;
  }
  get tooltip(): string {
    const t = this.item.tooltip;
    return typeof t === 'string' ? t : (t?.value ?? '');
  }
  get visible(): boolean {
    return this._visible;
  }

  private shouldShow(): boolean {
    const editor = vscode.window.activeTextEditor;
    if (!editor) {
      return this.model.document !== undefined;
    }
    if (editor.document.languageId === LANGUAGE_ID) {
      return true;
    }
    const root = this.model.view?.root;
    return !!root && editor.document.uri.toString().startsWith(root.endsWith('/') ? root : `${root}/`);
  }

  update(): void {
    const view = this.model.view;
    // the setting, as the server will read it for this document (the view's copy may lag
    // behind a change by one refresh)
    const mode = vscode.workspace
      .getConfiguration('deepResearch', this.model.document ?? null)
      .get<ApprovalMode>('approvalMode', 'update');
    const state = this.server.state;
    const researchers = this.model.researchers;
    this.item.text = statusText(state, view, mode, researchers.length);
    const md = new vscode.MarkdownString(undefined, true);
    if (view?.focus) {
      md.appendMarkdown(`**Focus:** ${view.focus.title.replace(/[\\`*_[\]<>]/g, '\\$&')}\n\n`);
      md.appendMarkdown(`Criteria done: ${view.focus.criteriaMet} of ${view.focus.criteriaTotal}\n\n`);
    } else if (view) {
      md.appendMarkdown(`Phase: ${view.phase}\n\n`);
    }
    if (researchers.length > 1) {
      md.appendMarkdown(`**Researchers:** ${researchers.map((r) => `${r.name.replace(/[\\`*_[\]<>]/g, '\\$&')} (${r.state})`).join(', ')}\n\n`);
    }
    md.appendMarkdown(`Approval mode: **${mode}** (commands of higher kinds need *Execute Message*)\n\n`);
    md.appendMarkdown('Click to show the prompt.');
    this.item.tooltip = md;
    this.item.backgroundColor =
      state === 'no-python' || state === 'failed' ? new vscode.ThemeColor('statusBarItem.errorBackground') : undefined;
    this.item.command = state === 'no-python' ? { command: 'workbench.action.openSettings', title: 'Settings', arguments: ['deepResearch.server.pythonPath'] } : ClientCommand.showPrompt;
    this._visible = this.shouldShow();
    if (this._visible) {
      this.item.show();
    } else {
      this.item.hide();
    }
  }

  dispose(): void {
    this.disposables.forEach((d) => d.dispose());
  }
}
