// Opens a dossier in headless Chromium with the network blocked and reports, as JSON on
// stdout, what a reader sees; tests/dossier/test_dossier_browser.py makes the assertions.
//
//   node browse_dossier.mjs ENV_JSON DOSSIER.html SCREENSHOT.png CLICK_TITLE FILTER_TITLE
//
// ENV_JSON is the env.json of scripts/setup-vscode-test-env (playwright-core, chromium).
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

const [envJson, dossier, screenshot, clickTitle, filterTitle] = process.argv.slice(2);
const env = JSON.parse(fs.readFileSync(envJson, 'utf8'));
const pw = createRequire(import.meta.url)(env.playwrightCore);
const url = pathToFileURL(dossier).href;
const out = { requests: [], blocked: [], dialogs: [], errors: [], console: [] };

async function open(browser, javaScriptEnabled) {
  const context = await browser.newContext({ javaScriptEnabled, offline: true, viewport: { width: 1280, height: 900 } });
  await context.route('**/*', (route) => {
    const u = route.request().url();
    out.requests.push(u);
    if (u === url || u.startsWith(url + '#')) {
      return route.continue();
    }
    out.blocked.push(u);
    return route.abort();
  });
  const page = await context.newPage();
  page.on('dialog', (d) => {
    out.dialogs.push(d.message());
    void d.dismiss();
  });
  page.on('pageerror', (e) => out.errors.push(String(e)));
  page.on('console', (m) => out.console.push(`${m.type()}: ${m.text()}`));
  await page.goto(url, { waitUntil: 'load' });
  return { context, page };
}

const browser = await pw.chromium.launch({
  executablePath: env.chromium,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking',
    '--disable-component-update', '--no-first-run'],
});
try {
  const { context, page } = await open(browser, true);
  const visiblePages = () => page.$$eval('main .page', (els) => els.filter((e) => e.offsetParent !== null).map((e) => e.id));
  // A click changes the hash; the page it names shows on the hashchange event, which comes after
  // the click returns: wait for it (a loaded machine read the previous page once).
  const settled = () => page.waitForFunction(() => {
    const target = location.hash && document.getElementById(decodeURIComponent(location.hash.slice(1)));
    return target !== null && target !== '' && target.offsetParent !== null;
  }, null, { timeout: 5000 });
  out.navTitles = await page.$$eval('#nav a[href^="#p"]', (as) => as.map((a) => a.textContent));
  out.sectionTitles = await page.$$eval('main section.problem h2', (hs) => hs.map((h) => h.firstChild.textContent.trim()));
  out.pwned = await page.evaluate(() => window.__pwned ?? null);
  out.scriptCount = await page.$$eval('script', (s) => s.length);
  out.initialVisible = await visiblePages();

  // Click a tree entry that is visible from the start (a child of the root).
  await page.locator('#nav a', { hasText: clickTitle }).first().click();
  await settled();
  out.afterClick = { hash: await page.evaluate(() => location.hash), visible: await visiblePages(),
    heading: await page.locator('main .page.current h2').first().textContent() };

  // A citation on that page of an attachment of the parent: the parent's page shows, the attachment unfolded.
  const cite = page.locator('main .page.current a.cite').first();
  const citeHref = await cite.getAttribute('href');
  await cite.click();
  await settled();
  const target = page.locator(citeHref);
  out.citation = { href: citeHref, hash: await page.evaluate(() => location.hash), visible: await visiblePages(),
    open: await target.evaluate((d) => d.open), shown: await target.isVisible(),
    name: (await target.locator('summary').textContent()).trim(),
    sources: await page.$$eval('main .page.current .sources li', (l) => l.map((x) => x.textContent)) };
  await page.screenshot({ path: screenshot.replace(/\.png$/, '-citation.png') });
  await page.locator('#nav a', { hasText: clickTitle }).first().click();

  // A nested entry: found with the filter box, then clicked.
  await page.fill('#filter', filterTitle);
  const nested = page.locator('#nav a', { hasText: filterTitle }).first();
  await nested.waitFor({ state: 'visible', timeout: 5000 });
  await nested.click();
  await settled();
  out.afterFilter = { hash: await page.evaluate(() => location.hash), visible: await visiblePages(),
    heading: await page.locator('main .page.current h2').first().textContent() };

  // The journal, and an attachment unfolded.
  await page.locator('#nav a[href="#journal"]').click();
  await settled();
  out.journal = { visible: await visiblePages(), entries: await page.$$eval('ol.timeline > li', (l) => l.length) };
  await page.screenshot({ path: screenshot.replace(/\.png$/, '-journal.png') });
  // The root problem with its report, an attachment unfolded.
  await page.locator('#nav a[href="#p0"]').click();
  await page.locator('main .page.current details.attachment summary').first().click();
  await page.screenshot({ path: screenshot });
  await context.close();

  // Without the script: every page shows, one after another.
  const plain = await open(browser, false);
  out.noScript = {
    visible: await plain.page.$$eval('main .page', (els) => els.filter((e) => e.offsetParent !== null).map((e) => e.id)),
    pwned: await plain.page.evaluate(() => window.__pwned ?? null).catch(() => 'no-js'),
  };
  await plain.context.close();
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(out) + '\n');
