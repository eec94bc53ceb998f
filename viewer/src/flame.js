// The calling-context tree as an icicle on a canvas: widths are the analyzers' inclusive
// seconds laid side by side, so a 1M-path profile draws only what is wider than a pixel.
import { el, fmtNum } from './dom.js';

const ROW = 18;
const KIND_COLOURS = {
  root: '#b0b0b0', python: '#6b9bd1', native: '#e8a25a', blas: '#d9534f', onednn: '#e377c2',
  region: '#5cb85c', cuda: '#9b59b6', cublas: '#8e44ad', cudnn: '#7d3c98', gpu: '#a569bd',
  nccl: '#af7ac5', mpi: '#17a2b8', io: '#f0ad4e', folded: '#dddddd',
};

function kindColour(kind) {
  if (KIND_COLOURS[kind]) return KIND_COLOURS[kind];
  let h = 0;
  for (const ch of String(kind)) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
  return `hsl(${h % 360}, 45%, 60%)`;
}

// Depth-first frames with their subtree's end, so a narrow frame skips its whole subtree.
function flatten(root, minPct) {
  const frames = [];
  const stack = [{ node: root, x: 0, depth: 0, parent: -1 }];
  while (stack.length) {
    const item = stack.pop();
    if (item.close !== undefined) { frames[item.close].end = frames.length; continue; }
    const { node, x, depth, parent } = item;
    const i = frames.length;
    const f = {
      name: node.name, id: node.routine_id ?? null, kind: node.kind, where: node.where || '', calls: node.calls,
      incl: node.incl_s, excl: node.excl_s, pct: node.incl_pct, x, depth, parent, end: i + 1,
    };
    frames.push(f);
    if (item.folded) continue;
    stack.push({ close: i });
    // Children pushed last-first so they come out in order, laid out left to right.
    const kids = [];
    let cx = x;
    for (const c of node.children || []) { kids.push({ node: c, x: cx, depth: depth + 1, parent: i }); cx += c.incl_s; }
    if (node.folded) {
      kids.push({
        node: { name: `(${node.folded.count} more below ${minPct} %)`, kind: 'folded', calls: node.folded.calls,
                incl_s: node.folded.incl_s, excl_s: node.folded.excl_s, incl_pct: null, children: [] },
        x: cx, depth: depth + 1, parent: i, folded: true,
      });
    }
    for (let k = kids.length - 1; k >= 0; --k) stack.push(kids[k]);
  }
  return frames;
}

export class FlameGraph {
  constructor({ onSelect, tooltip }) {
    this.onSelect = onSelect;
    this.tooltip = tooltip;
    this.canvas = el('canvas', { id: 'flame', role: 'img', 'aria-label': 'flame graph' });
    this.reset = el('button', { type: 'button', onclick: () => this.zoom(0) }, 'reset zoom');
    this.crumb = el('span', { class: 'crumb' });
    this.legend = el('span', { class: 'kinds' });
    this.element = el('div', { class: 'flame-wrap' },
                      el('div', { class: 'flame-tools' }, this.reset, this.legend, this.crumb), this.canvas);
    this.frames = [];
    this.zoomed = 0;
    this.search = '';
    this.selected = null;
    this.mode = 'incl';
    this.canvas.addEventListener('click', (e) => this.click(e));
    this.canvas.addEventListener('mousemove', (e) => this.hover(e));
    this.canvas.addEventListener('mouseleave', () => { this.tooltip.hidden = true; });
    window.addEventListener('resize', () => this.draw());
  }

  setTree(root, minPct) {
    this.frames = root ? flatten(root, minPct) : [];
    const kinds = [...new Set(this.frames.map((f) => f.kind))].sort();
    this.legend.replaceChildren(...kinds.map((k) => el('span', { class: 'kind' },
      el('span', { class: 'swatch', style: `background:${kindColour(k)}` }), ' ', k)));
    this.zoomed = 0;
    this.draw();
  }

