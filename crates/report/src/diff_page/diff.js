// diff.js — the `slowlab diff --html` page: the comparison's rows as a
// sortable, filterable table, and a differential flame graph of the merged
// call tree (width: the larger of A and B; colour: red where the path's
// share grew from A to B, blue where it shrank), drawn by the report's
// flame.js (which comes first in the page's script, and gives `el`):
// click-to-zoom, search that highlights and sums, and hover for the
// numbers. Every trace string goes through textContent or fillText.
'use strict';

const D = JSON.parse(document.getElementById('slowlab-data').textContent);

const V = D.view;
const perSecond = V.normalize === 'duration';
const cost = (x) => (x == null ? '' : perSecond ? x.toFixed(1) + '/s' : x.toFixed(2) + '%');
const signed = (x) => (x > 0 ? '+' : '') + cost(x);

// ---- the answer and the table ------------------------------------------

function header(app) {
  app.append(el('h1', { text: D.title }));
  const side = (label, name, s) => el('p', { class: 'fact', text:
    `${label}: ${name} — ${s.samples} samples over ${s.duration_s.toFixed(2)} s` });
  app.append(side('A', D.a_name, V.a), side('B', D.b_name, V.b));
  app.append(el('p', { class: 'note', text:
    `Rows by ${V.key}, ${V.metric === 'inclusive' ? 'anywhere on the stack' : 'self cost'}, ` +
    (perSecond ? 'as samples per second of each trace' : 'as a share of each trace\'s samples') +
    (V.omitted_rows ? `; ${V.omitted_rows} more rows left out (--top)` : '') + '.' }));
  const top = V.functions[0];
  if (top && top.delta > 0) {
    app.append(el('p', { class: 'summary', text:
      `Grew most: ${top.name}${top.module ? ' [' + top.module + ']' : ''}, ${cost(top.a)} → ${cost(top.b)}` +
      (top.status ? ` (${top.status})` : '') }));
  }
}

const COLUMNS = [
  ['name', V.key, false], ['module', 'module', false], ['a', 'A', true], ['b', 'B', true],
  ['delta', 'change', true], ['ratio', 'B / A', true], ['status', 'status', false],
];

function table(app) {
  app.append(el('h2', { text: 'What changed' }));
  const filter = el('input', { type: 'search', class: 'table-filter', id: 'diff-filter', placeholder: 'filter rows' });
  const tbl = el('table', { class: 'data', id: 'diff-table' });
  const thead = el('thead'); const tbody = el('tbody');
  const tr = el('tr');
  let sortKey = 'delta', sortDesc = true;
  for (const [key, label, num] of COLUMNS) {
    const th = el('th', { text: label, class: num ? 'num' : '', 'data-key': key });
    th.addEventListener('click', () => {
      sortDesc = sortKey === key ? !sortDesc : num;
      sortKey = key; fill();
    });
    tr.append(th);
  }
  thead.append(tr); tbl.append(thead, tbody);
  const fill = () => {
    const q = filter.value.trim().toLowerCase();
    const rows = V.functions.filter((r) => !q || (r.name + ' ' + r.module).toLowerCase().includes(q));
    rows.sort((x, y) => {
      const a = x[sortKey] ?? -Infinity, b = y[sortKey] ?? -Infinity;
      const c = typeof a === 'string' || typeof b === 'string' ? String(a).localeCompare(String(b)) : a - b;
      return sortDesc ? -c : c;
    });
    tbody.replaceChildren(...rows.map((r) => {
      const row = el('tr', { class: 'clickable' });
      row.append(el('td', { text: r.name }), el('td', { text: r.module }),
        el('td', { class: 'num', text: cost(r.a) }), el('td', { class: 'num', text: cost(r.b) }),
        el('td', { class: 'num ' + (r.delta > 0 ? 'grew' : r.delta < 0 ? 'shrank' : ''), text: signed(r.delta) }),
        el('td', { class: 'num', text: r.ratio == null ? '' : r.ratio.toFixed(2) + '×' }),
        el('td', { text: r.status || '' }));
      row.addEventListener('click', () => flame.searchFor(r.name));
      return row;
    }));
    tbl.setAttribute('data-sort', sortKey + (sortDesc ? ' desc' : ' asc'));
  };
  filter.addEventListener('input', fill);
  app.append(filter, el('div', { class: 'pane' }, tbl));
  fill();
}

