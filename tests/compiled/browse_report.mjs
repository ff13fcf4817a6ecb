// Opens a compiled report (report.html) in headless Chromium, scripts off and the network
// blocked, clicks a citation and the entry's way back, and reports what a reader sees as JSON
// on stdout; tests/compiled/test_compiled_browser.py makes the assertions.
//
//   node browse_report.mjs ENV_JSON REPORT.html SCREENSHOT_PREFIX
//
// ENV_JSON is the env.json of scripts/setup-vscode-test-env (playwright-core, chromium).
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

const [envJson, report, prefix] = process.argv.slice(2);
const env = JSON.parse(fs.readFileSync(envJson, 'utf8'));
const pw = createRequire(import.meta.url)(env.playwrightCore);
const url = pathToFileURL(report).href;
const out = { blocked: [], dialogs: [], errors: [] };

const browser = await pw.chromium.launch({
  executablePath: env.chromium,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking',
    '--disable-component-update', '--no-first-run'],
});
try {
  // No script is needed to read it: scripts are off.
  const context = await browser.newContext({ javaScriptEnabled: false, offline: true, viewport: { width: 1100, height: 800 } });
  await context.route('**/*', (route) => {
    const u = route.request().url();
    if (u === url || u.startsWith(url + '#')) {
      return route.continue();
    }
    out.blocked.push(u);
    return route.abort();
  });
  const page = await context.newPage();
  page.on('dialog', (d) => { out.dialogs.push(d.message()); void d.dismiss(); });
  page.on('pageerror', (e) => out.errors.push(String(e)));
  await page.goto(url, { waitUntil: 'load' });
  await page.screenshot({ path: `${prefix}-top.png` });
  out.title = await page.title();
  out.scripts = await page.$$eval('script', (s) => s.length);
  out.images = await page.$$eval('img', (s) => s.length);
  out.headings = await page.$$eval('h1, h2, h3, h4', (hs) => hs.map((h) => `${h.tagName} ${h.textContent.trim()}`));
  const inView = (selector) => page.locator(selector).evaluate((e) => {
    const r = e.getBoundingClientRect();
    return r.top >= -1 && r.top < window.innerHeight;
  });

  // A citation in a subproblem's report: its entry under References comes into view.
  const cite = page.locator('section#s-1 a.cite').first();
  out.cite = { text: await cite.textContent(), href: await cite.getAttribute('href'), id: await cite.getAttribute('id'),
    title: await cite.getAttribute('title') };
  await cite.click();
  await page.waitForFunction((h) => location.hash === h, out.cite.href);
  out.afterCite = { hash: await page.evaluate(() => location.hash), inView: await inView(out.cite.href),
    entry: (await page.locator(out.cite.href).textContent()).replace(/\s+/g, ' ').trim() };
  await page.screenshot({ path: `${prefix}-reference.png` });

  // Back from the entry to that citation.
  const back = page.locator(`${out.cite.href} a.back[href="#${out.cite.id}"]`);
  out.backLinks = await page.locator(`${out.cite.href} a.back`).count();
  await back.click();
  await page.waitForFunction((h) => location.hash === h, `#${out.cite.id}`);
  out.afterBack = { hash: await page.evaluate(() => location.hash), inView: await inView(`#${out.cite.id}`) };
  await page.screenshot({ path: `${prefix}-back.png` });

  // The contents take the reader to a section; the Citation check lists its figures.
  await page.locator('nav#contents a[href="#citation-check"]').click();
  await page.waitForFunction(() => location.hash === '#citation-check');
  out.figures = await page.$$eval('#citation-check ul.figures li', (l) => l.map((x) => x.textContent));
  await page.screenshot({ path: `${prefix}-check.png` });
  await context.close();
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
