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

// Characters shown as nothing, or that change how what follows is shown: zero-width spaces and
// joiners, the bidirectional marks, embeddings, overrides and isolates (a name can show as
// another's, as in "Trojan source"), the line and paragraph separators, the byte-order mark.
// Shown as their escape (\u202e), as the terminal reports show them (table_format.cpp visible,
// which escapes control characters and bytes that are not UTF-8 too: a text node shows those
// harmlessly, and JSON holds no invalid UTF-8).
const INVISIBLE = /[\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/g;
// The same in the JSON's text, as a character or escaped.
const INVISIBLE_IN_JSON = /[\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]|\\u(200[b-f]|202[89a-e]|206[0-46-9]|feff)/i;

export function visible(text) {
  return text.replace(INVISIBLE, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}

function visibleAll(v) {
  if (typeof v === 'string') return visible(v);
  if (Array.isArray(v)) return v.map(visibleAll);
  if (v === null || typeof v !== 'object') return v;
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [visible(k), visibleAll(x)]));
}

// A profile's JSON, every string in it with its invisible characters made visible: once, here,
// so that every panel, the canvas and the tooltips show the same text and select by it. The
// walk is skipped where the text has none (a 1M-path bundle is not walked twice).
export function parseProfileJson(text) {
  const data = JSON.parse(text);
  return INVISIBLE_IN_JSON.test(text) ? visibleAll(data) : data;
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
