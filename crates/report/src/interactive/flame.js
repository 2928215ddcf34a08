// flame.js — a flame graph (root on top, callees below) drawn on a canvas
// from per-stack-node weights: click a frame to zoom into it and show its
// callers and callees (butterfly), search to highlight and sum matching
// frames, hover for the numbers. Text goes through fillText/textContent
// only.
'use strict';

const ROW = 17;

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v; else if (k === 'text') e.textContent = v; else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k);
  return e;
}

function hashHue(s) {
  let h = 0;
  for (let i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) | 0;
  return Math.abs(h);
}

class FlameGraph {
  // `fmt(weight)` formats a weight for people (samples as time, µs).
  constructor(M, root, id, title, fmt) {
    this.M = M; this.fmt = fmt; this.zoom = -1; this.focusFunc = -1; this.query = '';
    this.w = new Float64Array(M.nStacks); this.incl = new Float64Array(M.nStacks); this.total = 0;
    this.box = el('div', { class: 'flame', id });
    const bar = el('div', { class: 'flame-bar' });
    this.search = el('input', { type: 'search', placeholder: 'search functions', class: 'flame-search' });
    this.result = el('span', { class: 'search-result' });
    this.zoomLabel = el('span', { class: 'zoom-label' });
    const reset = el('button', { text: 'reset zoom', class: 'reset-zoom' });
    bar.append(el('h3', { text: title }), this.search, this.result, reset, this.zoomLabel);
    this.canvas = el('canvas', { class: 'flame-canvas' });
    this.tip = el('div', { class: 'tip' });
    this.scrollBox = el('div', { class: 'flame-scroll' }, this.canvas);
    this.wrap = el('div', { class: 'flame-wrap' }, this.scrollBox, this.tip);
    this.butterfly = el('div', { class: 'butterfly' });
    this.box.append(bar, this.wrap, this.butterfly);
    root.append(this.box);
    this.search.addEventListener('input', () => { this.query = this.search.value.trim().toLowerCase(); this.draw(); });
    reset.addEventListener('click', () => { this.zoom = -1; this.focusFunc = -1; this.draw(); this.drawButterfly(); });
    this.canvas.addEventListener('click', (e) => this.click(e));
    this.canvas.addEventListener('mousemove', (e) => this.hover(e));
    this.canvas.addEventListener('mouseleave', () => { this.tip.style.display = 'none'; });
  }

  setWeights(w) {
    const M = this.M;
    this.w = w;
    const incl = Float64Array.from(w);
    for (let i = M.nStacks - 1; i >= 0; i--) if (M.parent[i] >= 0) incl[M.parent[i]] += incl[i];
    this.incl = incl;
    let total = 0;
    for (let i = 0; i < M.nStacks; i++) if (M.parent[i] < 0) total += incl[i];
    this.total = total;
    if (this.zoom >= 0 && !incl[this.zoom]) this.zoom = -1;
    this.draw();
    this.drawButterfly();
  }

  // The frames to draw: {node, x, w, d}; node -1 is "all".
  layout(width) {
    const M = this.M, incl = this.incl, rects = [];
    const chain = [];
    for (let x = this.zoom; x >= 0; x = M.parent[x]) chain.unshift(x);
    rects.push({ node: -1, x: 0, w: width, d: 0 });
    chain.forEach((n, i) => rects.push({ node: n, x: 0, w: width, d: i + 1 }));
    const base = this.zoom >= 0 ? incl[this.zoom] : this.total;
    if (!base) return rects;
    const scale = width / base;
    const walk = (node, x, d) => {
      const a = M.kidOff[node < 0 ? M.nStacks : node], b = M.kidOff[(node < 0 ? M.nStacks : node) + 1];
      const kids = [];
      for (let k = a; k < b; k++) if (incl[M.kids[k]] > 0) kids.push(M.kids[k]);
      kids.sort((p, q) => (M.funcName[M.func[p]] < M.funcName[M.func[q]] ? -1 : 1));
      for (const k of kids) {
        const w = incl[k] * scale;
        if (w >= 0.4) {
          rects.push({ node: k, x, w, d });
          if (w >= 1) walk(k, x, d + 1);
        }
        x += w;
      }
    };
    walk(this.zoom, 0, chain.length + 1);
    return rects;
  }

