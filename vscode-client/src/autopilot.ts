// The autopilot in VS Code: *Run Autopilot* / *Stop Autopilot*, *Set API Key*, and a
// status bar item with the run's state, round, researchers and tokens (a stop button while
// it runs). The server streams the model's reply into the open .dr document itself
// (workspace/applyEdit; a delegated researcher's into its own document), runs every
// researcher of the research (`deepResearch.parallel` of them at once); this module only
// starts, stops and shows the run.
import * as vscode from 'vscode';
import { ResearchModel } from './model';
import { AutopilotParams, ClientCommand, LANGUAGE_ID, RunOptions, runServerCommand, RunResult, ServerCommand } from './protocol';
import { API_KEY_SECRET, ServerManager } from './server';

const ACTIVE: ReadonlySet<string> = new Set(['running', 'waiting-approval']);
const SHOW_REPORT = 'Show Final Report';

/** The status bar text for a run; exported for tests. */
export function autopilotText(p: AutopilotParams): string {
  const tokens = p.tokens >= 1000 ? `${(p.tokens / 1000).toFixed(1)}k` : `${p.tokens}`;
  const round = p.maxRounds ? `round ${p.round}/${p.maxRounds}` : `round ${p.round}`;
  const researchers = p.researchers && p.researchers > 1 ? ` · ${p.researchers} researchers` : '';
  switch (p.state) {
    case 'running':
      return `$(sync~spin) Autopilot: ${round}${researchers} · ${tokens} tokens`;
    case 'waiting-approval':
      return `$(bell) Autopilot waits for approval · ${round}`;
    case 'finished':
      return `$(pass) Autopilot finished · ${p.round} rounds · ${tokens} tokens`;
    case 'stopped':
      return `$(debug-pause) Autopilot stopped · ${p.round} rounds`;
    case 'error':
      return `$(error) Autopilot error`;
  }
}

