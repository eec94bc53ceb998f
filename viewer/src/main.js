// sonde view: shows the bundle that `sonde view` (or the --html file) carries. Panels are linked:
// a click anywhere selects the routine everywhere, by its routine_id where the panel has one (the
// tree, the hot spots, shapes, roofline, candidates: two `step` of two files are two routines),
// else by its name (line costs, samples, ranks).
import { el, empty, fmtNum, panel, parseProfileJson } from './dom.js';
import { DataTable } from './table.js';
import { FlameGraph } from './flame.js';
import { breakdown, roofline } from './charts.js';
import { flamePanel } from './tree_panel.js';
import { callersPanel } from './callers_panel.js';
import { timelinePanel } from './timeline.js';
import { rankBars } from './rank_bars.js';

// A source line is a name, not a quantity: 1021, never 1,021 (the routine's name beside it says
// :1021).
const lineNumber = (v) => (v === null || v === undefined ? '' : String(v));

const SUPPORTED_FORMAT = 2;

// The --html file carries the whole bundle; the server hands out an index and then each part
// of a profile when the page asks (the first panel's first), so a large profile draws its tree
// before its metrics are computed.
async function fetchData(query) {
  const response = await fetch('data.json' + location.search + (location.search ? '&' : '?') + query);
  if (!response.ok) throw new Error(`the server answered ${response.status} for the profile's data: ${(await response.text()).trim()}`);
  return parseProfileJson(await response.text());
}

async function loadBundle() {
  const inline = document.getElementById('sonde-data');
  if (inline) return parseProfileJson(inline.textContent);
  return fetchData('part=index');
}

// Fetches the members of profile i the page needs that it does not hold yet.
async function need(i, names) {
  const p = state.bundle.profiles[i];
  await Promise.all(names.filter((n) => !(n in p)).map(async (n) => { p[n] = await fetchData(`profile=${i}&part=${n}`); }));
  return p;
}

const LATER_PARTS = ['report', 'shapes', 'metrics', 'roofline', 'candidates', 'lines', 'samples', 'ranks', 'rank_routines'];

const state = { bundle: null, profile: null, selected: null, search: '', mode: 'incl', linked: [] };
const tooltip = document.getElementById('tooltip');
const flame = new FlameGraph({ onSelect: select, tooltip });

// sel: null, or { name, id } with id null where the panel that chose it knows no routine id.
function select(name, id = null) {
  const sel = name === null ? null : { name, id: id ?? null };
  state.selected = sel;
  document.getElementById('selection').textContent = sel === null ? '' : 'selected: ' + name;
  for (const l of state.linked) l.setSelected(sel);
}

// The run's FPU flags: booleans in the JSON (`sonde report --format json`), a word here.
const onOff = (v) => (v === true ? 'on' : v === false ? 'off' : v ?? '–');

function runPanel(p) {
  const { section, body } = panel('run', 'Run');
  const r = p.run.run;
  const facts = [
    ['file', p.path], ['command', r.command], ['host', r.host], ['CPU', r.cpu_model], ['cores', r.cores],
    ['mode', r.mode], ['processes', r.processes], ['busy threads', r.threads], ['waiting threads', r.waiting_threads ?? 0], ['idle threads', r.idle_threads],
    ['wall time s', r.wall_s], ['BLAS', r.blas_library], ['BLAS threads', r.blas_threads],
    ['FTZ / DAZ', `${onOff(r.fpu_ftz)} / ${onOff(r.fpu_daz)}`],
  ];
  body.appendChild(el('dl', { class: 'facts' }, facts.map(([k, v]) => [el('dt', {}, k), el('dd', {}, fmtNum(v))])));
  const notes = p.run.notes || [];
  body.appendChild(el('h3', {}, `Notes (${notes.length}): what sonde could not see or wants you to know`));
  body.appendChild(notes.length
    ? el('ul', { class: 'notes' }, notes.map((n) => el('li', { class: n.severity },
        el('strong', {}, n.severity), ` ${n.topic}: `, n.message, n.pid !== null ? ` (pid ${n.pid})` : '')))
    : empty('No notes.'));
  return section;
}

