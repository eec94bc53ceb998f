// What a user of `sonde view` waits: from starting `sonde view PROFILE` to its first panel drawn
// in headless chromium (the browser already running, as a user's is), and to every panel. Each
// run starts a new `sonde view` (nothing computed yet) and ends it with SIGTERM. Prints JSON.
// Used by tests/bench/bench_viewer.py.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { CHROMIUM, playwright } from './serve.mjs';

const [cli, db, runs = '3'] = process.argv.slice(2);
const browser = await playwright().chromium.launch({ executablePath: CHROMIUM, headless: true });
const result = { first_panel_s: [], all_panels_s: [], url_s: [], frames: 0, errors: [] };
for (let i = 0; i < Number(runs); ++i) {
  const start = performance.timeOrigin + performance.now();
  const server = spawn(cli, ['view', db, '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise((ok, fail) => {
    createInterface({ input: server.stdout }).once('line', ok);
    server.once('exit', (code) => fail(new Error(`sonde view exited ${code} before printing its URL`)));
  });
  result.url_s.push((performance.timeOrigin + performance.now() - start) / 1000);
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on('pageerror', (e) => result.errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') result.errors.push(m.text()); });
  await page.goto(url);
  await page.waitForFunction(() => performance.getEntriesByName('sonde-first-panel').length > 0, null,
                             { timeout: 120000, polling: 20 });
  const first = await page.evaluate(() => performance.timeOrigin + performance.getEntriesByName('sonde-first-panel')[0].startTime);
  result.first_panel_s.push((first - start) / 1000);
  await page.waitForSelector('body[data-ready="1"]', { timeout: 300000 });
  result.all_panels_s.push((performance.timeOrigin + performance.now() - start) / 1000);
  result.frames = Number(await page.locator('#flame').getAttribute('data-frames'));
  await page.close();
  server.kill('SIGTERM');
  await new Promise((ok) => (server.exitCode !== null ? ok() : server.once('exit', ok)));
}
await browser.close();
console.log(JSON.stringify(result));
