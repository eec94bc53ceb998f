// Opens one URL in Debian's chromium (playwright-core from the viewer's node_modules) and
// prints what the page showed as JSON: the response status, the body's text, console errors,
// dialogs (an alert() would mean markup in a name ran), and every URL the page requested.
// Usage: node view_browser.mjs NODE_ROOT URL [offline]
import { createRequire } from 'node:module';
import { join } from 'node:path';

const [root, url, mode] = process.argv.slice(2);
const { chromium } = createRequire(join(root, 'package.json'))('playwright-core');
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu'],
});
try {
  const context = await browser.newContext();
  if (mode === 'offline') await context.setOffline(true);
  const page = await context.newPage();
  const out = { errors: [], dialogs: [], requests: [] };
  page.on('console', (m) => { if (m.type() === 'error') out.errors.push(m.text()); });
  page.on('pageerror', (e) => out.errors.push(String(e)));
  page.on('dialog', async (d) => { out.dialogs.push(d.message()); await d.dismiss(); });
  page.on('request', (r) => out.requests.push(r.url()));
  const response = await page.goto(url, { waitUntil: 'load' });
  out.status = response ? response.status() : null;
  // The page fetches its data after load; give it a moment to draw (and any markup to run).
  await page.waitForLoadState('networkidle').catch(() => {});
  await page.waitForTimeout(500);
  out.text = await page.evaluate(() => document.body ? document.body.innerText : '');
  out.injected = await page.evaluate(() => document.querySelectorAll('img[src="x"]').length);
  console.log(JSON.stringify(out));
} finally {
  await browser.close();
}
