// Nothing installed by hand: the Python packages the bundle cannot hold (compiled ones:
// openai for the autopilot, trafilatura for web pages, mcp for the MCP server, ddgs for DuckDuckGo; the list is
// vscode-client/bundled/not-bundled.json, written from pyproject.toml by
// scripts/bundle-server.py) go, on the user's say-so, into a private virtual environment in
// the extension's global storage — never into the user's Python (PEP 668). The server then
// runs with that environment's Python, made from the same interpreter.
//
// The extension offers it once per Python and set of missing packages (the Jupyter and
// Python extensions' convention), again when the autopilot refuses for want of openai, and
// any time through "Deep Research: Install Python Packages". They are installed exactly as
// the project's lock pins them (bundled/on-request.txt: every version and file hash, from
// requirements/on-request.txt), so that no new release of a library can break the install.
// pip reads its usual settings (PIP_INDEX_URL, PIP_FIND_LINKS …) from the environment: users
// get PyPI, the tests a local wheelhouse.
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { ClientCommand } from './protocol';
import type { PythonFound } from './python';

export interface Requirements {
  /** Requirements as pyproject.toml states them, e.g. `openai>=1.40`. */
  requirements: string[];
  /** Their distribution names, e.g. `openai`. */
  names: string[];
  /** The lock of them and all they need (a requirements file beside not-bundled.json), if any. */
  lock?: string;
}

export interface NotBundled extends Requirements {
  /** Extras installed when a command needs them (`export`: compile's docx, odt and pdf), each
   * with a lock that holds the packages above too. */
  extras?: Record<string, Requirements>;
}

/** What the private environment was made from (its marker file). */
interface Marker {
  base: string;
  requirements: string[];
  extras?: string[];
  created: string;
}

const MARKER = 'deep-research-env.json';
const OFFERED_KEY = 'deepResearch.packagesOffered';

const PROBE = [
  'import importlib.metadata as m, sys',
  'for name in sys.argv[1:]:',
  '    try: m.distribution(name)',
  '    except m.PackageNotFoundError: print(name)',
].join('\n');

export function notBundled(extensionPath: string): NotBundled | undefined {
  try {
    const file = path.join(extensionPath, 'vscode-client', 'bundled', 'not-bundled.json');
    const data = JSON.parse(fs.readFileSync(file, 'utf8')) as NotBundled;
    return Array.isArray(data.requirements) && Array.isArray(data.names) ? data : undefined;
  } catch {
    return undefined;
  }
}

/** Runs a process, every line of its output to `output`; resolves to its exit status and output. */
function run(command: string, args: string[], output: vscode.LogOutputChannel, env?: NodeJS.ProcessEnv): Promise<{ code: number; text: string }> {
  output.appendLine(`$ ${[command, ...args].join(' ')}`);
  return new Promise((resolve) => {
    let text = '';
    const child = spawn(command, args, { env: env ?? process.env, windowsHide: true });
    const take = (chunk: Buffer) => {
      const s = chunk.toString();
      text += s;
      for (const line of s.split(/\r?\n/)) if (line.trim()) output.appendLine(`  ${line}`);
    };
    child.stdout.on('data', take);
    child.stderr.on('data', take);
    child.on('error', (e) => resolve({ code: -1, text: text + String(e) }));
    child.on('close', (code) => resolve({ code: code ?? -1, text }));
  });
}

