// One code-server (the packaged .vsix installed) and one headless Chromium for the UI drivers of
// a test session (tests/vscode/conftest.py's `workbench` fixture): starting them is a third of
// each driver's CPU. Prints one line of JSON (what the drivers read from $DR_WORKBENCH: the
// workbench's address, the browser's endpoint, the user data folder, code-server's log and pid),
// then waits until its standard input closes, and stops both.
// Exit code: 0 stopped cleanly, 1 failed to start, 2 the environment or the .vsix is missing.
import { log, startWorkbenchSession, tail } from './lib.mjs';

let session;
try {
  session = await startWorkbenchSession();
} catch (e) {
  log(`ERROR: ${e.stack || e}`);
  process.exit(1);
}
const { close, ...shared } = session;
process.stdout.write(`${JSON.stringify(shared)}\n`);
let stopping;
const stop = () => {
  stopping ??= close(true).then(() => process.exit(0), (e) => {
    log(`ERROR while stopping: ${e.stack || e}\n${tail(shared.logFile)}`);
    process.exit(1);
  });
};
process.stdin.on('end', stop);
process.stdin.on('error', stop);
process.stdin.resume();
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
