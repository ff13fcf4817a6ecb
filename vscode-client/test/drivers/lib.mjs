// Shared helpers of the real-VS-Code test drivers (code-server + Playwright + Debian chromium).
// No sleeps for synchronisation: everything waits by polling a condition with a deadline.
import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
export const SETUP_SCRIPT = 'scripts/setup-vscode-test-env';

export function log(...args) {
  const t = ((Date.now() - T0) / 1000).toFixed(1).padStart(5);
  console.log(`[${t}s]`, ...args);
}
const T0 = Date.now();

/** The paths written by scripts/setup-vscode-test-env; exits 2 with a clear message when it has not run. */
export function testEnv() {
  let dir = process.env.DR_VSCODE_ENV_DIR;
  if (!dir) {
    try {
      dir = execFileSync('bash', [path.join(REPO, SETUP_SCRIPT), '--print-dir'], { encoding: 'utf8' }).trim();
    } catch {
      dir = '';
    }
  }
  const envFile = dir && path.join(dir, 'env.json');
  if (!envFile || !fs.existsSync(envFile) || !fs.existsSync(path.join(dir, '.complete'))) {
    console.error(
      `The VS Code test environment is not installed (code-server, node 24, playwright-core, chromium).\n` +
        `Run: ${SETUP_SCRIPT}   (about 2-3 minutes the first time; reused afterwards)`,
    );
    process.exit(2);
  }
  const env = JSON.parse(fs.readFileSync(envFile, 'utf8'));
  for (const key of ['node24', 'vscodeServerMain', 'codeServerBin', 'playwrightCore', 'chromium']) {
    if (!fs.existsSync(env[key])) {
      console.error(`The VS Code test environment is incomplete (${key}: ${env[key]} is missing). Run: ${SETUP_SCRIPT}`);
      process.exit(2);
    }
  }
  return env;
}

export function loadPlaywright(env) {
  return createRequire(import.meta.url)(env.playwrightCore);
}

/** A private temp tree: HOME, XDG dirs, user data, extensions, workspace, logs. */
export function makeTempRoot(name) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), `dr-${name}-`));
  const dirs = {
    root,
    home: path.join(root, 'home'),
    userData: path.join(root, 'user-data'),
    serverData: path.join(root, 'server-data'),
    extensions: path.join(root, 'extensions'),
    ws: path.join(root, 'ws'),
    logs: path.join(root, 'logs'),
  };
  for (const d of Object.values(dirs)) fs.mkdirSync(d, { recursive: true });
  return dirs;
}

export function isolatedEnv(dirs, extra = {}) {
  const env = { ...process.env };
  // keep the machine's npm/node settings out of the editor's processes
  for (const k of Object.keys(env)) if (k.startsWith('npm_') || k.startsWith('VSCODE_')) delete env[k];
  return {
    ...env,
    HOME: dirs.home,
    XDG_CONFIG_HOME: path.join(dirs.home, '.config'),
    XDG_DATA_HOME: path.join(dirs.home, '.local', 'share'),
    XDG_CACHE_HOME: path.join(dirs.home, '.cache'),
    XDG_STATE_HOME: path.join(dirs.home, '.local', 'state'),
    XDG_RUNTIME_DIR: path.join(dirs.home, 'run'),
    ...extra,
  };
}

/** User settings for a quiet, offline, trusted workbench; `extra` adds to them. */
export function writeSettings(file, extra = {}) {
  const settings = {
    'security.workspace.trust.enabled': false,
    'workbench.startupEditor': 'none',
    'workbench.tips.enabled': false,
    'workbench.welcomePage.walkthroughs.openOnInstall': false,
    'telemetry.telemetryLevel': 'off',
    'update.mode': 'none',
    'extensions.autoCheckUpdates': false,
    'extensions.autoUpdate': false,
    'extensions.ignoreRecommendations': true,
    'chat.disableAIFeatures': true,
    'files.autoSave': 'off',
    'git.enabled': false,
    'editor.minimap.enabled': false,
    'workbench.secondarySideBar.defaultVisibility': 'hidden',
    ...extra,
  };
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, JSON.stringify(settings, null, 2));
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

export const { waitFor } = createRequire(import.meta.url)('../wait.js');

export async function waitForHttp(url, timeoutMs) {
  await waitFor(`${url} to answer`, async () => (await fetch(url)).status < 500, timeoutMs, 100);
}

/** Starts a process in its own process group, logging to a file. */
export function startProcess(name, command, args, { env, cwd, logDir }) {
  const logFile = path.join(logDir, `${name}.log`);
  const fd = fs.openSync(logFile, 'a');
  const child = spawn(command, args, { env, cwd, detached: true, stdio: ['ignore', fd, fd] });
  fs.closeSync(fd);
  child.logFile = logFile;
  child.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  log(`started ${name} (pid ${child.pid}): ${[command, ...args].map((a) => (a.length > 80 ? a.slice(0, 77) + '...' : a)).join(' ')}`);
  return child;
}

