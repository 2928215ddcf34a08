// diff.js — the `slowlab diff --html` page: the comparison's rows as a
// sortable, filterable table, and a differential flame graph of the merged
// call tree (width: the larger of A and B; colour: red where the path's
// share grew from A to B, blue where it shrank), with click-to-zoom,
// search that highlights and sums, and hover for the numbers. Every trace
// string goes through textContent or fillText.
'use strict';

const D = JSON.parse(document.getElementById('slowlab-data').textContent);
const ROW = 17;

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v; else if (k === 'text') e.textContent = v; else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k);
  return e;
}

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

class DiffFlame {
  constructor(app) {
    const T = D.tree;
    this.n = T.name.length;
    this.inclA = Float64Array.from(T.a); this.inclB = Float64Array.from(T.b);
    for (let i = this.n - 1; i >= 0; i--) {
      const p = T.parent[i];
      if (p >= 0) { this.inclA[p] += this.inclA[i]; this.inclB[p] += this.inclB[i]; }
    }
    this.kids = Array.from({ length: this.n }, () => []);
    this.roots = [];
    for (let i = 0; i < this.n; i++) (T.parent[i] >= 0 ? this.kids[T.parent[i]] : this.roots).push(i);
    const width = (i) => Math.max(this.inclA[i], this.inclB[i]);
    const byName = (x, y) => this.name(x).localeCompare(this.name(y));
    this.roots.sort(byName); this.kids.forEach((k) => k.sort(byName));
    this.width = width;
    this.total = this.roots.reduce((s, r) => s + width(r), 0);
    this.totalB = this.roots.reduce((s, r) => s + this.inclB[r], 0);
    this.zoom = -1; this.query = '';

    app.append(el('h2', { text: 'Differential flame graph' }));
    app.append(el('p', { class: 'note diff-legend', text:
      'Each path of B and A merged (A scaled to B\'s total); width: the larger of the two; ' +
      'red: the path\'s share grew from A to B, blue: it shrank, white: unchanged. Click to zoom.' }));
    const bar = el('div', { class: 'flame-bar' });
    this.search = el('input', { type: 'search', placeholder: 'search functions', class: 'flame-search', id: 'diff-search' });
    this.result = el('span', { class: 'search-result', id: 'diff-search-result' });
    const reset = el('button', { text: 'reset zoom', id: 'diff-reset' });
    bar.append(this.search, this.result, reset);
    this.canvas = el('canvas', { class: 'flame-canvas', id: 'diff-canvas' });
    this.tip = el('div', { class: 'tip' });
    this.box = el('div', { class: 'flame diff-flame' }, bar,
      el('div', { class: 'flame-wrap' }, el('div', { class: 'flame-scroll' }, this.canvas), this.tip));
    app.append(this.box);
    this.search.addEventListener('input', () => { this.query = this.search.value.trim().toLowerCase(); this.draw(); });
    reset.addEventListener('click', () => { this.zoom = -1; this.draw(); });
    this.canvas.addEventListener('click', (e) => { const i = this.hit(e); this.zoom = i; this.draw(); });
    this.canvas.addEventListener('mousemove', (e) => this.hover(e));
    this.canvas.addEventListener('mouseleave', () => { this.tip.style.display = 'none'; });
    window.addEventListener('resize', () => this.draw());
  }

  name(i) { return D.tree.names[D.tree.name[i]]; }

  searchFor(text) { this.search.value = text; this.query = text.toLowerCase(); this.draw(); this.box.scrollIntoView(); }

  // Boxes to draw: [node, x0, x1, depth], the zoomed node's ancestors full width.
  layout(widthPx) {
    const boxes = [];
    let top = this.roots, scale = widthPx / Math.max(this.total, 1), depth = 0;
    if (this.zoom >= 0) {
      const chain = [];
      for (let i = this.zoom; i >= 0; i = D.tree.parent[i]) chain.unshift(i);
      for (const i of chain.slice(0, -1)) boxes.push([i, 0, widthPx, depth++]);
      top = [this.zoom]; scale = widthPx / Math.max(this.width(this.zoom), 1);
    }
    const walk = (nodes, x, d) => {
      for (const i of nodes) {
        const w = this.width(i) * scale;
        if (w >= 0.5) { boxes.push([i, x, x + w, d]); walk(this.kids[i], x, d + 1); }
        x += w;
      }
    };
    walk(top, 0, depth);
    return boxes;
  }

