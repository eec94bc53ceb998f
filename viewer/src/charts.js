// The two plots: the roofline (points and ceilings as the analyzers give them) and the
// iteration breakdown as stacked bars. Only geometry happens here: every number is the bundle's.
import { select } from 'd3-selection';
import { scaleLog, scaleLinear, scaleOrdinal } from 'd3-scale';
import { axisBottom, axisLeft } from 'd3-axis';
import { el, empty, fmtNum } from './dom.js';

const PHASE_COLOURS = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948',
                       '#b07aa1', '#ff9da7', '#9c755f', '#bab0ac'];

// One colour per thread count: its ceilings and the points held against them.
const THREAD_COLOURS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#8c564b', '#17becf'];
const MIXED = '#8a8a8a';  // calls on several thread counts: a time-weighted peak, no line
const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;

// "cblas_sgemm, 3 shapes of dnnl_sgemm": the points held against one set of ceilings.
function heldBy(points) {
  const names = new Map();
  for (const p of points) {
    const k = `${p.kind}\u0000${p.name}`;
    names.set(k, { kind: p.kind, name: p.name, n: (names.get(k)?.n ?? 0) + 1 });
  }
  return [...names.values()].map((v) => (v.kind === 'shape' ? `${plural(v.n, 'shape')} of ${v.name}` : v.name)).join(', ');
}

