// Extension-host test driver ("test mode B"): runs vscode-client/test/suite/index.js
// inside a real VS Code extension host. The VS Code server shipped in code-server is
// started directly (server-main.js accepts --enable-smoke-test-driver, which makes the
// workbench honour the `?payload=` development options), headless chromium opens the
// workbench with extensionDevelopmentPath = the repo and extensionTestsPath = the suite,
// and the suite writes its result to a file that this driver polls.
// Exit code: 0 all passed, 1 a test failed or timed out, 2 the environment is missing.
import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  REPO, descendants, freePort, isolatedEnv, killTree, launchChromium, loadPlaywright, log, makeTempRoot, newResearch,
  requireBuilt, startProcess, tail, testEnv, testPython, waitFor, waitForHttp, writeSettings,
} from './lib.mjs';

const TIMEOUT_MS = Number(process.env.DR_VSCODE_TEST_TIMEOUT_MS || 180000);
const env = testEnv();
requireBuilt();
const pw = loadPlaywright(env);
const dirs = makeTempRoot('exthost');
const resultFile = path.join(dirs.root, 'result.json');
const suite = path.join(REPO, 'vscode-client', 'test', 'suite', 'index.js');

// workspace: a research made by the command line, the way a user starts one
const research = path.join(dirs.ws, 'research');
newResearch(research);
const python = testPython();
const settings = { 'deepResearch.server.pythonPath': python };
writeSettings(path.join(dirs.userData, 'User', 'settings.json'), settings);
writeSettings(path.join(dirs.ws, '.vscode', 'settings.json'), settings);

let server;
let browser;
let exitCode = 1;
try {
  const port = await freePort();
  server = startProcess(
    'vscode-server',
    env.node24,
    [
      env.vscodeServerMain, '--host', '127.0.0.1', '--port', String(port), '--without-connection-token',
      '--accept-server-license-terms', '--enable-smoke-test-driver', '--telemetry-level', 'off',
      '--disable-workspace-trust', '--server-data-dir', dirs.serverData, '--user-data-dir', dirs.userData,
      '--extensions-dir', dirs.extensions, '--logsPath', dirs.logs,
    ],
    {
      cwd: dirs.ws,
      logDir: dirs.logs,
      // inherited by the extension host, where the suite reads them
      env: isolatedEnv(dirs, {
        DR_TEST_RESULT: resultFile,
        DR_TEST_WORKSPACE: dirs.ws,
        DR_TEST_RESEARCH: research,
        DR_TEST_PYTHON: python,
        DR_TEST_LOG: path.join(dirs.logs, 'suite.log'),
        DR_TEST_FILTER: process.env.DR_TEST_FILTER || '',
        // "Install Python Packages" must fail here, offline: no index, an empty wheelhouse
        PIP_NO_INDEX: '1',
        PIP_FIND_LINKS: dirs.logs,
        PIP_DISABLE_PIP_VERSION_CHECK: '1',
      }),
    },
  );
  await waitForHttp(`http://127.0.0.1:${port}/`, 30000);
  log('VS Code server is up');

  browser = await launchChromium(pw, env, dirs);
  const page = await browser.newPage();
  const pageLog = fs.createWriteStream(path.join(dirs.logs, 'page.log'));
  page.on('console', (m) => pageLog.write(`[${m.type()}] ${m.text()}\n`));
  page.on('pageerror', (e) => pageLog.write(`[pageerror] ${e.message}\n`));
  const remote = (p) => `vscode-remote://remote${p}`;
  const payload = JSON.stringify([
    ['extensionDevelopmentPath', remote(REPO)],
    ['extensionTestsPath', remote(suite)],
  ]);
  await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(dirs.ws)}&payload=${encodeURIComponent(payload)}`);
  log('workbench opening; waiting for the suite result');
  const started = Date.now();
  let progress = 0;
  await waitFor(
    'the suite result file',
    () => {
      const lines = tail(path.join(dirs.logs, 'suite.log'), 1000).split('\n').filter(Boolean);
      for (; progress < lines.length; progress++) log(`  ${lines[progress]}`);
      return fs.existsSync(resultFile);
    },
    TIMEOUT_MS,
    100,
  ).catch(async (e) => {
    await page.screenshot({ path: path.join(dirs.root, 'timeout.png') }).catch(() => undefined);
    throw e;
  });
  const result = JSON.parse(fs.readFileSync(resultFile, 'utf8'));
  for (const t of result.tests) {
    log(`${t.ok ? 'PASS' : t.skipped ? 'SKIP' : 'FAIL'} ${t.name} (${t.ms} ms)${t.error ? `\n${t.error}` : ''}`);
  }
  const passed = result.tests.filter((t) => t.ok).length;
  const failed = result.tests.filter((t) => !t.ok && !t.skipped).length;
  log(`extension-host suite: ${passed} passed, ${failed} failed in ${((Date.now() - started) / 1000).toFixed(1)}s after the page load`);
  if (result.error) log(`suite error: ${result.error}`);
  exitCode = result.ok && failed === 0 ? 0 : 1;
} catch (e) {
  log(`ERROR: ${e.stack || e}`);
  log(`--- vscode-server log (tail) ---\n${tail(server?.logFile)}`);
  log(`--- page console (tail) ---\n${tail(path.join(dirs.logs, 'page.log'))}`);
  exitCode = 1;
} finally {
  const family = server ? descendants(server.pid) : []; // before the browser goes and the host with it
  await browser?.close().catch(() => undefined);
  await killTree(server, 'vscode-server', family);
  if (exitCode === 0 && !process.env.DR_KEEP_TMP) {
    fs.rmSync(dirs.root, { recursive: true, force: true });
  } else {
    log(`kept ${dirs.root} (logs in ${dirs.logs})`);
  }
}
process.exit(exitCode);