function hotspotPanel(p) {
  const rep = p.report;
  const { section, body } = panel('hotspots', 'Hot spots',
    `%Time is of the busy threads' time: ${fmtNum(rep.total_s)} s = 100 % (${rep.busy_threads} busy thread(s); ` +
    (rep.waiting_threads ? `${rep.waiting_threads} waiting for work, by their calls alone; ` : '') +
    `${rep.idle_threads} idle, in no percentage` +
    (rep.waited_s ? `; ${fmtNum(rep.waited_s)} s of waits for work left out` : '') + `). The run's wall time: ${fmtNum(rep.wall_s)} s.`);
  const t = new DataTable({
    id: 'hotspot-table', rows: rep.rows, nameKey: 'name', idKey: 'routine_id', sortKey: state.mode === 'excl' ? 'excl_ms' : 'incl_ms',
    onSelect: select,
    columns: [
      { key: 'name', title: 'Name' }, { key: 'kind', title: 'Kind' },
      { key: 'pct_time', title: '%Time', digits: 1 }, { key: 'excl_ms', title: 'Exclusive ms' },
      { key: 'incl_ms', title: 'Inclusive ms' }, { key: 'calls', title: 'Calls' }, { key: 'subrs', title: 'Subrs' },
      { key: 'incl_us_per_call', title: 'Incl µs/call', digits: 1 },
      { key: 'library', title: 'Library' }, { key: 'file', title: 'File' }, { key: 'line', title: 'Line', format: lineNumber },
    ],
  });
  body.appendChild(t.element);
  return { section, table: t };
}

function tablePanel(id, title, note, rows, columns, nameKey, sortKey, emptyText, idKey = null) {
  const { section, body } = panel(id, title, note);
  if (!rows || !rows.length) { body.appendChild(empty(emptyText)); return { section, table: null }; }
  const t = new DataTable({ id: id + '-table', rows, columns, nameKey, idKey, sortKey, onSelect: select });
  body.appendChild(t.element);
  return { section, table: t };
}

function candidatesPanel(p) {
  const { section, body } = panel('candidates', 'Tuning candidates',
    'Ranked by estimated gain; each with the numbers that made the rule fire.');
  const list = p.candidates || [];
  if (!list.length) { body.appendChild(empty('No rule fired.')); return { section, setSelected() {} }; }
  // A candidate's location names a routine ("cblas_sgemm 100x200x784 at train.py:207(forward)"):
  // the longest routine name it holds is the one selected.
  const names = p.report.rows.map((r) => r.name).filter((n) => n.length > 2).sort((a, b) => b.length - a.length);
  const routineOf = (loc) => names.find((n) => loc.includes(n)) ?? loc;
  const items = list.map((c, i) => el('li', { class: 'candidate', dataset: { name: c.location, id: String(c.routine_id ?? '') }, onclick: () => select(routineOf(c.location), c.routine_id) },
    el('h3', {}, `${i + 1}. ${c.location}`, el('span', { class: 'rule' }, ` ${c.rule} · est. gain ${fmtNum(c.est_gain_s)} s`)),
    el('p', {}, c.summary),
    el('table', { class: 'evidence' }, el('tbody', {}, (c.evidence_keys || Object.keys(c.evidence || {})).map((k) =>
      el('tr', {}, el('th', {}, k), el('td', {}, fmtNum(c.evidence[k])))))),
    el('p', { class: 'advice' }, c.advice)));
  body.appendChild(el('ol', { class: 'candidates' }, items));
  return {
    section,
    setSelected(sel) {
      for (const li of items) {
        const byId = sel !== null && sel.id !== null && li.dataset.id !== '';
        li.classList.toggle('selected', sel !== null && (byId ? li.dataset.id === String(sel.id) : li.dataset.name.includes(sel.name)));
      }
    },
  };
}

function linesPanel(p) {
  const { section, body } = panel('lines', 'Line costs',
    'Per source line of the functions recorded with python3 -m sonde --lines; % is of the function\'s total.');
  if (!p.lines) { body.appendChild(empty('Not recorded: run python3 -m sonde --lines PATTERN to see line costs.')); return { section, table: null }; }
  // rows name the function and file; the routine (for the linked selection) is in functions
  const routine = new Map(p.lines.functions.map((f) => [f.function + '\0' + f.file, f.name]));
  const rows = p.lines.rows.map((r) => ({ ...r, routine: routine.get(r.function + '\0' + r.file) ?? r.function }));
  const t = new DataTable({
    id: 'lines-table', rows, nameKey: 'routine', sortKey: 'line', desc: false, onSelect: select, limit: 2000,
    columns: [{ key: 'function', title: 'Function' }, { key: 'line', title: 'Line', format: lineNumber }, { key: 'hits', title: 'Hits' },
              { key: 'time_s', title: 'Time s', digits: 6 }, { key: 'pct', title: '% function', digits: 1 },
              { key: 'contents', title: 'Line contents', format: (v) => el('code', {}, v ?? '') }],
  });
  body.appendChild(t.element);
  return { section, table: t };
}

