// The ranks panel's bars, one row per rank as ParaProf draws them: each rank's busy time in its
// three parts (the per_rank rows of `sonde ranks`, from the rank_breakdown view), or one
// routine's inclusive time on each rank under the routine's min, mean and max over the ranks
// (rank_hotspots and rank_imbalance, the bundle's rank_routines). Only geometry happens here:
// every number drawn or shown is the bundle's.
import { el, empty, fmtNum, svgEl } from './dom.js';

const PARTS = [
  { key: 'compute_s', label: 'compute (outside communication calls)', colour: '#4e79a7' },
  { key: 'comm_s', label: 'communication', colour: '#e15759' },
  { key: 'setup_s', label: 'set-up (MPI_Init, MPI_Finalize, …)', colour: '#bab0ac' },
];
const ROUTINE_COLOUR = '#59a14f';
const STATS = [['min', 'min_s', '#2f6fb0'], ['mean', 'mean_s', '#000'], ['max', 'max_s', '#b00020']];

const W = 760, LABEL = 64, VALUE = 70, BAR = W - LABEL - VALUE, AXIS_H = 30;

// Rows stay readable up to 48 ranks; past that they shrink to a few pixels and the chart
// scrolls (the axis above it stays in view), so 1,024 ranks are 2,048 px to scroll, not 16k.
function rowHeight(n) { return n <= 48 ? 16 : n <= 128 ? 8 : n <= 512 ? 4 : 2; }

// "a nice" axis end and its ticks: 1, 2 or 5 times a power of ten.
function ticks(max) {
  if (!(max > 0)) return { end: 1, step: 0.25 };
  const raw = max / 5, p = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * p).find((s) => s >= raw);
  return { end: Math.ceil(max / step - 1e-9) * step, step };
}

function axis(end, step, marks) {
  const svg = svgEl('svg', { viewBox: `0 0 ${W} ${AXIS_H}`, class: 'rank-axis', 'aria-hidden': 'true' });
  const x = (v) => LABEL + (v / end) * BAR;
  for (let v = 0; v <= end + step / 2; v += step) {
    svg.append(svgEl('line', { x1: x(v), x2: x(v), y1: AXIS_H - 6, y2: AXIS_H, stroke: '#888' }));
    const t = svgEl('text', { x: x(v), y: AXIS_H - 9, 'text-anchor': 'middle' });
    t.textContent = `${Number(v.toPrecision(6))} s`;
    svg.append(t);
  }
  // min to the left of its line, max to the right, mean over it where it leaves them room
  const anchor = { min: 'end', mean: 'middle', max: 'start' }, shift = { min: -3, mean: 0, max: 3 };
  for (const [label, value, colour] of marks) {
    if (label === 'mean' && marks.some(([l, v]) => l !== 'mean' && Math.abs(x(v) - x(value)) < 36)) continue;
    const t = svgEl('text', { x: x(value) + shift[label], y: 10, 'text-anchor': anchor[label], fill: colour, class: 'stat-label' });
    t.textContent = label;
    svg.append(t);
  }
  return svg;
}

// rows: [{rank, parts: [{key, value, colour}], total, title}]; lines: [[label, value, colour]].
function chart(rows, end, lines, name) {
  const h = rowHeight(rows.length), gap = h >= 8 ? 2 : 0;
  const { end: axisEnd, step } = ticks(end);
  const x = (v) => (v / axisEnd) * BAR;
  const H = rows.length * (h + gap);
  const svg = svgEl('svg', { viewBox: `0 0 ${W} ${H}`, class: 'rank-bars', role: 'img', 'aria-label': name,
                             'data-axis-s': axisEnd, 'data-bar-px': BAR });
  const labelEvery = Math.ceil(12 / (h + gap));
  rows.forEach((r, i) => {
    const y = i * (h + gap);
    const g = svgEl('g', { class: 'rank-row', 'data-rank': r.rank, 'data-total': r.total ?? '' });
    let at = 0;
    for (const p of r.parts) {
      const w = x(p.value ?? 0);
      g.append(svgEl('rect', { x: LABEL + at, y, width: Math.max(0, w), height: h, fill: p.colour,
                               'data-key': p.key, 'data-value': p.value ?? '' }));
      at += w;
    }
    // the whole row answers hover, not only its bars: a rank of 0 s has a tooltip too
    g.append(svgEl('rect', { x: 0, y, width: W, height: h + gap, fill: 'transparent', class: 'hover' }));
    const title = svgEl('title');
    title.textContent = r.title;
    g.append(title);
    if (i % labelEvery === 0) {
      const t = svgEl('text', { x: LABEL - 6, y: Math.max(y + h / 2 + 4, 9), 'text-anchor': 'end' });
      t.textContent = `rank ${r.rank}`;
      g.append(t);
    }
    if (h >= 12) {
      const t = svgEl('text', { x: LABEL + at + 4, y: y + h - 3 });
      t.textContent = fmtNum(r.total);
      g.append(t);
    }
    svg.append(g);
  });
  for (const [label, value, colour] of lines)
    svg.append(svgEl('line', { class: 'stat', 'data-stat': label, 'data-value': value, x1: LABEL + x(value), x2: LABEL + x(value),
                               y1: 0, y2: H, stroke: colour, 'stroke-width': 1.5, 'stroke-dasharray': label === 'mean' ? '' : '4 3' }));
  return el('div', { class: 'rank-chart' }, el('div', { class: 'rank-axis-wrap' }, axis(axisEnd, step, lines)),
            el('div', { class: 'rank-scroll' }, svg));
}

