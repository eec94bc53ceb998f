// The timeline panel in a real browser (Debian's chromium via playwright-core), under the real
// `sonde view` and in its --html file: a Python program with two threads recorded with
// SONDE_TRACE=1, and three GPU records added on one stream (no GPU here). The panel has one
// lane per thread with events and per stream; a hovered call's duration is its trace_events
// row's; a shift-drag span lists the time per routine that SQL computes over the same window.
// Then a trace of a million events: the part's time, the page's, a redraw's, printed; the
// --html file carries its cap and says so.
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

const PROGRAM = `import threading, time

def spin(s):
    end = time.perf_counter() + s
    while time.perf_counter() < end:
        pass

def load(ms):
    spin(ms / 1000)

def step(i):
    load(5)
    spin(0.01)

def worker():
    for _ in range(3):
        load(8)

def main():
    t = threading.Thread(target=worker)
    t.start()
    for i in range(4):
        step(i)
    t.join()

main()
`;

let dir, db, gpuDb, plainDb, browser;

function env(extra = {}) {
  const e = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SONDE_') && k !== 'LD_PRELOAD'));
  return { ...e, PYTHONPATH: join(BUILD, 'python'), SONDE_PEAKS: '/nonexistent/sonde-peaks.txt', ...extra };
}

function sql(file, script, ...args) {
  const out = execFileSync(PY, ['-c', `import json, sqlite3, sys\ndb = sqlite3.connect(sys.argv[1])\n${script}`, file, ...args.map(String)],
                           { encoding: 'utf8', maxBuffer: 1 << 26 });
  return JSON.parse(out);
}

// Time per routine within [a, b] (absolute ns), as docs/viewer.md defines it: each overlapping
// call's time clipped to the span, less its overlapping children's (the event of the node's
// parent that holds it), and each GPU record's clipped time; with the overlapping events.
const SPAN_SQL = `a, b = int(sys.argv[2]), int(sys.argv[3])
rows = db.execute("""
WITH w AS (SELECT e.thread_id, e.node_id, n.parent_id, n.routine_id, e.start_ns, e.end_ns,
                  MIN(e.end_ns, :b) - MAX(e.start_ns, :a) AS clip
           FROM trace_events e JOIN nodes n USING (node_id) WHERE e.start_ns < :b AND e.end_ns > :a)
SELECT r.name, SUM(x), SUM(k) FROM (
  SELECT routine_id, clip AS x, 1 AS k FROM w
  UNION ALL
  SELECT p.routine_id, -c.clip, 0 FROM w c JOIN w p ON p.thread_id = c.thread_id AND p.node_id = c.parent_id
    AND p.start_ns <= c.start_ns AND p.end_ns >= c.end_ns)
JOIN routines r USING (routine_id) GROUP BY routine_id
UNION ALL
SELECT name, SUM(MIN(end_ns, :b) - MAX(start_ns, :a)), COUNT(*) FROM gpu_activity
WHERE start_ns < :b AND end_ns > :a GROUP BY kind, name""", {"a": a, "b": b}).fetchall()
print(json.dumps(sorted(rows)))`;

// The lanes SQL counts: threads with trace events, and timed GPU streams per process.
const LANES_SQL = `print(json.dumps(db.execute("SELECT (SELECT COUNT(DISTINCT thread_id) FROM trace_events) + "
  "(SELECT COUNT(*) FROM (SELECT DISTINCT process_id, device, stream FROM gpu_activity WHERE start_ns IS NOT NULL))").fetchone()[0]))`;

const open = (url) => openPage(browser, url);

const serveView = (file) => sondeView(CLI, [file], env());

// Hovers the widest drawn event of that name; returns the tooltip's name, start and duration.
async function hoverEvent(page, name) {
  await page.locator('#panel-timeline canvas.timeline').scrollIntoViewIfNeeded();
  const at = await page.evaluate((n) => window.sonde.state.timeline.locate(n), name);
  assert.ok(at, `an event of ${name} is drawn`);
  await page.mouse.move(at.x, at.y);
  await page.waitForFunction(() => !document.getElementById('tooltip').hidden);
  return { at, ...(await page.locator('#tooltip').evaluate((t) => ({ ...t.dataset }))) };
}

// The event's routine and duration in trace_events, by its start and routine.
function sqlEvent(file, startNs) {
  return sql(file, `print(json.dumps(db.execute("SELECT r.name, e.end_ns - e.start_ns FROM trace_events e JOIN nodes n USING (node_id) "
    "JOIN routines r USING (routine_id) WHERE e.start_ns = ?", (int(sys.argv[2]),)).fetchall()))`, startNs);
}

async function checkPanel(page, file) {
  const lanes = sql(file, LANES_SQL);
  assert.equal(Number(await page.locator('#timeline').getAttribute('data-lanes')), lanes);
  // a call of step: the tooltip's duration is its row's end_ns - start_ns
  const ev = await hoverEvent(page, 'prog.py:11(step)');
  const rows = sqlEvent(file, ev.startNs);
  assert.ok(rows.some(([n, d]) => n === 'prog.py:11(step)' && d === Number(ev.durNs)), `${JSON.stringify(ev)} in ${JSON.stringify(rows)}`);
  assert.ok(Number(ev.durNs) >= 15e6, 'step spins 15 ms');
  return ev;
}