export function roofline(data, onSelect) {
  const ceilings = data.ceilings || [];
  const colour = new Map(ceilings.map((c, i) => [c.threads, THREAD_COLOURS[i % THREAD_COLOURS.length]]));
  const colourOf = (threads) => colour.get(threads) ?? MIXED;
  const point = (r, kind, label) => ({ name: r.routine, id: r.routine_id ?? null, label, x: r.intensity, y: r.gflops, pct: r.pct_peak,
                                       kind, threads: r.threads ?? null, dtype: r.dtype || '', peak: r.peak_gflops, mem: r.mem_bw_gbs });
  const routines = (data.routines || []).filter((r) => r.intensity > 0 && r.gflops > 0).map((r) => point(r, 'routine', r.routine));
  const shapes = (data.shapes || []).filter((s) => s.intensity > 0 && s.gflops > 0)
    .map((s) => point(s, 'shape', `${s.routine} ${s.m}×${s.n}×${s.k} ${s.dtype} @ ${s.call_site}`));
  const points = routines.concat(shapes);
  const wrap = el('div', { class: 'roofline' });
  const blas = data.blas_threads === null ? 'unknown' : data.blas_threads;
  const described = (c) => `${plural(c.threads, 'thread')}: ` +
    [...c.compute.map((k) => `${k.dtype} ${fmtNum(k.gflops, 1)} GFLOP/s`), ...(c.memory_gbs ? [`memory ${fmtNum(c.memory_gbs, 1)} GB/s`] : [])].join(', ');
  const calibrated = ceilings.filter((c) => c.compute.length || c.memory_gbs);
  wrap.appendChild(el('p', { class: 'note' }, calibrated.length
    ? `Ceilings calibrated for the thread counts the points ran with (BLAS threads: ${blas}). ` + calibrated.map(described).join('; ')
    : `No calibrated peaks for the thread counts the points ran with (BLAS threads: ${blas}): run \`sonde calibrate\` before profiling for the ceilings.`));
  if (!points.length) { wrap.appendChild(empty('No routine or GEMM shape with a cost model (FLOPs and bytes) was recorded.')); return { element: wrap, setSelected() {} }; }

  const W = 720, H = 360, m = { l: 60, r: 20, t: 12, b: 40 };
  const peaks = ceilings.flatMap((c) => c.compute.map((k) => k.gflops));
  const xs = points.map((p) => p.x), ys = points.map((p) => p.y).concat(peaks);
  const x = scaleLog().domain([Math.min(...xs) / 2, Math.max(...xs) * 2]).range([m.l, W - m.r]).nice();
  const y = scaleLog().domain([Math.min(...ys) / 2, Math.max(...ys) * 2]).range([H - m.b, m.t]).nice();
  const svg = select(wrap).append('svg').attr('viewBox', `0 0 ${W} ${H}`).attr('class', 'plot')
    .attr('role', 'img').attr('aria-label', 'roofline');
  svg.append('g').attr('transform', `translate(0,${H - m.b})`).call(axisBottom(x).ticks(6, '~g'));
  svg.append('g').attr('transform', `translate(${m.l},0)`).call(axisLeft(y).ticks(6, '~g'));
  svg.append('text').attr('x', (W + m.l) / 2).attr('y', H - 6).attr('text-anchor', 'middle').text('arithmetic intensity (FLOP/byte)');
  svg.append('text').attr('transform', `translate(14,${(H - m.b) / 2}) rotate(-90)`).attr('text-anchor', 'middle').text('GFLOP/s');
  const [x0, x1] = x.domain();
  // Each peak's label above its line, pushed down below the one above it where they would meet.
  const labelY = new Map();
  let prev = -Infinity;
  for (const k of ceilings.flatMap((c) => c.compute).sort((a, b) => b.gflops - a.gflops)) {
    prev = Math.max(y(k.gflops) - 4, prev + 12);
    labelY.set(k, prev);
  }
  for (const c of ceilings) {
    const roof = svg.append('g').attr('class', 'ceilings').attr('data-threads', c.threads).attr('stroke', colourOf(c.threads));
    for (const k of c.compute) {
      // the memory roof meets this ceiling where intensity × bandwidth = peak
      const start = c.memory_gbs ? Math.max(x0, k.gflops / c.memory_gbs) : x0;
      roof.append('line').attr('x1', x(start)).attr('x2', x(x1)).attr('y1', y(k.gflops)).attr('y2', y(k.gflops)).attr('class', 'ceiling');
      roof.append('text').attr('x', x(x1) - 4).attr('y', labelY.get(k)).attr('text-anchor', 'end').attr('fill', colourOf(c.threads))
        .attr('stroke', 'none').text(`${k.dtype} peak ${fmtNum(k.gflops, 1)}, ${plural(c.threads, 'thread')}`);
    }
    if (c.memory_gbs) {
      const top = c.compute.length ? Math.max(...c.compute.map((k) => k.gflops)) : y.domain()[1];
      const end = Math.min(x1, top / c.memory_gbs);
      roof.append('line').attr('x1', x(x0)).attr('y1', y(Math.max(y.domain()[0], x0 * c.memory_gbs)))
        .attr('x2', x(end)).attr('y2', y(end * c.memory_gbs)).attr('class', 'ceiling memory');
    }
  }
  const dots = svg.append('g').selectAll('path').data(points).join('path')
    .attr('class', (p) => 'point ' + p.kind)
    .attr('d', (p) => p.kind === 'shape' ? 'M-4,-4h8v8h-8z' : 'M0,-5a5,5 0 1,0 0.01,0z')
    .attr('transform', (p) => `translate(${x(p.x)},${y(p.y)})`)
    .attr('fill', (p) => colourOf(p.threads))
    .attr('data-name', (p) => p.name)
    .attr('data-id', (p) => p.id ?? '')
    .attr('data-threads', (p) => p.threads ?? '')
    .on('click', (e, p) => onSelect(p.name, p.id));
  const against = (p) => (p.threads === null ? 'held against the peaks of its calls\' thread counts, time-weighted'
    : `held against the ${p.threads}-thread ceilings`) +
    (p.peak ? `: ${p.dtype} ${fmtNum(p.peak, 1)} GFLOP/s` : '') + (p.mem ? `, memory ${fmtNum(p.mem, 1)} GB/s` : '');
  dots.append('title').text((p) => `${p.label}\n${fmtNum(p.x, 2)} FLOP/byte, ${fmtNum(p.y, 2)} GFLOP/s` +
                                   (p.pct !== null && p.pct !== undefined ? `, ${fmtNum(p.pct, 1)} % of peak` : '') + `\n${against(p)}`);
  // Which points each set of ceilings is for, in its colour.
  const sets = [...ceilings.map((c) => c.threads), null];
  const legend = el('ul', { class: 'legend roofline-legend' }, el('li', {}, el('span', { class: 'dot routine' }), ' routines  ',
                    el('span', { class: 'dot shape' }), ' GEMM shapes (per call site); solid lines: GEMM peaks, dashed: memory'));
  for (const t of sets) {
    const held = points.filter((p) => p.threads === t);
    if (!held.length) continue;
    legend.appendChild(el('li', { dataset: { threads: t ?? '' } }, el('span', { class: 'swatch', style: `background:${colourOf(t)}` }), ' ',
      t === null ? 'several thread counts (no line; each point held against its calls\' peaks, time-weighted): '
                 : `ran on ${plural(t, 'thread')}, held against the ${t}-thread ceilings (lines in this colour): `, heldBy(held)));
  }
  wrap.appendChild(legend);
  // by routine id where both have one (two routines may share a name), else by name
  const picks = (p, sel) => sel !== null && (sel.id !== null && p.id !== null ? p.id === sel.id : p.name === sel.name);
  return { element: wrap, setSelected(sel) { dots.classed('selected', (p) => picks(p, sel)); } };
}