// The sampler's paths (sonde run --sample): shares of all samples with their standard error, as
// `sonde tree` lists them; a row selects the routine it was sampled under.
function samplesPanel(p) {
  const { section, body } = panel('samples', 'Sampled paths',
    'CPU-time samples, not exact figures: each path\'s share of all samples, ± one standard error; ' +
    'the native frames are those sampled below the measured routine.' +
    (p.samples.length >= 2000 ? ' The 2,000 paths with most samples.' : ''));
  const rows = p.samples.map((r) => ({ ...r, routine: r.path.slice(r.path.lastIndexOf(';') + 1) }));
  const t = new DataTable({
    id: 'samples-table', rows, nameKey: 'routine', sortKey: 'samples', onSelect: select,
    columns: [{ key: 'samples', title: 'Samples' }, { key: 'share_pct', title: 'Share %', digits: 1 },
              { key: 'share_err_pct', title: '± %', digits: 1 }, { key: 'path', title: 'Under' },
              { key: 'frames', title: 'Sampled native frames', format: (v) => el('code', {}, v ?? '') }],
  });
  body.appendChild(t.element);
  return { section, table: t };
}

// A merged MPI run (sonde merge): bars per rank (rank_bars.js), then the tables of `sonde ranks`,
// as its JSON has them.
function ranksPanel(r, routines) {
  const { section, body } = panel('ranks', `Ranks (${r.ranks})`,
    'Per rank, its busy time as bars (or one routine\'s time on each rank), the load imbalance per routine ' +
    '(lost: max − mean) and the communication per operation, from the rank views; comm % is of the rank\'s busy threads\' time.');
  const bars = rankBars(r.per_rank, routines, { onSelect: select });
  body.appendChild(bars.element);
  const tables = [];
  const specs = [
    ['per_rank', 'Per rank', null, 'rank', [['rank', 'Rank'], ['host', 'Host'], ['wall_s', 'Wall s'], ['busy_s', 'Busy s'],
      ['compute_s', 'Compute s'], ['comm_s', 'Comm s'], ['setup_s', 'Setup s'], ['comm_pct', 'Comm %', 1], ['bytes', 'Bytes'], ['exposed_s', 'Exposed s'],
      ['overlapped_s', 'Overlapped s'], ['overlap_pct', 'Overlap %', 1]], false],
    ['imbalance', 'Load imbalance', 'routine', 'lost_s', [['routine', 'Routine'], ['kind', 'Kind'], ['mean_s', 'Mean s'],
      ['max_s', 'Max s'], ['min_s', 'Min s'], ['max_over_mean', 'Max/mean', 2], ['max_over_min', 'Max/min', 2],
      ['slowest_rank', 'Slowest'], ['lost_s', 'Lost s']], true],
    ['bandwidth', 'Communication', 'op', 'time_s', [['op', 'Operation'], ['kind', 'Kind'], ['comm_size', 'Comm size'],
      ['message_bytes', 'Msg bytes'], ['ranks', 'Ranks'], ['calls', 'Calls'], ['time_s', 'Time s'], ['bytes', 'Bytes'],
      ['us_per_call', 'µs/call', 1], ['gbs', 'GB/s', 2]], true],
  ];
  for (const [key, title, nameKey, sortKey, cols, desc] of specs) {
    body.appendChild(el('h3', {}, title));
    if (!r[key] || !r[key].length) { body.appendChild(empty('No rows.')); continue; }
    const t = new DataTable({ id: 'ranks-' + key, rows: r[key], nameKey, sortKey, desc, onSelect: select,
                              columns: cols.map(([k, t, digits]) => ({ key: k, title: t, digits })) });
    body.appendChild(t.element);
    tables.push(t);
  }
  return { section, tables, bars };
}