before(async () => {
  if (skip) return;
  dir = mkdtempSync(join(tmpdir(), 'sonde-timeline-'));
  writeFileSync(join(dir, 'prog.py'), PROGRAM);
  db = join(dir, 'prof.db');
  execFileSync(PY, ['-m', 'sonde', '-o', db, 'prog.py'], { env: env({ SONDE_TRACE: '1' }), cwd: dir, stdio: ['ignore', 'ignore', 'pipe'], timeout: 120000 });
  plainDb = join(dir, 'plain.db');
  execFileSync(PY, ['-m', 'sonde', '-o', plainDb, 'prog.py'], { env: env(), cwd: dir, stdio: ['ignore', 'ignore', 'pipe'], timeout: 120000 });
  // Three kernels on device 0 stream 7, during the second, third and fourth calls of step,
  // launched from them: as CUPTI would record them.
  gpuDb = join(dir, 'gpu.db');
  copyFileSync(db, gpuDb);
  sql(gpuDb, `steps = db.execute("SELECT e.node_id, e.start_ns, e.end_ns, n.thread_id FROM trace_events e JOIN nodes n USING (node_id) "
  "JOIN routines r USING (routine_id) WHERE r.name = 'prog.py:11(step)' ORDER BY e.start_ns").fetchall()
pid = db.execute("SELECT process_id FROM threads WHERE thread_id = ?", (steps[0][3],)).fetchone()[0]
for k, (node, s, e, _) in enumerate(steps[1:]):
    db.execute("INSERT INTO gpu_activity (process_id, node_id, kind, name, device, stream, start_ns, end_ns) "
               "VALUES (?, ?, 'kernel', ?, 0, 7, ?, ?)", (pid, node, 'gemm_kernel_%d' % (k % 2), s + 1000000, s + 4000000))
db.commit()
print(json.dumps(len(steps)))`);
  browser = await playwright().chromium.launch({ executablePath: CHROMIUM, headless: true });
});

