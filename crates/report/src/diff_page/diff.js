// diff.js — the `slowlab diff --html` page: the comparison's rows as a
// sortable, filterable table, and a differential flame graph of the merged
// call tree (width: the larger of A and B; colour: red where the path's
// share grew from A to B, blue where it shrank), drawn by the report's
// flame.js (which comes first in the page's script, and gives `el`):
// click-to-zoom, search that highlights and sums, and hover for the
// numbers. On `slowlab diagnose` directories it starts with the critical
// paths compared (D.paths): A's and B's path as two bars of coloured
// stretches on one time axis (an SVG built here, each stretch's cause in
// its <title>) and the causes' table; the CPU part follows when D.view is
// there. Every trace string goes through textContent or fillText.
'use strict';

const D = JSON.parse(document.getElementById('slowlab-data').textContent);

const V = D.view || {};
const perSecond = V.normalize === 'duration';
const cost = (x) => (x == null ? '' : perSecond ? x.toFixed(1) + '/s' : x.toFixed(2) + '%');
const signed = (x) => (x > 0 ? '+' : '') + cost(x);

// ---- the answer and the table ------------------------------------------

function header(app) {
  if (!D.paths) app.append(el('h1', { text: D.title }));
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

// ---- the critical paths compared ---------------------------------------

const SVG = 'http://www.w3.org/2000/svg';
function svg(tag, attrs, ...kids) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'text') e.textContent = v; else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k);
  return e;
}

// The colour of each stretch class (bar pieces' `class`).
const PATH_COLOURS = [
  ['cpu', '#3b7dd8', 'on a CPU'], ['runnable', '#f2b233', 'waiting for a CPU'],
  ['lock', '#d8453b', 'lock'], ['io', '#8e44ad', 'disk'], ['sleep', '#9aa5b1', 'sleep'],
  ['ipc', '#2e9e6a', 'another thread or process'], ['fault', '#e67e22', 'page fault'],
  ['other', '#6b6b6b', 'other wait'],
];
const PATH_FILL = Object.fromEntries(PATH_COLOURS.map(([k, c]) => [k, c]));
const secs = (x) => x.toFixed(3) + ' s';
const signedSecs = (x) => (x > 0 ? '+' : '') + x.toFixed(3);

function pathsSection(app) {
  const P = D.paths, PD = P.diff;
  app.append(el('h1', { text: D.title }));
  app.append(el('p', { class: 'summary', id: 'paths-summary', text: PD.summary }));
  for (const w of PD.warnings) app.append(el('p', { class: 'note', text: 'Warning: ' + w }));
  app.append(el('h2', { text: 'Critical paths, on one time axis' }));
  const runs = (s) => s.runs_s.length > 1 ? ` (first of ${s.runs_s.length} runs; mean ${secs(s.wall_s)})` : '';
  app.append(el('p', { class: 'note', text:
    'Each bar is the run\'s critical path from its root\'s start to its end, as long as its wall time; ' +
    'hover a stretch for its cause.' }));
  const W = 1000, left = 40, right = 20, barH = 28, gap = 18, top = 16;
  const maxWall = Math.max(P.bars[0].wall_s, P.bars[1].wall_s, 1e-9);
  const x = (t) => left + (W - left - right) * t / maxWall;
  const height = top + 2 * barH + gap + 34;
  const root = svg('svg', { id: 'path-bars', viewBox: `0 0 ${W} ${height}`, width: '100%', role: 'img' });
  P.bars.forEach((bar, i) => {
    const y = top + i * (barH + gap);
    const label = i === 0 ? 'A' : 'B';
    root.append(svg('text', { x: 4, y: y + barH / 2 + 5, 'font-weight': 'bold', text: label }));
    const g = svg('g', { class: 'path-bar', 'data-side': label, 'data-wall': String(bar.wall_s),
      'data-width': String(x(bar.wall_s) - x(0)) });
    for (const p of bar.pieces) {
      const r = svg('rect', { x: x(p.from_s), y, width: Math.max(0, x(p.to_s) - x(p.from_s)), height: barH,
        fill: PATH_FILL[p.class] || '#999', class: 'piece ' + p.class });
      r.append(svg('title', { text: `${p.what}\n${secs(p.to_s - p.from_s)} (${secs(p.from_s)} – ${secs(p.to_s)})` }));
      g.append(r);
    }
    g.append(svg('rect', { x: x(0), y, width: x(bar.wall_s) - x(0), height: barH, fill: 'none', stroke: '#333' }));
    root.append(g);
    root.append(svg('text', { x: Math.min(x(bar.wall_s) + 4, W - right - 60), y: y - 2, 'font-size': 11,
      text: secs(bar.wall_s) + runs(i === 0 ? PD.a : PD.b) }));
  });
  // The shared axis, with about six round ticks.
  const axisY = top + 2 * barH + gap + 6;
  root.append(svg('line', { x1: x(0), x2: x(maxWall), y1: axisY, y2: axisY, stroke: '#333' }));
  const raw = maxWall / 6, mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw);
  for (let t = 0; t <= maxWall + 1e-9; t += step) {
    root.append(svg('line', { x1: x(t), x2: x(t), y1: axisY, y2: axisY + 4, stroke: '#333' }));
    root.append(svg('text', { x: x(t), y: axisY + 16, 'font-size': 11, 'text-anchor': 'middle',
      text: +t.toPrecision(6) + ' s' }));
  }
  app.append(el('div', { class: 'pane' }, root));
  const legend = el('p', { class: 'note diff-legend' });
  for (const [k, c, label] of PATH_COLOURS) {
    legend.append(el('span', { class: 'sw', style: `background:${c}`, text: '\u00a0\u00a0\u00a0' }), ' ' + label + '  ');
  }
  app.append(legend);
  causesTable(app, PD);
}