export class Autopilot implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  private readonly stopItem: vscode.StatusBarItem;
  private readonly disposables: vscode.Disposable[] = [];
  private readonly runs = new Map<string, AutopilotParams>();
  private shownErrors = new Set<string>();
  private current: string | undefined;

  constructor(
    server: ServerManager,
    private readonly model: ResearchModel,
    private readonly output: vscode.LogOutputChannel,
  ) {
    this.item = vscode.window.createStatusBarItem('deepResearch.autopilot', vscode.StatusBarAlignment.Left, 99);
    this.item.name = 'Deep Research Autopilot';
    this.stopItem = vscode.window.createStatusBarItem('deepResearch.autopilotStop', vscode.StatusBarAlignment.Left, 98);
    this.stopItem.name = 'Stop the Deep Research Autopilot';
    this.stopItem.text = '$(debug-stop) Stop';
    this.stopItem.tooltip = 'Stop the autopilot (nothing half-applied; the partial reply stays in the document)';
    this.stopItem.command = ClientCommand.stopAutopilot;
    this.disposables.push(this.item, this.stopItem, server.onAutopilot((p) => this.onNotification(p)));
  }

  /** The last state of the run of `uri` (or of the last run), for the tests and the commands. */
  state(uri?: string): AutopilotParams | undefined {
    return this.runs.get(uri ?? this.current ?? '');
  }
  get statusText(): string {
    return this.item.text;
  }
  get stopVisible(): boolean {
    return this._stopVisible;
  }
  private _stopVisible = false;

  private onNotification(p: AutopilotParams): void {
    const before = this.runs.get(p.uri);
    this.runs.set(p.uri, p);
    this.current = p.uri;
    this.output.appendLine(`autopilot ${p.uri}: ${p.state}, round ${p.round}, ${p.tokens} tokens${p.message ? ` — ${p.message}` : ''}`);
    this.update();
    if (before?.round !== p.round || before?.state !== p.state) {
      void this.model.refresh(); // the tree view follows the focus as the model moves
    }
    if (p.state === 'running' && before?.state !== 'running') {
      this.shownErrors.clear(); // a new run: its errors are news again
    }
    this.announceWaiting(before, p);
    if (before?.state === p.state) {
      return; // say each change once, never once per round
    }
    if (p.state === 'error') {
      const text = p.error ?? p.message ?? 'the autopilot stopped on an error';
      if (!this.shownErrors.has(text)) {
        this.shownErrors.add(text);
        void vscode.window
          .showErrorMessage(`Deep Research autopilot: ${text}`, 'Set API Key', 'Open Settings')
          .then((choice) => {
            if (choice === 'Set API Key') {
              void vscode.commands.executeCommand(ClientCommand.setApiKey);
            } else if (choice === 'Open Settings') {
              void vscode.commands.executeCommand('workbench.action.openSettings', 'deepResearch.');
            }
          });
      }
    } else if (p.state === 'waiting-approval' && !p.waiting?.length) {
      void vscode.window.showInformationMessage(
        `Deep Research autopilot: ${p.message ?? 'the model wrote commands above the approval mode'}. ` +
          'Read (or edit) the message, then run "Approve and Execute" to continue.',
      );
    } else if (p.state === 'finished') {
      // The answer in hand: the root problem's report, one click away.
      void vscode.window
        .showInformationMessage(`Deep Research autopilot: ${p.message ?? 'the research is finished'}`, SHOW_REPORT)
        .then((choice) => choice === SHOW_REPORT && vscode.commands.executeCommand(ClientCommand.showReport, vscode.Uri.parse(p.uri)));
    } else if (p.state === 'stopped') {
      vscode.window.setStatusBarMessage(`Deep Research autopilot: ${p.message ?? p.state}`, 8000);
    }
  }

  /** Each researcher whose message starts waiting for approval is said once, with a button
   * that opens its document (where "Approve and Execute" runs it). */
  private announceWaiting(before: AutopilotParams | undefined, p: AutopilotParams): void {
    const known = new Set((before?.waiting ?? []).map((w) => w.uri));
    for (const item of p.waiting ?? []) {
      if (known.has(item.uri)) {
        continue;
      }
      const who = item.researcher === 'main' ? 'The main researcher\'s message' : `The message of the researcher “${item.researcher}”`;
      void vscode.window
        .showInformationMessage(
          `Deep Research autopilot: ${who} waits for approval in ${vscode.workspace.asRelativePath(vscode.Uri.parse(item.uri))}. ` +
            'Read (or edit) it, then run "Approve and Execute" there.',
          'Open It',
        )
        .then(async (choice) => {
          if (choice) {
            await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(vscode.Uri.parse(item.uri)), { preview: false });
          }
        });
    }
  }

  private update(): void {
    const p = this.state();
    if (!p) {
      this.item.hide();
      this.stopItem.hide();
      this._stopVisible = false;
      return;
    }
    this.item.text = autopilotText(p);
    const md = new vscode.MarkdownString(undefined, true);
    md.appendMarkdown(`**Autopilot:** ${p.state}\n\n`);
    if (p.problem) {
      md.appendMarkdown(`Problem in focus: ${p.problem.replace(/[\\`*_[\]<>]/g, '\\$&')}\n\n`);
    }
    md.appendMarkdown(`Round ${p.round}${p.maxRounds ? ` of ${p.maxRounds}` : ''}, ${p.tokens} tokens${p.maxTokens ? ` of ${p.maxTokens}` : ''}\n\n`);
    if (p.researchers) {
      md.appendMarkdown(`Researchers working: ${p.researchers}\n\n`);
    }
    if (p.message) {
      md.appendMarkdown(`${p.message.replace(/[\\`*_[\]<>]/g, '\\$&')}\n\n`);
    }
    this.item.tooltip = md;
    this.item.command = ACTIVE.has(p.state) ? undefined : ClientCommand.runAutopilot;
    this.item.backgroundColor = p.state === 'error' ? new vscode.ThemeColor('statusBarItem.errorBackground') : undefined;
    this.item.show();
    this._stopVisible = p.state === 'running';
    if (this._stopVisible) {
      this.stopItem.show();
    } else {
      this.stopItem.hide();
    }
  }

  dispose(): void {
    this.disposables.forEach((d) => d.dispose());
  }
}