function childrenMap() {
  const map = new Map();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (!map.has(ppid)) map.set(ppid, []);
      map.get(ppid).push(Number(entry));
    } catch {
      // the process is gone
    }
  }
  return map;
}

export function descendants(pid) {
  const map = childrenMap();
  const out = [];
  const walk = (p) => {
    for (const c of map.get(p) ?? []) {
      out.push(c);
      walk(c);
    }
  };
  walk(pid);
  return out;
}

function commandName(pid) {
  try {
    const args = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
    const pick = args.find((a) => /deep_research|server-main|entry\.js|--type=/.test(a)) ?? args[0] ?? '?';
    return `${pid}:${path.basename(pick).slice(0, 40)}`;
  } catch {
    return `${pid}:?`;
  }
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return false;
  }
}

/** Stops a process and every descendant (file watcher, extension host, our Python server). */
export async function killTree(child, name, known = []) {
  if (!child || child.pid === undefined) return;
  const pids = [...new Set([...known, ...descendants(child.pid), child.pid])];
  const names = pids.filter(alive).map(commandName);
  const signal = (sig) => {
    try {
      process.kill(-child.pid, sig); // the whole process group
    } catch {
      // already gone
    }
    for (const p of pids) {
      try {
        process.kill(p, sig);
      } catch {
        // already gone
      }
    }
  };
  signal('SIGTERM');
  try {
    await waitFor(`${name} to exit`, () => pids.every((p) => !alive(p)), 5000, 50);
  } catch {
    signal('SIGKILL');
    await waitFor(`${name} to die`, () => pids.every((p) => !alive(p)), 5000, 50);
  }
  log(`stopped ${name}: ${names.join(', ') || 'already gone'}`);
}

