// The timeline panel: one lane per CPU thread (its calls nested by depth, a flame chart over
// time) and one per GPU stream, on one time axis, drawn on a canvas. Wheel zooms, drag pans,
// shift-drag selects a span whose time per routine is listed below. A million events stay fast:
// each row's visible events are found by binary search, and events narrower than a pixel are
// merged into one block per pixel run, skipping to the next pixel's events by binary search.
import { scaleLinear } from 'd3-scale';
import { el, empty, fmtNum, panel } from './dom.js';
import { DataTable } from './table.js';
import { fitText, kindColour } from './flame.js';
import { TimelineData } from './timeline_data.js';

const ROW = 16, GAP = 6, GUTTER = 180, AXIS = 22;
const FONT = '11px system-ui, sans-serif';

// Nanoseconds as the axis and the tooltip say them.
export function fmtNs(ns) {
  const a = Math.abs(ns);
  if (a >= 1e9) return `${(ns / 1e9).toFixed(3)} s`;
  if (a >= 1e6) return `${(ns / 1e6).toFixed(3)} ms`;
  if (a >= 1e3) return `${(ns / 1e3).toFixed(3)} µs`;
  return `${Math.round(ns)} ns`;
}

function laneLabel(l) {
  if (l.kind === 'stream') return `GPU ${l.device} stream ${l.stream} (pid ${l.pid})`;
  return `pid ${l.pid} thread ${l.seq} (tid ${l.tid})${l.name ? ' ' + l.name : ''}`;
}

export class Timeline {
  constructor(part, { onSelect, tooltip }) {
    this.d = new TimelineData(part);
    this.origin = BigInt(part.origin_ns);
    this.onSelect = onSelect;
    this.tooltip = tooltip;
    this.t0 = 0;
    this.t1 = Math.max(part.end_ns, 1);
    this.span = null;  // [a, b] ns after the origin, integers
    this.selectedFrames = null;
    this.axis = el('canvas', { id: 'timeline-axis', class: 'timeline-axis' });
    this.canvas = el('canvas', { id: 'timeline', class: 'timeline', role: 'img', 'aria-label': 'timeline' });
    this.space = el('div', { class: 'flame-space' }, this.canvas);
    this.scroller = el('div', { class: 'timeline-wrap' }, this.space);
    this.event = el('p', { id: 'timeline-event', class: 'note' });
    this.spanHead = el('p', { id: 'timeline-span', class: 'routine' });
    this.spanBody = el('div', { id: 'timeline-span-content' });
    // Lane tops: lane l's row d is at laneTop[l] + d * ROW.
    this.laneTop = [];
    let y = 0;
    for (const l of this.d.lanes) { this.laneTop.push(y); y += Math.max(1, l.depths) * ROW + GAP; }
    this.contentHeight = y;
    this.scroller.addEventListener('scroll', () => this.redraw());
    this.canvas.addEventListener('wheel', (e) => this.wheel(e), { passive: false });
    this.canvas.addEventListener('mousedown', (e) => this.down(e));
    this.canvas.addEventListener('mousemove', (e) => { if (!this.drag) this.hover(e); });
    this.canvas.addEventListener('mouseleave', () => { this.tooltip.hidden = true; });
    window.addEventListener('mousemove', (e) => this.move(e));
    window.addEventListener('mouseup', (e) => this.up(e));
    window.addEventListener('resize', () => this.redraw());
  }

  get width() { return Math.max(400, this.scroller.clientWidth || 1000); }
  x(t) { return GUTTER + ((t - this.t0) / (this.t1 - this.t0)) * (this.width - GUTTER); }
  t(x) { return this.t0 + ((x - GUTTER) / (this.width - GUTTER)) * (this.t1 - this.t0); }
  abs(ns) { return (this.origin + BigInt(Math.round(ns))).toString(); }

  // The visible window, kept within the recorded time and above 100 ns.
  setView(t0, t1) {
    const end = Math.max(this.d.part.end_ns, 1);
    let w = Math.min(Math.max(t1 - t0, 100), end);
    t0 = Math.min(Math.max(t0, 0), end - w);
    this.t0 = t0;
    this.t1 = t0 + w;
    this.redraw();
  }

