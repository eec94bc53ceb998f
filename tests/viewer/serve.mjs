// What the browser tests and the viewer benchmark share: a static server for the built pages on
// 127.0.0.1 (data.json?b=NAME answers with the bundle NAME), the --html inlining done the way
// `sonde view --html` does it, and chromium through playwright-core.
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export const SOURCE = process.env.SONDE_SOURCE || '';
export const DIST = process.env.SONDE_VIEWER_DIST || join(process.env.SONDE_BUILD || 'build', 'viewer', 'dist');
export const CHROMIUM = process.env.SONDE_CHROMIUM || '/usr/bin/chromium';

export function playwright() {
  const require = createRequire(join(SOURCE, 'viewer', 'package.json'));
  return require('playwright-core');
}

export function chromiumMissing() {
  return existsSync(CHROMIUM) ? false : `chromium not found at ${CHROMIUM} (apt-get install chromium): browser tests skipped`;
}

const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.css': 'text/css' };

// bundles: name -> path of a JSON file.
export async function serve(bundles) {
  const server = createServer((req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    let file = null, type = 'application/json';
    if (url.pathname === '/blank') { res.writeHead(200, { 'content-type': TYPES['.html'] }).end('<!doctype html><title>blank</title>'); return; }
    if (url.pathname === '/data.json') file = bundles[url.searchParams.get('b')];
    else {
      const name = url.pathname === '/' ? 'index.html' : url.pathname.slice(1);
      if (['index.html', 'app.js', 'app.css'].includes(name)) { file = join(DIST, name); type = TYPES[name.slice(name.lastIndexOf('.'))]; }
    }
    if (!file) { res.writeHead(404).end(); return; }
    res.writeHead(200, { 'content-type': type }).end(readFileSync(file));
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  return { url: `http://127.0.0.1:${server.address().port}/`, close: () => new Promise((ok) => server.close(ok)) };
}

// One self-contained page: app.js, app.css and the bundle inside index.html, the JSON with '<'
// escaped so that no recorded name can close the script element.
export function inlineHtml(bundleText) {
  const html = readFileSync(join(DIST, 'index.html'), 'utf8');
  const js = readFileSync(join(DIST, 'app.js'), 'utf8');
  const css = readFileSync(join(DIST, 'app.css'), 'utf8');
  const data = bundleText.replace(/</g, '\\u003c');
  return html
    .replace('<link rel="stylesheet" href="app.css">', () => `<style>${css}</style>`)
    .replace('<script src="app.js"></script>',
             () => `<script id="sonde-data" type="application/json">${data}</script>\n<script>${js}</script>`);
}

// The real `sonde view FILE...` (the executable `cli`, environment `env`), started and waited for
// until it prints its address: { server, url }. The caller ends the server.
export async function sondeView(cli, files, env) {
  const server = spawn(cli, ['view', ...files], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise((ok, fail) => {
    server.stdout.on('data', (d) => { const m = String(d).match(/http:\/\/127\.0\.0\.1:\d+\/\?token=\w+/); if (m) ok(m[0]); });
    server.on('exit', (code) => fail(new Error(`sonde view exited ${code}`)));
  });
  return { server, url };
}

// A new page of `browser` at `url`, once the viewer says it is ready: { page, errors }, errors
// collecting the console's errors, uncaught exceptions and any dialog (a script payload's alert).
export async function openPage(browser, url, timeout = 120000) {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const errors = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('dialog', async (d) => { errors.push(`dialog: ${d.message()}`); await d.dismiss(); });
  await page.goto(url);
  await page.waitForSelector('body[data-ready="1"]', { timeout });
  return { page, errors };
}
