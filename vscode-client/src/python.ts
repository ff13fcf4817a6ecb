// Finds the Python that runs the bundled server: the `deepResearch.server.pythonPath`
// setting, else the Python extension's interpreter, else `python3`, else `python`.
// Each candidate is probed (`-c` prints its version and executable); it must be >= 3.10.
import { execFile } from 'node:child_process';
import * as os from 'node:os';
import * as path from 'node:path';
import * as vscode from 'vscode';

export const MIN_PYTHON: [number, number] = [3, 10];

export interface PythonCandidate {
  /** Command (and leading arguments) to run, e.g. ['/usr/bin/python3'] or ['conda', 'run', '-n', 'x', 'python']. */
  command: string[];
  source: 'setting' | 'python-extension' | 'path';
}

export interface PythonFound {
  command: string[];
  executable: string;
  version: string;
  source: PythonCandidate['source'];
}

export interface PythonRejected {
  candidate: PythonCandidate;
  reason: string;
}

export interface PythonDiscovery {
  found?: PythonFound;
  rejected: PythonRejected[];
}

const PROBE = 'import sys; print("%d.%d.%d" % sys.version_info[:3]); print(sys.executable)';

function probe(command: string[], timeoutMs = 10000): Promise<{ version: string; executable: string }> {
  return new Promise((resolve, reject) => {
    execFile(command[0], [...command.slice(1), '-c', PROBE], { timeout: timeoutMs, windowsHide: true }, (err, stdout, stderr) => {
      if (err) {
        const code = (err as NodeJS.ErrnoException).code;
        reject(new Error(code === 'ENOENT' ? 'not found' : (stderr || err.message).trim().split('\n').pop() ?? err.message));
        return;
      }
      const [version, executable] = stdout.trim().split(/\r?\n/);
      resolve({ version, executable: executable || command[0] });
    });
  });
}

function atLeast(version: string, min: [number, number]): boolean {
  const [major, minor] = version.split('.').map(Number);
  return major > min[0] || (major === min[0] && minor >= min[1]);
}

export function expandPath(value: string, folder?: vscode.WorkspaceFolder): string {
  let v = value.trim();
  const ws = folder ?? vscode.workspace.workspaceFolders?.[0];
  if (ws) {
    v = v.replace(/\$\{workspaceFolder\}/g, ws.uri.fsPath);
  }
  v = v.replace(/\$\{userHome\}/g, os.homedir());
  if (v === '~' || v.startsWith('~/')) {
    v = path.join(os.homedir(), v.slice(1));
  }
  return v;
}

/** The Python extension's interpreter for `resource`, if that extension is installed. */
async function pythonExtensionInterpreter(resource?: vscode.Uri): Promise<string[] | undefined> {
  const ext = vscode.extensions.getExtension('ms-python.python');
  if (!ext) {
    return undefined;
  }
  try {
    const api: any = ext.isActive ? ext.exports : await ext.activate();
    const envPath = api?.environments?.getActiveEnvironmentPath?.(resource);
    if (envPath?.path) {
      const resolved = await api.environments.resolveEnvironment?.(envPath);
      const exe: string | undefined = resolved?.executable?.uri?.fsPath ?? envPath.path;
      if (exe) {
        return [exe];
      }
    }
    const details = await api?.settings?.getExecutionDetails?.(resource);
    if (Array.isArray(details?.execCommand) && details.execCommand.length) {
      return details.execCommand as string[];
    }
  } catch {
    // an older or broken Python extension: fall through to PATH
  }
  return undefined;
}

/** Subscribes to interpreter changes of the Python extension (when it is there). */
export function onPythonExtensionInterpreterChange(listener: () => void): vscode.Disposable {
  const ext = vscode.extensions.getExtension('ms-python.python');
  if (!ext) {
    return new vscode.Disposable(() => undefined);
  }
  let disposable: vscode.Disposable | undefined;
  let disposed = false;
  void Promise.resolve(ext.isActive ? ext.exports : ext.activate()).then(
    (api: any) => {
      const event = api?.environments?.onDidChangeActiveEnvironmentPath;
      if (!disposed && typeof event === 'function') {
        disposable = event(() => listener());
      }
    },
    () => undefined,
  );
  return new vscode.Disposable(() => {
    disposed = true;
    disposable?.dispose();
  });
}

export async function candidates(resource?: vscode.Uri): Promise<PythonCandidate[]> {
  const config = vscode.workspace.getConfiguration('deepResearch', resource ?? null);
  const setting = (config.get<string>('server.pythonPath') ?? '').trim();
  if (setting) {
    // an explicit setting is the only candidate: falling back silently would hide a typo
    const folder = resource ? vscode.workspace.getWorkspaceFolder(resource) : undefined;
    return [{ command: [expandPath(setting, folder)], source: 'setting' }];
  }
  const list: PythonCandidate[] = [];
  const fromExtension = await pythonExtensionInterpreter(resource);
  if (fromExtension) {
    list.push({ command: fromExtension, source: 'python-extension' });
  }
  const names = process.platform === 'win32' ? ['py', 'python3', 'python'] : ['python3', 'python'];
  for (const name of names) {
    list.push({ command: name === 'py' ? ['py', '-3'] : [name], source: 'path' });
  }
  return list;
}

export async function discoverPython(resource?: vscode.Uri): Promise<PythonDiscovery> {
  const rejected: PythonRejected[] = [];
  for (const candidate of await candidates(resource)) {
    try {
      const { version, executable } = await probe(candidate.command);
      if (atLeast(version, MIN_PYTHON)) {
        return { found: { command: candidate.command, executable, version, source: candidate.source }, rejected };
      }
      rejected.push({ candidate, reason: `Python ${version} is older than ${MIN_PYTHON.join('.')}` });
    } catch (e) {
      rejected.push({ candidate, reason: (e as Error).message });
    }
  }
  return { rejected };
}

export function describeRejections(rejected: PythonRejected[]): string {
  return rejected.map((r) => `${r.candidate.command.join(' ')} (${r.candidate.source}): ${r.reason}`).join('; ');
}