function causesTable(app, PD) {
  app.append(el('h2', { text: 'The critical path\'s change by cause' }));
  const noise = PD.interval != null;
  const tbl = el('table', { class: 'data', id: 'cause-table' });
  const head = el('tr');
  for (const [t, num] of [['state', 0], ['kind', 0], ['process', 0], ['thread', 0],
    ['function / resource', 0], ['A s', 1], ['B s', 1], ['change', 1], ['interval', 1]]) {
    head.append(el('th', { text: t, class: num ? 'num' : '' }));
  }
  const body = el('tbody');
  for (const c of PD.causes) {
    const row = el('tr', { class: c.significant ? '' : 'insignificant' });
    row.append(el('td', { text: c.state }), el('td', { text: c.kind || '' }),
      el('td', { text: c.process }), el('td', { text: c.thread }),
      el('td', { text: c.function || c.resource || '' }),
      el('td', { class: 'num', text: c.a_s.toFixed(3) }), el('td', { class: 'num', text: c.b_s.toFixed(3) }),
      el('td', { class: 'num ' + (c.delta_s > 0 ? 'grew' : c.delta_s < 0 ? 'shrank' : ''), text: signedSecs(c.delta_s) }),
      el('td', { class: 'num', text: c.interval ? `[${signedSecs(c.interval[0])}, ${signedSecs(c.interval[1])}]` :
        noise ? '' : '—' }));
    body.append(row);
  }
  tbl.append(el('thead', {}, head), body);
  app.append(el('p', { class: 'note', text:
    `A ${secs(PD.a.wall_s)} → B ${secs(PD.b.wall_s)} (${signedSecs(PD.delta_s)} s); the changes add up to it. ` +
    (noise ? 'Greyed rows do not clear the runs\' own noise.' : 'One run per side: no interval.') }));
  app.append(el('div', { class: 'pane' }, tbl));
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
if (D.paths) pathsSection(app);
let flame = null;
if (D.view) {
  if (D.paths) app.append(el('h2', { class: 'part', text: 'Sampled CPU of the first run of each side' }));
  header(app);
  table(app);
  flame = new DiffFlame(app);
  flame.draw();
  window.addEventListener('resize', () => { flame.width = 0; flame.draw(); });
}
document.body.setAttribute('data-ready', '1');