function diffPanel(d) {
  const { section, body } = panel('diff', 'Before and after',
    `${d.before} → ${d.after}: speedup = before / after (wall time ${fmtNum(d.total_speedup ?? null, 2)}×).`);
  // What sonde diff prints first: why the two may not compare (commands, collection windows,
  // thread counts differ), and the noise, unknown with one run a side. A --delay run against a
  // whole run read a 2.81x speedup here with no word of either.
  const warnings = d.warnings || [];
  if (warnings.length)
    body.appendChild(el('ul', { class: 'notes' }, warnings.map((w) => el('li', { class: 'warning' },
      el('strong', {}, 'warning'), ' ', w))));
  body.appendChild(el('p', { class: 'note' }, (d.runs_before ?? 1) < 2 || (d.runs_after ?? 1) < 2
    ? 'noise: unknown with one run a side; run each side several times and give them all ' +
      '(sonde diff a1.db a2.db a3.db -- b1.db b2.db b3.db) to see which figures differ beyond it.'
    : `noise: the wall time's change is ${d.total_noise}.`));
  const cols = [{ key: 'name', title: 'Name' }, { key: 'kind', title: 'Kind' }, { key: 'before_s', title: 'Before s', digits: 6 },
                { key: 'after_s', title: 'After s', digits: 6 }, { key: 'speedup', title: 'Speedup', digits: 2 }, { key: 'status', title: 'Status' },
                { key: 'before_name', title: 'Name before' }];
  const tables = [];
  for (const [key, title] of [['phases', 'Phases'], ['routines', 'Routines']]) {
    if (!d[key] || !d[key].length) continue;
    // In sonde diff's order (the larger of the two times first: new code ranks by its time).
    const t = new DataTable({ id: 'diff-' + key, rows: d[key], columns: cols, nameKey: 'name', sortKey: null, onSelect: select });
    body.append(el('h3', {}, title), t.element);
    tables.push(t);
  }
  return { section, tables };
}

// The run and the flame graph first, the other panels once their data is there, so that a
// large profile shows its first panel before its tables are built. Resolves when all are there.
async function render(index) {
  const b = state.bundle;
  // The --html file has the tree; the server sends a coarser one first (frames of 0.1 % and up).
  let p = state.bundle.profiles[index];
  p = await need(index, ['run', 'tree' in p ? 'tree' : 'tree_first', 'tree_scopes']);
  if (((p.tree ?? p.tree_first).trees || []).length > 1) await need(index, ['tree_merged']);
  else if (!('tree_merged' in p)) p.tree_merged = null;
  state.profile = p;
  state.index = index;
  state.linked = [flame];
  state.filtered = [];
  const main = document.getElementById('panels');
  main.replaceChildren();
  main.appendChild(runPanel(p));
  // The --html file carries the comparisons of a few small profiles (kViewComparedMax); the server makes any.
  const inline = document.getElementById('sonde-data') !== null;
  const others = b.profiles.map((q, i) => ({ index: i, path: q.path, carried: !inline || `tree_diff_${i}` in p }))
    .filter((o) => o.index !== index);
  const fp = flamePanel(p, flame, (names) => need(index, names), fail, others);
  main.appendChild(fp.section);
  flame.search = state.search.toLowerCase();
  flame.selected = null;
  await fp.show();
  performance.mark('sonde-first-panel');
  const waiting = el('p', { id: 'loading-rest', class: 'note' }, 'computing the other panels…');
  main.appendChild(waiting);
  const timelineSlot = el('div', { id: 'timeline-slot' });
  fp.section.after(timelineSlot);
  await new Promise((done) => setTimeout(done, 0));  // the first panel is painted meanwhile
  const finer = !('tree' in p);
  await need(index, LATER_PARTS);
  if (b.diff === true) b.diff = await fetchData('part=diff');
  waiting.remove();
  renderRest(p, main);
  // The timeline after the tables: a million events are tens of MB to fetch and parse.
  await need(index, ['timeline']);
  const tl = timelinePanel(p.timeline, document.getElementById('sonde-data') !== null, { onSelect: select, tooltip });
  timelineSlot.replaceWith(tl.section);
  state.linked.push(tl);
  state.timeline = tl.timeline;
  tl.show();
  if (finer) {
    await need(index, ['tree']);
    await fp.refine();
  }
}

