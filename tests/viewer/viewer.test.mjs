// The viewer in a real browser (Debian's chromium via playwright-core): real profiles of
// examples/mlp_numpy and examples/torch_cnn, made here with few steps, their bundles from
// `sonde view-bundle`, the pages from the build. Every panel renders without a console error, a
// click on a flame-graph frame zooms and selects the routine's row, search filters, and a
// routine named like markup is shown as text, one with a bidirectional override escaped.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromiumMissing, CHROMIUM, inlineHtml, playwright, serve, SOURCE, openPage } from './serve.mjs';

const CLI = process.env.SONDE_CLI;
const BUILD = process.env.SONDE_BUILD;
const PY = '/usr/bin/python3';
const XSS = '<img src=x onerror=alert(1)>';
// A name whose right-to-left override shows it as "load_eval.py": shown escaped instead.
const BIDI = 'load_\u202eyp.lave';
const BIDI_SHOWN = 'load_\\u202eyp.lave';
const skip = chromiumMissing();
if (skip) console.log(`# SKIP: ${skip}`);

const PANELS = ['run', 'flame', 'hotspots', 'shapes', 'roofline', 'breakdown', 'candidates', 'lines', 'kernels'];
let dir, server, browser;
const bundles = {};

function env(extra) {
  const e = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SONDE_') && k !== 'LD_PRELOAD'));
  return { ...e, PYTHONPATH: join(BUILD, 'python'), SONDE_PEAKS: join(dir, 'peaks.txt'), ...extra };
}

function profile(name, args, extra = {}) {
  const db = join(dir, `${name}.db`);
  execFileSync(PY, ['-m', 'sonde', '-o', db, ...args], { env: env(extra), cwd: dir, stdio: ['ignore', 'ignore', 'pipe'], timeout: 240000 });
  return db;
}

function bundle(name, ...dbs) {
  const out = join(dir, `${name}.json`);
  writeFileSync(out, execFileSync(CLI, ['view-bundle', ...dbs], { env: env(), maxBuffer: 1 << 30 }));
  bundles[name] = out;
  return out;
}

// A page with its console errors and uncaught exceptions collected, and any alert() noted.
const open = (url) => openPage(browser, url);