  colour(i) {
    const a = this.inclA[i], b = this.inclB[i];
    const r = (b - a) / Math.max(a, b, 1);
    const t = Math.min(1, Math.abs(r));
    const shade = Math.round(255 - 175 * t);
    return r > 0 ? `rgb(255,${shade},${shade})` : `rgb(${shade},${shade},255)`;
  }

  draw() {
    const widthPx = Math.max(300, this.box.clientWidth - 4);
    this.boxes = this.layout(widthPx);
    const depth = this.boxes.reduce((m, b) => Math.max(m, b[3]), 0) + 1;
    const ratio = window.devicePixelRatio || 1;
    this.canvas.width = widthPx * ratio; this.canvas.height = depth * ROW * ratio;
    this.canvas.style.width = widthPx + 'px'; this.canvas.style.height = depth * ROW + 'px';
    const g = this.canvas.getContext('2d');
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.font = '11px ui-monospace,monospace'; g.textBaseline = 'middle';
    let matchA = 0, matchB = 0;
    const counted = new Set();
    for (const [i, x0, x1, d] of this.boxes) {
      const hit = this.query && this.name(i).toLowerCase().includes(this.query);
      g.fillStyle = hit ? '#e040fb' : this.colour(i);
      g.fillRect(x0, d * ROW, Math.max(x1 - x0 - 0.5, 0.5), ROW - 1);
      if (x1 - x0 > 30) {
        g.fillStyle = '#111';
        g.save(); g.beginPath(); g.rect(x0, d * ROW, x1 - x0 - 2, ROW); g.clip();
        g.fillText(this.name(i), x0 + 3, d * ROW + ROW / 2); g.restore();
      }
      // A match inside a match is counted once.
      if (hit) {
        let covered = false;
        for (let p = D.tree.parent[i]; p >= 0; p = D.tree.parent[p]) if (counted.has(p)) { covered = true; break; }
        if (!covered) { counted.add(i); matchA += this.inclA[i]; matchB += this.inclB[i]; }
      }
    }
    const pct = (x) => (100 * x / Math.max(this.totalB, 1)).toFixed(1) + '%';
    this.result.textContent = this.query ? `matches: A ${pct(matchA)} → B ${pct(matchB)}` : '';
    this.canvas.setAttribute('data-zoom', this.zoom >= 0 ? this.name(this.zoom) : '');
    document.body.setAttribute('data-ready', '1');
  }

  hit(e) {
    const r = this.canvas.getBoundingClientRect();
    const x = e.clientX - r.left, d = Math.floor((e.clientY - r.top) / ROW);
    const b = (this.boxes || []).find(([, x0, x1, dd]) => dd === d && x >= x0 && x < x1);
    return b ? b[0] : -1;
  }

  hover(e) {
    const i = this.hit(e);
    if (i < 0) { this.tip.style.display = 'none'; return; }
    const pct = (x) => (100 * x / Math.max(this.totalB, 1)).toFixed(2) + '%';
    this.tip.textContent = `${this.name(i)}\nA ${pct(this.inclA[i])} → B ${pct(this.inclB[i])}` +
      ` (${this.inclB[i] >= this.inclA[i] ? '+' : ''}${pct(this.inclB[i] - this.inclA[i])})`;
    const r = this.canvas.getBoundingClientRect();
    this.tip.style.left = (e.clientX - r.left + 12) + 'px';
    this.tip.style.top = (e.clientY - r.top + 12) + 'px';
    this.tip.style.display = 'block';
  }
}

const app = document.getElementById('app');
header(app);
let flame = null;
table(app);
flame = new DiffFlame(app);
flame.draw();