  redraw() {
    if (this.pending) return;
    this.pending = requestAnimationFrame(() => { this.pending = 0; this.draw(); });
  }

  // Draws the rows in view; returns the milliseconds it took (the benchmark reads it).
  draw() {
    const begin = performance.now();
    const d = this.d, width = this.width;
    this.space.style.height = this.contentHeight + 'px';  // first: the scroller's height follows it
    const viewH = Math.min(this.contentHeight, this.scroller.clientHeight || 600);
    const top = Math.max(0, Math.min(this.scroller.scrollTop, this.contentHeight - viewH));
    this.top = top;
    const dpr = window.devicePixelRatio || 1;
    for (const [c, h] of [[this.canvas, viewH], [this.axis, AXIS]]) {
      c.width = Math.round(width * dpr); c.height = Math.round(h * dpr);
      c.style.width = width + 'px'; c.style.height = h + 'px';
    }
    const ctx = this.canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, -top * dpr);
    ctx.font = FONT;
    ctx.textBaseline = 'middle';
    const fills = new Map(), labels = [], outlined = [];
    const rect = (colour, x0, y, w) => {
      let r = fills.get(colour);
      if (!r) fills.set(colour, r = []);
      r.push(x0, y, w);
    };
    const nsPerPx = (this.t1 - this.t0) / (width - GUTTER);
    let rects = 0, merged = 0;
    for (let l = 0; l < d.lanes.length; ++l) {
      const depths = Math.max(1, d.lanes[l].depths);
      if (this.laneTop[l] > top + viewH || this.laneTop[l] + depths * ROW < top) continue;
      for (let dep = 0; dep < depths; ++dep) {
        const y = this.laneTop[l] + dep * ROW;
        if (y + ROW < top || y > top + viewH) continue;
        const r = d.rowOf[l] + dep;
        const [from, to] = d.window(r, this.t0, this.t1);
        let k = from;
        while (k < to) {
          const i = d.ids[k];
          const x0 = Math.max(GUTTER, this.x(d.start[i]));
          let x1 = Math.min(width, this.x(d.end[i]));
          if (x1 <= GUTTER) { k += 1; continue; }
          if (x1 - x0 >= 1) {  // wide enough to be itself
            rect(kindColour(d.kind(i)), x0, y, x1 - x0 > 3 ? x1 - x0 - 1 : x1 - x0);  // a gap between neighbours
            if (this.selectedFrames && this.selectedFrames[d.frame[i]]) outlined.push(x0, y, x1 - x0);
            if (x1 - x0 > 40) labels.push(i, x0, y, x1 - x0);
            rects += 1;
            k += 1;
            continue;
          }
          // A run of narrow events: one block to where they stop being within a pixel of it.
          const bx0 = Math.floor(x0);
          let bx1 = Math.max(x1, bx0 + 1), n = 0;
          while (k < to) {
            const next = d.skipTo(r, k + 1, this.t(Math.floor(bx1) + 1));
            const last = d.ids[Math.max(next - 1, k)];
            n += next - k;
            bx1 = Math.max(bx1, Math.min(width, this.x(d.end[last])));
            k = next;
            if (k >= to) break;
            const j = d.ids[k];
            const nx0 = this.x(d.start[j]);
            if (nx0 > bx1 + 1 || this.x(d.end[j]) - nx0 >= 1) break;
            bx1 = Math.max(bx1, nx0 + 1);
          }
          rect(kindColour(d.kind(i)), bx0, y, Math.max(bx1 - bx0, 1));
          rects += 1;
          merged += n;
        }
      }
    }
    for (const [colour, r] of fills) {
      ctx.fillStyle = colour;
      ctx.beginPath();
      for (let k = 0; k < r.length; k += 3) ctx.rect(r[k], r[k + 1], r[k + 2], ROW - 1);
      ctx.fill();
    }
    ctx.strokeStyle = '#000';
    ctx.lineWidth = 2;
    for (let k = 0; k < outlined.length; k += 3)
      ctx.strokeRect(outlined[k] + 1, outlined[k + 1] + 1, Math.max(outlined[k + 2] - 2.5, 0.5), ROW - 3);
    ctx.fillStyle = '#111';
    for (let k = 0; k < labels.length; k += 4) {
      const i = labels[k];
      const text = fitText(`${d.name(i)} (${fmtNs(d.dur[i])})`, labels[k + 3] - 6, ctx);
      if (text) ctx.fillText(text, labels[k + 1] + 3, labels[k + 2] + ROW / 2);
    }
    if (this.span) {
      const [a, b] = this.span;
      const xa = Math.max(GUTTER, this.x(a)), xb = Math.min(width, this.x(b));
      if (xb > xa) {
        ctx.fillStyle = 'rgba(40, 110, 220, 0.15)';
        ctx.fillRect(xa, top, xb - xa, viewH);
        ctx.fillStyle = 'rgba(40, 110, 220, 0.9)';
        ctx.fillRect(xa, top, 1, viewH);
        ctx.fillRect(xb - 1, top, 1, viewH);
      }
    }
    // The lanes' names in the gutter, over anything drawn there.
    ctx.fillStyle = '#fff';
    ctx.fillRect(0, top, GUTTER - 2, viewH);
    ctx.fillStyle = '#333';
    for (let l = 0; l < d.lanes.length; ++l) {
      const y = this.laneTop[l];
      ctx.fillStyle = '#d8dee4';
      ctx.fillRect(0, y + Math.max(1, d.lanes[l].depths) * ROW + GAP / 2 - 0.5, width, 1);
      ctx.fillStyle = '#333';
      const text = fitText(laneLabel(d.lanes[l]), GUTTER - 8, ctx);
      if (text) ctx.fillText(text, 4, Math.max(y, top) + ROW / 2);
    }
    this.drawAxis(width, dpr);
    const ms = performance.now() - begin;
    Object.assign(this.canvas.dataset, { lanes: String(d.lanes.length), rects: String(rects), merged: String(merged),
                                         t0: String(this.t0), t1: String(this.t1), drawMs: ms.toFixed(1) });
    return ms;
  }

  drawAxis(width, dpr) {
    const ctx = this.axis.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.font = FONT;
    ctx.textBaseline = 'middle';
    ctx.fillStyle = '#5b6570';
    ctx.fillText(`+${fmtNs(this.t0)} … +${fmtNs(this.t1)}`, 4, AXIS / 2);
    const scale = scaleLinear().domain([this.t0, this.t1]).range([GUTTER, width]);
    for (const tick of scale.ticks(Math.max(2, Math.floor((width - GUTTER) / 110)))) {
      const x = scale(tick);
      ctx.fillRect(x, AXIS - 6, 1, 6);
      ctx.fillText(fmtNs(tick).replace(/(\.\d*?)0+ /, '$1 ').replace('. ', ' '), x + 3, AXIS / 2 - 2);
    }
  }

  // The row and instant under the mouse: [lane, row, t] or null over the gutter or a gap.
  place(e) {
    const r = this.canvas.getBoundingClientRect();
    const mx = e.clientX - r.left, my = e.clientY - r.top + this.top;
    if (mx < GUTTER) return null;
    for (let l = 0; l < this.d.lanes.length; ++l) {
      const dep = Math.floor((my - this.laneTop[l]) / ROW);
      if (dep >= 0 && dep < Math.max(1, this.d.lanes[l].depths)) return [l, this.d.rowOf[l] + dep, this.t(mx)];
    }
    return null;
  }

  eventAt(e) {
    const p = this.place(e);
    if (!p) return -1;
    return this.d.at(p[1], p[2], (this.t1 - this.t0) / (this.width - GUTTER));
  }

  hover(e) {
    const i = this.eventAt(e), tip = this.tooltip, d = this.d;
    if (i < 0) { tip.hidden = true; return; }
    const where = d.frames.where[d.frame[i]];
    tip.replaceChildren(
      el('strong', {}, d.name(i)), el('br'),
      `${d.kind(i)}${where ? ' · ' + where : ''} · ${laneLabel(d.lanes[d.lane[i]])}`, el('br'),
      `start +${fmtNs(d.start[i])} · duration ${fmtNs(d.dur[i])} (${fmtNum(d.dur[i])} ns)`, el('br'),
      d.lanes[d.lane[i]].kind === 'stream' ? 'launched from: ' : 'path: ', d.path(i).join(' › ') || '(not seen)');
    Object.assign(tip.dataset, { name: d.name(i), startNs: this.abs(d.start[i]), durNs: String(d.dur[i]) });
    tip.hidden = false;
    tip.style.left = Math.min(e.clientX + 12, window.innerWidth - 320) + 'px';
    tip.style.top = e.clientY + 14 + 'px';
  }

  wheel(e) {
    e.preventDefault();
    const w = this.t1 - this.t0;
    if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) {
      const dx = e.shiftKey ? e.deltaY : e.deltaX;
      this.setView(this.t0 + (dx / (this.width - GUTTER)) * w, this.t1 + (dx / (this.width - GUTTER)) * w);
      return;
    }
    const at = this.t(e.clientX - this.canvas.getBoundingClientRect().left);
    const f = Math.exp(e.deltaY * 0.002);
    this.setView(at - (at - this.t0) * f, at + (this.t1 - at) * f);
  }

  down(e) {
    if (e.button !== 0) return;
    e.preventDefault();
    this.drag = { x: e.clientX, t0: this.t0, t1: this.t1, select: e.shiftKey, at: this.t(e.clientX - this.canvas.getBoundingClientRect().left), moved: false };
  }

  move(e) {
    const g = this.drag;
    if (!g) return;
    if (Math.abs(e.clientX - g.x) > 3) g.moved = true;
    if (!g.moved) return;
    if (g.select) {
      const t = this.t(e.clientX - this.canvas.getBoundingClientRect().left);
      const end = this.d.part.end_ns;
      this.span = [Math.round(Math.max(0, Math.min(g.at, t))), Math.round(Math.min(end, Math.max(g.at, t)))];
      this.redraw();
    } else {
      const dt = ((e.clientX - g.x) / (this.width - GUTTER)) * (g.t1 - g.t0);
      this.setView(g.t0 - dt, g.t1 - dt);
    }
  }

  up(e) {
    const g = this.drag;
    if (!g) return;
    this.drag = null;
    if (g.moved && g.select && this.span) this.showSpan();
    else if (!g.moved) this.click(e);
  }

  click(e) {
    const i = this.eventAt(e), d = this.d;
    if (i < 0) return;
    this.event.textContent = `${d.name(i)}: start +${fmtNs(d.start[i])}, duration ${fmtNs(d.dur[i])} ` +
      `(${fmtNum(d.dur[i])} ns) on ${laneLabel(d.lanes[d.lane[i]])}; path: ${d.path(i).join(' › ') || '(not seen)'}`;
    Object.assign(this.event.dataset, { name: d.name(i), startNs: this.abs(d.start[i]), durNs: String(d.dur[i]) });
    this.onSelect(d.name(i), d.routineId(i) ?? null);
  }

  // The span's time per routine: calls' exclusive time and GPU records' device time within it.
  showSpan() {
    const [a, b] = this.span;
    const rows = this.d.aggregate(a, b);
    this.spanHead.textContent = `Span +${fmtNs(a)} to +${fmtNs(b)} (${fmtNs(b - a)}): time per routine within it, ` +
      'exclusive, clipped to the span, summed over the lanes';
    Object.assign(this.spanHead.dataset, { aNs: this.abs(a), bNs: this.abs(b) });
    if (!rows.length) { this.spanBody.replaceChildren(empty('No event in the span.')); return; }
    const table = new DataTable({
      id: 'timeline-span-table', rows, nameKey: 'name', idKey: 'routine_id', sortKey: 'excl_ns', onSelect: this.onSelect,
      columns: [{ key: 'name', title: 'Name' }, { key: 'kind', title: 'Kind' },
                { key: 'excl_ms', title: 'Exclusive ms in span', digits: 6 }, { key: 'events', title: 'Events' },
                { key: 'where', title: 'Where' }],
    });
    this.spanBody.replaceChildren(table.element);
    this.spanTable = table;
  }

  setSelected(sel) {
    const f = this.d.frames;
    this.selectedFrames = sel === null ? null : f.name.map((name, k) =>
      (sel.id !== null && f.routine_id[k] !== null ? f.routine_id[k] === sel.id : name === sel.name));
    if (this.spanTable) this.spanTable.setSelected(sel, false);
    this.redraw();
  }

  // Where an event of that name is drawn widest in the rows in view, in client coordinates
  // (the browser tests hover and click it); null when none is wider than 4 px.
  locate(name) {
    const d = this.d, r = this.canvas.getBoundingClientRect();
    let best = null;
    for (let l = 0; l < d.lanes.length; ++l)
      for (let dep = 0; dep < Math.max(1, d.lanes[l].depths); ++dep) {
        const row = d.rowOf[l] + dep, y = this.laneTop[l] + dep * ROW - this.top;
        if (y < 0 || y + ROW > r.height) continue;
        const [from, to] = d.window(row, this.t0, this.t1);
        for (let k = from; k < to; ++k) {
          const i = d.ids[k];
          if (d.name(i) !== name) continue;
          const x0 = Math.max(GUTTER, this.x(d.start[i])), x1 = Math.min(this.width, this.x(d.end[i]));
          if (x1 - x0 > 4 && (!best || x1 - x0 > best.w)) best = { x: r.left + (x0 + x1) / 2, y: r.top + y + ROW / 2, w: x1 - x0, lane: l };
        }
      }
    return best;
  }

  // Client x of an instant, for the tests' drags.
  clientX(t) { return this.canvas.getBoundingClientRect().left + this.x(t); }
}

