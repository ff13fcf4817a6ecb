// The research the user is looking at: the current `.dr` document, the server's view of
// its tree (`deepResearch.tree`) and its researchers (`deepResearch.researchers`). The
// tree view and the status bar render them.
import * as vscode from 'vscode';
import { ChildrenPage, LANGUAGE_ID, Researcher, ResearchView, runServerCommand, ServerCommand } from './protocol';
import { ServerManager } from './server';

export class ResearchModel implements vscode.Disposable {
  private _document: vscode.Uri | undefined;
  private _view: ResearchView | undefined;
  private _researchers: Researcher[] = [];
  private inFlight: Promise<ResearchView | undefined> | undefined;
  private again = false;
  private readonly emitter = new vscode.EventEmitter<ResearchView | undefined>();
  private readonly disposables: vscode.Disposable[] = [];
  /** Fires after every refresh, with the new view (undefined: no research or no server). */
  readonly onDidChange = this.emitter.event;

  constructor(
    private readonly server: ServerManager,
    private readonly output: vscode.LogOutputChannel,
  ) {
    this.pickDocument(vscode.window.activeTextEditor);
    this.disposables.push(
      vscode.window.onDidChangeActiveTextEditor((editor) => {
        if (this.pickDocument(editor)) {
          void this.refresh();
        } else {
          this.emitter.fire(this._view); // visibility of the status bar depends on the editor
        }
      }),
      vscode.workspace.onDidOpenTextDocument((doc) => {
        if (!this._document && doc.languageId === LANGUAGE_ID && doc.uri.scheme === 'file') {
          this._document = doc.uri;
          void this.refresh();
        }
      }),
    );
  }

  /** The `.dr` document whose research is shown. */
  get document(): vscode.Uri | undefined {
    return this._document;
  }
  get view(): ResearchView | undefined {
    return this._view;
  }
  /** The researchers at work on the research (main first), as of the last refresh. */
  get researchers(): Researcher[] {
    return this._researchers;
  }
  /** The researcher called `name`, if it works. */
  researcher(name: string): Researcher | undefined {
    return this._researchers.find((r) => r.name === name);
  }

  private pickDocument(editor: vscode.TextEditor | undefined): boolean {
    const doc = editor?.document;
    if (doc && doc.languageId === LANGUAGE_ID && doc.uri.scheme === 'file' && doc.uri.toString() !== this._document?.toString()) {
      this._document = doc.uri;
      return true;
    }
    if (!this._document) {
      const open = vscode.workspace.textDocuments.find((d) => d.languageId === LANGUAGE_ID && d.uri.scheme === 'file');
      if (open) {
        this._document = open.uri;
        return true;
      }
    }
    return false;
  }

  setDocument(uri: vscode.Uri): Promise<ResearchView | undefined> {
    this._document = uri;
    return this.refresh();
  }

  /** Asks the server for the tree again; concurrent calls coalesce into one more request. */
  refresh(): Promise<ResearchView | undefined> {
    if (this.inFlight) {
      this.again = true;
      return this.inFlight;
    }
    this.inFlight = (async () => {
      let view: ResearchView | undefined;
      let researchers: Researcher[] = [];
      do {
        this.again = false;
        [view, researchers] = await Promise.all([this.fetch(), this.fetchResearchers()]);
      } while (this.again);
      this._view = view;
      this._researchers = researchers;
      this.emitter.fire(view);
      return view;
    })().finally(() => (this.inFlight = undefined));
    return this.inFlight;
  }

  /** One page of a problem's children, straight from the server (the view holds no tree). */
  async children(path: string[], offset = 0): Promise<ChildrenPage | undefined> {
    const client = this.server.running;
    const doc = this._document;
    if (!client || !doc) {
      return undefined;
    }
    try {
      return await runServerCommand<ChildrenPage>(client, ServerCommand.tree, doc.toString(), path, offset);
    } catch (e) {
      // the problem is gone (renamed or removed by hand): the whole view is out of date
      this.output.appendLine(`${ServerCommand.tree} failed for ${JSON.stringify(path)}: ${(e as Error).message}`);
      void this.refresh();
      return undefined;
    }
  }

  private async fetch(): Promise<ResearchView | undefined> {
    const client = this.server.running;
    const doc = this._document;
    if (!client || !doc) {
      return undefined;
    }
    try {
      const view = await runServerCommand<ResearchView | null>(client, ServerCommand.tree, doc.toString());
      return view ?? undefined;
    } catch (e) {
      this.output.appendLine(`${ServerCommand.tree} failed for ${doc.toString()}: ${(e as Error).message}`);
      return undefined;
    }
  }

  private async fetchResearchers(): Promise<Researcher[]> {
    const client = this.server.running;
    const doc = this._document;
    if (!client || !doc) {
      return [];
    }
    try {
      return (await runServerCommand<Researcher[] | null>(client, ServerCommand.researchers, doc.toString())) ?? [];
    } catch (e) {
      this.output.appendLine(`${ServerCommand.researchers} failed for ${doc.toString()}: ${(e as Error).message}`);
      return [];
    }
  }

  dispose(): void {
    this.disposables.forEach((d) => d.dispose());
    this.emitter.dispose();
  }
}