  matches(node) {
    return this.query && node >= 0 && this.M.funcName[this.M.func[node]].toLowerCase().includes(this.query);
  }

  draw() {
    const M = this.M;
    if (!this.width) this.width = Math.max(300, (this.wrap.clientWidth || 920) - 20);
    const width = this.width;
    const rects = this.layout(width);
    this.rects = rects;
    let depth = 0;
    for (const r of rects) depth = Math.max(depth, r.d);
    const dpr = window.devicePixelRatio || 1;
    const height = (depth + 1) * ROW;
    this.canvas.width = width * dpr; this.canvas.height = height * dpr;
    this.canvas.style.width = width + 'px'; this.canvas.style.height = height + 'px';
    const g = this.canvas.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.font = '11px sans-serif';
    g.textBaseline = 'middle';
    const chainDepth = this.zoom >= 0 ? M.depth[this.zoom] + 1 : 0;
    for (const r of rects) {
      const y = r.d * ROW;
      let color;
      if (r.node < 0) color = '#bbb';
      else if (this.matches(r.node)) color = '#e040fb';
      else if (M.funcKind[M.func[r.node]] === 2) color = '#c9c9c9';
      else {
        const h = hashHue(M.funcName[M.func[r.node]]);
        color = M.funcKind[M.func[r.node]] === 1 ? `hsl(${20 + (h % 25)},75%,${62 + (h % 10)}%)` : `hsl(${h % 50},80%,${55 + (h % 12)}%)`;
      }
      g.fillStyle = color;
      g.globalAlpha = r.d <= chainDepth && r.node !== this.zoom && this.zoom >= 0 ? 0.55 : 1;
      g.fillRect(r.x, y, Math.max(r.w - 0.5, 0.5), ROW - 1);
      g.globalAlpha = 1;
      if (r.w > 28) {
        const name = r.node < 0 ? 'all (' + this.fmt(this.total) + ')' : M.funcName[M.func[r.node]];
        g.fillStyle = '#111';
        g.save();
        g.beginPath(); g.rect(r.x, y, r.w - 2, ROW); g.clip();
        g.fillText(name, r.x + 3, y + ROW / 2);
        g.restore();
      }
    }
    // Search: the sum of matching frames, nested matches counted once.
    if (this.query) {
      const covered = new Uint8Array(M.nStacks);
      let sum = 0, frames = 0;
      for (let n = 0; n < M.nStacks; n++) {
        const up = M.parent[n] >= 0 && covered[M.parent[n]];
        const hit = this.matches(n) && this.incl[n] > 0;
        if (hit) frames++;
        if (hit && !up) sum += this.incl[n];
        covered[n] = up || hit ? 1 : 0;
      }
      const pct = this.total ? (100 * sum / this.total).toFixed(1) : '0';
      this.result.textContent = `${frames} matching frames: ${this.fmt(sum)} (${pct}%)`;
    } else this.result.textContent = '';
    this.zoomLabel.textContent = this.zoom >= 0 ? 'zoomed into ' + M.funcName[M.func[this.zoom]] : '';
    if (!this.total) this.result.textContent = 'nothing in the selection';
  }

  at(e) {
    const box = this.canvas.getBoundingClientRect();
    const x = e.clientX - box.left, d = Math.floor((e.clientY - box.top) / ROW);
    for (const r of this.rects || []) if (r.d === d && x >= r.x && x < r.x + r.w) return r;
    return null;
  }

  click(e) {
    const r = this.at(e);
    if (!r) return;
    this.zoom = r.node;
    this.focusFunc = r.node >= 0 && this.M.funcKind[this.M.func[r.node]] !== 2 ? this.M.func[r.node] : -1;
    this.draw();
    this.drawButterfly();
  }