  // The same tree in more detail (the server's first tree, then the finer one): the zoomed
  // frame stays zoomed, found again by the routines on its path.
  refineTree(root, minPct) {
    const key = (f) => `${f.id}\u0000${f.name}\u0000${f.kind}`;
    const path = [];
    for (let j = this.zoomed; j > 0 && this.frames[j]; j = this.frames[j].parent) path.unshift(key(this.frames[j]));
    this.setTree(root, minPct);
    let at = 0;
    for (const k of path) {
      let next = -1;
      for (let i = at + 1; i < (this.frames[at] ? this.frames[at].end : 0); i = this.frames[i].end)
        if (key(this.frames[i]) === k) { next = i; break; }
      if (next < 0) break;
      at = next;
    }
    if (at) this.zoom(at);
  }

  // Each redraws only on a change: a 1M-path profile's first draw costs tens of ms.
  setSearch(text) { if (text.toLowerCase() !== this.search) { this.search = text.toLowerCase(); this.draw(); } }
  setSelected(sel) { if (sel !== this.selected) { this.selected = sel; this.draw(); } }

  // The frames of the selected routine: by routine_id where both know it, else by name.
  isSelected(f) {
    const s = this.selected;
    if (s === null || f.kind === 'folded') return false;
    return s.id !== null && f.id !== null ? f.id === s.id : f.name === s.name;
  }
  setMode(mode) { if (mode !== this.mode) { this.mode = mode; this.draw(); } }

  zoom(i) {
    this.zoomed = this.frames[i] ? i : 0;
    const path = [];
    for (let j = this.zoomed; j >= 0 && this.frames[j]; j = this.frames[j].parent) path.unshift(this.frames[j].name);
    this.crumb.textContent = this.zoomed ? 'zoomed: ' + path.join(' › ') : '';
    this.draw();
  }

  // Calls fn(frame, index, x px, width px) for the zoomed frame's ancestors (full width), then
  // for every frame of its subtree wider than half a pixel; a narrower frame skips its subtree.
  visit(width, fn) {
    const frames = this.frames;
    if (!frames.length) return;
    const z = frames[this.zoomed];
    const path = [];
    for (let j = this.zoomed; j >= 0; j = frames[j].parent) path.unshift(j);
    for (const j of path) fn(frames[j], j, 0, width);
    const x0 = z.x, scale = z.incl > 0 ? width / z.incl : 0;
    let i = this.zoomed + 1;
    while (i < z.end) {
      const f = frames[i];
      let px = (f.x - x0) * scale, pw = f.incl * scale;
      if (px >= width || px + pw <= 0 || pw < 0.5) { i = f.end; continue; }
      if (px < 0) { pw += px; px = 0; }
      if (px + pw > width) pw = width - px;
      fn(f, i, px, pw);
      i += 1;
    }
  }