export function registerAutopilotCommands(
  context: vscode.ExtensionContext,
  server: ServerManager,
  model: ResearchModel,
  autopilot: Autopilot,
  messageDocument: (arg: unknown) => vscode.Uri | undefined,
): void {
  const client = async () => {
    const c = await server.start();
    if (!c) {
      void vscode.window.showErrorMessage('Deep Research: the language server is not running (see the "Deep Research" output).');
    }
    return c;
  };
  context.subscriptions.push(
    vscode.commands.registerCommand(ClientCommand.runAutopilot, async (arg?: unknown): Promise<RunResult | undefined> => {
      const uri = messageDocument(arg);
      if (!uri) {
        void vscode.window.showWarningMessage('Deep Research: open a message (.dr) to run the autopilot on its research.');
        return undefined;
      }
      // The model writes into this document: show it, so the user can watch and take over.
      const doc = await vscode.workspace.openTextDocument(uri);
      if (doc.languageId === LANGUAGE_ID) {
        await vscode.window.showTextDocument(doc, { preview: false, preserveFocus: false });
      }
      const c = await client();
      if (!c) {
        return undefined;
      }
      // every researcher of the research runs; the setting says how many at once (empty: deep-research.toml)
      const parallel = vscode.workspace.getConfiguration('deepResearch', uri).get<number | null>('parallel', null);
      const options: RunOptions = typeof parallel === 'number' && parallel >= 1 ? { parallel } : {};
      const result = await runServerCommand<RunResult>(c, ServerCommand.run, uri.toString(), options);
      if (!result.started && result.reason === 'no-openai') {
        // The package is missing from the server's Python: offer the private environment (packages.ts).
        void vscode.window
          .showWarningMessage('Deep Research: the autopilot needs the Python package openai, which the server\'s Python lacks.', 'Install Python Packages')
          .then((choice) => choice && vscode.commands.executeCommand(ClientCommand.installPackages));
      } else if (!result.started) {
        void vscode.window.showWarningMessage(`Deep Research: the autopilot did not start: ${result.message ?? result.reason}`);
      }
      await model.setDocument(uri);
      return result;
    }),

    vscode.commands.registerCommand(ClientCommand.stopAutopilot, async (arg?: unknown): Promise<boolean> => {
      const uri = messageDocument(arg) ?? (autopilot.state() ? vscode.Uri.parse(autopilot.state()!.uri) : undefined);
      const c = server.running;
      if (!uri || !c) {
        return false;
      }
      const result = await runServerCommand<{ stopped: boolean }>(c, ServerCommand.stop, uri.toString());
      return !!result?.stopped;
    }),

    vscode.commands.registerCommand(ClientCommand.setApiKey, async (value?: unknown): Promise<boolean> => {
      const key =
        typeof value === 'string'
          ? value
          : await vscode.window.showInputBox({
              title: 'Deep Research: API key of the model endpoint',
              prompt: 'Stored in VS Code\'s secret storage and given to the language server as OPENAI_API_KEY. Leave empty to remove it.',
              password: true,
              ignoreFocusOut: true,
            });
      if (key === undefined) {
        return false;
      }
      if (key.trim()) {
        await context.secrets.store(API_KEY_SECRET, key.trim());
      } else {
        await context.secrets.delete(API_KEY_SECRET);
      }
      const running = autopilot.state();
      if (running && running.state === 'running') {
        await vscode.commands.executeCommand(ClientCommand.stopAutopilot, running.uri);
      }
      await server.restart(); // the server reads the key from its environment at start
      vscode.window.setStatusBarMessage(`Deep Research: API key ${key.trim() ? 'stored' : 'removed'}`, 4000);
      return true;
    }),
  );
}