export function tail(file, lines = 40) {
  try {
    return fs.readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

function chromiumOptions(env, dirs) {
  return {
    executablePath: env.chromium,
    headless: true,
    env: isolatedEnv(dirs),
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-dev-shm-usage',
    ],
  };
}

export function launchChromium(pw, env, dirs) {
  return pw.chromium.launch(chromiumOptions(env, dirs));
}

/** The Python that runs our server in the tests (the pytest interpreter when run from pytest). */
export function testPython() {
  return process.env.DR_TEST_PYTHON || 'python3';
}

/** `python -m deep_research ARGS…`, from the repo's sources with the bundled libraries; its output. */
export function researchCli(...args) {
  const env = {
    ...process.env,
    PYTHONPATH: [path.join(REPO, 'server'), path.join(REPO, 'vscode-client', 'bundled', 'libs'), process.env.PYTHONPATH]
      .filter(Boolean)
      .join(path.delimiter),
  };
  return execFileSync(testPython(), ['-m', 'deep_research', ...args], { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
}

/** `python -m deep_research new DIR`. */
export function newResearch(dir) {
  researchCli('new', dir);
  return path.join(dir, 'message.dr');
}

export function requireBuilt() {
  const missing = [
    'vscode-client/dist/extension.js',
    'vscode-client/bundled/libs/pygls/__init__.py',
  ].filter((f) => !fs.existsSync(path.join(REPO, f)));
  if (missing.length) {
    console.error(`Build the extension first (npm run package): missing ${missing.join(', ')}`);
    process.exit(2);
  }
}

const VIEWPORT = { width: 1400, height: 900 };

function vsixPath() {
  const vsix = process.env.DR_VSIX || path.join(REPO, 'vscode-client', 'dist', 'deep-research.vsix');
  if (!fs.existsSync(vsix)) {
    console.error(`${vsix} is missing: run \`npm run package\` first`);
    process.exit(2);
  }
  return vsix;
}

/**
 * A code-server with the packaged .vsix installed, in `dirs` (its user data, extensions and
 * logs), serving `folder`; `machineSettings` go to the remote machine's settings, `env` to its
 * environment (the extension hosts' and the servers'). Returns the process and its address.
 */
async function startCodeServer(env, dirs, { machineSettings = {}, env: extraEnv = {}, folder }) {
  writeSettings(path.join(dirs.userData, 'User', 'settings.json'), { 'workbench.colorTheme': 'Default Dark Modern' });
  fs.mkdirSync(path.join(dirs.userData, 'Machine'), { recursive: true });
  fs.writeFileSync(path.join(dirs.userData, 'Machine', 'settings.json'),
    JSON.stringify({ 'deepResearch.server.pythonPath': testPython(), ...machineSettings }));
  const port = await freePort();
  const config = path.join(dirs.root, 'config.yaml');
  fs.writeFileSync(config, `bind-addr: 127.0.0.1:${port}\nauth: none\ncert: false\n`);
  const cs = (...args) => [env.codeServerBin, '--config', config, '--user-data-dir', dirs.userData, '--extensions-dir', dirs.extensions, ...args];
  // No extension gallery: code-server would ask open-vsx.org at every window (traffic beyond loopback).
  const csEnv = isolatedEnv(dirs, { EXTENSIONS_GALLERY: '{}', ...extraEnv });
  log('step: install the .vsix');
  const out = execFileSync(env.node24, cs('--install-extension', vsixPath()), { env: csEnv, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  if (!/successfully installed/.test(out)) throw new Error(`install failed: ${out}`);
  const server = startProcess(
    'code-server',
    env.node24,
    cs('--bind-addr', `127.0.0.1:${port}`, '--auth', 'none', '--disable-telemetry', '--disable-update-check',
      '--disable-workspace-trust', '--disable-getting-started-override', folder),
    { env: csEnv, cwd: folder, logDir: dirs.logs },
  );
  const url = `http://127.0.0.1:${port}`;
  await waitForHttp(`${url}/healthz`, 30000);
  return { server, url };
}

/**
 * One code-server and one Chromium for several drivers (the pytest session's, through
 * `workbench-session.mjs`): what `DR_WORKBENCH` (JSON) says, or undefined when each driver
 * starts its own. Each driver then opens its own folder in its own browser context (its own
 * storage: secrets, state), with its settings in the folder's .vscode/settings.json, and stops
 * its own window's extension host (and so its language server) when it closes.
 */
function sharedWorkbench() {
  return process.env.DR_WORKBENCH ? JSON.parse(process.env.DR_WORKBENCH) : undefined;
}

/** Starts the shared code-server and Chromium; `close()` stops them. */
export async function startWorkbenchSession() {
  const env = testEnv();
  const pw = loadPlaywright(env);
  const dirs = makeTempRoot('workbench');
  const { server, url } = await startCodeServer(env, dirs, { folder: dirs.ws });
  const browser = await pw.chromium.launchServer(chromiumOptions(env, dirs));
  const session = { url, wsEndpoint: browser.wsEndpoint(), userData: dirs.userData, logFile: server.logFile, pid: server.pid };
  session.close = async (ok) => {
    const family = descendants(server.pid);
    await browser.close().catch(() => undefined);
    await killTree(server, 'code-server', family);
    if (ok && !process.env.DR_KEEP_TMP) fs.rmSync(dirs.root, { recursive: true, force: true });
    else log(`kept ${dirs.root}`);
  };
  return session;
}

/** The extension hosts under the shared code-server (one per window), with what they started. */
function extensionHosts(serverPid) {
  const hosts = descendants(serverPid).filter((pid) => {
    try {
      return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes('--type=extensionHost');
    } catch {
      return false;
    }
  });
  return new Set(hosts);
}

/**
 * Opens `research/message.dr` of a fresh research in the workbench, in headless Chromium: in
 * the shared code-server when there is one (see sharedWorkbench), else in a code-server of its
 * own with the packaged .vsix installed. `machineSettings` are the driver's settings (in a
 * code-server of its own, the remote machine's, where machine-overridable and model settings
 * of a code-server window live; in the shared one, the folder's, where a user may put the same
 * resource-scoped settings), `env` is added to code-server's environment (the extension
 * host's and the server's: only in a code-server of its own); `before(dirs)` runs before the
 * window opens. Exits 2 when the .vsix is missing.
 * Returns what a driver needs, and `close(ok)` to take it all down.
 */
export async function openWorkbench(name, { machineSettings = {}, env: extraEnv = {}, before } = {}) {
  const env = testEnv();
  const pw = loadPlaywright(env);
  const shared = sharedWorkbench();
  if (shared && Object.keys(extraEnv).length) throw new Error(`${name}: a driver that sets code-server's environment needs its own`);
  if (!shared) vsixPath();
  const dirs = makeTempRoot(name);
  const research = path.join(dirs.ws, 'research');
  const message = newResearch(research);
  if (shared) {
    dirs.userData = shared.userData; // where the machine's and user's settings are
    writeSettings(path.join(dirs.ws, '.vscode', 'settings.json'), machineSettings);
  }
  await before?.(dirs);
  const bench = { env, dirs, research, message, prompt: path.join(research, '.deep-research', 'prompt.md') };
  let hostsBefore = new Set();
  bench.close = async (ok) => {
    if (shared) {
      await bench.context?.close().catch(() => undefined);
      await bench.browser?.close().catch(() => undefined); // disconnects; the browser stays for the next driver
      // this window's extension host, and our language server under it
      const mine = [...extensionHosts(shared.pid)].filter((pid) => !hostsBefore.has(pid));
      for (const pid of mine) await killTree({ pid }, 'extension host', descendants(pid));
    } else {
      const family = bench.server ? descendants(bench.server.pid) : [];
      await bench.browser?.close().catch(() => undefined);
      await killTree(bench.server, 'code-server', family);
    }
    if (ok && !process.env.DR_KEEP_TMP) fs.rmSync(dirs.root, { recursive: true, force: true });
    else log(`kept ${dirs.root}`);
  };
  let url;
  if (shared) {
    url = shared.url;
    bench.server = { logFile: shared.logFile }; // for the drivers' failure reports
    hostsBefore = extensionHosts(shared.pid);
    bench.browser = await pw.chromium.connect(shared.wsEndpoint);
    bench.context = await bench.browser.newContext({ viewport: VIEWPORT });
  } else {
    ({ server: bench.server, url } = await startCodeServer(env, dirs, { machineSettings, env: extraEnv, folder: dirs.ws }));
    bench.browser = await launchChromium(pw, env, dirs);
    bench.context = await bench.browser.newContext({ viewport: VIEWPORT });
  }
  const page = (bench.page = await bench.context.newPage());
  const pageLog = fs.createWriteStream(path.join(dirs.logs, 'page.log'));
  page.on('console', (m) => pageLog.write(`[${m.type()}] ${m.text()}\n`));
  page.setDefaultTimeout(20000);
  await page.goto(`${url}/?folder=${encodeURIComponent(dirs.ws)}`);
  await page.waitForSelector('.monaco-workbench');
  log('step: open research/message.dr with Quick Open');
  await waitFor('quick open to find message.dr', async () => {
    await page.keyboard.press('Escape');
    await page.keyboard.press('Control+P');
    await page.locator('.quick-input-widget input').waitFor({ timeout: 3000 });
    await page.keyboard.type('message.dr');
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'message.dr' }).first().waitFor({ timeout: 3000 });
    return true;
  }, 30000);
  await page.keyboard.press('Enter');
  await page.locator('.tab.active', { hasText: 'message.dr' }).waitFor();
  bench.editor = page.locator('.editor-group-container .monaco-editor .view-lines').first();
  return bench;
}

/** The text of an editor's `.view-lines` as typed: Monaco renders spaces as U+00A0. */
export async function editorText(editor) {
  return (await editor.innerText()).replace(/\u00a0/g, ' ');
}

/**
 * What a failed driver leaves: a screenshot in its temp root, and in the log (all CI keeps)
 * what the workbench showed, the files named in `files` ({label: path}), and code-server's log.
 */
export async function reportFailure(bench, error, files = {}) {
  log(`ERROR: ${error.stack || error}`);
  const page = bench?.page;
  if (page) {
    await page.screenshot({ path: path.join(bench.dirs.root, 'failure.png') }).catch(() => undefined);
    const texts = async (selector) => (await page.locator(selector).allInnerTexts()).map((t) => t.replace(/\s+/g, ' ').trim());
    const shown = async () => [
      `tabs: ${(await texts('.tab')).join(' | ')}`,
      `active tab: ${(await texts('.tab.active')).join(' | ')}`,
      `breadcrumbs: ${(await texts('.breadcrumbs-control')).join(' | ')}`,
      `editor: ${JSON.stringify(await editorText(bench.editor))}`,
      `notifications: ${(await texts('.notification-toast')).join(' | ')}`,
      `status bar: ${(await texts('.statusbar-item')).filter(Boolean).join(' | ')}`,
    ];
    const lines = await shown().catch((e) => [`(not read: ${e.message})`]);
    for (const [label, file] of Object.entries(files)) {
      lines.push(`${label}: ${fs.existsSync(file) ? JSON.stringify(fs.readFileSync(file, 'utf8').slice(0, 2000)) : '(missing)'}`);
    }
    log(`--- what the workbench showed ---\n${lines.join('\n')}`);
  }
  log(`--- code-server log (tail) ---\n${tail(bench?.server?.logFile)}`);
}

/** Runs a palette command by its title, as a user does (F1, type, Enter). */
export async function runPaletteCommand(page, title) {
  await page.keyboard.press('F1');
  await page.locator('.quick-input-widget input').waitFor();
  await page.keyboard.type(title);
  await page.locator('.quick-input-list .monaco-list-row', { hasText: title }).first().waitFor();
  await page.keyboard.press('Enter');
}

/**
 * Saves a screenshot as `<DR_SCREENSHOTS>/<name>.png` (the pytest side points it at the test
 * output, .test-output/screenshots/); without DR_SCREENSHOTS, into the driver's temp root.
 */
export async function screenshot(page, dirs, name) {
  const dir = process.env.DR_SCREENSHOTS || dirs.root;
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${name}.png`);
  await page.screenshot({ path: file });
  log(`screenshot: ${file}`);
  return file;
}