before(async () => {
  if (skip) return;
  dir = mkdtempSync(join(tmpdir(), 'sonde-viewer-'));
  writeFileSync(join(dir, 'peaks.txt'), 'gemm.f32 1 100 manual\ngemm.f32 0 200 manual\ngemm.f64 1 50 manual\n' +
                'gemm.f64 0 100 manual\nmem.bw 1 18 manual\nmem.bw 0 29 manual\n');
  writeFileSync(join(dir, 'xss.py'), [
    'import ctypes, time, numpy as np',
    'sonde = ctypes.CDLL(None)',
    `name = ${JSON.stringify(XSS)}.encode()`,
    `bidi = ${JSON.stringify(BIDI)}.encode()`,
    'a = np.ones((64, 64), dtype=np.float32)',
    'for _ in range(20):',
    '    sonde.sonde_region_begin(name)',
    '    a = (a @ a) / 64.0',
    '    time.sleep(0.02)  # wide enough to be drawn at full view',
    '    sonde.sonde_region_end(name)',
    '    sonde.sonde_region_begin(bidi)',
    '    time.sleep(0.02)',
    '    sonde.sonde_region_end(bidi)',
  ].join('\n') + '\n');
  const mlp = join(SOURCE, 'examples', 'mlp_numpy', 'train.py');
  const cnn = join(SOURCE, 'examples', 'torch_cnn', 'train.py');
  const m1 = profile('mlp', ['--lines', 'update_core*', mlp, '--steps', '20', '--hidden', '200']);
  const m2 = profile('mlp1', [mlp, '--steps', '20', '--hidden', '200'], { OPENBLAS_NUM_THREADS: '1' });
  const c = profile('cnn', [cnn, '--steps', '3', '--batch', '16', '--eval-every', '0']);
  const x = profile('xss', [join(dir, 'xss.py')]);
  // Two routines of one display name: model.py:2(step) in two folders, the first three times
  // as long as the second.
  for (const [sub, ms] of [['one', 30], ['two', 10]]) {
    mkdirSync(join(dir, sub));
    writeFileSync(join(dir, sub, 'model.py'), `import time\ndef step():\n    time.sleep(${ms / 1000})\n`);
  }
  writeFileSync(join(dir, 'twins.py'), [
    'import importlib.util, os',
    'def load(sub):',
    '    spec = importlib.util.spec_from_file_location(sub, os.path.join(os.path.dirname(__file__), sub, "model.py"))',
    '    m = importlib.util.module_from_spec(spec)',
    '    spec.loader.exec_module(m)',
    '    return m',
    'one, two = load("one"), load("two")',
    'for _ in range(10):',
    '    one.step()',
    '    two.step()',
  ].join('\n') + '\n');
  const tw = profile('twins', [join(dir, 'twins.py')]);
  bundle('mlp', m1);
  bundle('cnn', c);
  bundle('xss', x);
  bundle('twins', tw);
  bundle('diff', m2, m1);
  // No GPU here: CUPTI's kernel records, as the store writes them, added to a copy of a real
  // profile under its hottest node (two kernels, one with SONDE_GPU_METRICS values).
  const gpu = join(dir, 'gpu.db');
  copyFileSync(m1, gpu);
  execFileSync(PY, ['-c', [
    'import sqlite3, sys',
    'db = sqlite3.connect(sys.argv[1])',
    'node, proc, t0 = db.execute("SELECT n.node_id, t.process_id, t.started_ns FROM nodes n JOIN threads t USING (thread_id) '
      + 'WHERE n.depth > 0 ORDER BY n.incl_ns DESC LIMIT 1").fetchone()',
    'for i in range(12):',
    '    name = "sgemm_128x64_nn" if i % 3 else "<b>relu_kernel</b>"',
    '    start = t0 + 1000000 * i',
    '    db.execute("INSERT INTO gpu_activity (process_id, node_id, kind, name, device, stream, start_ns, end_ns, '
      + 'grid_x, grid_y, grid_z, block_x, block_y, block_z, registers) VALUES (?,?,?,?,0,7,?,?,64,1,1,256,1,1,96)", '
      + '(proc, node, "kernel", name, start, start + 200000 + 50000 * (i % 3)))',
    '    aid = db.execute("SELECT last_insert_rowid()").fetchone()[0]',
    '    if i % 3:',
    '        db.execute("INSERT INTO gpu_metrics VALUES (?, ?, ?)", (aid, "smsp__inst_executed.sum", 1e6))',
    '        db.execute("INSERT INTO gpu_metrics VALUES (?, ?, ?)", (aid, "smsp__warps_launched.sum", 2e4))',
    'db.commit()',
  ].join('\n'), gpu]);
  bundle('gpu', gpu);
  const none = join(dir, 'none.db');  // a program that calls nothing sonde measures
  execFileSync(CLI, ['run', '-o', none, '--', '/bin/true'], { env: env(), stdio: 'ignore' });
  bundle('none', none);
  server = await serve(bundles);
  browser = await playwright().chromium.launch({ executablePath: CHROMIUM, headless: true });
});

