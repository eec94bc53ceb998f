// The calling-context tree's panel: which tree the flame graph draws (the threads menu), and
// with two or more profiles which one it is coloured against (the compare menu).
import { el, empty, fmtNum, panel } from './dom.js';

// A rank's or a process's entry in the threads menu: the analyzers' figures, as text.
function scopeLabel(s) {
  const threads = `${s.busy_threads} busy thread${s.busy_threads === 1 ? '' : 's'}`;
  if (s.kind === 'rank')
    return `rank ${s.rank}${s.host ? ' on ' + s.host : ''}: ${threads} of ${s.processes} process${s.processes === 1 ? '' : 'es'} merged, ${fmtNum(s.busy_s)} s`;
  return `pid ${s.pid}${s.rank !== null ? ` (rank ${s.rank})` : ''}${s.images > 1 ? ` (${s.images} images, exec)` : ''}: ` +
    `${threads} merged, ${fmtNum(s.busy_s)} s: ${s.command}`;
}

// The flame graph's panel and the threads menu: the merged tree, each rank's and process's
// (fetched with need(parts) when first chosen; the --html file has them all), each thread's.
// others: the profiles this one can be compared with, [{index, path, carried}] (the part
// tree_diff_<index>; carried false: an --html file without it).
export function flamePanel(p, flame, need, fail, others = []) {
  const { section, body } = panel('flame', 'Calling-context tree',
    'Icicle: the root on top, callees below, width = inclusive time. Click a frame to zoom and select it; ' +
    'exclusive mode darkens each frame\'s own time. Colours are kinds: python, native, blas, region, GPU.' +
    (others.length ? ' Compared with another profile: all busy threads merged, each frame coloured by the change of its ' +
                     'call path\'s share of the busy time (red grew, blue shrank; as sonde export --format svg --baseline).' : ''));
  const threads = document.getElementById('threads');
  threads.disabled = false;
  const compare = el('select', { id: 'compare', 'aria-label': 'compare with' },
    el('option', { value: '' }, 'none (colour: kind)'),
    others.map((o) => el('option', { value: String(o.index), disabled: !o.carried },
      o.carried ? o.path : `${o.path} (not in this file; sonde view makes it)`)));
  const tree = () => p.tree ?? p.tree_first;  // the server's first tree until the finer one is here
  const trees = tree().trees || [];
  const sc = p.tree_scopes || { scopes: [] };
  const group = (label, options) => (options.length ? [el('optgroup', { label }, options)] : []);
  // Scopes are listed only where there are two or more (a lone rank or process is the merged tree).
  const more = (kind, total, listed) => (listed > 0 && total > listed
    ? [el('option', { disabled: true }, `… ${total - listed} more ${kind === 'rank' ? 'ranks' : 'processes'} ` +
          `(sonde tree --threads merge ${kind === 'rank' ? '--rank R' : '--pid P'} prints any)`)] : []);
  const scopeOptions = (kind) => sc.scopes.map((s, i) => [s, i]).filter(([s]) => s.kind === kind)
    .map(([s, i]) => el('option', { value: 'scope:' + i }, scopeLabel(s)));
  const ranks = scopeOptions('rank'), processes = scopeOptions('process');
  threads.replaceChildren(
    ...(p.tree_merged ? [el('option', { value: 'merged' }, `all ${trees.length} threads merged`)] : []),
    ...group('per rank, its threads merged', [...ranks, ...more('rank', sc.ranks, ranks.length)]),
    ...group('per process, its threads merged', [...processes, ...more('process', sc.processes, processes.length)]),
    ...group('per thread', trees.map((t, i) => el('option', { value: String(i) },
      `pid ${t.pid} thread ${t.seq} (tid ${t.tid})${t.name ? ' ' + t.name : ''}: ${fmtNum(t.wall_s)} s${t.waiting ? ' (waiting for work)' : ''}${t.waited_s ? ` (${fmtNum(t.waited_s)} s waiting for work, in no total)` : ''}`))));
  // A rank's or process's tree is fetched when first chosen (the --html file has them all).
  const show = async (refine = false) => {
    const against = compare.value;
    threads.disabled = against !== '';
    if (against !== '') {
      const part = `tree_diff_${against}`;
      if (!(part in p)) flame.setNote(`colouring against ${others.find((o) => String(o.index) === against).path}…`);
      await need([part]);
      if (compare.value !== against) return;  // another was chosen meanwhile
      const d = p[part];
      flame.setNote(`all busy threads merged (${fmtNum(d.total_s)} s), against ${d.baseline} (${fmtNum(d.baseline_total_s)} s)`);
      flame.setTree(d.tree, d.min_pct, { baseline: d.baseline, legend: d.legend });
      return;
    }
    const v = threads.value;
    let t = null;
    if (v === 'merged') t = p.tree_merged;
    else if (v.startsWith('scope:')) {
      const part = sc.scopes[Number(v.slice(6))].part;
      await need([part]);
      if (threads.value !== v) return;  // another was chosen meanwhile
      t = p[part];
    }
    const root = t ? t.tree : tree().trees[Number(v)]?.tree;
    const minPct = t ? t.min_pct : tree().min_pct;
    const depth = t ? null : tree().max_depth;  // the server's first tree stops at a level
    flame.setNote(depth !== null && depth !== undefined ? `the top ${depth} levels; the deeper ones are on their way` : '');
    if (refine) flame.refineTree(root ?? null, minPct); else flame.setTree(root ?? null, minPct);
  };
  if (!trees.length) body.appendChild(empty('No thread called a measured routine: there is no tree to draw.'));
  threads.onchange = () => { show().catch(fail); };
  compare.onchange = () => { show().catch(fail); };
  if (others.length) body.appendChild(el('p', { class: 'compare' }, el('label', {}, 'compare with ', compare)));
  body.appendChild(flame.element);
  // The finer tree, once fetched, replaces the first where a thread's tree is shown.
  const refine = () => (compare.value === '' && /^\d+$/.test(threads.value) ? show(true) : Promise.resolve());
  return { section, show, refine };
}

