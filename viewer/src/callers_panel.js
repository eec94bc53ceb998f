// The callers panel ("sandwich"): the selected routine's callers as an inverted icicle (each row
// the callers of the row above) and its callees below, with tables of the nearest of each. The
// figures are the bundle's `sandwich_<routine_id>` part: `sonde tree --callers` and `--callees`.
import { el, empty, fmtNum, panel } from './dom.js';
import { DataTable } from './table.js';
import { FlameGraph } from './flame.js';

const COLUMNS = [
  { key: 'name', title: 'Name' }, { key: 'kind', title: 'Kind' }, { key: 'calls', title: 'Calls' },
  { key: 'incl_s', title: 'Inclusive s', digits: 6 }, { key: 'excl_s', title: 'Exclusive s', digits: 6 },
  { key: 'incl_pct', title: '% of routine', digits: 1 }, { key: 'where', title: 'Where' },
];

// p: the profile; need(parts) fetches parts (null for the --html file, which has what it has);
// rows: the hot-spot rows, for a selection known by name alone.
export function callersPanel(p, need, rows, { onSelect, tooltip }) {
  const { section, body } = panel('callers', 'Callers and callees',
    'The selected routine\'s callers, read downward: each row holds the routines that called the row above, ' +
    'its width the time of the selected routine that came through them (a recursive call counts with its outermost ' +
    'one). Below, its callees. The same figures as sonde tree --callers NAME and --callees NAME.');
  const head = el('p', { id: 'callers-routine', class: 'routine' });
  const content = el('div', { id: 'callers-content' });
  body.append(head, content);
  const flame = (id) => new FlameGraph({ onSelect, tooltip, id });
  const up = flame('callers-flame'), down = flame('callees-flame');
  let shown = null;  // the routine id shown, or the selection's text
  const say = (text) => { head.textContent = ''; content.replaceChildren(empty(text)); shown = null; };
  say('Select a routine (a flame-graph frame, a hot-spot row) to see its callers and callees.');

  const draw = (s) => {
    const r = s.routine;
    head.textContent = `${r.name} [${r.kind}]${r.where ? ' ' + r.where : ''}: ${fmtNum(r.calls)} calls, ` +
      `${fmtNum(r.incl_s)} s inclusive (${fmtNum(r.incl_pct, 1)} % of the busy threads' time), ${fmtNum(r.excl_s)} s exclusive`;
    const table = (id, node, none) => (node.children || []).length ? new DataTable({
      id, rows: node.children.map((c) => ({ ...c })), columns: COLUMNS, nameKey: 'name', idKey: 'routine_id',
      sortKey: 'incl_s', onSelect,
    }).element : empty(none);
    content.replaceChildren(
      el('h3', {}, 'Callers'), up.element, table('callers-table', s.callers, 'No caller: a thread\'s root.'),
      el('h3', {}, 'Callees'), down.element, table('callees-table', s.callees, 'No callee: it calls no measured routine.'));
    up.setTree(s.callers, s.min_pct);
    down.setTree(s.callees, s.min_pct);
    const sel = { name: r.name, id: r.routine_id };
    up.setSelected(sel);
    down.setSelected(sel);
  };

  return {
    section,
    // Selections come from every panel; one without an id is taken by its name where one
    // routine has it.
    setSelected(sel) {
      if (sel === null) return;
      let id = sel.id;
      if (id === null) {
        const named = rows.filter((r) => r.name === sel.name);
        if (named.length !== 1) { say(`${named.length ? 'Several routines are' : 'No routine is'} named ${sel.name}: select one by its frame or hot-spot row.`); return; }
        id = named[0].routine_id;
      }
      if (id === shown) return;
      const part = `sandwich_${id}`;
      if (part in p) { shown = id; draw(p[part]); return; }
      if (!need) { say(`The callers of ${sel.name} are not in this file: it carries those of the hot-spot table's first routines by exclusive time. sonde tree --callers NAME, or sonde view, shows any routine's.`); return; }
      shown = id;
      head.textContent = `${sel.name}: computing its callers…`;
      need([part]).then(() => { if (shown === id) draw(p[part]); })
        .catch((err) => { if (shown === id) say(err.message); });
    },
  };
}
