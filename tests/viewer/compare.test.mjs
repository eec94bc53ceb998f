// The flame graph compared with another profile, in a real browser (Debian's chromium via
// playwright-core), under the real `sonde view` and in its --html file: one Python program run
// twice, the second time with one function doing more work, one less, and one called only then.
// With "compare with" the other profile, each frame's colour and hover are checked against the
// shares SQL reads from the two files (callpaths over run_totals, as the svg export's test does):
// a new path full red, a grown one red, a shrunk one blue, the depth the rule docs/cli.md gives.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromiumMissing, CHROMIUM, playwright, sondeView, openPage } from './serve.mjs';

const CLI = process.env.SONDE_CLI;
const BUILD = process.env.SONDE_BUILD;
const PY = '/usr/bin/python3';
const skip = chromiumMissing();
if (skip) console.log(`# SKIP: ${skip}`);

// Work in units of 10,000 squares, per round: [before, after]. The shares move far (grows
// 0.22 -> 0.50 of the work, shrinks 0.44 -> 0.17): with 30 -> 40 and 40 -> 25, a loaded CI
// machine's timing once put grows' share lower after than before (0.42 -> 0.42).
const PROGRAM = `import sys

def spin(n):
    return sum(i * i for i in range(n))

def grows(n):
    return spin(n)

def shrinks(n):
    return spin(n)

def steady(n):
    return spin(n)

def only_after(n):
    return spin(n)

after = sys.argv[1] == "after"
for _ in range(20):
    grows(60000 if after else 20000)
    shrinks(20000 if after else 40000)
    steady(30000)
    if after:
        only_after(10000)
`;
const FUNCTIONS = ['grows', 'shrinks', 'steady', 'only_after'];

let dir, beforeDb, afterDb, browser, server, url;

function env(extra = {}) {
  const e = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SONDE_') && k !== 'LD_PRELOAD'));
  return { ...e, PYTHONPATH: join(BUILD, 'python'), SONDE_PEAKS: '/nonexistent/sonde-peaks.txt', ...extra };
}

// Each function's share of the busy threads' time, by SQL on the file (null: no such path).
function sqlShares(db) {
  const out = execFileSync(PY, ['-c', [
    'import json, sqlite3, sys',
    'db = sqlite3.connect(sys.argv[1])',
    'shares = {}',
    'for name in sys.argv[2:]:',
    '    row = db.execute("SELECT SUM(c.incl_s) / (SELECT thread_s FROM run_totals) FROM callpaths c "',
    '                     "WHERE c.path LIKE ?", ("%(" + name + ")",)).fetchone()',
    '    shares[name] = row[0]',
    'print(json.dumps(shares))',
  ].join('\n'), db, ...FUNCTIONS], { encoding: 'utf8' });
  return JSON.parse(out);
}

// The colour docs/cli.md gives a path's change: red grew, blue shrank, lightness from 96 % (held)
// to 50 % (twice or half, and a new path), as [r, g, b].
function expectedColour(was, now) {
  const depth = was === null ? 1 : Math.min(Math.abs(Math.log2(now / was)), 1);
  const hue = was === null || now >= was ? 0 : 220;
  const l = Math.trunc(96 - 46 * depth) / 100, s = 0.8;
  const k = (n) => (n + hue / 30) % 12;
  const a = s * Math.min(l, 1 - l);
  return [0, 8, 4].map((n) => Math.round(255 * (l - a * Math.max(-1, Math.min(k(n) - 3, 9 - k(n), 1)))));
}

const open = (url) => openPage(browser, url);

// A function's widest frame: where it is, and the canvas's pixel inside its top-left corner
// (clear of the label).
async function frameOf(page, fn) {
  return page.evaluate((fn) => {
    const flame = window.sonde.flame;
    const f = flame.frames.find((x) => x.name.endsWith(`(${fn})`));
    if (!f) return null;
    const at = flame.locate(f.name);
    if (!at) return null;
    const r = flame.canvas.getBoundingClientRect(), dpr = window.devicePixelRatio || 1;
    const px = Math.round((at.x - at.w / 2 + 2 - r.left) * dpr), py = Math.round((at.y - 9 + 2 - r.top) * dpr);
    const rgb = [...flame.canvas.getContext('2d').getImageData(px, py, 1, 1).data.slice(0, 3)];
    return { name: f.name, x: at.x, y: at.y, w: at.w, rgb };
  }, fn);
}

const near = (a, b, tol) => a.every((v, i) => Math.abs(v - b[i]) <= tol);