after(async () => {
  if (browser) await browser.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('timeline panel in chromium', { skip }, () => {
  test('served: lanes, a hovered call\'s duration and a span\'s time per routine equal SQL', async () => {
    const { server, url } = await serveView(gpuDb);
    try {
      const { page, errors } = await open(url);
      await checkPanel(page, gpuDb);
      // a kernel's lane: its tooltip names the kernel and the call that launched it
      const k = await hoverEvent(page, 'gemm_kernel_0');
      assert.equal(Number(k.durNs), 3000000);
      assert.match(await page.locator('#tooltip').textContent(), /launched from: .*prog\.py:11\(step\)/);
      // a click selects the routine everywhere
      const step = await hoverEvent(page, 'prog.py:11(step)');
      await page.mouse.click(step.at.x, step.at.y);
      assert.equal(await page.locator('#selection').textContent(), 'selected: prog.py:11(step)');
      assert.equal(await page.locator('#timeline-event').getAttribute('data-dur-ns'), step.durNs);
      // shift-drag over the middle of the run
      const box = await page.locator('#timeline').boundingBox();
      const y = box.y + 8;
      await page.keyboard.down('Shift');
      await page.mouse.move(box.x + 180 + (box.width - 180) * 0.2, y);
      await page.mouse.down();
      await page.mouse.move(box.x + 180 + (box.width - 180) * 0.7, y, { steps: 6 });
      await page.mouse.up();
      await page.keyboard.up('Shift');
      await page.waitForSelector('#timeline-span-table tbody tr');
      const { aNs, bNs } = await page.locator('#timeline-span').evaluate((h) => ({ ...h.dataset }));
      const shown = await page.locator('#timeline-span-table tbody tr').evaluateAll((trs) => trs.map((tr) => {
        const td = [...tr.querySelectorAll('td')].map((t) => t.textContent);
        return [tr.dataset.name, Math.round(Number(td[2].replace(/,/g, '')) * 1e6), Number(td[3].replace(/,/g, ''))];
      }));
      const expected = sql(gpuDb, SPAN_SQL, aNs, bNs);
      assert.deepEqual(shown.sort(), expected.map(([n, ns, k]) => [n, ns, k]).sort());
      assert.ok(expected.some(([n]) => n === 'prog.py:3(spin)') && expected.some(([n]) => n.startsWith('gemm_kernel')));
      // the span's width is the sum of the main thread's time in it when its lane is busy throughout
      assert.ok(BigInt(bNs) - BigInt(aNs) > 10000000n, `a span of ${aNs}..${bNs}`);
      // zoom in by the wheel: the window narrows around the mouse
      const before = Number(await page.locator('#timeline').getAttribute('data-t1')) - Number(await page.locator('#timeline').getAttribute('data-t0'));
      await page.mouse.move(box.x + box.width / 2, y);
      await page.mouse.wheel(0, -400);
      await page.waitForFunction((w) => Number(document.getElementById('timeline').dataset.t1) - Number(document.getElementById('timeline').dataset.t0) < w / 2, before);
      assert.deepEqual(errors, []);
      await page.close();
    } finally {
      server.kill('SIGTERM');
    }
  });

  test('--html: the panel, its lanes and a hovered call equal SQL', async () => {
    const html = join(dir, 'view.html');
    execFileSync(CLI, ['view', db, '--html', html], { env: env(), stdio: 'ignore' });
    const { page, errors } = await open(`file://${html}`);
    await checkPanel(page, db);
    assert.doesNotMatch(await page.locator('#timeline-facts').textContent(), /Only the events/);
    assert.deepEqual(errors, []);
    await page.close();
  });

  test('a profile without events says how to record a timeline', async () => {
    const html = join(dir, 'plain.html');
    execFileSync(CLI, ['view', plainDb, '--html', html], { env: env(), stdio: 'ignore' });
    const { page, errors } = await open(`file://${html}`);
    assert.match(await page.locator('#panel-timeline').textContent(), /No timeline in this file: record one with sonde run --trace/);
    assert.equal(await page.locator('#timeline').count(), 0);
    assert.deepEqual(errors, []);
    await page.close();
  });

  test('a million events: the part, the page and a redraw, timed', { timeout: 600000 }, async () => {
    // The program's trace, its second thread's calls repeated: 250,000 steps of four nested
    // calls (load in step, spin in load, spin in step), each step 40 µs, after the recorded run.
    const big = join(dir, 'big.db');
    copyFileSync(db, big);
    const made = sql(big, `ids = dict(db.execute("SELECT r.name, n.node_id FROM nodes n JOIN routines r USING (routine_id) WHERE n.thread_id = 1").fetchall())
step = ids['prog.py:11(step)']
load = db.execute("SELECT node_id FROM nodes WHERE parent_id = ? AND routine_id = (SELECT routine_id FROM routines WHERE name = 'prog.py:8(load)')", (step,)).fetchone()[0]
spin_l = db.execute("SELECT node_id FROM nodes WHERE parent_id = ?", (load,)).fetchone()[0]
spin_s = db.execute("SELECT node_id FROM nodes WHERE parent_id = ? AND node_id <> ?", (step, load)).fetchone()[0]
t = db.execute("SELECT MAX(end_ns) FROM trace_events").fetchone()[0] + 1000
def rows():
    for k in range(250000):
        s = t + k * 40000
        yield (1, step, s, s + 39000); yield (1, load, s + 100, s + 20000)
        yield (1, spin_l, s + 200, s + 19000); yield (1, spin_s, s + 21000, s + 38000)
db.executemany("INSERT INTO trace_events VALUES (?, ?, ?, ?)", rows())
db.commit()
print(json.dumps(db.execute("SELECT COUNT(*) FROM trace_events").fetchone()[0]))`);
    assert.ok(made > 1000000);
    const { server, url } = await serveView(big);
    try {
      // the served part alone
      const started = performance.now();
      const part = await (await fetch(url.replace('/?', '/data.json?') + '&profile=0&part=timeline')).text();
      const partS = (performance.now() - started) / 1000;
      const parsed = JSON.parse(part);
      assert.equal(parsed.carried, made);
      assert.equal(parsed.cut_ns, null);
      const { page, errors } = await open(url);
      const opened = (performance.now() - started) / 1000;
      await page.locator('#panel-timeline canvas.timeline').scrollIntoViewIfNeeded();
      const redraw = await page.evaluate(() => { const t = window.sonde.state.timeline; const ms = []; for (let k = 0; k < 5; ++k) ms.push(t.draw()); return ms; });
      const zoomed = await page.evaluate(() => { const t = window.sonde.state.timeline; t.setView(t.t1 * 0.5, t.t1 * 0.5 + 2e6); return t.draw(); });
      const rects = Number(await page.locator('#timeline').getAttribute('data-rects'));
      console.log(`# ${made} events: part ${partS.toFixed(2)} s (${(part.length / 1e6).toFixed(1)} MB), ` +
                  `page ready ${opened.toFixed(2)} s after asking for the part, redraw of the whole run ` +
                  `${redraw.map((m) => m.toFixed(1)).join(', ')} ms, of 2 ms ${zoomed.toFixed(1)} ms (${rects} rects)`);
      assert.ok(Math.min(...redraw) < 2000, 'a redraw of a million events takes under 2 s (generous)');
      assert.ok(rects > 0);
      assert.deepEqual(errors, []);
      await page.close();
    } finally {
      server.kill('SIGTERM');
    }
    // the --html file carries the first 300,000 events and says so
    const html = join(dir, 'big.html');
    execFileSync('sh', ['-c', `ulimit -v 4000000; exec "$0" view "$1" --html "$2"`, CLI, big, html], { env: env(), stdio: 'ignore', timeout: 300000 });
    const { page, errors } = await open(`file://${html}`);
    assert.match(await page.locator('#timeline-facts').textContent(), /Only the events that start in the first .* 300,000 of 1,000,0\d\d, this --html file's cap of 300,000/);
    assert.deepEqual(errors, []);
    await page.close();
  });
});
