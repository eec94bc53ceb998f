// The two plots: the roofline (points and ceilings as the analyzers give them) and the
// iteration breakdown as stacked bars. Only geometry happens here: every number is the bundle's.
import { select } from 'd3-selection';
import { scaleLog, scaleLinear, scaleOrdinal } from 'd3-scale';
import { axisBottom, axisLeft } from 'd3-axis';
import { el, empty, fmtNum } from './dom.js';

const PHASE_COLOURS = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948',
                       '#b07aa1', '#ff9da7', '#9c755f', '#bab0ac'];

export function roofline(data, onSelect) {
  const routines = (data.routines || []).filter((r) => r.intensity > 0 && r.gflops > 0)
    .map((r) => ({ name: r.routine, id: r.routine_id ?? null, label: r.routine, x: r.intensity, y: r.gflops, pct: r.pct_peak, kind: 'routine' }));
  const shapes = (data.shapes || []).filter((s) => s.intensity > 0 && s.gflops > 0)
    .map((s) => ({ name: s.routine, id: s.routine_id ?? null, label: `${s.routine} ${s.m}×${s.n}×${s.k} ${s.dtype} @ ${s.call_site}`,
                   x: s.intensity, y: s.gflops, pct: s.pct_peak, kind: 'shape' }));
  const points = routines.concat(shapes);
  const wrap = el('div', { class: 'roofline' });
  const threads = data.threads === null ? 'unknown' : data.threads;
  const ceilings = data.compute || [];
  wrap.appendChild(el('p', { class: 'note' },
    ceilings.length || data.memory_gbs
      ? `Ceilings calibrated for ${threads} BLAS thread${threads === 1 ? '' : 's'}: ` +
        ceilings.map((c) => `${c.dtype} ${fmtNum(c.gflops, 1)} GFLOP/s`).join(', ') +
        (data.memory_gbs ? `${ceilings.length ? ', ' : ''}memory ${fmtNum(data.memory_gbs, 1)} GB/s` : '')
      : `No calibrated peaks for ${threads} BLAS thread(s): run \`sonde calibrate\` before profiling for the ceilings.`));
  if (!points.length) { wrap.appendChild(empty('No routine or GEMM shape with a cost model (FLOPs and bytes) was recorded.')); return { element: wrap, setSelected() {} }; }

  const W = 720, H = 360, m = { l: 60, r: 20, t: 12, b: 40 };
  const xs = points.map((p) => p.x), ys = points.map((p) => p.y).concat(ceilings.map((c) => c.gflops));
  const x = scaleLog().domain([Math.min(...xs) / 2, Math.max(...xs) * 2]).range([m.l, W - m.r]).nice();
  const y = scaleLog().domain([Math.min(...ys) / 2, Math.max(...ys) * 2]).range([H - m.b, m.t]).nice();
  const svg = select(wrap).append('svg').attr('viewBox', `0 0 ${W} ${H}`).attr('class', 'plot')
    .attr('role', 'img').attr('aria-label', 'roofline');
  svg.append('g').attr('transform', `translate(0,${H - m.b})`).call(axisBottom(x).ticks(6, '~g'));
  svg.append('g').attr('transform', `translate(${m.l},0)`).call(axisLeft(y).ticks(6, '~g'));
  svg.append('text').attr('x', (W + m.l) / 2).attr('y', H - 6).attr('text-anchor', 'middle').text('arithmetic intensity (FLOP/byte)');
  svg.append('text').attr('transform', `translate(14,${(H - m.b) / 2}) rotate(-90)`).attr('text-anchor', 'middle').text('GFLOP/s');
  const [x0, x1] = x.domain();
  const roof = svg.append('g').attr('class', 'ceilings');
  for (const c of ceilings) {
    // the memory roof meets this ceiling where intensity × bandwidth = peak
    const start = data.memory_gbs ? Math.max(x0, c.gflops / data.memory_gbs) : x0;
    roof.append('line').attr('x1', x(start)).attr('x2', x(x1)).attr('y1', y(c.gflops)).attr('y2', y(c.gflops)).attr('class', 'ceiling');
    roof.append('text').attr('x', x(x1) - 4).attr('y', y(c.gflops) - 4).attr('text-anchor', 'end').text(`${c.dtype} peak ${fmtNum(c.gflops, 1)}`);
  }
  if (data.memory_gbs) {
    const top = ceilings.length ? Math.max(...ceilings.map((c) => c.gflops)) : y.domain()[1];
    const end = Math.min(x1, top / data.memory_gbs);
    roof.append('line').attr('x1', x(x0)).attr('y1', y(Math.max(y.domain()[0], x0 * data.memory_gbs)))
      .attr('x2', x(end)).attr('y2', y(end * data.memory_gbs)).attr('class', 'ceiling memory');
  }
  const dots = svg.append('g').selectAll('path').data(points).join('path')
    .attr('class', (p) => 'point ' + p.kind)
    .attr('d', (p) => p.kind === 'shape' ? 'M-4,-4h8v8h-8z' : 'M0,-5a5,5 0 1,0 0.01,0z')
    .attr('transform', (p) => `translate(${x(p.x)},${y(p.y)})`)
    .attr('data-name', (p) => p.name)
    .attr('data-id', (p) => p.id ?? '')
    .on('click', (e, p) => onSelect(p.name, p.id));
  dots.append('title').text((p) => `${p.label}\n${fmtNum(p.x, 2)} FLOP/byte, ${fmtNum(p.y, 2)} GFLOP/s` +
                                   (p.pct !== null && p.pct !== undefined ? `, ${fmtNum(p.pct, 1)} % of peak` : ''));
  wrap.appendChild(el('p', { class: 'legend' }, el('span', { class: 'dot routine' }), ' routines  ',
                      el('span', { class: 'dot shape' }), ' GEMM shapes (per call site)'));
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
                             (r.pct_thread !== null ? `, ${fmtNum(r.pct_thread, 1)} % of the training threads' time` : ''));
      if (x(r[bar.key]) > 50) g.append('text').attr('x', x(at) + 4).attr('y', H / 2 + 4).text(r.phase);
      at += r[bar.key];
    }
    wrap.appendChild(el('h3', {}, bar.title));
    wrap.appendChild(svg.node());
  }
  const legend = el('table', { class: 'data legend-table' },
    el('thead', {}, el('tr', {}, ['', 'phase', 'what', 'time s', '% thread', 'ms/iter', 'from'].map((t) => el('th', {}, t)))),
    el('tbody', {}, b.phases.map((r) => el('tr', {},
      el('td', {}, el('span', { class: 'swatch', style: `background:${colour(r.phase)}` })),
      el('td', {}, r.phase), el('td', {}, r.what), el('td', { class: 'num' }, fmtNum(r.time_s)),
      el('td', { class: 'num' }, fmtNum(r.pct_thread, 1)), el('td', { class: 'num' }, fmtNum(r.ms_per_iter)),
      el('td', {}, r.routines || '')))));
  wrap.appendChild(legend);
  for (const n of b.notes || []) wrap.appendChild(el('p', { class: 'note' }, n));
  return wrap;
}
