// The callers panel in a real browser (Debian's chromium via playwright-core), under the real
// `sonde view` (each routine's callers made when the page asks) and in its --html file (the
// callers it carries): a Python program whose helper is called by three functions a different
// number of times. Selecting the helper, by its hot-spot row or its flame-graph frame, shows
// its callers with the calls and times SQL sums over the nodes table, and its callees.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromiumMissing, CHROMIUM, playwright, sondeView, openPage } from './serve.mjs';

const CLI = process.env.SONDE_CLI;
const BUILD = process.env.SONDE_BUILD;
const PY = '/usr/bin/python3';
const skip = chromiumMissing();
if (skip) console.log(`# SKIP: ${skip}`);

const PROGRAM = `import time

def spin(s):
    end = time.perf_counter() + s
    while time.perf_counter() < end:
        pass

def helper(ms):
    spin(ms / 1000)

def alpha():
    for _ in range(3):
        helper(10)

def beta():
    for _ in range(5):
        helper(20)

def rec(n):
    helper(10)
    return rec(n - 1) if n else 0

def main():
    alpha()
    beta()
    rec(3)

main()
`;

let dir, db, browser, server, url;

function env(extra = {}) {
  const e = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SONDE_') && k !== 'LD_PRELOAD'));
  return { ...e, PYTHONPATH: join(BUILD, 'python'), SONDE_PEAKS: '/nonexistent/sonde-peaks.txt', ...extra };
}

// SQL on the nodes table, by Python's sqlite3: the helper's nodes grouped by their parent's
// routine, as [function name, calls, incl_ns, excl_ns].
function sqlCallers(routine) {
  const out = execFileSync(PY, ['-c', [
    'import json, sqlite3, sys',
    'db = sqlite3.connect(sys.argv[1])',
    'rows = db.execute("SELECT rp.name, SUM(c.calls), SUM(CASE WHEN c.recursive = 0 THEN c.incl_ns ELSE 0 END), SUM(c.excl_ns) "',
    '  "FROM nodes c JOIN routines r ON r.routine_id = c.routine_id JOIN nodes p ON p.node_id = c.parent_id "',
    '  "JOIN routines rp ON rp.routine_id = p.routine_id WHERE r.name LIKE ? GROUP BY rp.routine_id", ("%(" + sys.argv[2] + ")",)).fetchall()',
    'print(json.dumps(rows))',
  ].join('\n'), db, routine], { encoding: 'utf8' });
  return JSON.parse(out).map(([name, calls, incl, excl]) => [name.slice(name.lastIndexOf('(') + 1, -1), calls, incl, excl]);
}

const open = (url) => openPage(browser, url);

// The rows of a callers or callees table as the page shows them: [function name, calls, incl s, excl s].
function tableRows(page, id) {
  return page.locator(`#${id} tbody tr`).evaluateAll((trs) => trs.map((tr) => {
    const td = [...tr.querySelectorAll('td')].map((t) => t.textContent);
    const name = tr.dataset.name;
    return [name.slice(name.lastIndexOf('(') + 1, -1), Number(td[2].replace(/,/g, '')), td[3], td[4]];
  }));
}

// The page's figures are the bundle's seconds with 6 digits.
const secs = (ns) => (ns / 1e9).toFixed(6);

async function helperCallersShown(page) {
  await page.waitForFunction(() => document.querySelector('#callers-table tbody tr') !== null, null, { timeout: 30000 });
  assert.match(await page.locator('#callers-routine').textContent(), /^prog\.py:\d+\(helper\) \[python\] .*: 12 calls, /);
  const sql = sqlCallers('helper');
  assert.deepEqual(sql.map((r) => [r[0], r[1]]).sort(), [['alpha', 3], ['beta', 5], ['rec', 4]]);
  // Each row is SQL's, and the table is in order of its inclusive time, checked each on its own:
  // compared with SQL's order by time, the test failed once in a loaded clean-clone ctest (not
  // reproduced here under two busy loops, six runs).
  const rows = await tableRows(page, 'callers-table');
  const byName = (a, b) => a[0].localeCompare(b[0]);
  assert.deepEqual([...rows].sort(byName), sql.map(([n, c, i, e]) => [n, c, secs(i), secs(e)]).sort(byName));
  const incl = rows.map((r) => Number(r[2]));
  assert.deepEqual(incl, [...incl].sort((a, b) => b - a), `not by inclusive time: ${JSON.stringify(rows)}`);
  // the inverted icicle draws the helper and its callers, beta widest
  assert.ok(Number(await page.locator('#callers-flame').getAttribute('data-frames')) >= 4);
  // its callees: spin, 12 calls
  const callees = await tableRows(page, 'callees-table');
  assert.deepEqual(callees.map((r) => [r[0], r[1]]), [['spin', 12]]);
}

before(async () => {
  if (skip) return;
  dir = mkdtempSync(join(tmpdir(), 'sonde-callers-'));
  writeFileSync(join(dir, 'prog.py'), PROGRAM);
  db = join(dir, 'prof.db');
  execFileSync(PY, ['-m', 'sonde', '-o', db, 'prog.py'], { env: env(), cwd: dir, stdio: ['ignore', 'ignore', 'pipe'], timeout: 120000 });
  ({ server, url } = await sondeView(CLI, [db], env()));
  browser = await playwright().chromium.launch({ executablePath: CHROMIUM, headless: true });
});

after(async () => {
  if (browser) await browser.close();
  if (server) server.kill('SIGTERM');
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('callers panel in chromium', { skip }, () => {
  test('served: a hot-spot row shows its callers (made on request) equal to SQL on nodes', async () => {
    const { page, errors } = await open(url);
    assert.match(await page.locator('#panel-callers').textContent(), /Select a routine/);
    await page.locator('#hotspot-table tbody tr', { hasText: '(helper)' }).click();
    await helperCallersShown(page);
    // a caller's row selects that routine: beta's callers are main, its callees the helper (5)
    await page.locator('#callers-table tbody tr', { hasText: '(beta)' }).click();
    // Drawn, not "computing its callers…": until beta's part comes, the helper's tables stay
    // under that line (read there once under load: the helper's callers for beta's).
    await page.waitForFunction(() => /\(beta\) \[python\].*: \d+ calls, /.test(document.querySelector('#callers-routine').textContent));
    await page.waitForFunction(() => document.querySelector('#callees-table tbody tr') !== null);
    assert.deepEqual((await tableRows(page, 'callers-table')).map((r) => [r[0], r[1]]), [['main', 1]]);
    const [, calls, incl, excl] = sqlCallers('helper').find((r) => r[0] === 'beta');
    assert.deepEqual(await tableRows(page, 'callees-table'), [['helper', calls, secs(incl), secs(excl)]]);
    assert.deepEqual(errors, []);
    await page.close();
  });

  test('--html: a flame-graph frame shows the callers the file carries', async () => {
    const html = join(dir, 'view.html');
    execFileSync(CLI, ['view', db, '--html', html], { env: env(), stdio: 'ignore' });
    const { page, errors } = await open(`file://${html}`);
    const name = await page.locator('#hotspot-table tbody tr', { hasText: '(helper)' }).getAttribute('data-name');
    const at = await page.evaluate((n) => window.sonde.flame.locate(n), name);
    assert.ok(at && at.w > 5, `the helper's frame: ${JSON.stringify(at)}`);
    await page.mouse.click(at.x, at.y);
    await helperCallersShown(page);
    assert.deepEqual(errors, []);
    await page.close();
  });
});