// Chooses the other profile in "compare with" and checks every function's frame.
async function compared(page) {
  const shown = await page.locator('#compare option').allTextContents();
  assert.deepEqual(shown, ['none (colour: kind)', beforeDb]);
  await page.selectOption('#compare', { label: beforeDb });
  await page.waitForFunction((b) => document.querySelector('#flame').dataset.compare === b, beforeDb);
  assert.equal(await page.locator('#threads').isDisabled(), true);
  assert.equal(await page.locator('#panel-flame .swatch.share').count(), 5);
  const was = sqlShares(beforeDb), now = sqlShares(afterDb);
  assert.equal(was.only_after, null);
  assert.ok(now.grows > was.grows && now.shrinks < was.shrinks, JSON.stringify({ was, now }));
  const frames = {};
  for (const fn of FUNCTIONS) {
    const f = frames[fn] = await frameOf(page, fn);
    assert.ok(f && f.w > 20, `${fn}: ${JSON.stringify(f)}`);
    const want = expectedColour(was[fn], now[fn]);
    assert.ok(near(f.rgb, want, 3), `${fn}: drawn ${f.rgb}, the rule on SQL's shares gives ${want}`);
    await page.mouse.move(f.x, f.y);
    const tip = await page.locator('#tooltip .share').textContent();
    const pct = (v) => (100 * v).toFixed(2);
    if (was[fn] === null) {
      assert.equal(tip, `share ${pct(now[fn])} %, not in ${beforeDb}`);
    } else {
      const change = (100 * (now[fn] - was[fn]) / was[fn]).toFixed(1);
      assert.equal(tip, `share ${pct(was[fn])} % in ${beforeDb} → ${pct(now[fn])} % here (${change > 0 ? '+' : ''}${change} % of its share)`);
    }
  }
  assert.deepEqual(frames.only_after.rgb.map((v) => Math.round(v / 5)), [46, 5, 5]);  // full red: hsl(0,80%,50%)
  const [gr, , gb] = frames.grows.rgb, [sr, , sb] = frames.shrinks.rgb;
  assert.ok(gr > gb + 20 && sb > sr + 20, `grows ${frames.grows.rgb}, shrinks ${frames.shrinks.rgb}`);
  assert.ok(frames.grows.w > frames.shrinks.w);  // the widths are this profile's
  // Back to no comparison: the kinds' colours and the threads menu again.
  await page.selectOption('#compare', '');
  await page.waitForFunction(() => document.querySelector('#flame').dataset.compare === '');
  assert.deepEqual((await frameOf(page, 'grows')).rgb, [0x6b, 0x9b, 0xd1]);  // python
  assert.equal(await page.locator('#threads').isDisabled(), false);
}

before(async () => {
  if (skip) return;
  dir = mkdtempSync(join(tmpdir(), 'sonde-compare-'));
  writeFileSync(join(dir, 'work.py'), PROGRAM);
  beforeDb = join(dir, 'before.db');
  afterDb = join(dir, 'after.db');
  for (const [db, arg] of [[beforeDb, 'before'], [afterDb, 'after']])
    execFileSync(PY, ['-m', 'sonde', '-o', db, 'work.py', arg], { env: env(), cwd: dir, stdio: ['ignore', 'ignore', 'pipe'], timeout: 120000 });
  ({ server, url } = await sondeView(CLI, [afterDb, beforeDb], env()));
  browser = await playwright().chromium.launch({ executablePath: CHROMIUM, headless: true });
});

after(async () => {
  if (browser) await browser.close();
  if (server) server.kill('SIGTERM');
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('flame graph compared with another profile, in chromium', { skip }, () => {
  test('served: frames coloured and hovered with the shares SQL has in both files', async () => {
    const { page, errors } = await open(url);
    await compared(page);
    assert.deepEqual(errors, []);
    await page.close();
  });

  test('--html: the file carries the comparison', async () => {
    const html = join(dir, 'view.html');
    execFileSync(CLI, ['view', afterDb, beforeDb, '--html', html], { env: env(), stdio: 'ignore' });
    const { page, errors } = await open(`file://${html}`);
    await compared(page);
    assert.deepEqual(errors, []);
    await page.close();
  });

  test('--html of more profiles than it carries comparisons of: the menu says so', async () => {
    const more = [1, 2, 3, 4].map((k) => { const c = join(dir, `copy${k}.db`); copyFileSync(beforeDb, c); return c; });
    const html = join(dir, 'five.html');
    execFileSync(CLI, ['view', afterDb, ...more, '--html', html], { env: env(), stdio: 'ignore' });
    const { page, errors } = await open(`file://${html}`);
    const options = await page.locator('#compare option').evaluateAll((os) => os.map((o) => [o.textContent, o.disabled]));
    assert.deepEqual(options, [['none (colour: kind)', false],
                               ...more.map((c) => [`${c} (not in this file; sonde view makes it)`, true])]);
    assert.deepEqual(errors, []);
    await page.close();
  });
});