after(async () => {
  if (browser) await browser.close();
  if (server) await server.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function panelsRender(name) {
  const { page, errors } = await open(`${server.url}?b=${name}`);
  for (const id of PANELS) {
    const n = await page.locator(`#panel-${id} .body`).evaluate((b) => b.childElementCount);
    assert.ok(n > 0, `panel ${id} is empty`);
  }
  const frames = Number(await page.locator('#flame').getAttribute('data-frames'));
  assert.ok(frames > 3, `flame graph drew ${frames} frames`);
  assert.ok(await page.locator('#hotspot-table tbody tr').count() > 3);
  assert.match(await page.locator('#panel-hotspots .note').textContent(), /busy threads' time: [\d.]+ s = 100 %/);
  return { page, errors };
}

describe('viewer in chromium', { skip }, () => {
  test('mlp_numpy: every panel renders, with shapes, roofline, breakdown, candidates, line costs', async () => {
    const { page, errors } = await panelsRender('mlp');
    const data = JSON.parse(readFileSync(bundles.mlp, 'utf8')).profiles[0];
    assert.ok(data.shapes.length > 0 && data.lines.rows.length > 0, 'the mlp_numpy profile has shapes and line costs');
    // one element per row of the analyzers' JSON (which rules fire depends on the run's speed)
    assert.equal(await page.locator('#shapes-table tbody tr').count(), data.shapes.length);
    assert.equal(await page.locator('#panel-candidates li.candidate').count(), data.candidates.length);
    assert.equal(await page.locator('#lines-table tbody tr').count(), data.lines.rows.length);
    assert.equal(await page.locator('#hotspot-table tbody tr').count(), Math.min(500, data.report.rows.length));
    assert.ok(await page.locator('#panel-roofline svg .point').count() > 0, 'no roofline point');
    assert.ok(await page.locator('#panel-roofline svg .ceiling').count() >= 2, 'no calibrated ceilings drawn');
    assert.ok(await page.locator('#panel-breakdown svg.stack .segment').count() >= 3, 'no breakdown segments');
    // The FPU flags are booleans in the JSON and words on the page.
    assert.equal(typeof data.run.run.fpu_ftz, 'boolean');
    assert.match(await page.locator('#panel-run').textContent(), /FTZ \/ DAZ(on|off) \/ (on|off)/);
    assert.deepEqual(errors, []);
    await page.close();
  });

  test('torch_cnn: every panel renders', async () => {
    const html = inlineHtml(readFileSync(bundles.cnn, 'utf8'));
    console.log(`# torch_cnn as one self-contained file: ${(html.length / 2 ** 20).toFixed(2)} MiB (target < 5 MB)`);
    assert.ok(html.length < 5e6, `the self-contained torch_cnn page is ${html.length} bytes`);
    const { page, errors } = await panelsRender('cnn');
    assert.ok(await page.locator('#panel-breakdown svg.stack .segment').count() >= 3, 'no breakdown segments');
    assert.deepEqual(errors, []);
    await page.close();
  });

  test('a click on a flame frame zooms to it and selects its row in the table', async () => {
    const { page, errors } = await open(`${server.url}?b=mlp`);
    const names = await page.locator('#hotspot-table tbody tr').evaluateAll((trs) => trs.map((t) => t.dataset.name));
    let target = null;
    for (const n of names) {
      const at = await page.evaluate((name) => window.sonde.flame.locate(name), n);
      if (at && at.w > 40 && n !== '<thread>') { target = { n, at }; break; }
    }
    assert.ok(target, 'no routine of the table is drawn wide enough to click');
    const before = Number(await page.locator('#flame').getAttribute('data-frames'));
    await page.mouse.click(target.at.x, target.at.y);
    assert.equal(await page.locator('#flame').getAttribute('data-zoomed'), target.n);
    const selected = await page.locator('#hotspot-table tbody tr.selected').evaluateAll((trs) => trs.map((t) => t.dataset.name));
    assert.deepEqual(selected, [target.n]);
    assert.match(await page.locator('#selection').textContent(), /selected: /);
    // zoomed in, the frame spans the width: its subtree has room for frames too narrow before
    const wide = await page.evaluate((name) => window.sonde.flame.locate(name), target.n);
    assert.ok(wide.w > 1000, `zoomed frame is ${wide.w} px wide`);
    assert.ok(Number(await page.locator('#flame').getAttribute('data-frames')) <= before + 1000);
    // and a click on a row selects the routine in the flame graph's caption and the other tables
    await page.locator('#hotspot-table tbody tr').nth(1).click();
    const rowName = await page.locator('#hotspot-table tbody tr').nth(1).getAttribute('data-name');
    assert.equal(await page.locator('#selection').textContent(), `selected: ${rowName}`);
    assert.deepEqual(errors, []);
    await page.close();
  });

  test('two routines of one name are selected apart, by routine id', async () => {
    const { page, errors } = await open(`${server.url}?b=twins`);
    const stepRows = () => page.locator('#hotspot-table tbody tr').evaluateAll((trs) =>
      trs.filter((t) => /^model\.py:\d+\(step\)$/.test(t.dataset.name))
        .map((t) => ({ name: t.dataset.name, id: t.dataset.id, selected: t.classList.contains('selected') })));
    const rows = await stepRows();
    assert.equal(rows.length, 2, `hot-spot rows of step: ${JSON.stringify(rows)}`);
    assert.equal(rows[0].name, rows[1].name);
    const name = rows[0].name;
    const frameOf = (sub) => page.evaluate(([n, w]) => {
      const f = window.sonde.flame.frames.find((x) => x.name === n && x.where.includes(w));
      return f ? { id: f.id, at: window.sonde.flame.locate(n, f.where) } : null;
    }, [name, sub]);
    const one = await frameOf('/one/model.py'), two = await frameOf('/two/model.py');
    assert.ok(one && two && one.at && one.at.w > 10, `frames: ${JSON.stringify([one, two])}`);
    // a click on one's frame selects one's row alone (both rows were selected by name), and
    // outlines one's frame alone
    await page.mouse.click(one.at.x, one.at.y);
    const selected = (await stepRows()).filter((r) => r.selected);
    assert.equal(selected.length, 1, `rows selected by a click on one's step: ${JSON.stringify(selected)}`);
    assert.equal(selected[0].id, String(one.id));
    assert.notEqual(one.id, two.id);
    assert.equal(Number(await page.locator('#flame').getAttribute('data-selected-frames')), 1);
    // and a click on two's row selects two: its frame alone is outlined
    await page.locator(`#hotspot-table tbody tr[data-id="${two.id}"]`).click();
    await page.locator('#panel-flame button', { hasText: 'reset zoom' }).click();  // the callers panel has its own
    assert.equal(await page.evaluate(() => window.sonde.state.selected.id), two.id);
    assert.equal(Number(await page.locator('#flame').getAttribute('data-selected-frames')), 1);
    assert.deepEqual((await stepRows()).filter((r) => r.selected).map((r) => r.id), [String(two.id)]);
    assert.deepEqual(errors, []);
    await page.close();
  });

  test('a shape row and a roofline point select their routine by routine id everywhere', async () => {
    const { page, errors } = await open(`${server.url}?b=mlp`);
    const data = JSON.parse(readFileSync(bundles.mlp, 'utf8')).profiles[0];
    const shape = data.shapes[0];
    assert.ok(Number.isInteger(shape.routine_id), 'the bundle gives the shape its routine id');
    await page.locator('#shapes-table tbody tr').first().click();
    const ids = await page.locator('#hotspot-table tbody tr.selected').evaluateAll((trs) => trs.map((t) => t.dataset.id));
    assert.deepEqual(ids, [String(shape.routine_id)]);
    const points = await page.locator('#panel-roofline .point.selected').evaluateAll((ps) => ps.map((p) => p.dataset.id));
    assert.ok(points.length > 0 && points.every((id) => id === String(shape.routine_id)), `selected points ${points}`);
    // and a roofline point selects the same way: its row in the hot spots (one the table draws:
    // it shows the 500 hottest)
    const drawn = await page.locator('#hotspot-table tbody tr').evaluateAll((trs) => trs.map((t) => t.dataset.id));
    const plotted = data.roofline.routines.filter((r) => r.intensity > 0 && r.gflops > 0 && drawn.includes(String(r.routine_id)));
    const point = plotted.find((r) => r.routine_id !== shape.routine_id) ?? plotted[0];
    await page.locator(`#panel-roofline .point.routine[data-id="${point.routine_id}"]`).dispatchEvent('click');
    const after = await page.locator('#hotspot-table tbody tr.selected').evaluateAll((trs) => trs.map((t) => t.dataset.id));
    assert.deepEqual(after, [String(point.routine_id)]);
    assert.deepEqual(errors, []);
    await page.close();
  });

  // torch_cnn: torch runs oneDNN on its own thread count (1 here), the BLAS on its own (2 on
  // this 2-core machine): each count's ceilings, each point in its count's colour, the legend
  // naming what is held against which.
  test('roofline: the ceilings of each thread count the points ran with', async () => {
    const { page, errors } = await open(`${server.url}?b=cnn`);
    const r = JSON.parse(readFileSync(bundles.cnn, 'utf8')).profiles[0].roofline;
    const points = [...r.routines, ...r.shapes].filter((p) => p.intensity > 0 && p.gflops > 0);
    const counts = [...new Set(points.map((p) => p.threads).filter((t) => t !== null))].sort();
    console.log(`# torch_cnn's roofline points ran on ${counts.join(' and ')} thread(s)`);
    assert.deepEqual(r.ceilings.map((c) => c.threads), counts);
    const groups = await page.locator('#panel-roofline g.ceilings').evaluateAll((gs) => gs.map((g) => ({
      threads: Number(g.dataset.threads), stroke: g.getAttribute('stroke'),
      peaks: [...g.querySelectorAll('text')].map((t) => t.textContent) })));
    assert.deepEqual(groups.map((g) => g.threads), counts);
    for (const [i, c] of r.ceilings.entries()) {  // each line labelled with the bundle's peak at its count
      const labels = groups[i].peaks.map((t) => t.match(/^(\S+) peak ([\d.,]+), (\d+) threads?$/));
      assert.deepEqual(labels.map((m) => [m[1], Number(m[2].replace(/,/g, '')), Number(m[3])]),
                       c.compute.map((k) => [k.dtype, Number(k.gflops.toFixed(1)), c.threads]));
    }
    const colour = Object.fromEntries(groups.map((g) => [g.threads, g.stroke]));
    assert.equal(new Set(Object.values(colour)).size, counts.length, 'one colour per thread count');
    const drawn = await page.locator('#panel-roofline .point').evaluateAll((ps) => ps.map((p) => [p.dataset.threads, p.getAttribute('fill')]));
    assert.equal(drawn.length, points.length);
    for (const [t, fill] of drawn) if (t !== '') assert.equal(fill, colour[t], `a point of ${t} thread(s)`);
    const legend = Object.fromEntries(await page.locator('#panel-roofline .roofline-legend li[data-threads]')
      .evaluateAll((lis) => lis.map((li) => [li.dataset.threads, li.textContent])));
    for (const p of points.filter((q) => q.threads !== null))
      assert.ok(legend[p.threads].includes(p.routine), `${p.routine} not named under ${p.threads} thread(s): ${legend[p.threads]}`);
    assert.deepEqual(errors, []);
    await page.close();
  });

  test('search filters the table; exclusive sorts it by exclusive time', async () => {
    const { page, errors } = await open(`${server.url}?b=mlp`);
    const all = await page.locator('#hotspot-table tbody tr').count();
    await page.locator('#search').fill('update');
    const names = await page.locator('#hotspot-table tbody tr').evaluateAll((trs) => trs.map((t) => t.dataset.name));
    assert.ok(names.length > 0 && names.length < all, `${names.length} of ${all} rows after search`);
    for (const n of names) assert.match(n.toLowerCase(), /update/);
    await page.locator('#search').fill('');
    assert.equal(await page.locator('#hotspot-table tbody tr').count(), all);
    // the exclusive toggle sorts the table by exclusive time (the analyzers' excl_ms, descending)
    await page.locator('input[name=time][value=excl]').check();
    assert.equal(await page.locator('#hotspot-table th[aria-sort=descending]').getAttribute('data-key'), 'excl_ms');
    assert.deepEqual(errors, []);
    await page.close();
  });

  test('a routine named like markup renders as text, served and in a self-contained file', async () => {
    const file = join(dir, 'xss.html');
    writeFileSync(file, inlineHtml(readFileSync(bundles.xss, 'utf8')));
    for (const url of [`${server.url}?b=xss`, `file://${file}`]) {
      const { page, errors } = await open(url);
      assert.equal(await page.locator('#panels img').count(), 0, `an <img> was made from a name (${url})`);
      const cells = await page.locator('#hotspot-table td').evaluateAll((tds) => tds.map((t) => t.textContent));
      assert.ok(cells.includes(XSS), `the name is not shown as text (${url})`);
      const at = await page.evaluate((name) => window.sonde.flame.locate(name), XSS);
      assert.ok(at, 'the region is not in the flame graph');
      // Its bidirectional override shown as an escape, in the table and the flame graph alike,
      // and nowhere on the page as the character itself.
      assert.ok(cells.includes(BIDI_SHOWN), `the override is not shown escaped (${url}): ${cells.filter((c) => c.startsWith('load_'))}`);
      assert.ok(await page.evaluate((name) => window.sonde.flame.locate(name), BIDI_SHOWN), 'the escaped name is not in the flame graph');
      // (innerText: what is shown; the inline file's data script holds the name as it is)
      assert.ok(!(await page.evaluate(() => document.body.innerText)).includes('\u202e'), `the override reached the page (${url})`);
      assert.deepEqual(errors, [], url);
      await page.close();
    }
  });

  test('a profile without a measured call opens and says there is no tree', async () => {
    const { page, errors } = await open(`${server.url}?b=none`);
    assert.match(await page.locator('#panel-flame').textContent(), /no tree to draw/);
    assert.equal(await page.locator('#hotspot-table').count(), 1);
    assert.deepEqual(errors, []);
    await page.close();
  });

  test('under the real sonde view: served with its token and CSP, and as --html', async () => {
    const srv = spawn(CLI, ['view', join(dir, 'mlp.db')], { env: env(), stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      const url = await new Promise((ok, fail) => {
        srv.stdout.on('data', (d) => { const m = String(d).match(/http:\/\/127\.0\.0\.1:\d+\/\?token=\w+/); if (m) ok(m[0]); });
        srv.on('exit', (code) => fail(new Error(`sonde view exited ${code}`)));
      });
      const html = join(dir, 'mlp.html');
      execFileSync(CLI, ['view', join(dir, 'mlp.db'), '--html', html], { env: env(), stdio: 'ignore' });
      for (const u of [url, `file://${html}`]) {
        const { page, errors } = await open(u);
        assert.ok(Number(await page.locator('#flame').getAttribute('data-frames')) > 3, u);
        assert.ok(await page.locator('#hotspot-table tbody tr').count() > 3, u);
        assert.deepEqual(errors, [], u);  // a CSP violation is a console error
        await page.close();
      }
    } finally {
      srv.kill('SIGTERM');
    }
  });

  test('GPU kernels where recorded: the kernels table, as the analyzers rank them', async () => {
    const { page, errors } = await open(`${server.url}?b=gpu`);
    const kernels = JSON.parse(readFileSync(bundles.gpu, 'utf8')).profiles[0].metrics.kernels;
    assert.equal(kernels.length, 2);
    const shown = await page.locator('#kernels-table tbody tr').evaluateAll((trs) => trs.map((t) => t.dataset.name));
    assert.deepEqual(shown.slice().sort(), kernels.map((k) => k.kernel).sort());
    assert.ok(shown.includes('<b>relu_kernel</b>'), 'the kernel name is shown as text');
    assert.equal(await page.locator('#panels b').count(), 0);
    assert.deepEqual(errors, []);
    await page.close();
  });

  test('two profiles: the diff panel shows per-routine speedups', async () => {
    const { page, errors } = await open(`${server.url}?b=diff`);
    assert.ok(await page.locator('#panel-diff table tbody tr').count() > 0);
    // sonde diff's warnings (the two runs' commands and BLAS threads differ) and its noise line,
    // which the panel left out (a red-team --delay run against a whole run read 2.81x, no word).
    const expected = JSON.parse(execFileSync(CLI, ['diff', join(dir, 'mlp1.db'), join(dir, 'mlp.db'),
      '--format', 'json'], { env: env() })).warnings;
    assert.ok(expected.length > 0, 'the two runs differ in command and threads');
    const shown = await page.locator('#panel-diff ul.notes li.warning').allInnerTexts();
    assert.deepEqual(shown.map((w) => w.replace(/^warning\s*/, '')), expected);
    assert.match(await page.locator('#panel-diff').innerText(), /noise: unknown with one run a side/);
    assert.equal(await page.locator('#profile option').count(), 2);
    await page.locator('#profile').selectOption('1');
    assert.ok(Number(await page.locator('#flame').getAttribute('data-frames')) > 3);
    assert.deepEqual(errors, []);
    await page.close();
  });
});
