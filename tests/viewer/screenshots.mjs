// Screenshots of each panel of the viewer for docs/viewer.md:
//   node tests/viewer/screenshots.mjs BUNDLE.json OUTDIR [PANEL...]
// (with the ranks panel, viewer-ranks-routine.png too: its bars for one routine)
// (SONDE_SOURCE and SONDE_VIEWER_DIST as for the tests). Clicks the widest routine below the
// root first, so the flame graph, the table and the plot show a linked selection.
// SONDE_SHOT_COMPARE=PATH (a bundle of two or more profiles): the flame graph compared with
// that profile, shot as viewer-diff-flame.png.
import { CHROMIUM, playwright, serve } from './serve.mjs';
import { join } from 'node:path';

const [bundle, out, ...wanted] = process.argv.slice(2);
const server = await serve({ doc: bundle });
const browser = await playwright().chromium.launch({ executablePath: CHROMIUM, headless: true });
const page = await browser.newPage({ viewport: { width: 1100, height: 800 } });
page.on('pageerror', (e) => console.error(String(e)));
page.on('console', (m) => { if (m.type() === 'error') console.error(m.text()); });
await page.goto(`${server.url}?b=doc`);
await page.waitForSelector('body[data-ready="1"]');
await page.addStyleTag({ content: '#bar { position: static; }' });  // not over the panel shot
if (process.env.SONDE_SHOT_SELECT) await page.evaluate((n) => window.sonde.select(n), process.env.SONDE_SHOT_SELECT);
if (process.env.SONDE_SHOT_SEARCH) await page.locator('#search').fill(process.env.SONDE_SHOT_SEARCH);
const compare = process.env.SONDE_SHOT_COMPARE;
if (compare) {
  await page.selectOption('#compare', { label: compare });
  await page.waitForFunction((b) => document.querySelector('#flame').dataset.compare === b, compare);
}
const ids = wanted.length ? wanted : await page.locator('section.panel').evaluateAll((s) => s.map((x) => x.dataset.panel));
for (const id of ids) {
  // at most 720 px of each panel: the top of a long list shows what it is
  const panel = page.locator(`#panel-${id}`);
  await panel.evaluate((p) => p.scrollIntoView({ block: 'start' }));
  const box = await panel.boundingBox();
  const file = join(out, compare && id === 'flame' ? 'viewer-diff-flame.png' : `viewer-${id}.png`);
  await page.screenshot({ path: file, clip: { x: box.x, y: box.y, width: box.width, height: Math.min(box.height, 720) } });
  console.log(file);
}
// The ranks panel's bars once more, in their per-routine mode (the menu's first routine, or the
// one SONDE_SHOT_SELECT chose).
const routineMode = page.locator('#rank-bars input[value=routine]:not([disabled])');
if (ids.includes('ranks') && await routineMode.count()) {
  await routineMode.check();
  const path = join(out, 'viewer-ranks-routine.png');
  await page.locator('#rank-bars').screenshot({ path });
  console.log(path);
}
await browser.close();
await server.close();
