// A sortable table over rows the analyzers produced; it sorts and filters, it computes nothing.
import { el, fmtNum } from './dom.js';

export class DataTable {
  // columns: [{key, title, digits}]; nameKey: the member naming the routine, idKey: the one
  // holding its routine_id where the rows have it (the linked selection).
  constructor({ id, columns, rows, nameKey, idKey = null, sortKey, desc = true, limit = 500, onSelect }) {
    Object.assign(this, { id, columns, rows, nameKey, idKey, sortKey, desc, limit, onSelect });
    this.filter = '';
    this.selected = null;
    this.tbody = el('tbody');
    this.count = el('p', { class: 'count' });
    this.heads = columns.map((c) => el('th', {
      scope: 'col', tabindex: 0, dataset: { key: c.key },
      onclick: () => this.sortBy(c.key),
      onkeydown: (e) => { if (e.key === 'Enter') this.sortBy(c.key); },
    }, c.title));
    this.element = el('div', { class: 'table-wrap' },
                      el('table', { class: 'data', id: id },
                         el('thead', {}, el('tr', {}, this.heads)), this.tbody),
                      this.count);
    this.draw();
  }

  sortBy(key) {
    if (this.sortKey === key) this.desc = !this.desc;
    else { this.sortKey = key; this.desc = true; }
    this.draw();
  }

  setFilter(text) { if (text.toLowerCase() !== this.filter) { this.filter = text.toLowerCase(); this.draw(); } }

  // A selection with a routine id picks that routine's rows where this table has ids; one
  // without (or a table without) picks the rows of that name.
  setSelected(sel, scroll = true) {
    this.selected = sel;
    const byId = sel !== null && sel.id !== null && this.idKey !== null;
    let first = null;
    for (const tr of this.tbody.children) {
      // a row without an id (a name two routines share) is picked by its name
      const on = sel !== null && (byId && tr.dataset.id !== undefined ? tr.dataset.id === String(sel.id) : tr.dataset.name === sel.name);
      tr.classList.toggle('selected', on);
      if (on && !first) first = tr;
    }
    if (first && scroll) first.scrollIntoView({ block: 'nearest' });
  }

  visibleRows() {
    let rows = this.rows;
    if (this.filter && this.nameKey)
      rows = rows.filter((r) => String(r[this.nameKey] ?? '').toLowerCase().includes(this.filter));
    if (this.sortKey) {
      const k = this.sortKey, sign = this.desc ? -1 : 1;
      rows = rows.slice().sort((a, b) => {
        const x = a[k], y = b[k];
        if (x === y) return 0;
        if (x === null || x === undefined) return 1;
        if (y === null || y === undefined) return -1;
        return (x < y ? -1 : 1) * sign;
      });
    }
    return rows;
  }

  draw() {
    for (const th of this.heads) {
      const on = th.dataset.key === this.sortKey;
      th.classList.toggle('sorted', on);
      th.setAttribute('aria-sort', on ? (this.desc ? 'descending' : 'ascending') : 'none');
    }
    const rows = this.visibleRows();
    const shown = rows.slice(0, this.limit);
    const body = document.createDocumentFragment();
    for (const r of shown) {
      const name = this.nameKey ? String(r[this.nameKey] ?? '') : null;
      const rid = this.idKey !== null ? r[this.idKey] ?? null : null;
      const data = name === null ? {} : rid === null ? { name } : { name, id: String(rid) };
      const tr = el('tr', { dataset: data },
                    this.columns.map((c) => el('td', { class: typeof r[c.key] === 'number' ? 'num' : '' },
                                               c.format ? c.format(r[c.key], r) : fmtNum(r[c.key], c.digits))));
      if (name !== null && this.onSelect) tr.addEventListener('click', () => this.onSelect(name, rid));
      body.appendChild(tr);
    }
    this.tbody.replaceChildren(body);
    this.count.textContent = rows.length > shown.length
      ? `showing ${shown.length} of ${rows.length} rows (${this.rows.length} in all): search to narrow`
      : `${rows.length} of ${this.rows.length} rows`;
    if (this.selected !== null) this.setSelected(this.selected, false);
  }
}