export function breakdown(b) {
  const wrap = el('div', { class: 'breakdown' });
  if (!b || !b.found) {
    wrap.appendChild(empty(`No training loop found: ${b ? b.reason : 'no breakdown in this profile'}`));
    return wrap;
  }
  wrap.appendChild(el('p', { class: 'note' },
    `${b.iterations} iterations (counted from ${b.iterations_from}) of the loop in ${b.loop}; ` +
    `body ${b.body}; ${b.threads} training thread(s). % thread: of their ${fmtNum(b.threads_s)} s.`));
  const colour = scaleOrdinal(PHASE_COLOURS);
  const bars = [
    { title: 'one iteration (ms)', key: 'ms_per_iter', digits: 3 },
    { title: 'whole run (s)', key: 'time_s', digits: 3 },
  ];
  // device time of the work launched in each phase, beside the host's (metrics.md, "On the GPU")
  if (b.gpu) bars.push({ title: 'one iteration on the GPU (ms of device time launched in each phase)', key: 'gpu_ms_per_iter', digits: 3 });
  for (const bar of bars) {
    const rows = b.phases.filter((r) => r[bar.key] > 0);
    const sum = rows.reduce((a, r) => a + r[bar.key], 0);
    const W = 720, H = 30;
    const x = scaleLinear().domain([0, sum || 1]).range([0, W]);
    const svg = select(el('div')).append('svg').attr('viewBox', `0 0 ${W} ${H}`).attr('class', 'stack')
      .attr('role', 'img').attr('aria-label', bar.title);
    let at = 0;
    for (const r of rows) {
      const g = svg.append('g').attr('class', 'segment').attr('data-phase', r.phase);
      g.append('rect').attr('x', x(at)).attr('width', Math.max(0, x(r[bar.key]) - 0.5)).attr('y', 0).attr('height', H)
        .attr('fill', colour(r.phase));
      g.append('title').text(`${r.phase}: ${r.what}\n${fmtNum(r[bar.key], bar.digits)} ${bar.key === 'time_s' ? 's' : 'ms'}` +
                             (bar.key === 'gpu_ms_per_iter' ? ' on the GPU'
                               : r.pct_thread !== null ? `, ${fmtNum(r.pct_thread, 1)} % of the training threads' time` : ''));
      if (x(r[bar.key]) > 50) g.append('text').attr('x', x(at) + 4).attr('y', H / 2 + 4).text(r.phase);
      at += r[bar.key];
    }
    wrap.appendChild(el('h3', {}, bar.title));
    wrap.appendChild(svg.node());
  }
  const gpuHeads = b.gpu ? ['gpu s', 'gpu ms/iter'] : [];
  const gpuCells = (r) => (b.gpu ? [el('td', { class: 'num' }, fmtNum(r.gpu_s)), el('td', { class: 'num' }, fmtNum(r.gpu_ms_per_iter))] : []);
  const legend = el('table', { class: 'data legend-table' },
    el('thead', {}, el('tr', {}, ['', 'phase', 'what', 'time s', '% thread', 'ms/iter', ...gpuHeads, 'from'].map((t) => el('th', {}, t)))),
    el('tbody', {}, b.phases.map((r) => el('tr', {},
      el('td', {}, el('span', { class: 'swatch', style: `background:${colour(r.phase)}` })),
      el('td', {}, r.phase), el('td', {}, r.what), el('td', { class: 'num' }, fmtNum(r.time_s)),
      el('td', { class: 'num' }, fmtNum(r.pct_thread, 1)), el('td', { class: 'num' }, fmtNum(r.ms_per_iter)),
      ...gpuCells(r), el('td', {}, r.routines || '')))));
  wrap.appendChild(legend);
  if (b.gpu_overlap && b.gpu_overlap.length) {
    wrap.appendChild(el('h3', {}, 'GPU communication/compute overlap per device (unions of intervals)'));
    const heads = ['pid', 'device', 'comm s', 'compute s', 'overlap s', '% comm hidden', 'exposed ms/iter', 'overlap ms/iter'];
    const keys = ['pid', 'device', 'comm_s', 'compute_s', 'overlap_s', 'overlap_pct', 'exposed_ms_per_iter', 'overlap_ms_per_iter'];
    wrap.appendChild(el('table', { class: 'data overlap-table' },
      el('thead', {}, el('tr', {}, heads.map((t) => el('th', {}, t)))),
      el('tbody', {}, b.gpu_overlap.map((o) => el('tr', {}, keys.map((k) =>
        el('td', { class: 'num' }, k === 'pid' || k === 'device' ? String(o[k] ?? '-') : fmtNum(o[k], k === 'overlap_pct' ? 1 : 3))))))));
  }
  for (const n of b.notes || []) wrap.appendChild(el('p', { class: 'note' }, n));
  return wrap;
}
