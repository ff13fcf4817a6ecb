// npm run test:vscode: the extension-host suite, then the Playwright UI test, in real
// VS Code (code-server). Needs scripts/setup-vscode-test-env and `npm run package`.
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
let failed = 0;
let passed = 0;
for (const driver of ['exthost.mjs', 'ui.mjs']) {
  const started = Date.now();
  const r = spawnSync(process.execPath, [path.join(here, 'drivers', driver)], { stdio: 'inherit' });
  console.log(`${driver}: ${r.status === 0 ? 'passed' : `FAILED (exit ${r.status ?? r.signal})`} in ${((Date.now() - started) / 1000).toFixed(1)}s`);
  if (r.status === 2) process.exit(2);
  if (r.status === 0) passed++;
  else failed++;
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