  draw() {
    if (!this.frames.length) { this.canvas.width = 0; this.canvas.height = 0; this.canvas.dataset.frames = '0'; return; }
    const width = Math.max(300, this.canvas.parentElement ? this.canvas.parentElement.clientWidth : 800);
    let maxDepth = 0;
    this.visit(width, (f) => { if (f.depth > maxDepth) maxDepth = f.depth; });
    const rows = Math.min(maxDepth + 1, 400);
    const dpr = window.devicePixelRatio || 1;
    this.width = width;
    this.canvas.width = Math.round(width * dpr);
    this.canvas.height = Math.round(rows * ROW * dpr);
    this.canvas.style.width = width + 'px';
    this.canvas.style.height = rows * ROW + 'px';
    const ctx = this.canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    const q = this.search;
    this.drawn = 0;
    this.drawnSelected = 0;
    this.visit(width, (f, i, px, pw) => {
      if (f.depth >= rows) return;
      const y = f.depth * ROW;
      const match = !q || f.name.toLowerCase().includes(q);
      ctx.globalAlpha = match ? 1 : 0.25;
      ctx.fillStyle = kindColour(f.kind);
      ctx.fillRect(px, y, Math.max(pw - 0.5, 0.5), ROW - 1);
      if (this.mode === 'excl' && f.incl > 0 && f.kind !== 'folded') {
        // the frame's own time, darker, from its left edge
        ctx.fillStyle = 'rgba(0,0,0,0.25)';
        ctx.fillRect(px, y, Math.max(0, pw - 0.5) * Math.min(1, f.excl / f.incl), ROW - 1);
      }
      if (this.isSelected(f)) {
        ctx.globalAlpha = 1;
        ctx.strokeStyle = '#000';
        ctx.lineWidth = 2;
        ctx.strokeRect(px + 1, y + 1, Math.max(pw - 2.5, 0.5), ROW - 3);
        this.drawnSelected += 1;
      }
      if (pw > 36) {
        ctx.globalAlpha = match ? 1 : 0.4;
        ctx.fillStyle = '#111';
        const t = this.mode === 'excl' ? f.excl : f.incl;
        this.label(ctx, `${f.name} (${fmtNum(t)} s)`, px + 3, y + ROW / 2, pw - 6);
      }
      this.drawn += 1;
    });
    ctx.globalAlpha = 1;
    this.canvas.dataset.frames = String(this.drawn);
    this.canvas.dataset.selectedFrames = String(this.drawnSelected);
    this.canvas.dataset.zoomed = this.frames[this.zoomed] ? this.frames[this.zoomed].name : '';
  }

  label(ctx, text, x, y, max) {
    if (ctx.measureText(text).width <= max) { ctx.fillText(text, x, y); return; }
    let lo = 0, hi = text.length;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (ctx.measureText(text.slice(0, mid) + '…').width <= max) lo = mid; else hi = mid - 1;
    }
    if (lo > 2) ctx.fillText(text.slice(0, lo) + '…', x, y);
  }

  frameAt(e) {
    const r = this.canvas.getBoundingClientRect();
    const mx = e.clientX - r.left, depth = Math.floor((e.clientY - r.top) / ROW);
    let hit = -1;
    this.visit(this.width || r.width, (f, i, px, pw) => {
      if (f.depth === depth && mx >= px && mx < px + pw) hit = i;
    });
    return hit;
  }

  click(e) {
    const i = this.frameAt(e);
    if (i < 0) return;
    const f = this.frames[i];
    this.zoom(f.kind === 'folded' ? f.parent : i);
    if (f.kind !== 'root' && f.kind !== 'folded') this.onSelect(f.name, f.id);
  }

  hover(e) {
    const i = this.frameAt(e);
    const tip = this.tooltip;
    if (i < 0) { tip.hidden = true; return; }
    const f = this.frames[i];
    tip.replaceChildren(
      el('strong', {}, f.name), el('br'),
      `${f.kind}${f.where ? ' · ' + f.where : ''}`, el('br'),
      `inclusive ${fmtNum(f.incl)} s${f.pct !== null && f.pct !== undefined ? ` (${fmtNum(f.pct, 1)} %)` : ''}`,
      ` · exclusive ${fmtNum(f.excl)} s · ${fmtNum(f.calls)} calls`);
    tip.hidden = false;
    tip.style.left = Math.min(e.clientX + 12, window.innerWidth - 320) + 'px';
    tip.style.top = e.clientY + 14 + 'px';
  }

  // Where the widest drawn frame of that name is, in client coordinates (for keyboard-less
  // checks and the browser tests); null when none is drawn.
  locate(name, where = null) {
    const r = this.canvas.getBoundingClientRect();
    let best = null;
    this.visit(this.width || r.width, (f, i, px, pw) => {
      if (f.name === name && (where === null || f.where === where) && (!best || pw > best.w)) best = { x: r.left + px + pw / 2, y: r.top + f.depth * ROW + ROW / 2, w: pw };
    });
    return best;
  }
}
