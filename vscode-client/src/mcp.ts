// Makes `deep-research mcp` known to VS Code's agent mode: one MCP server definition per
// workspace folder that holds a research (a .dr document or a .deep-research/ folder),
// launched with the same Python and server package as the language server, with that folder
// as its root. Uses vscode.lm.registerMcpServerDefinitionProvider (VS Code 1.101 and later);
// on an older VS Code nothing is registered. If the Python lacks the `mcp` package the server
// is not started, and the output channel says why.
import { execFile } from 'node:child_process';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { ServerManager, serverPythonPath } from './server';

export const MCP_PROVIDER_ID = 'deepResearch.mcpServers';

/** The MCP part of the API (stable since 1.101; the extension builds against older typings). */
interface McpApi {
  registerMcpServerDefinitionProvider(id: string, provider: McpProvider): vscode.Disposable;
}
interface McpStdioDefinition {
  label: string;
  command: string;
  args: string[];
  cwd?: vscode.Uri;
  env: Record<string, string | number | null>;
  version?: string;
}
interface McpProvider {
  onDidChangeMcpServerDefinitions: vscode.Event<void>;
  provideMcpServerDefinitions(token: vscode.CancellationToken): Promise<McpStdioDefinition[]>;
  resolveMcpServerDefinition(server: McpStdioDefinition, token: vscode.CancellationToken): Promise<McpStdioDefinition | undefined>;
}
type StdioDefinitionClass = new (
  label: string, command: string, args?: string[], env?: Record<string, string | number | null>, version?: string,
) => McpStdioDefinition;

const HOLDS_RESEARCH = '{**/*.dr,**/.deep-research/state.json}';

/** Registers the provider; returns what to dispose, or undefined when this VS Code has no MCP API. */
export function registerMcpServers(
  context: vscode.ExtensionContext, server: ServerManager, output: vscode.LogOutputChannel,
): vscode.Disposable | undefined {
  const lm = vscode.lm as unknown as Partial<McpApi> | undefined;
  const Definition = (vscode as unknown as { McpStdioServerDefinition?: StdioDefinitionClass }).McpStdioServerDefinition;
  if (typeof lm?.registerMcpServerDefinitionProvider !== 'function' || !Definition) {
    output.info('This VS Code has no MCP server API (1.101 or later): the Deep Research MCP server is not offered to agents.');
    return undefined;
  }
  const changed = new vscode.EventEmitter<void>();
  const version = String(context.extension.packageJSON.version ?? '0');
  const checked = new Map<string, Promise<string | undefined>>(); // python -> why it cannot serve, if it cannot

  const provider: McpProvider = {
    onDidChangeMcpServerDefinitions: changed.event,
    async provideMcpServerDefinitions(token) {
      const found: McpStdioDefinition[] = [];
      for (const folder of vscode.workspace.workspaceFolders ?? []) {
        const hits = await vscode.workspace.findFiles(new vscode.RelativePattern(folder, HOLDS_RESEARCH), null, 1, token);
        if (hits.length === 0) {
          continue;
        }
        // Resolved when VS Code starts it (the Python is known only once the language server looked for it).
        const python = server.python?.[0] ?? 'python3';
        const definition = new Definition(`Deep Research: ${folder.name}`, python, ['-m', 'deep_research', 'mcp', folder.uri.fsPath], {}, version);
        definition.cwd = folder.uri;
        found.push(definition);
      }
      return found;
    },
    async resolveMcpServerDefinition(definition) {
      await server.start(); // finds the Python, as for the language server
      const found = server.discovery?.found;
      const located = serverPythonPath(context.extensionPath);
      // the language server's Python: the private environment's once the packages are installed (packages.ts)
      const command = server.python ?? found?.command;
      if (!found || !command || !located) {
        output.warn(`Deep Research MCP server "${definition.label}" not started: no Python (>= 3.10) or no server package was found; see the messages above.`);
        return undefined;
      }
      const pythonPath = [...located.entries, process.env.PYTHONPATH].filter(Boolean).join(path.delimiter);
      const key = `${command.join('\0')}\0${pythonPath}`;
      if (!checked.has(key)) {
        checked.set(key, missingMcp(command, pythonPath));
      }
      const missing = await checked.get(key);
      if (missing) {
        checked.delete(key); // check again next time: the user may have installed it meanwhile
        output.warn(
          `Deep Research MCP server "${definition.label}" not started: ${command.join(' ')} cannot import the Python package mcp (${missing}). ` +
            'Run "Deep Research: Install Python Packages" (a private environment of the extension); the language server works without it.',
        );
        return undefined;
      }
      definition.command = command[0];
      definition.args = [...command.slice(1), '-m', 'deep_research', 'mcp', definition.args[definition.args.length - 1]];
      definition.env = { ...definition.env, PYTHONPATH: pythonPath, PYTHONIOENCODING: 'utf-8' };
      output.info(`Starting the Deep Research MCP server "${definition.label}": ${definition.command} ${definition.args.join(' ')}`);
      return definition;
    },
  };

  const watcher = vscode.workspace.createFileSystemWatcher('**/.deep-research/state.json', false, true, false);
  const fire = () => changed.fire();
  return vscode.Disposable.from(
    lm.registerMcpServerDefinitionProvider(MCP_PROVIDER_ID, provider),
    changed,
    watcher,
    watcher.onDidCreate(fire),
    watcher.onDidDelete(fire),
    vscode.workspace.onDidChangeWorkspaceFolders(fire),
  );
}

/** Why `python` cannot run the MCP server (it cannot import `mcp`), or undefined if it can. */
function missingMcp(python: string[], pythonPath: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile(
      python[0], [...python.slice(1), '-c', 'import mcp.server.lowlevel'],
      { timeout: 30000, windowsHide: true, env: { ...process.env, PYTHONPATH: pythonPath } },
      (err, _stdout, stderr) => resolve(err ? (stderr || err.message).trim().split('\n').pop() || err.message : undefined),
    );
  });
}
