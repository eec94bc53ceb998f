// The calling-context tree as an icicle on a canvas: widths are the analyzers' inclusive
// seconds laid side by side, so a 1M-path profile draws only what is wider than a pixel. Colours
// are kinds, or in a differential tree (the bundle's tree_diff_<j>) each node's own `fill`: the
// change of its path's share against the baseline, as the analyzers coloured it.
import { el, fmtNum } from './dom.js';

const ROW = 18;
// A Map: a kind is a profile's string ('constructor' is not a colour).
const KIND_COLOURS = new Map(Object.entries({
  root: '#b0b0b0', python: '#6b9bd1', native: '#e8a25a', blas: '#d9534f', onednn: '#e377c2',
  region: '#5cb85c', cuda: '#9b59b6', cublas: '#8e44ad', cudnn: '#7d3c98', gpu: '#a569bd',
  nccl: '#af7ac5', mpi: '#17a2b8', io: '#f0ad4e', folded: '#dddddd',
  kernel: '#8e6bbf', memcpy: '#d4a017', memset: '#b8b8b8',
}));

const FONT = '11px system-ui, sans-serif';

// Each character's width in FONT, measured once: a label is fitted by adding them up rather
// than by measuring every prefix of it (canvas measureText, ~10 calls a label).
const charWidths = new Map();
function charWidth(ch, ctx) {
  let w = charWidths.get(ch);
  if (w === undefined) charWidths.set(ch, w = ctx.measureText(ch).width);
  return w;
}

// The text, or as much of it as fits in max px followed by '…' (null when under 3 characters).
export function fitText(text, max, ctx) {
  const ellipsis = charWidth('…', ctx);
  let w = 0, fit = 0;  // fit: the characters that fit with the ellipsis after them
  for (let i = 0; i < text.length; ++i) {
    w += charWidth(text[i], ctx);
    if (w + ellipsis <= max) fit = i + 1;
    else if (w > max) {
      if (fit > 0 && text.charCodeAt(fit - 1) >= 0xd800 && text.charCodeAt(fit - 1) < 0xdc00) fit -= 1;  // half a pair
      return fit > 2 ? text.slice(0, fit) + '…' : null;
    }
  }
  return text;
}

export function kindColour(kind) {
  let c = KIND_COLOURS.get(kind);
  if (c === undefined) {  // a kind of its own: a colour from its name, kept
    let h = 0;
    for (const ch of String(kind)) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
    KIND_COLOURS.set(kind, c = `hsl(${h % 360}, 45%, 60%)`);
  }
  return c;
}

// Depth-first frames with their subtree's end, so a narrow frame skips its whole subtree. The
// stack holds the nodes still to lay out, children pushed last-first so that they come out in
// order, left to right; a negative entry closes frame -1 - entry.
function flatten(root, minPct) {
  const frames = [];
  const nodes = [root], xs = [0], depths = [0], parents = [-1];
  while (nodes.length) {
    const node = nodes.pop(), x = xs.pop(), depth = depths.pop(), parent = parents.pop();
    if (typeof node === 'number') { frames[node].end = frames.length; continue; }
    const i = frames.length;
    frames.push({
      name: node.name, id: node.routine_id ?? null, kind: node.kind, where: node.where || '', calls: node.calls,
      incl: node.incl_s, excl: node.excl_s, pct: node.incl_pct ?? null, x, depth, parent, end: i + 1,
      fill: node.fill ?? null,
      share: node.fill === undefined ? null : { before: node.before_pct, after: node.after_pct, change: node.change_pct },
    });
    const kids = node.children || [];
    if (!kids.length && !node.folded) continue;
    nodes.push(i); xs.push(0); depths.push(0); parents.push(0);
    const at = new Array(kids.length);  // the children's x, summed left to right as laid out
    let cx = x;
    for (let k = 0; k < kids.length; ++k) { at[k] = cx; cx += kids[k].incl_s; }
    if (node.folded) {
      nodes.push({ name: `(${node.folded.count} more below ${minPct} %)`, kind: 'folded', calls: node.folded.calls,
                   incl_s: node.folded.incl_s, excl_s: node.folded.excl_s, incl_pct: null });
      xs.push(cx); depths.push(depth + 1); parents.push(i);
    }
    for (let k = kids.length - 1; k >= 0; --k) { nodes.push(kids[k]); xs.push(at[k]); depths.push(depth + 1); parents.push(i); }
  }
  return frames;
}

