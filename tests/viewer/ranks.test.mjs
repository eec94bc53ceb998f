// The ranks panel's bars in chromium, on a real MPI run: mpi_calls on 4 ranks under mpirun, rank
// r spinning r × 25 ms more per step in its "compute" phase, merged with `sonde merge`. Its
// `sonde view --html` page and its served page draw one row of stacked bars per rank whose
// values and lengths are `sonde query`'s rank_breakdown rows, and, for a routine chosen in the
// imbalance table or the menu, each rank's time in it (rank_hotspots) under its min, mean and
// max lines (rank_imbalance). 96 ranks (the real rank files copied, as tests/bench/bench_merge.py
// makes 1,024) stay in a scrolled chart of compressed rows.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { chromiumMissing, CHROMIUM, playwright, openPage } from './serve.mjs';

const CLI = process.env.SONDE_CLI;
const PROG = process.env.SONDE_MPI_CALLS;
const MPIRUN = ['/usr/bin/mpirun', '/usr/local/bin/mpirun'].find((p) => existsSync(p));
const PY = '/usr/bin/python3';
const NP = 4, STEPS = 6, RANK_MS = 25;
const skip = chromiumMissing() || ((!MPIRUN || !PROG || !existsSync(PROG)) && 'no mpirun, or mpi_calls not built (no MPI headers)');
if (skip) console.log(`# SKIP: ${skip}`);

let dir, browser, merged, wide;

function env(extra = {}) {
  const e = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SONDE_') && k !== 'LD_PRELOAD'));
  return { ...e, ...extra };
}

// Rows of `sonde query FILE SQL --format json`: the reader every user has.
function query(db, sql) {
  return JSON.parse(execFileSync(CLI, ['query', db, sql, '--format', 'json'], { env: env(), encoding: 'utf8' })).rows;
}

before(async () => {
  if (skip) return;
  dir = mkdtempSync(join(tmpdir(), 'sonde-ranks-'));
  execFileSync(MPIRUN, ['--oversubscribe', '--allow-run-as-root', '-np', String(NP), CLI, 'run', '-o', join(dir, 'prof.db'), '--',
                        PROG, '--steps', String(STEPS), '--compute-ms', '5', '--rank-ms', String(RANK_MS), '--regions'],
               { env: env({ SONDE_LIBRARY: process.env.SONDE_LIB }), cwd: dir, stdio: ['ignore', 'ignore', 'pipe'], timeout: 240000 });
  const files = [...Array(NP).keys()].map((r) => join(dir, `prof.rank${r}.db`));
  merged = join(dir, 'run.db');
  execFileSync(CLI, ['merge', '-o', merged, ...files], { env: env(), stdio: ['ignore', 'ignore', 'pipe'] });
  // 96 ranks: rank r is a copy of the real rank r % 4's file, given its rank in a job of 96.
  const many = join(dir, 'many');
  mkdirSync(many);
  const copies = [];
  for (let r = 0; r < 96; ++r) copies.push(join(many, `prof.rank${r}.db`));
  copies.forEach((f, r) => copyFileSync(files[r % NP], f));
  execFileSync(PY, ['-c', [
    'import sqlite3, sys',
    'for r, f in enumerate(sys.argv[1:]):',
    '    db = sqlite3.connect(f)',
    '    db.execute("UPDATE processes SET rank = ?, world_size = 96", (r,))',
    '    db.commit()',
  ].join('\n'), ...copies]);
  wide = join(dir, 'wide.db');
  execFileSync(CLI, ['merge', '-o', wide, many], { env: env(), stdio: ['ignore', 'ignore', 'pipe'] });
  browser = await playwright().chromium.launch({ executablePath: CHROMIUM, headless: true });
});

