// `sonde view` on every reference workload, in chromium: mlp_train (C++), mlp_numpy with --lines,
// torch_cnn, mlp_train_mpi's two rank files merged, mlp_numpy under --sample, and the GPU
// workload cnn_train against the stub CUDA libraries. Each profile is made here with few steps;
// its `sonde view --html` file and its served page (the parts fetched one by one) both draw
// every panel the profile has, without a console error.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { chromiumMissing, CHROMIUM, playwright, SOURCE } from './serve.mjs';

const CLI = process.env.SONDE_CLI;
const BUILD = process.env.SONDE_BUILD;
const MLP = process.env.SONDE_MLP || join(BUILD || 'build', 'examples', 'mlp_cpp', 'mlp_train');
const MLP_MPI = join(dirname(MLP), 'mlp_train_mpi');
const CNN = process.env.SONDE_CNN;  // cnn_train, with the stub libraries in SONDE_GPU_STUBS
const STUBS = process.env.SONDE_GPU_STUBS;
const MPIRUN = ['/usr/bin/mpirun', '/usr/local/bin/mpirun'].find((p) => existsSync(p));
const PY = '/usr/bin/python3';
const skip = chromiumMissing();
if (skip) console.log(`# SKIP: ${skip}`);

// Shown for every profile; the others only when the profile has their data.
const ALWAYS = ['run', 'flame', 'hotspots', 'shapes', 'roofline', 'breakdown', 'candidates', 'lines', 'kernels'];
let dir, browser;

function env(extra = {}) {
  const e = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SONDE_') && k !== 'LD_PRELOAD'));
  return { ...e, PYTHONPATH: join(BUILD, 'python'), SONDE_PEAKS: join(dir, 'peaks.txt'), ...extra };
}

function run(cmd, args, extra) {
  execFileSync(cmd, args, { env: env(extra), cwd: dir, stdio: ['ignore', 'ignore', 'pipe'], timeout: 240000 });
}

// extra(page): the profile's own checks, on each of the two pages.
async function check(url, panels, extra) {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const errors = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(url);
  await page.waitForSelector('body[data-ready="1"]', { timeout: 120000 });
  for (const id of panels) {
    const n = await page.locator(`#panel-${id} .body`).evaluate((b) => b.childElementCount).catch(() => 0);
    assert.ok(n > 0, `panel ${id} is missing or empty at ${url.slice(0, 60)}`);
  }
  // The root and at least one frame under it. Not more: cnn_train's stub GPU calls take 1.5 ms
  // of its 0.5 s (the rest, making the data, is the root's own), so only its root, step and data
  // are a pixel wide or more, and sometimes a fourth (more than 3 were asked: 1 run in 2 failed).
  assert.ok(Number(await page.locator('#flame').getAttribute('data-frames')) >= 2, 'no flame graph');
  if (extra) await extra(page);
  assert.deepEqual(errors, []);
  await page.close();
}