// A differential frame's two shares of the busy time, as the bundle gives them.
function shareText(s, baseline) {
  if (s.before === null) return `share ${fmtNum(s.after, 2)} %, not in ${baseline}`;
  const sign = s.change > 0 ? '+' : '';
  return `share ${fmtNum(s.before, 2)} % in ${baseline} → ${fmtNum(s.after, 2)} % here (${sign}${fmtNum(s.change, 1)} % of its share)`;
}

export class FlameGraph {
  // id: the canvas's (the callers panel draws two more).
  constructor({ onSelect, tooltip, id = 'flame' }) {
    this.onSelect = onSelect;
    this.tooltip = tooltip;
    this.canvas = el('canvas', { id, class: 'flame', role: 'img', 'aria-label': 'flame graph' });
    this.reset = el('button', { type: 'button', onclick: () => this.zoom(0) }, 'reset zoom');
    this.crumb = el('span', { class: 'crumb' });
    this.note = el('span', { class: 'note flame-note' });
    this.legend = el('span', { class: 'kinds' });
    // The canvas covers the scroller's visible rows only (sticky at its top), over a spacer as
    // tall as the tree: a deep tree (384 rows in the 1M-path benchmark) is not painted whole.
    this.space = el('div', { class: 'flame-space' }, this.canvas);
    this.scroller = el('div', { class: 'flame-wrap' }, this.space);
    this.element = el('div', {}, el('div', { class: 'flame-tools' }, this.reset, this.legend, this.note, this.crumb), this.scroller);
    this.top = 0;
    this.scroller.addEventListener('scroll', () => {
      if (this.scrolled) return;
      this.scrolled = requestAnimationFrame(() => { this.scrolled = 0; this.draw(); });
    });
    this.frames = [];
    this.zoomed = 0;
    this.search = '';
    this.selected = null;
    this.mode = 'incl';
    this.diff = null;
    this.canvas.addEventListener('click', (e) => this.click(e));
    this.canvas.addEventListener('mousemove', (e) => this.hover(e));
    this.canvas.addEventListener('mouseleave', () => { this.tooltip.hidden = true; });
    window.addEventListener('resize', () => this.draw());
  }

  // diff: null, or the differential tree's { baseline, legend: [{label, fill}] }.
  setTree(root, minPct, diff = null) {
    this.frames = root ? flatten(root, minPct) : [];
    this.diff = diff;
    this.canvas.dataset.compare = diff ? diff.baseline : '';
    if (diff) {
      this.legend.replaceChildren(`share of the busy time against ${diff.baseline}:`, ...diff.legend.map((k) =>
        el('span', { class: 'kind' }, el('span', { class: 'swatch share', style: `background:${k.fill}` }), ' ', k.label)));
    } else {
      const kinds = [...new Set(this.frames.map((f) => f.kind))].sort();
      this.legend.replaceChildren(...kinds.map((k) => el('span', { class: 'kind' },
        el('span', { class: 'swatch', style: `background:${kindColour(k)}` }), ' ', k)));
    }
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

  setNote(text) { this.note.textContent = text; }

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
  // for every frame of its subtree wider than half a pixel down to depth maxDepth; a narrower
  // or deeper frame skips its subtree.
  visit(width, fn, maxDepth = Infinity) {
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
      if (px >= width || px + pw <= 0 || pw < 0.5 || f.depth > maxDepth) { i = f.end; continue; }
      if (px < 0) { pw += px; px = 0; }
      if (px + pw > width) pw = width - px;
      fn(f, i, px, pw);
      i += 1;
    }
  }