// ---- the differential flame graph --------------------------------------

class DiffFlame extends FlameGraph {
  constructor(app) {
    app.append(el('h2', { text: 'Differential flame graph' }));
    app.append(el('p', { class: 'note diff-legend', text:
      'Each path of B and A merged (A scaled to B\'s total); width: the larger of the two; ' +
      'red: the path\'s share grew from A to B, blue: it shrank, white: unchanged. Click to zoom.' }));
    const T = D.tree;
    super(app, 'diff', T.parent);
    // The shade is the change: ancestors of the zoomed frame are not faded.
    this.font = '11px ui-monospace,monospace'; this.dimAncestors = false;
    this.n = T.name.length;
    this.inclA = Float64Array.from(T.a); this.inclB = Float64Array.from(T.b);
    for (let i = this.n - 1; i >= 0; i--) {
      const p = T.parent[i];
      if (p >= 0) { this.inclA[p] += this.inclA[i]; this.inclB[p] += this.inclB[i]; }
    }
    this.children = Array.from({ length: this.n }, () => []);
    this.roots = [];
    for (let i = 0; i < this.n; i++) (T.parent[i] >= 0 ? this.children[T.parent[i]] : this.roots).push(i);
    const byName = (x, y) => this.name(x).localeCompare(this.name(y));
    this.roots.sort(byName); this.children.forEach((k) => k.sort(byName));
    this.totalB = this.roots.reduce((s, r) => s + this.inclB[r], 0);
  }

  // The box's width less 4 pixels, as this page has always drawn it (the
  // report's leaves 20).
  canvasWidth() { return Math.max(300, this.box.clientWidth - 4); }

  // A click outside every frame zooms out.
  clicked(r) { this.zoomTo(r ? r.node : -1); }

  kids(i) { return i < 0 ? this.roots : this.children[i]; }

  size(i) { return Math.max(this.inclA[i], this.inclB[i]); }

  name(i) { return D.tree.names[D.tree.name[i]]; }

  colour(i) {
    const a = this.inclA[i], b = this.inclB[i];
    const r = (b - a) / Math.max(a, b, 1);
    const t = Math.min(1, Math.abs(r));
    const shade = Math.round(255 - 175 * t);
    return r > 0 ? `rgb(255,${shade},${shade})` : `rgb(${shade},${shade},255)`;
  }

  pct(x, digits) { return (100 * x / Math.max(this.totalB, 1)).toFixed(digits) + '%'; }

  tipText(i) {
    const a = this.inclA[i], b = this.inclB[i];
    return `${this.name(i)}\nA ${this.pct(a, 2)} → B ${this.pct(b, 2)} (${b >= a ? '+' : ''}${this.pct(b - a, 2)})`;
  }

  summary(m) {
    if (!m) return '';
    let a = 0, b = 0;
    for (const i of m.top) { a += this.inclA[i]; b += this.inclB[i]; }
    return `matches: A ${this.pct(a, 1)} → B ${this.pct(b, 1)}`;
  }

  searchFor(text) { this.search.value = text; this.query = text.toLowerCase(); this.draw(); this.box.scrollIntoView(); }
}

const app = document.getElementById('app');
header(app);
let flame = null;
table(app);
flame = new DiffFlame(app);
flame.draw();
window.addEventListener('resize', () => { flame.width = 0; flame.draw(); });
document.body.setAttribute('data-ready', '1');
