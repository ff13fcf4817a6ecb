// Entry point of the Deep Research extension: starts the bundled language server with
// the user's Python and wires the problem tree, the status bar and the commands to it.
import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import { Autopilot, registerAutopilotCommands } from './autopilot';
import { messageDocumentOf, registerCommands } from './commands';
import { registerMcpServers } from './mcp';
import { ResearchModel } from './model';
import { AutopilotParams, ResearchView } from './protocol';
import { onPythonExtensionInterpreterChange, PythonDiscovery } from './python';
import { ServerManager, ServerState } from './server';
import { registerSetupCommands } from './setup';
import { StatusBar } from './statusBar';
import { MORE_COMMAND, MoreRow, ProblemTreeProvider, TREE_VIEW_ID, TreeItemSnapshot, TreeNode } from './tree';

/** What `extensions.getExtension('deep-research.deep-research').exports` gives (used by the tests). */
export interface DeepResearchApi {
  /** Resolves once the first start attempt is over: the client, or undefined if the server cannot run. */
  ready(): Promise<LanguageClient | undefined>;
  serverState(): ServerState;
  python(): PythonDiscovery | undefined;
  /** Asks the server for the tree of the current research again. */
  refresh(): Promise<ResearchView | undefined>;
  view(): ResearchView | undefined;
  treeItems(): TreeItemSnapshot[];
  /**
   * Expands the problem at `path` (folder names from the root) in the real tree view, as a
   * click on its twistie does: VS Code then asks the provider for its children, which asks
   * the server. Resolves once the view has revealed it; the children follow in treeItems().
   */
  expand(path: string[]): Promise<void>;
  statusBar(): { text: string; tooltip: string; visible: boolean };
  /** Fires after every refresh of the tree and the status bar. */
  onDidRefresh: vscode.Event<ResearchView | undefined>;
  /** The autopilot's last state (of `uri`, or of the last run) and its status bar. */
  autopilot(uri?: string): AutopilotParams | undefined;
  autopilotStatus(): { text: string; stopVisible: boolean };
}

let server: ServerManager | undefined;

export function activate(context: vscode.ExtensionContext): DeepResearchApi {
  const output = vscode.window.createOutputChannel('Deep Research', { log: true });
  server = new ServerManager(context, output);
  const model = new ResearchModel(server, output);
  const tree = new ProblemTreeProvider(model);
  const statusBar = new StatusBar(model, server);
  const treeView = vscode.window.createTreeView<TreeNode>(TREE_VIEW_ID, { treeDataProvider: tree, showCollapseAll: true });
  const autopilot = new Autopilot(server, model, output);
  context.subscriptions.push(
    output, server, model, tree, statusBar, treeView, autopilot,
    vscode.commands.registerCommand(MORE_COMMAND, (row: MoreRow) => tree.more(row)),
  );
  registerCommands(context, server, model, output);
  registerSetupCommands(context, server, model, output);
  registerAutopilotCommands(context, server, model, autopilot, messageDocumentOf(model));
  const mcpServers = registerMcpServers(context, server, output); // agents as the researcher (docs/mcp.md)
  if (mcpServers) {
    context.subscriptions.push(mcpServers);
  }

  const srv = server;
  // refresh after every execution: the server's notification, and (in case an execution
  // ran without one) the save of a message and every rewrite of a prompt
  let refreshTimer: NodeJS.Timeout | undefined;
  const refreshSoon = () => {
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(() => void model.refresh(), 150); // debounce bursts of file events
  };
  const promptWatcher = vscode.workspace.createFileSystemWatcher('**/.deep-research/prompt.md');
  context.subscriptions.push(
    srv.onDidExecute(() => void model.refresh()),
    srv.onDidChangeState((state) => state === 'running' && void model.refresh()),
    vscode.workspace.onDidSaveTextDocument((doc) => doc.languageId === 'deep-research' && void model.refresh()),
    promptWatcher,
    promptWatcher.onDidChange(refreshSoon),
    promptWatcher.onDidCreate(refreshSoon),
    { dispose: () => clearTimeout(refreshTimer) },
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration('deepResearch.server')) {
        void srv.restart();
      } else if (e.affectsConfiguration('deepResearch')) {
        void model.refresh(); // the server re-reads its settings (didChangeConfiguration)
      }
    }),
    onPythonExtensionInterpreterChange(() => {
      const setting = vscode.workspace.getConfiguration('deepResearch').get<string>('server.pythonPath');
      if (!setting) {
        void srv.restart();
      }
    }),
  );

  const ready = srv.start();
  return {
    ready: () => ready,
    serverState: () => srv.state,
    python: () => srv.discovery,
    refresh: () => model.refresh(),
    view: () => model.view,
    treeItems: () => tree.snapshot(),
    expand: async (path: string[]) => {
      const node = tree.node(path);
      if (!node) {
        throw new Error(`the tree view does not show the problem ${JSON.stringify(path)}`);
      }
      await treeView.reveal(node, { expand: true, select: false, focus: false });
    },
    statusBar: () => ({ text: statusBar.text, tooltip: statusBar.tooltip, visible: statusBar.visible }),
    onDidRefresh: model.onDidChange,
    autopilot: (uri?: string) => autopilot.state(uri),
    autopilotStatus: () => ({ text: autopilot.statusText, stopVisible: autopilot.stopVisible }),
  };
}

export async function deactivate(): Promise<void> {
  await server?.stop();
  server = undefined;
}
