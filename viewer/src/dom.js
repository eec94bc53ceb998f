// Every string from a profile reaches the page as a text node, never as markup: a routine named
// "<img src=x onerror=...>" is shown, not run.
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') node.className = v;
    else if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(node.dataset, v);
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  append(node, children);
  return node;
}

export function append(node, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    node.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

export function svgEl(tag, attrs) {
  const node = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  return node;
}

// Numbers as the analyzers gave them, only rounded for display.
export function fmtNum(v, digits = 3) {
  if (v === null || v === undefined || v === '') return '–';
  if (typeof v !== 'number') return String(v);
  if (Number.isInteger(v)) return v.toLocaleString('en-US');
  const a = Math.abs(v);
  if (a !== 0 && (a < 10 ** -digits || a >= 1e7)) return v.toExponential(2);
  return v.toFixed(digits);
}

export function panel(id, title, note) {
  const body = el('div', { class: 'body' });
  const section = el('section', { class: 'panel', id: 'panel-' + id, dataset: { panel: id } },
                     el('h2', {}, title), note ? el('p', { class: 'note' }, note) : null, body);
  return { section, body };
}

export function empty(text) {
  return el('p', { class: 'empty' }, text);
}
