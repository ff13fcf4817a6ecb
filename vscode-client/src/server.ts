// Lifecycle of the language client and the bundled Python server: start with the
// discovered Python, stop, restart (command, settings change, interpreter change).
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import {
  CancellationToken,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  ResponseError,
  ShowDocumentParams,
  ShowDocumentRequest,
  ShowDocumentResult,
  State,
  TransportKind,
} from 'vscode-languageclient/node';
import { PythonPackages } from './packages';
import { AutopilotNotification, AutopilotParams, DidExecuteNotification, DidExecuteParams, LANGUAGE_ID } from './protocol';
import { describeRejections, discoverPython, PythonDiscovery } from './python';

export type ServerState = 'stopped' | 'starting' | 'running' | 'no-python' | 'failed';

/** The markdown files of a research tree (engine/store.py's names), which the server checks. */
export const TREE_FILES =
  '**/{Problem Definition,Criteria of Definition of Done,Breakdown Structure,Report 3 Pager,Attachments/*}.md';

/** The model endpoint's API key, in VS Code's secret storage (never in settings.json). */
export const API_KEY_SECRET = 'deepResearch.apiKey';

/** Where the server package and its libraries are: PYTHONPATH entries, first wins. */
export function serverPythonPath(extensionPath: string): { entries: string[]; layout: 'bundled' | 'checkout' } | undefined {
  const bundled = path.join(extensionPath, 'vscode-client', 'bundled');
  const libs = path.join(bundled, 'libs');
  const checkout = path.join(extensionPath, 'server');
  const hasPkg = (dir: string) => fs.existsSync(path.join(dir, 'deep_research', '__init__.py'));
  const libEntries = fs.existsSync(libs) ? [libs] : [];
  if (hasPkg(checkout)) {
    // running from a source checkout (extension development): the live server sources
    return { entries: [checkout, ...libEntries], layout: 'checkout' };
  }
  if (hasPkg(bundled)) {
    return { entries: [bundled, ...libEntries], layout: 'bundled' };
  }
  return undefined;
}

/** Main's prompt (`.deep-research/prompt.md`) and each delegated researcher's
 * (`.deep-research/researchers/<digest>/prompt.md`, the engine's `Research.prompt_file`). */
const PROMPT_FILE = /\/\.deep-research\/(?:researchers\/[^/]+\/)?prompt\.md$/;

/** Prompt documents open beside the message, in the column where the prompt already is if it is visible. */
async function showDocumentBeside(
  params: ShowDocumentParams,
  token: CancellationToken,
  next: ShowDocumentRequest.HandlerSignature,
): Promise<ShowDocumentResult> {
  if (params.external || !PROMPT_FILE.test(params.uri)) {
    const result = await next(params, token);
    return result instanceof ResponseError ? { success: false } : result;
  }
  try {
    const uri = vscode.Uri.parse(params.uri);
    const visible = vscode.window.visibleTextEditors.find((e) => e.document.uri.toString() === uri.toString());
    const doc = await vscode.workspace.openTextDocument(uri);
    // The server selects what is new in the prompt (the latest reply): reveal it at the top.
    const at = params.selection?.start;
    const selection = at ? new vscode.Range(at.line, at.character, at.line, at.character) : undefined;
    const editor = await vscode.window.showTextDocument(doc, {
      viewColumn: visible?.viewColumn ?? vscode.ViewColumn.Beside,
      preserveFocus: params.takeFocus !== true,
      preview: false,
      selection,
    });
    if (selection) {
      editor.revealRange(selection, vscode.TextEditorRevealType.AtTop);
    }
    return { success: true };
  } catch {
    return { success: false };
  }
}

