// Opens the viewer on one bundle in headless chromium and prints, as JSON, how long the page
// took from navigation to its first panel drawn (the 'sonde-first-panel' mark), and a blank
// page's load in the same browser for comparison. Used by tests/bench/bench_viewer.py.
import { CHROMIUM, playwright, serve } from './serve.mjs';

const [bundlePath, runs = '3'] = process.argv.slice(2);
const server = await serve({ big: bundlePath });
const browser = await playwright().chromium.launch({ executablePath: CHROMIUM, headless: true });
const result = { first_panel_ms: [], all_panels_ms: [], blank_ms: [], frames: 0, errors: [] };
for (let i = 0; i < Number(runs); ++i) {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on('pageerror', (e) => result.errors.push(String(e)));
  await page.goto(`${server.url}?b=big`);
  await page.waitForSelector('body[data-ready="1"]', { timeout: 120000 });
  result.all_panels_ms.push(await page.evaluate(() => performance.now()));  // ready seen: every panel built
  result.first_panel_ms.push(await page.evaluate(() => performance.getEntriesByName('sonde-first-panel')[0].startTime));
  result.frames = Number(await page.locator('#flame').getAttribute('data-frames'));
  await page.close();
  const blank = await browser.newPage();
  await blank.goto(`${server.url}blank`);
  result.blank_ms.push(await blank.evaluate(() => performance.now()));
  await blank.close();
}
await browser.close();
await server.close();
console.log(JSON.stringify(result));