  hover(e) {
    const r = this.at(e);
    if (!r) { this.tip.style.display = 'none'; return; }
    const M = this.M;
    const v = r.node < 0 ? this.total : this.incl[r.node];
    const name = r.node < 0 ? 'all' : M.funcName[M.func[r.node]];
    const mod = r.node < 0 ? '' : M.funcModule[M.func[r.node]];
    const pct = this.total ? (100 * v / this.total).toFixed(2) : '0';
    const self = r.node < 0 ? '' : ', self ' + this.fmt(this.w[r.node]);
    this.tip.textContent = `${name}${mod ? ' [' + mod + ']' : ''}\n${this.fmt(v)} (${pct}%)${self}`;
    const box = this.wrap.getBoundingClientRect();
    this.tip.style.left = Math.min(e.clientX - box.left + 12, box.width - 260) + 'px';
    this.tip.style.top = (e.clientY - box.top + 14) + 'px';
    this.tip.style.display = 'block';
  }

  // Callers and callees of the clicked function, merged over every place
  // it occurs (an occurrence inside another one of itself counted once).
  drawButterfly() {
    const M = this.M, f = this.focusFunc, incl = this.incl;
    this.butterfly.replaceChildren();
    if (f < 0) return;
    const top = [];
    const inside = new Uint8Array(M.nStacks);
    let total = 0;
    for (let n = 0; n < M.nStacks; n++) {
      const up = M.parent[n] >= 0 && inside[M.parent[n]];
      const hit = M.func[n] === f;
      if (hit && !up && incl[n] > 0) { top.push(n); total += incl[n]; }
      inside[n] = up || hit ? 1 : 0;
    }
    const newNode = () => ({ w: 0, kids: new Map() });
    const callers = newNode(), callees = newNode();
    for (const n of top) {
      let t = callers; t.w += incl[n];
      let depth = 0;
      for (let x = M.parent[n]; x >= 0 && depth < 12; x = M.parent[x], depth++) {
        const fx = M.func[x];
        if (!t.kids.has(fx)) t.kids.set(fx, newNode());
        t = t.kids.get(fx); t.w += incl[n];
      }
      const merge = (node, into, depth) => {
        into.w += incl[node];
        if (depth >= 10) return;
        for (let k = M.kidOff[node]; k < M.kidOff[node + 1]; k++) {
          const c = M.kids[k];
          if (!incl[c]) continue;
          if (!into.kids.has(M.func[c])) into.kids.set(M.func[c], newNode());
          merge(c, into.kids.get(M.func[c]), depth + 1);
        }
      };
      merge(n, callees, 0);
    }
    const render = (node, depth) => {
      const ul = el('ul');
      const kids = [...node.kids.entries()].sort((a, b) => b[1].w - a[1].w).slice(0, 12);
      for (const [fx, k] of kids) {
        const pct = total ? (100 * k.w / total).toFixed(1) : '0';
        const label = `${pct}%  ${this.fmt(k.w)}  ${M.funcName[fx]}`;
        const li = el('li');
        if (k.kids.size && depth < 12) {
          const d = el('details', depth < 2 ? { open: '' } : {}, el('summary', { text: label }));
          d.append(render(k, depth + 1));
          li.append(d);
        } else li.append(el('span', { text: label }));
        ul.append(li);
      }
      return ul;
    };
    const name = M.funcName[f];
    this.butterfly.append(
      el('h4', { text: `Butterfly of ${name}: ${this.fmt(total)} (${this.total ? (100 * total / this.total).toFixed(1) : 0}% of the selection)` }),
      el('div', { class: 'bf-cols' },
        el('div', { class: 'bf-callers' }, el('h5', { text: 'callers (who calls it), innermost caller first' }), render(callers, 0)),
        el('div', { class: 'bf-callees' }, el('h5', { text: 'callees (what it calls)' }), render(callees, 0))));
  }
}
