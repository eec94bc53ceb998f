// The timeline part (analyzers/view/view_timeline.hpp) as typed arrays, indexed for drawing:
// each lane's rows (one per depth) list their events by start, so that the visible window is
// found by binary search and an event narrower than a pixel skips to the next pixel's events.

// The first index i in [lo, hi) of ids with key(ids[i]) >= v (hi when none).
function lowerBound(ids, lo, hi, key, v) {
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (key[ids[mid]] < v) lo = mid + 1; else hi = mid;
  }
  return lo;
}

export class TimelineData {
  constructor(t) {
    this.part = t;
    this.n = t.start.length;
    this.lane = Int32Array.from(t.lane);
    this.depth = Int32Array.from(t.depth);
    this.frame = Int32Array.from(t.frame);
    this.node = Int32Array.from(t.node);
    this.start = Float64Array.from(t.start);  // ns after origin_ns: exact up to 2^53 ns
    this.dur = Float64Array.from(t.dur);
    this.end = new Float64Array(this.n);
    for (let i = 0; i < this.n; ++i) this.end[i] = this.start[i] + this.dur[i];
    this.lanes = t.lanes;
    this.frames = t.frames;
    this.nodeParent = Int32Array.from(t.nodes.parent);
    this.nodeFrame = Int32Array.from(t.nodes.frame);
    // Rows: lane l's depth d is row rowOf[l] + d; its events are ids[offset[row] .. offset[row + 1]).
    this.rowOf = new Int32Array(this.lanes.length + 1);
    for (let l = 0; l < this.lanes.length; ++l) this.rowOf[l + 1] = this.rowOf[l] + Math.max(1, this.lanes[l].depths);
    const rows = this.rowOf[this.lanes.length];
    this.offset = new Int32Array(rows + 1);
    for (let i = 0; i < this.n; ++i) this.offset[this.rowOf[this.lane[i]] + this.depth[i] + 1] += 1;
    for (let r = 0; r < rows; ++r) this.offset[r + 1] += this.offset[r];
    this.ids = new Int32Array(this.n);
    const fill = this.offset.slice(0, rows);
    this.maxDur = new Float64Array(rows);  // how far before a window an event may start and reach it
    for (let i = 0; i < this.n; ++i) {  // the part is by lane and start: each row stays by start
      const r = this.rowOf[this.lane[i]] + this.depth[i];
      this.ids[fill[r]++] = i;
      if (this.dur[i] > this.maxDur[r]) this.maxDur[r] = this.dur[i];
    }
    this.rows = rows;
  }

  // The event ids of row r that may overlap [t0, t1): ids[from .. to).
  window(r, t0, t1) {
    const lo = this.offset[r], hi = this.offset[r + 1];
    const from = lowerBound(this.ids, lo, hi, this.start, t0 - this.maxDur[r]);
    return [from, lowerBound(this.ids, from, hi, this.start, t1)];
  }

  // The first index at or after k in row r whose event starts at t or later.
  skipTo(r, k, t) { return lowerBound(this.ids, k, this.offset[r + 1], this.start, t); }

  // The event of row r that holds instant t (the innermost: rows hold one depth), or -1.
  at(r, t, slack = 0) {
    const [from, to] = this.window(r, t - slack, t + slack + 1e-9);
    let best = -1, bestGap = Infinity;
    for (let k = from; k < to; ++k) {
      const i = this.ids[k];
      const gap = t < this.start[i] ? this.start[i] - t : t > this.end[i] ? t - this.end[i] : 0;
      if (gap <= slack && gap < bestGap) { best = i; bestGap = gap; }
    }
    return best;
  }

  name(i) { return this.frames.name[this.frame[i]]; }
  kind(i) { return this.frames.kind[this.frame[i]]; }
  routineId(i) { return this.frames.routine_id[this.frame[i]]; }

  // The call path of event i, root first: a call's own path, a GPU record's launching call's.
  path(i) {
    const names = [];
    for (let n = this.node[i]; n >= 0; n = this.nodeParent[n]) names.push(this.frames.name[this.nodeFrame[n]]);
    return names.reverse();
  }

  // The enclosing call of event i (same lane, one depth up, holding it), or -1.
  parent(i) {
    if (this.lanes[this.lane[i]].kind !== 'thread' || this.depth[i] === 0) return -1;
    const r = this.rowOf[this.lane[i]] + this.depth[i] - 1;
    const k = lowerBound(this.ids, this.offset[r], this.offset[r + 1], this.start, this.start[i] + 1e-9) - 1;
    if (k < this.offset[r]) return -1;
    const p = this.ids[k];
    return this.end[p] >= this.end[i] ? p : -1;
  }

  // Time per frame within [a, b]: each event's time clipped to the span, less its children's
  // (a call's exclusive time in the span; a GPU record's device time in it), with the events
  // that overlap it. The SQL of docs/viewer.md ("Timeline") gives the same figures.
  aggregate(a, b) {
    const excl = new Map(), events = new Map();
    for (let r = 0; r < this.rows; ++r) {
      const [from, to] = this.window(r, a, b);
      for (let k = from; k < to; ++k) {
        const i = this.ids[k];
        const clip = Math.min(this.end[i], b) - Math.max(this.start[i], a);
        if (this.end[i] <= a) continue;  // overlapping: start < b and end > a
        const f = this.frame[i];
        excl.set(f, (excl.get(f) ?? 0) + clip);
        events.set(f, (events.get(f) ?? 0) + 1);
        const p = this.parent(i);
        if (p >= 0) excl.set(this.frame[p], (excl.get(this.frame[p]) ?? 0) - clip);
      }
    }
    return [...excl].map(([f, ns]) => ({
      name: this.frames.name[f], kind: this.frames.kind[f], where: this.frames.where[f],
      routine_id: this.frames.routine_id[f], excl_ns: ns, excl_ms: ns / 1e6, events: events.get(f),
    }));
  }
}