// The served viewer: `sonde view` prints its URL, the page fetches the parts, SIGTERM ends it.
async function served(db, panels, extra) {
  const server = spawn(CLI, ['view', db, '--port', '0'], { env: env(), stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const url = await new Promise((ok, fail) => {
      createInterface({ input: server.stdout }).once('line', ok);
      server.once('exit', (code) => fail(new Error(`sonde view exited ${code}`)));
    });
    await check(url, panels, extra);
  } finally {
    server.kill('SIGTERM');
    await new Promise((ok) => (server.exitCode !== null ? ok() : server.once('exit', ok)));
  }
  assert.equal(server.exitCode, 0);
}

async function both(db, panels, extra) {
  const html = db.replace(/\.db$/, '.html');
  execFileSync(CLI, ['view', db, '--html', html], { env: env(), stdio: ['ignore', 'ignore', 'pipe'] });
  await check(pathToFileURL(html).href, panels, extra);
  await served(db, panels, extra);
}

before(async () => {
  if (skip) return;
  dir = mkdtempSync(join(tmpdir(), 'sonde-workloads-'));
  writeFileSync(join(dir, 'peaks.txt'), 'gemm.f32 1 100 manual\ngemm.f32 0 200 manual\nmem.bw 1 18 manual\nmem.bw 0 29 manual\n');
  browser = await playwright().chromium.launch({ executablePath: CHROMIUM, headless: true });
});

after(async () => {
  if (browser) await browser.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const mlpNumpy = () => join(SOURCE, 'examples', 'mlp_numpy', 'train.py');

describe('every reference workload in chromium, as --html and served', { skip }, () => {
  test('mlp_train (C++)', { skip: !existsSync(MLP) && `${MLP} not built` }, async () => {
    const db = join(dir, 'mlp_train.db');
    run(CLI, ['run', '-o', db, '--', MLP, '--steps', '20', '--hidden', '200']);
    await both(db, ALWAYS, async (page) => {
      // One process of no rank: its threads menu offers no rank or process beyond what it lists
      // (it said "… 1 more ranks" and "… 1 more processes", listing none).
      const menu = await page.locator('#threads').textContent();
      assert.ok(!/more (ranks|processes)/.test(menu), menu);
    });
  });

  test('mlp_numpy with --lines', async () => {
    const db = join(dir, 'mlp_numpy.db');
    run(PY, ['-m', 'sonde', '-o', db, '--lines', 'update_core*', mlpNumpy(), '--steps', '20', '--hidden', '200']);
    await both(db, ALWAYS);
  });

  test('torch_cnn', async () => {
    const db = join(dir, 'torch_cnn.db');
    run(PY, ['-m', 'sonde', '-o', db, join(SOURCE, 'examples', 'torch_cnn', 'train.py'), '--steps', '3', '--batch', '16', '--eval-every', '0']);
    await both(db, ALWAYS);
  });

  // A thread blocked in queue.get the whole run: its wait is left out of the 100 %. The page
  // says so and marks the thread's own tree, as sonde tree does.
  test('a helper thread waiting for work: its wait said to be left out', async () => {
    const script = join(dir, 'blocked.py');
    writeFileSync(script, ['import queue, threading, time', 'q = queue.Queue()', 'def consume():', '    q.get()',
      't = threading.Thread(target=consume); t.start()', 'end = time.thread_time() + 0.3', 'x = 0',
      'while time.thread_time() < end:', '    x += 1', 'q.put(None); t.join()', ''].join('\n'));
    const db = join(dir, 'blocked.db');
    run(PY, ['-m', 'sonde', '-o', db, script]);
    await both(db, ALWAYS, async (page) => {
      const note = await page.locator('#panel-hotspots').textContent();
      assert.match(note, /s of waits for work left out/);
      const options = await page.locator('#threads option').evaluateAll((os) => os.map((o) => o.textContent));
      // The helper's queue.get, and the main thread's join of it (a wait for work the helper's
      // own time counts, since 2026-12-07).
      const waiting = options.filter((o) => / s waiting for work, in no total\)$/.test(o));
      assert.equal(waiting.length, 2, JSON.stringify(options));
      assert.ok(waiting.some((o) => /thread 1 \(/.test(o)), JSON.stringify(options));
    });
  });

  test('mlp_numpy under --sample: the sampled paths panel', async () => {
    const db = join(dir, 'sampled.db');
    run(PY, ['-m', 'sonde', '--sample', '1000', '-o', db, mlpNumpy(), '--steps', '20', '--hidden', '200']);
    await both(db, [...ALWAYS, 'samples']);
  });

  // No GPU here, and CUPTI is kept out (the stub driver is not one the real libcupti accepts):
  // the kernels each cuDNN and cuBLAS call would launch are added as CUPTI's records, under
  // those calls' own nodes of the real profile, one launch per call (as the store writes them).
  test('cnn_train (GPU, stub CUDA libraries): the GPU kernels panel shows its kernels',
       { skip: (!CNN || !STUBS) && 'cnn_train or the stub CUDA libraries not built' }, async () => {
    const db = join(dir, 'cnn_gpu.db');
    run(CLI, ['run', '-o', db, '--', CNN, '--steps', '4', '--eval-every', '0', '--batch', '64'],
        { LD_LIBRARY_PATH: STUBS, SONDE_CUPTI_LIBRARY: '/nonexistent/libcupti.so.13' });
    const kernels = { cudnnConvolutionForward: 'implicit_convolve_sgemm', cudnnConvolutionBackwardFilter: 'wgrad_alg0_engine',
                      cudnnConvolutionBackwardData: 'dgrad_engine', cublasSgemm_v2: 'sgemm_32x32x32_NN' };
    const launches = JSON.parse(execFileSync(PY, ['-c', [
      'import json, sqlite3, sys',
      'db = sqlite3.connect(sys.argv[1])',
      'kernels = json.loads(sys.argv[2])',
      'rows = db.execute("SELECT n.node_id, n.calls, t.process_id, t.started_ns, r.name FROM nodes n JOIN threads t USING (thread_id) '
        + 'JOIN routines r USING (routine_id) WHERE r.name IN (%s)" % ",".join("?" * len(kernels)), list(kernels)).fetchall()',
      'count = {}',
      'for node, calls, proc, t0, routine in rows:',
      '    for i in range(calls):',
      '        start = t0 + 1000 * (node * 100 + i)',
      '        db.execute("INSERT INTO gpu_activity (process_id, node_id, kind, name, device, stream, start_ns, end_ns, grid_x, grid_y, '
        + 'grid_z, block_x, block_y, block_z, registers) VALUES (?,?,?,?,0,7,?,?,32,1,1,128,1,1,64)", (proc, node, "kernel", kernels[routine], start, start + 20000))',
      '        count[kernels[routine]] = count.get(kernels[routine], 0) + 1',
      'db.commit()',
      'print(json.dumps(count))',
    ].join('\n'), db, JSON.stringify(kernels)], { encoding: 'utf8' }));
    assert.equal(Object.keys(launches).length, 4, `kernels added: ${JSON.stringify(launches)}`);
    await both(db, ALWAYS, async (page) => {
      const rows = await page.locator('#kernels-table tbody tr').evaluateAll((trs) => trs.map((tr) =>
        [tr.dataset.name, Number(tr.children[1].textContent.replace(/,/g, ''))]));
      assert.deepEqual(Object.fromEntries(rows), launches);
      // the calls that launched them are in the hot spots
      const names = await page.locator('#hotspot-table tbody tr').evaluateAll((trs) => trs.map((t) => t.dataset.name));
      for (const routine of Object.keys(kernels)) assert.ok(names.includes(routine), `${routine} not in the hot spots`);
    });
  });

  test('mlp_train_mpi on 2 ranks, merged: the ranks panel',
       { skip: (!MPIRUN || !existsSync(MLP_MPI)) && 'no mpirun, or mlp_train_mpi not built' }, async () => {
    const db = join(dir, 'mpi.db');
    run(MPIRUN, ['--oversubscribe', '--allow-run-as-root', '-np', '2', CLI, 'run', '-o', db, '--', MLP_MPI,
                 '--steps', '12', '--hidden', '200'], { SONDE_LIBRARY: process.env.SONDE_LIB });
    const merged = join(dir, 'merged.db');
    run(CLI, ['merge', '-o', merged, join(dir, 'mpi.rank0.db'), join(dir, 'mpi.rank1.db')]);
    // the threads menu has each rank's tree; chosen, it is `sonde tree --rank R --threads merge`'s
    await both(merged, [...ALWAYS, 'ranks'], async (page) => {
      const options = await page.locator('#threads option[value^="scope:"]').evaluateAll((os) => os.map((o) => [o.value, o.textContent]));
      for (const rank of [0, 1]) {
        const tree = JSON.parse(execFileSync(CLI, ['tree', merged, '--rank', String(rank), '--threads', 'merge', '--min-pct', '0.01',
                                                    '--format', 'json'], { env: env(), encoding: 'utf8' }));
        const option = options.find(([, label]) => new RegExp(`^rank ${rank}\\b`).test(label));
        assert.ok(option, `no rank ${rank} in the threads menu: ${JSON.stringify(options)}`);
        await page.selectOption('#threads', option[0]);
        await page.waitForFunction((want) => window.sonde.flame.frames[0]?.incl === want, tree.tree.incl_s, { timeout: 30000 });
        assert.ok(Number(await page.locator('#flame').getAttribute('data-frames')) > 3, `rank ${rank}'s tree not drawn`);
      }
    });
  });
});