  // Frames are batched by colour into one path each: a fill per colour instead of a style
  // change and a fill per frame (22k frames of the 1M-path benchmark's first tree).
  draw() {
    if (!this.frames.length) {
      this.canvas.width = 0; this.canvas.height = 0; this.space.style.height = '0';
      this.canvas.dataset.frames = '0';
      return;
    }
    let maxDepth = 0;
    this.visit(this.scroller.clientWidth || 800, (f) => { if (f.depth > maxDepth) maxDepth = f.depth; });
    this.space.style.height = (maxDepth + 1) * ROW + 'px';
    // the rows in view (the scroller is at most its CSS max-height tall)
    const width = Math.max(300, this.scroller.clientWidth || 800);
    const height = Math.min((maxDepth + 1) * ROW, this.scroller.clientHeight || 560);
    const top = this.top = Math.max(0, Math.min(this.scroller.scrollTop, (maxDepth + 1) * ROW - height));
    const first = this.first = Math.floor(top / ROW), last = this.last = Math.floor((top + height - 1) / ROW);
    const dpr = window.devicePixelRatio || 1;
    this.width = width;
    this.canvas.width = Math.round(width * dpr);
    this.canvas.height = Math.round(height * dpr);
    this.canvas.style.width = width + 'px';
    this.canvas.style.height = height + 'px';
    const ctx = this.canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, -top * dpr);
    ctx.font = FONT;
    ctx.textBaseline = 'middle';
    const q = this.search, excl = this.mode === 'excl';
    const fills = new Map(), own = [], selected = [], labels = [];
    this.drawn = 0;
    this.visit(width, (f, i, px, pw) => {
      if (f.depth < first) return;
      const y = f.depth * ROW;
      const match = !q || f.name.toLowerCase().includes(q);
      const key = (match ? '1 ' : '0.25 ') + (f.fill ?? kindColour(f.kind));
      let rects = fills.get(key);
      if (!rects) fills.set(key, rects = []);
      rects.push(px, y, Math.max(pw - 0.5, 0.5));
      // the frame's own time, darker, from its left edge
      if (excl && f.incl > 0 && f.kind !== 'folded') own.push(px, y, Math.max(0, pw - 0.5) * Math.min(1, f.excl / f.incl));
      if (this.isSelected(f)) selected.push(px, y, pw);
      if (pw > 36) labels.push(f, px, y, pw, match);
      this.drawn += 1;
    }, last);
    const fillAll = (style, alpha, rects, h = ROW - 1) => {
      ctx.globalAlpha = alpha;
      ctx.fillStyle = style;
      ctx.beginPath();
      for (let k = 0; k < rects.length; k += 3) ctx.rect(rects[k], rects[k + 1], rects[k + 2], h);
      ctx.fill();
    };
    for (const [key, rects] of fills) {
      const space = key.indexOf(' ');
      fillAll(key.slice(space + 1), Number(key.slice(0, space)), rects);
    }
    if (own.length) fillAll('rgba(0,0,0,0.25)', 1, own);
    ctx.globalAlpha = 1;
    ctx.strokeStyle = '#000';
    ctx.lineWidth = 2;
    for (let k = 0; k < selected.length; k += 3)
      ctx.strokeRect(selected[k] + 1, selected[k + 1] + 1, Math.max(selected[k + 2] - 2.5, 0.5), ROW - 3);
    ctx.fillStyle = '#111';
    for (let k = 0; k < labels.length; k += 5) {
      const f = labels[k];
      ctx.globalAlpha = labels[k + 4] ? 1 : 0.4;
      const text = fitText(`${f.name} (${fmtNum(excl ? f.excl : f.incl)} s)`, labels[k + 3] - 6, ctx);
      if (text) ctx.fillText(text, labels[k + 1] + 3, labels[k + 2] + ROW / 2);
    }
    ctx.globalAlpha = 1;
    this.drawnSelected = selected.length / 3;
    this.canvas.dataset.frames = String(this.drawn);
    this.canvas.dataset.selectedFrames = String(this.drawnSelected);
    this.canvas.dataset.zoomed = this.frames[this.zoomed] ? this.frames[this.zoomed].name : '';
  }

  frameAt(e) {
    const r = this.canvas.getBoundingClientRect();
    const mx = e.clientX - r.left, depth = Math.floor((e.clientY - r.top + this.top) / ROW);
    let hit = -1;
    this.visit(this.width || r.width, (f, i, px, pw) => {
      if (f.depth === depth && mx >= px && mx < px + pw) hit = i;
    }, depth);
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
      ` · exclusive ${fmtNum(f.excl)} s · ${fmtNum(f.calls)} calls`,
      ...(f.share ? [el('br'), el('span', { class: 'share' }, shareText(f.share, this.diff.baseline))] : []));
    tip.hidden = false;
    tip.style.left = Math.min(e.clientX + 12, window.innerWidth - 320) + 'px';
    tip.style.top = e.clientY + 14 + 'px';
  }

  // Where the widest drawn frame of that name is, in client coordinates (for keyboard-less
  // checks and the browser tests); null when none is drawn (in the rows scrolled into view).
  locate(name, where = null) {
    const r = this.canvas.getBoundingClientRect();
    let best = null;
    this.visit(this.width || r.width, (f, i, px, pw) => {
      if (f.depth >= this.first && f.name === name && (where === null || f.where === where) && (!best || pw > best.w))
        best = { x: r.left + px + pw / 2, y: r.top + f.depth * ROW - this.top + ROW / 2, w: pw };
    }, this.last);
    return best;
  }
}