after(async () => {
  if (browser) await browser.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function open(url) {
  const opened = await openPage(browser, url);
  await opened.page.locator('#rank-bars').scrollIntoViewIfNeeded();
  return opened;
}

// Each row as drawn: its rank, its bars (key, value, on-screen left and width) and its tooltip;
// and where the chart's 0 s is on screen, and the bars' pixels per second.
function drawn(page) {
  return page.locator('#rank-bars').evaluate((wrap) => {
    const svg = wrap.querySelector('svg.rank-bars');
    const box = svg.getBoundingClientRect();
    const scale = box.width / svg.viewBox.baseVal.width;
    const origin = box.left + 64 * scale;  // the bars start after the labels' 64 units
    const pxPerS = (Number(svg.dataset.barPx) * scale) / Number(svg.dataset.axisS);
    const rows = [...svg.querySelectorAll('g.rank-row')].map((g) => ({
      rank: Number(g.dataset.rank),
      title: g.querySelector('title').textContent,
      height: g.querySelector('rect').getBoundingClientRect().height,
      bars: [...g.querySelectorAll('rect[data-key]')].map((r) => {
        const b = r.getBoundingClientRect();
        return { key: r.dataset.key, value: r.dataset.value === '' ? null : Number(r.dataset.value), left: b.left, width: b.width };
      }),
    }));
    const lines = Object.fromEntries([...svg.querySelectorAll('line.stat')].map((l) =>
      [l.dataset.stat, { value: Number(l.dataset.value), x: l.getBoundingClientRect().left + l.getBoundingClientRect().width / 2 }]));
    const scroll = wrap.querySelector('.rank-scroll');
    return { mode: wrap.dataset.mode, routine: wrap.dataset.routine, origin, pxPerS, rows, lines,
             scroll: { client: scroll.clientHeight, height: scroll.scrollHeight } };
  });
}

const close = (a, b, what) => assert.ok(Math.abs(a - b) <= 1e-9 + 1e-9 * Math.abs(b), `${what}: ${a} against ${b}`);
// a value as the page prints it (dom.js's fmtNum at its 3 digits)
const shown = (v) => (v !== 0 && (Math.abs(v) < 1e-3 || Math.abs(v) >= 1e7) ? v.toExponential(2) : v.toFixed(3));
const px = (a, b, what) => assert.ok(Math.abs(a - b) <= 0.75, `${what}: ${a} px against ${b} px`);

async function checkBusyBars(page, db) {
  const truth = query(db, 'SELECT rank, busy_s, compute_s, comm_s, setup_s FROM rank_breakdown ORDER BY rank');
  const d = await drawn(page);
  assert.equal(d.mode, 'ranks');
  assert.deepEqual(d.rows.map((r) => r.rank), truth.map((t) => t.rank));
  for (const [i, t] of truth.entries()) {
    const row = d.rows[i];
    assert.deepEqual(row.bars.map((b) => b.key), ['compute_s', 'comm_s', 'setup_s']);
    let at = d.origin;
    for (const b of row.bars) {
      close(b.value, t[b.key], `rank ${t.rank} ${b.key}`);
      px(b.left, at, `rank ${t.rank} ${b.key} starts where the bar before it ends`);
      px(b.width, t[b.key] * d.pxPerS, `rank ${t.rank} ${b.key}'s length`);
      at += b.width;
    }
    px(at - d.origin, t.busy_s * d.pxPerS, `rank ${t.rank}'s whole bar is its busy time`);
    for (const k of ['busy_s', 'compute_s', 'comm_s', 'setup_s']) assert.ok(row.title.includes(`${shown(t[k])} s`), `${k} not in ${row.title}`);
  }
  return { d, truth };
}

async function checkRoutineBars(page, db, routine) {
  const truth = query(db, `SELECT t.rank, h.incl_s FROM rank_times t LEFT JOIN rank_hotspots h ON h.rank = t.rank AND h.routine = '${routine}' ORDER BY t.rank`);
  const [stats] = query(db, `SELECT min_s, mean_s, max_s, slowest_rank FROM rank_imbalance WHERE routine = '${routine}'`);
  const d = await drawn(page);
  assert.equal(d.mode, 'routine');
  assert.equal(d.routine, routine);
  assert.deepEqual(d.rows.map((r) => r.rank), truth.map((t) => t.rank));
  for (const [i, t] of truth.entries()) {
    const [bar] = d.rows[i].bars;
    if (t.incl_s === null) assert.equal(bar.value, null, `rank ${t.rank} never called ${routine}`);
    else close(bar.value, t.incl_s, `rank ${t.rank}'s ${routine}`);
    px(bar.width, (t.incl_s ?? 0) * d.pxPerS, `rank ${t.rank}'s ${routine} bar`);
    assert.ok(d.rows[i].title.includes(t.incl_s === null ? 'never called' : `${shown(t.incl_s)} s`), d.rows[i].title);
  }
  for (const [stat, key] of [['min', 'min_s'], ['mean', 'mean_s'], ['max', 'max_s']]) {
    close(d.lines[stat].value, stats[key], `${routine}'s ${stat} line`);
    px(d.lines[stat].x, d.origin + stats[key] * d.pxPerS, `${routine}'s ${stat} line`);
  }
  // the max line at the end of the slowest rank's bar
  const slowest = d.rows.find((r) => r.rank === stats.slowest_rank).bars[0];
  px(d.lines.max.x, slowest.left + slowest.width, 'the max line ends the slowest rank\'s bar');
  return d;
}

async function checkPage(url) {
  const { page, errors } = await open(url);
  await checkBusyBars(page, merged);
  // A row of the imbalance table selects its routine: the bars then show it on each rank.
  await page.locator('#ranks-imbalance tbody tr[data-name="compute"]').click();
  await checkRoutineBars(page, merged, 'compute');
  // The menu picks another and selects it everywhere.
  const value = await page.locator('#rank-routine option', { hasText: /^MPI_Allreduce \[/ }).getAttribute('value');
  await page.selectOption('#rank-routine', value);
  await checkRoutineBars(page, merged, 'MPI_Allreduce');
  assert.equal(await page.locator('#selection').textContent(), 'selected: MPI_Allreduce');
  assert.deepEqual(await page.locator('#hotspot-table tbody tr.selected').evaluateAll((trs) => trs.map((t) => t.dataset.name)), ['MPI_Allreduce']);
  // Longest first: the same bars, ordered by the query's times.
  await page.locator('#rank-bars input[type=checkbox]').check();
  const order = query(merged, "SELECT rank FROM rank_hotspots WHERE routine = 'MPI_Allreduce' ORDER BY incl_s DESC, rank").map((r) => r.rank);
  assert.deepEqual((await drawn(page)).rows.map((r) => r.rank), order);
  // Back to the busy time, still longest first.
  await page.locator('#rank-bars input[value=ranks]').check();
  const busy = query(merged, 'SELECT rank FROM rank_breakdown ORDER BY busy_s DESC, rank').map((r) => r.rank);
  assert.deepEqual((await drawn(page)).rows.map((r) => r.rank), busy);
  assert.deepEqual(errors, []);
  await page.close();
}

describe('the ranks panel\'s bars in chromium', { skip }, () => {
  test('4 real ranks doing unequal work: the query\'s figures, as --html', async () => {
    // The work is unequal: rank r spins r × 25 ms a step in "compute" (at least that long, on
    // the wall clock; more where 4 ranks share 2 loaded cores), rank 0 none.
    const phase = query(merged, "SELECT rank, incl_s FROM rank_hotspots WHERE routine = 'compute' ORDER BY rank");
    assert.ok(phase[0].incl_s < 0.5 * STEPS * RANK_MS / 1000, JSON.stringify(phase));
    for (let r = 1; r < NP; ++r) assert.ok(phase[r].incl_s >= 0.999 * r * STEPS * RANK_MS / 1000, JSON.stringify(phase));
    const html = join(dir, 'run.html');
    execFileSync(CLI, ['view', merged, '--html', html], { env: env(), stdio: ['ignore', 'ignore', 'pipe'] });
    await checkPage(pathToFileURL(html).href);
  });

  test('4 real ranks doing unequal work: the query\'s figures, served', async () => {
    const server = spawn(CLI, ['view', merged, '--port', '0'], { env: env(), stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      const url = await new Promise((ok, fail) => {
        createInterface({ input: server.stdout }).once('line', ok);
        server.once('exit', (code) => fail(new Error(`sonde view exited ${code}`)));
      });
      await checkPage(url);
    } finally {
      server.kill('SIGTERM');
      await new Promise((ok) => (server.exitCode !== null ? ok() : server.once('exit', ok)));
    }
  });

  test('96 ranks: compressed rows in a scrolled chart, each the query\'s', async () => {
    const html = join(dir, 'wide.html');
    execFileSync(CLI, ['view', wide, '--html', html], { env: env(), stdio: ['ignore', 'ignore', 'pipe'] });
    const { page, errors } = await open(pathToFileURL(html).href);
    const { d } = await checkBusyBars(page, wide);
    assert.equal(d.rows.length, 96);
    assert.ok(d.rows.every((r) => r.height >= 3 && r.height <= 10), `row heights ${d.rows.map((r) => r.height)}`);
    assert.ok(d.scroll.client <= 480 && d.scroll.height > d.scroll.client, `chart ${d.scroll.client} px of ${d.scroll.height}`);
    // rank labels a line apart at least, the first rank's among them
    const labels = await page.locator('#rank-bars svg.rank-bars text').evaluateAll((ts) => ts.map((t) => [t.textContent, t.getBoundingClientRect().top]));
    assert.equal(labels[0][0], 'rank 0');
    for (let i = 1; i < labels.length; ++i) assert.ok(labels[i][1] - labels[i - 1][1] >= 10, `labels ${labels[i - 1]} and ${labels[i]}`);
    await page.locator('#ranks-imbalance tbody tr[data-name="compute"]').click();
    await checkRoutineBars(page, wide, 'compute');
    assert.deepEqual(errors, []);
    await page.close();
  });
});
