// Bundles the extension into one CommonJS file (vscode is provided by the host).
// Usage: node vscode-client/esbuild.mjs [--dev]   (--dev: no minification, with a source map)
import * as esbuild from 'esbuild';
import { fileURLToPath } from 'node:url';
import * as path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const dev = process.argv.includes('--dev');
const started = Date.now();
const result = await esbuild.build({
  entryPoints: [path.join(here, 'src', 'extension.ts')],
  outfile: path.join(here, 'dist', 'extension.js'),
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  external: ['vscode'],
  minify: !dev,
  sourcemap: dev,
  metafile: true,
  logLevel: 'warning',
});
const bytes = Object.values(result.metafile.outputs).reduce((n, o) => n + o.bytes, 0);
console.log(`bundled vscode-client/dist/extension.js (${Math.round(bytes / 1024)} KB) in ${Date.now() - started} ms`);