export class PythonPackages {
  private installing: Promise<boolean> | undefined;

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly output: vscode.LogOutputChannel,
    /** Restarts the server (it picks the private environment up when it starts). */
    private readonly restart: () => Promise<unknown>,
  ) {}

  get dir(): string {
    return path.join(this.context.globalStorageUri.fsPath, 'python-env');
  }

  private get python(): string {
    return process.platform === 'win32' ? path.join(this.dir, 'Scripts', 'python.exe') : path.join(this.dir, 'bin', 'python');
  }

  private marker(): Marker | undefined {
    try {
      return JSON.parse(fs.readFileSync(path.join(this.dir, MARKER), 'utf8')) as Marker;
    } catch {
      return undefined;
    }
  }

  /** The private environment's Python if it was made from `base` and is whole; else undefined. */
  environmentFor(base: PythonFound): string | undefined {
    const marker = this.marker();
    return marker && marker.base === base.executable && fs.existsSync(this.python) ? this.python : undefined;
  }

  /** The packages of not-bundled.json that `python` lacks ([] if it has them all, or the list is unknown). */
  async missing(python: string[], env: NodeJS.ProcessEnv): Promise<string[]> {
    const wanted = notBundled(this.context.extensionPath);
    if (!wanted?.names.length) {
      return [];
    }
    return new Promise((resolve) => {
      const child = spawn(python[0], [...python.slice(1), '-c', PROBE, ...wanted.names], { env, windowsHide: true });
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.on('error', () => resolve([]));
      child.on('close', (code) => resolve(code === 0 ? out.split(/\r?\n/).filter(Boolean) : []));
    });
  }

  /** After the server started: offer the install if packages are missing and this was not offered before. */
  async offerOnce(base: PythonFound, running: string[], env: NodeJS.ProcessEnv): Promise<void> {
    const missing = await this.missing(running, env);
    if (!missing.length) {
      return;
    }
    const key = `${running.join(' ')}|${missing.join(',')}`;
    const offered = this.context.globalState.get<string[]>(OFFERED_KEY, []);
    if (offered.includes(key)) {
      this.output.appendLine(`Python packages missing: ${missing.join(', ')} (the install was offered before; run "Deep Research: Install Python Packages")`);
      return;
    }
    await this.context.globalState.update(OFFERED_KEY, [...offered, key].slice(-20));
    await this.offer(base, missing);
  }

  /** Asks, then installs. `missing`: the packages to name in the question. */
  async offer(base: PythonFound, missing: string[], why?: string): Promise<boolean> {
    const choice = await vscode.window.showInformationMessage(
      `Deep Research: ${why ?? 'the autopilot, reading web pages and the MCP server need'} Python packages that ${base.executable} lacks: ` +
        `${missing.join(', ')}. Install them into a private environment of the extension? Your Python is not changed.`,
      'Install',
      'Not Now',
    );
    return choice === 'Install' ? this.install(base) : false;
  }

  /** Makes (or completes) the private environment, with `extra` (e.g. `export`) and the extras
   * it holds already, and restarts the server with it. */
  install(base: PythonFound, extra?: string): Promise<boolean> {
    this.installing ??= this.doInstall(base, extra).finally(() => (this.installing = undefined));
    return this.installing;
  }

  /** The extras the private environment was given (its marker says). */
  private extrasHeld(): string[] {
    return this.marker()?.extras ?? [];
  }

  private async doInstall(base: PythonFound, extra?: string): Promise<boolean> {
    const all = notBundled(this.context.extensionPath);
    const extras = [...new Set([...this.extrasHeld(), ...(extra ? [extra] : [])])].filter((e) => all?.extras?.[e]);
    if (extra && !all?.extras?.[extra]) {
      void vscode.window.showErrorMessage(`Deep Research: this build of the extension cannot install the ${extra} packages.`);
      return false;
    }
    // An extra's lock holds the packages of not-bundled.json as well: its install makes the whole environment.
    const wanted = all && { requirements: [...all.requirements, ...extras.flatMap((e) => all.extras![e].requirements)] };
    const locks = (extras.length ? extras.map((e) => all!.extras![e].lock) : [all?.lock])
      .filter((l): l is string => !!l)
      .map((l) => path.join(this.context.extensionPath, 'vscode-client', 'bundled', l));
    if (!wanted?.requirements.length) {
      void vscode.window.showInformationMessage('Deep Research: the language server needs no further Python packages.');
      return false;
    }
    this.output.appendLine(`Installing ${wanted.requirements.join(', ')} into ${this.dir} (made from ${base.executable})`);
    const failure = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: 'Deep Research: installing Python packages', cancellable: false },
      async (progress) => {
        const fresh = this.environmentFor(base) === undefined;
        let pip: string[] = [this.python, '-m', 'pip'];
        if (fresh) {
          progress.report({ message: 'making a private environment' });
          fs.rmSync(this.dir, { recursive: true, force: true });
          fs.mkdirSync(path.dirname(this.dir), { recursive: true });
          const venv = await run(base.command[0], [...base.command.slice(1), '-m', 'venv', this.dir], this.output);
          if (venv.code !== 0) {
            if (!/ensurepip/.test(venv.text)) {
              return `making the environment failed (python -m venv exited with ${venv.code})`;
            }
            // Debian's Python without python3-venv: an environment without pip, filled by the base's pip
            fs.rmSync(this.dir, { recursive: true, force: true });
            const bare = await run(base.command[0], [...base.command.slice(1), '-m', 'venv', '--without-pip', this.dir], this.output);
            if (bare.code !== 0) {
              return `making the environment failed (python -m venv exited with ${bare.code})`;
            }
            pip = [...base.command, '-m', 'pip', '--python', this.python];
          }
        }
        // The lock, when the bundle has one: exact versions, each file checked against its hash
        // (it names every package, lxml's HTML cleaner included, so an old pip needs no update).
        const what = locks.length && locks.every((l) => fs.existsSync(l))
          ? ['--require-hashes', ...locks.flatMap((l) => ['-r', l])]
          : wanted.requirements;
        progress.report({ message: `pip install ${wanted.requirements.join(' ')}` });
        const installed = await run(pip[0], [...pip.slice(1), 'install', '--disable-pip-version-check', '--no-input', ...what], this.output);
        if (installed.code !== 0) {
          const hint = /No module named pip/.test(installed.text)
            ? ' (this Python has neither venv nor pip: on Debian or Ubuntu install python3-venv)'
            : '';
          return `pip exited with ${installed.code}${hint}`;
        }
        const marker: Marker = { base: base.executable, requirements: wanted.requirements, extras, created: new Date().toISOString() };
        fs.writeFileSync(path.join(this.dir, MARKER), JSON.stringify(marker, null, 1));
        progress.report({ message: 'restarting the language server' });
        return undefined;
      },
    );
    if (failure) {
      this.output.appendLine(`The install failed: ${failure}`);
      void vscode.window
        .showErrorMessage(
          `Deep Research: the Python packages could not be installed: ${failure}. Nothing else changed; ` +
            'the output "Deep Research" shows what pip said.',
          'Show Output',
        )
        .then((choice) => choice && this.output.show());
      return false;
    }
    this.output.appendLine(`Installed; the server now runs with ${this.python}`);
    await this.restart();
    vscode.window.setStatusBarMessage('Deep Research: Python packages installed', 8000);
    return true;
  }
}

/** The command "Deep Research: Install Python Packages". */
export function registerInstallCommand(
  context: vscode.ExtensionContext,
  packages: PythonPackages,
  base: () => PythonFound | undefined,
): void {
  context.subscriptions.push(
    vscode.commands.registerCommand(ClientCommand.installPackages, async (extra?: unknown) => {
      const found = base();
      if (!found) {
        void vscode.window.showErrorMessage('Deep Research: no Python 3.10+ was found to make the environment from (see the "Deep Research" output).');
        return false;
      }
      return packages.install(found, typeof extra === 'string' ? extra : undefined);
    }),
  );
}
