// Packages the extension: vscode-client/dist/deep-research.vsix (after typecheck, bundle
// and bundle-server, see the `package` npm script), then checks its contents.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const out = path.join(repo, 'vscode-client', 'dist', 'deep-research.vsix');
const started = Date.now();
// Python writes __pycache__ next to the bundled sources whenever the server ran from them
for (const dir of ['vscode-client/bundled']) {
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) {
        if (e.name === '__pycache__') fs.rmSync(p, { recursive: true, force: true });
        else walk(p);
      }
    }
  };
  if (fs.existsSync(path.join(repo, dir))) walk(path.join(repo, dir));
}
fs.rmSync(out, { force: true });
const vsce = path.join(repo, 'node_modules', '@vscode', 'vsce', 'vsce');
// vsce lists every file under its folder before .vscodeignore picks from them, matching each
// against each pattern anew: ~20,000 files in a checkout with .venv and .git, 19 s of CPU. So it
// packages a copy of what the whitelist can pick from (package.json and vscode-client/): 1 s.
const stage = fs.mkdtempSync(path.join(os.tmpdir(), 'dr-vsix-'));
try {
  for (const name of ['package.json', '.vscodeignore', 'vscode-client']) {
    fs.cpSync(path.join(repo, name), path.join(stage, name), { recursive: true });
  }
  execFileSync(
    process.execPath,
    [vsce, 'package', '--no-dependencies', '--allow-missing-repository', '--skip-license',
      '--readme-path', 'vscode-client/README.md', '--out', out],
    { cwd: stage, stdio: ['ignore', 'inherit', 'inherit'] },
  );
} finally {
  fs.rmSync(stage, { recursive: true, force: true });
}
console.log(`packaged ${path.relative(repo, out)} (${Math.round(fs.statSync(out).size / 1024)} KB) in ${Date.now() - started} ms`);
execFileSync('python3', [path.join(repo, 'vscode-client', 'scripts', 'check-vsix.py'), out], { cwd: repo, stdio: ['ignore', 'inherit', 'inherit'] });