function renderRest(p, main) {
  const b = state.bundle;
  const hot = hotspotPanel(p);
  main.appendChild(hot.section);
  state.filtered.push(hot.table);
  state.linked.push(hot.table);
  // The server makes any routine's callers when asked; the --html file has what it carries.
  const inline = document.getElementById('sonde-data') !== null;
  const sandwich = callersPanel(p, inline ? null : (names) => need(state.index, names), p.report.rows,
                                { onSelect: select, tooltip });
  main.appendChild(sandwich.section);
  state.linked.push(sandwich);
  const shapes = tablePanel('shapes', 'GEMM and convolution shapes',
    'Per shape and call site; GFLOP/s achieved, % of the calibrated peak for the thread count the calls ran with.',
    p.shapes, [{ key: 'routine', title: 'Routine' }, { key: 'call_site', title: 'Call site' }, { key: 'm', title: 'm' },
               { key: 'n', title: 'n' }, { key: 'k', title: 'k' }, { key: 'dtype', title: 'dtype' }, { key: 'calls', title: 'Calls' },
               { key: 'time_s', title: 'Time s', digits: 6 }, { key: 'gflops', title: 'GFLOP/s', digits: 2 },
               { key: 'pct_peak', title: '% peak', digits: 1 }],
    'routine', 'time_s', 'No GEMM-like call was recorded.', 'routine_id');
  main.appendChild(shapes.section);
  const rl = panel('roofline', 'Roofline', 'Routines and GEMM shapes by arithmetic intensity and GFLOP/s, under the calibrated ceilings.');
  const plot = roofline(p.roofline, select);
  rl.body.appendChild(plot.element);
  main.appendChild(rl.section);
  const bd = panel('breakdown', 'Iteration breakdown', 'The training loop\'s time by phase: t_io, t_h2d, t_f, t_b, t_u, t_comm.');
  bd.body.appendChild(breakdown(p.metrics.breakdown));
  main.appendChild(bd.section);
  const cands = candidatesPanel(p);
  main.appendChild(cands.section);
  const lines = linesPanel(p);
  main.appendChild(lines.section);
  const kernels = tablePanel('kernels', 'GPU kernels',
    'Kernels from CUPTI, ranked as TAU does: (warps per instruction) × time where the metrics were recorded.',
    p.metrics.kernels, [{ key: 'kernel', title: 'Kernel' }, { key: 'launches', title: 'Launches' }, { key: 'time_s', title: 'Time s', digits: 4 },
                        { key: 'metric_launches', title: 'Measured' }, { key: 'warps_per_inst', title: 'Warps/inst', digits: 4 },
                        { key: 'inst_per_gld', title: 'Inst/gld', digits: 1 }, { key: 'sm_pct_peak', title: 'SM %', digits: 1 },
                        { key: 'memory_pct_peak', title: 'Mem %', digits: 1 }],
    'kernel', null, 'No GPU kernel was recorded (a CPU run, or CUPTI was not available).');
  main.appendChild(kernels.section);
  const extra = [];
  if (p.samples) { const s = samplesPanel(p); main.appendChild(s.section); extra.push(s.table); }
  if (p.ranks) {
    const r = ranksPanel(p.ranks, p.rank_routines ?? null);
    main.appendChild(r.section);
    extra.push(...r.tables);
    state.linked.push(r.bars);
  }
  for (const x of [shapes.table, plot, cands, lines.table, kernels.table, ...extra]) if (x) state.linked.push(x);
  for (const x of [shapes.table, lines.table, kernels.table, ...extra]) if (x) state.filtered.push(x);
  if (b.diff) {
    const d = diffPanel(b.diff);
    main.appendChild(d.section);
    state.linked.push(...d.tables);
    state.filtered.push(...d.tables);
  }
  applySearch();
  select(null);
}

function applySearch() {
  flame.setSearch(state.search);
  for (const t of state.filtered) t.setFilter(state.search);
}

function setMode(mode) {
  state.mode = mode;
  flame.setMode(mode);
  const t = state.filtered[0];
  if (t) { t.sortKey = mode === 'excl' ? 'excl_ms' : 'incl_ms'; t.desc = true; t.draw(); }
}

// The line that says what failed, above the panels (render() replaces the first one).
function fail(err) {
  let status = document.getElementById('status');
  if (!status) document.getElementById('panels').prepend(status = el('p', { id: 'status' }));
  status.textContent = 'sonde view: ' + err.message;
  status.className = 'error';
  console.error(err);
}

async function start() {
  try {
    const b = await loadBundle();
    if (b.format_version !== SUPPORTED_FORMAT)
      throw new Error(`data format ${b.format_version}, this viewer reads ${SUPPORTED_FORMAT}: use the sonde that made it`);
    if (!b.profiles || !b.profiles.length) throw new Error('the data holds no profile');
    state.bundle = b;
    const pick = document.getElementById('profile');
    pick.replaceChildren(...b.profiles.map((p, i) => el('option', { value: String(i) }, p.path)));
    pick.onchange = () => { document.body.dataset.ready = '0'; render(Number(pick.value)).then(() => { document.body.dataset.ready = '1'; }); };
    document.getElementById('search').addEventListener('input', (e) => { state.search = e.target.value; applySearch(); });
    for (const r of document.querySelectorAll('input[name=time]')) r.addEventListener('change', (e) => setMode(e.target.value));
    document.title = `sonde view: ${b.profiles.map((p) => p.path).join(' vs ')}`;
    await render(0);
    document.body.dataset.ready = '1';
  } catch (err) {
    fail(err);
  }
}

window.sonde = { flame, select, state };
start();
