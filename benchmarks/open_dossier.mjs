// How long a browser takes to open a dossier: headless Chromium (from the VS Code test
// environment, scripts/setup-vscode-test-env), offline, with and without the page's script.
//   node benchmarks/open_dossier.mjs ENV_JSON DOSSIER.html
// Prints one JSON line per run: the time to the load event, and to show a problem by a click.
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

const [envJson, file] = process.argv.slice(2);
const env = JSON.parse(fs.readFileSync(envJson, 'utf8'));
const pw = createRequire(import.meta.url)(env.playwrightCore);
const browser = await pw.chromium.launch({
  executablePath: env.chromium, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
try {
  for (const javaScriptEnabled of [true, false]) {
    const context = await browser.newContext({ javaScriptEnabled, offline: true });
    const page = await context.newPage();
    const started = Date.now();
    await page.goto(pathToFileURL(file).href, { waitUntil: 'load', timeout: 600000 });
    const loadMs = Date.now() - started;
    const ids = await page.$$eval('#nav a[href^="#p"]', (as) => as.map((a) => a.getAttribute('href')));
    const target = ids[Math.floor(ids.length / 2)];
    const clicked = Date.now();
    await page.locator(`#nav a[href="${target}"]`).evaluate((a) => a.click());
    await page.locator(target).waitFor({ state: 'visible' });
    console.log(JSON.stringify({ script: javaScriptEnabled, loadMs, clickMs: Date.now() - clicked }));
    await context.close();
  }
} finally {
  await browser.close();
}