export class ServerManager implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private pending: Promise<LanguageClient | undefined> | undefined;
  private _state: ServerState = 'stopped';
  private _discovery: PythonDiscovery | undefined;
  private readonly stateEmitter = new vscode.EventEmitter<ServerState>();
  private readonly executedEmitter = new vscode.EventEmitter<DidExecuteParams>();
  private readonly autopilotEmitter = new vscode.EventEmitter<AutopilotParams>();
  private readonly traceChannel: vscode.LogOutputChannel;
  readonly onDidChangeState = this.stateEmitter.event;
  /** `deepResearch/didExecute` from the server. */
  readonly onDidExecute = this.executedEmitter.event;
  /** `deepResearch/autopilot` from the server. */
  readonly onAutopilot = this.autopilotEmitter.event;
  /** The private environment with the packages the bundle cannot hold (packages.ts). */
  readonly packages: PythonPackages;
  private _python: string[] | undefined;

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly output: vscode.LogOutputChannel,
  ) {
    this.traceChannel = vscode.window.createOutputChannel('Deep Research Trace', { log: true });
    this.packages = new PythonPackages(context, output, () => this.restart());
  }

  get state(): ServerState {
    return this._state;
  }
  get discovery(): PythonDiscovery | undefined {
    return this._discovery;
  }
  /** The command of the Python the server runs with (the private environment's, once installed). */
  get python(): string[] | undefined {
    return this._python;
  }
  /** The running client, or undefined. */
  get running(): LanguageClient | undefined {
    return this._state === 'running' ? this.client : undefined;
  }

  private setState(state: ServerState): void {
    this._state = state;
    this.stateEmitter.fire(state);
  }

  /** Starts the server unless it is running; resolves to the client, or undefined if it cannot run. */
  start(): Promise<LanguageClient | undefined> {
    if (this.client && this._state === 'running') {
      return Promise.resolve(this.client);
    }
    this.pending ??= this.doStart().finally(() => (this.pending = undefined));
    return this.pending;
  }

  private async doStart(): Promise<LanguageClient | undefined> {
    this.setState('starting');
    const resource = vscode.window.activeTextEditor?.document.uri ?? vscode.workspace.workspaceFolders?.[0]?.uri;
    const discovery = await discoverPython(resource);
    this._discovery = discovery;
    if (!discovery.found) {
      const tried = describeRejections(discovery.rejected);
      this.output.appendLine(`No suitable Python (>= 3.10) found. Tried: ${tried}`);
      this.setState('no-python');
      void vscode.window
        .showErrorMessage(
          `Deep Research needs Python 3.10 or newer to run its language server, and none was found (tried: ${tried}). ` +
            'Install Python 3.10+ or set "deepResearch.server.pythonPath".',
          'Open Settings',
          'Retry',
        )
        .then((choice) => {
          if (choice === 'Open Settings') {
            void vscode.commands.executeCommand('workbench.action.openSettings', 'deepResearch.server.pythonPath');
          } else if (choice === 'Retry') {
            void this.restart();
          }
        });
      return undefined;
    }
    const located = serverPythonPath(this.context.extensionPath);
    if (!located) {
      this.output.appendLine(`The server package deep_research is missing from ${this.context.extensionPath}`);
      this.setState('failed');
      void vscode.window.showErrorMessage('Deep Research: the bundled language server is missing; reinstall the extension.');
      return undefined;
    }
    const py = discovery.found;
    const privatePython = this.packages.environmentFor(py);
    const command = privatePython ? [privatePython] : py.command;
    this._python = command;
    const pythonPath = [...located.entries, process.env.PYTHONPATH].filter(Boolean).join(path.delimiter);
    this.output.appendLine(
      `Starting the server: ${command.join(' ')} -m deep_research serve (Python ${py.version}, ${py.executable}, from ${py.source}` +
        `${privatePython ? ', in the private environment with the installed packages' : ''}; ${located.layout} server; PYTHONPATH=${pythonPath})`,
    );
    // The API key reaches the server through its environment only, as the openai package reads it.
    const apiKey = await this.context.secrets.get(API_KEY_SECRET);
    const env: NodeJS.ProcessEnv = { ...process.env, PYTHONPATH: pythonPath, PYTHONIOENCODING: 'utf-8' };
    if (apiKey) {
      env.OPENAI_API_KEY = apiKey;
    }
    this.output.appendLine(`API key for the model: ${apiKey ? 'from VS Code secret storage' : env.OPENAI_API_KEY ? 'from the environment' : 'none set'}`);
    const serverOptions: ServerOptions = {
      command: command[0],
      args: [...command.slice(1), '-m', 'deep_research', 'serve'],
      transport: TransportKind.stdio, // adds --stdio, which the server accepts
      options: { env },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [
        { scheme: 'file', language: LANGUAGE_ID },
        // The research tree's own markdown files: the server shows `deep-research check`'s findings on them.
        { scheme: 'file', language: 'markdown', pattern: TREE_FILES },
      ],
      synchronize: { configurationSection: 'deepResearch' },
      outputChannel: this.output,
      traceOutputChannel: this.traceChannel,
      diagnosticCollectionName: 'deep-research',
      // VS Code re-reads files changed on disk, so the server may select the prompt's newest line.
      initializationOptions: { reloadsChangedFiles: true },
      middleware: { window: { showDocument: (params, token, next) => showDocumentBeside(params, token, next) } },
    };
    // the id `deepResearch` makes the client read `deepResearch.trace.server`
    const client = new LanguageClient('deepResearch', 'Deep Research', serverOptions, clientOptions);
    this.client = client;
    client.onDidChangeState((e) => {
      if (this.client !== client) {
        return;
      }
      if (e.newState === State.Running) {
        this.setState('running');
      } else if (e.newState === State.Stopped && this._state === 'running') {
        this.setState('stopped');
      }
    });
    client.onNotification(DidExecuteNotification, (params) => this.executedEmitter.fire(params));
    client.onNotification(AutopilotNotification, (params) => this.autopilotEmitter.fire(params));
    try {
      await client.start();
    } catch (e) {
      this.output.appendLine(`The server failed to start: ${(e as Error).message}`);
      this.setState('failed');
      void vscode.window.showErrorMessage(
        `Deep Research: the language server failed to start with ${py.executable}: ${(e as Error).message}`,
        'Show Output',
      ).then((choice) => choice && this.output.show());
      return undefined;
    }
    this.setState('running');
    void this.packages.offerOnce(py, command, env);
    return client;
  }

  async stop(): Promise<void> {
    await this.pending?.catch(() => undefined);
    const client = this.client;
    this.client = undefined;
    if (client) {
      try {
        // dispose, not just stop: a stopped client's features (configuration sync)
        // would start it again on the next settings change
        await client.dispose(3000);
      } catch (e) {
        this.output.appendLine(`Stopping the server: ${(e as Error).message}`);
      }
    }
    this.setState('stopped');
  }

  async restart(): Promise<LanguageClient | undefined> {
    this.output.appendLine('Restarting the server');
    await this.stop();
    return this.start();
  }

  dispose(): void {
    void this.stop();
    this.stateEmitter.dispose();
    this.executedEmitter.dispose();
    this.autopilotEmitter.dispose();
    this.traceChannel.dispose();
  }
}