function byValue(rows, sorted) { return sorted ? rows.slice().sort((a, b) => (b.total ?? 0) - (a.total ?? 0) || a.rank - b.rank) : rows; }

// perRank: `sonde ranks`' per_rank rows; routines: the rank_routines part (or null).
export function rankBars(perRank, routines, { onSelect }) {
  const wrap = el('div', { class: 'rank-bars-wrap', id: 'rank-bars' });
  const list = routines?.routines ?? [];
  const state = { mode: 'ranks', routine: list[0] ?? null, sorted: false };
  const radio = (value, text) => el('label', {}, el('input', { type: 'radio', name: 'rank-bars-mode', value, checked: value === state.mode,
                                                               onchange: () => { state.mode = value; draw(); } }), ' ', text);
  const pick = el('select', { id: 'rank-routine', 'aria-label': 'routine', onchange: () => {
    state.routine = list[Number(pick.value)];
    state.mode = 'routine';
    draw();
    onSelect(state.routine.routine, state.routine.routine_id);
  } }, list.map((r, i) => el('option', { value: String(i) }, `${r.routine} [${r.kind}], lost ${fmtNum(r.lost_s)} s`)));
  const tools = el('div', { class: 'rank-tools' },
    radio('ranks', 'busy time per rank'), radio('routine', 'one routine on each rank:'), pick,
    el('label', {}, el('input', { type: 'checkbox', onchange: (e) => { state.sorted = e.target.checked; draw(); } }), ' longest first'));
  if (!list.length) { pick.disabled = true; tools.querySelector('input[value=routine]').disabled = true; }
  const note = el('p', { class: 'note' });
  const legend = el('div', { class: 'kinds' });
  const body = el('div');
  wrap.append(tools, note, legend, body);

  function drawRanks() {
    note.textContent = 'Each rank\'s busy threads\' time (busy s, the 100 % of its percentages): inside communication calls, ' +
      'in set-up (MPI_Init, MPI_Finalize, …) and outside both, as `sonde ranks` lists it per rank (view rank_breakdown).';
    legend.replaceChildren(...PARTS.map((p) => el('span', {}, el('span', { class: 'swatch', style: `background:${p.colour}` }), ' ', p.label)));
    const rows = perRank.map((r) => ({
      rank: r.rank, total: r.busy_s,
      parts: PARTS.map((p) => ({ key: p.key, value: r[p.key], colour: p.colour })),
      title: `rank ${r.rank}${r.host ? ' on ' + r.host : ''}: busy ${fmtNum(r.busy_s)} s\n` +
        PARTS.map((p) => `${p.label}: ${fmtNum(r[p.key])} s`).join('\n') + `\ncomm ${fmtNum(r.comm_pct, 1)} % of busy`,
    }));
    body.replaceChildren(chart(byValue(rows, state.sorted), Math.max(0, ...perRank.map((r) => r.busy_s ?? 0)), [], 'busy time per rank'));
  }

  function drawRoutine() {
    const r = state.routine;
    const more = routines.routines_in_all > list.length ? ` The bundle carries the ${list.length} routines of ${routines.routines_in_all} that lose most.` : '';
    note.textContent = `${r.routine} [${r.kind}]: its inclusive time on each rank (rank_hotspots; a rank that never called it counts 0 s), ` +
      `under its min, mean and max over the ranks (rank_imbalance); lost = max − mean = ${fmtNum(r.lost_s)} s, slowest rank ${r.slowest_rank}.${more}`;
    const lines = STATS.map(([label, key, colour]) => [label, r[key], colour]);
    legend.replaceChildren(el('span', {}, el('span', { class: 'swatch', style: `background:${ROUTINE_COLOUR}` }), ' inclusive time'),
      ...lines.map(([label, v, colour]) => el('span', { class: 'stat-key', dataset: { stat: label } },
        el('span', { class: 'swatch', style: `background:${colour}` }), ` ${label} ${fmtNum(v)} s`)));
    const rows = routines.ranks.map((rank, i) => {
      const v = r.incl_s[i];
      return { rank, total: v ?? 0, parts: [{ key: 'incl_s', value: v, colour: ROUTINE_COLOUR }],
               title: `rank ${rank}: ${r.routine}\n${v === null ? 'never called (0 s)' : `${fmtNum(v)} s inclusive`}` +
                      (rank === r.slowest_rank ? '\nthe slowest rank' : '') };
    });
    body.replaceChildren(chart(byValue(rows, state.sorted), r.max_s ?? 0, lines, `${r.routine} on each rank`));
  }

  function draw() {
    for (const i of tools.querySelectorAll('input[name=rank-bars-mode]')) i.checked = i.value === state.mode;
    wrap.dataset.mode = state.mode;
    if (state.mode === 'routine' && state.routine) {
      pick.value = String(list.indexOf(state.routine));
      wrap.dataset.routine = state.routine.routine;
      drawRoutine();
    } else drawRanks();
  }

  if (!perRank || !perRank.length) { wrap.replaceChildren(empty('No rows.')); return { element: wrap, setSelected() {} }; }
  draw();
  return {
    element: wrap,
    // A routine chosen anywhere is drawn on each rank, where the bundle carries it: by its id
    // where the selection has one, else by name (the rank tables know no ids).
    setSelected(sel) {
      if (sel === null) return;
      const r = list.find((x) => (sel.id !== null ? x.routine_id === sel.id : x.routine === sel.name));
      if (!r || (state.mode === 'routine' && r === state.routine)) return;
      state.routine = r;
      state.mode = 'routine';
      draw();
    },
  };
}