// The panel; part: the bundle's timeline, null without events. inline: the --html file.
export function timelinePanel(part, inline, { onSelect, tooltip }) {
  const { section, body } = panel('timeline', 'Timeline',
    'Each CPU thread\'s calls nested by depth over time, and each GPU stream\'s kernels and copies, on one axis ' +
    '(ns after the first event). Wheel: zoom; drag: pan; shift-drag: select a span and list its time per routine; ' +
    'click: select the routine. Events narrower than a pixel are drawn merged into one block.');
  if (!part) {
    body.appendChild(empty('No timeline in this file: record one with sonde run --trace (SONDE_TRACE=1), ' +
      'python3 -m sonde --trace, or a GPU run (CUPTI\'s kernels and copies).'));
    return { section, timeline: null, setSelected() {}, show() {} };
  }
  const tl = new Timeline(part, { onSelect, tooltip });
  const lanes = part.lanes.length;
  const facts = [`${fmtNum(part.carried)} events on ${lanes} lane${lanes === 1 ? '' : 's'}, ${fmtNs(part.end_ns)}.`];
  if (part.cut_ns !== null)
    facts.push(`Only the events that start in the first ${fmtNs(part.cut_ns)} are here: ${fmtNum(part.carried)} of ` +
      `${fmtNum(part.events)}, this ${inline ? '--html file\'s' : 'server\'s'} cap of ${fmtNum(part.max_events)}` +
      (inline ? '; sonde view FILE serves more.' : '; sonde export --format chrome writes them all.'));
  if (part.dropped) facts.push(`${fmtNum(part.dropped)} events did not fit the trace buffers and are missing (the run's notes say why).`);
  const reset = el('button', { type: 'button', onclick: () => tl.setView(0, part.end_ns) }, 'reset zoom');
  const toSpan = el('button', { type: 'button', onclick: () => { if (tl.span) tl.setView(tl.span[0], tl.span[1]); } }, 'zoom to span');
  body.append(el('p', { id: 'timeline-facts', class: part.cut_ns !== null || part.dropped ? 'warning-note' : 'note' }, facts.join(' ')),
              el('div', { class: 'flame-tools' }, reset, toSpan), tl.axis, tl.scroller, tl.event, tl.spanHead, tl.spanBody);
  tl.spanHead.textContent = 'Shift-drag across the timeline to list the time per routine within a span.';
  return { section, timeline: tl, setSelected: (sel) => tl.setSelected(sel), show: () => tl.draw() };
}
