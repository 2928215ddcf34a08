// flame.js — the flame graph of both pages (the report's CPU and blocked
// graphs, `slowlab diff --html`'s differential one): frames laid out from a
// tree, root on top and callees below, each as wide as its weight, drawn on
// a canvas; click a frame to zoom into it (its ancestors stay above it, full
// width), search to highlight the matching frames and sum them, hover for
// the numbers. Each page subclasses FlameGraph with what differs: its tree,
// the weights, colours and tooltips of its frames, what the search's sum
// reads. Text goes through fillText/textContent only. Also `el`, how the
// pages' scripts make elements.
'use strict';

const ROW = 17;
const MATCH_COLOUR = '#e040fb';

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v; else if (k === 'text') e.textContent = v; else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k);
  return e;
}

// The frames are a tree's nodes 0..n-1, parents before children, given by
// `parent` (-1 for a root). A subclass defines
//   kids(i)     i's children in drawing order (i = -1: the roots)
//   size(i)     the weight of i's frame, its width (0: not drawn)
//   name(i)     its label, what the search matches
//   colour(i)   its fill
//   tipText(i)  what hovering it shows
//   summary(m)  the search's result: m = {top, frames}, the matching nodes
//               no ancestor of which matches (their weights sum with none
//               counted twice) and the number of matching frames; null
//               without a search
// and may set, before the first draw, `font`, `allRow` (a top row, node
// -1, for the whole tree, labelled name(-1), that zooms out when clicked)
// and `dimAncestors` (the zoomed frame's ancestors drawn faded).
// The box's id is ID-flame, and its search, result, reset button and
// canvas have ids ID-search, ID-search-result, ID-reset and ID-canvas.
class FlameGraph {
  constructor(root, id, parent) {
    this.parent = parent;
    this.zoom = -1; this.query = ''; this.width = 0; this.total = 0; this.rects = [];
    this.font = '11px sans-serif'; this.allRow = false; this.dimAncestors = true;
    this.box = el('div', { class: 'flame', id: id + '-flame' });
    this.bar = el('div', { class: 'flame-bar' });
    this.search = el('input', { type: 'search', placeholder: 'search functions', class: 'flame-search', id: id + '-search' });
    this.result = el('span', { class: 'search-result', id: id + '-search-result' });
    const reset = el('button', { text: 'reset zoom', class: 'reset-zoom', id: id + '-reset' });
    this.bar.append(this.search, this.result, reset);
    this.canvas = el('canvas', { class: 'flame-canvas', id: id + '-canvas' });
    this.tip = el('div', { class: 'tip' });
    this.scrollBox = el('div', { class: 'flame-scroll' }, this.canvas);
    this.wrap = el('div', { class: 'flame-wrap' }, this.scrollBox, this.tip);
    this.box.append(this.bar, this.wrap);
    root.append(this.box);
    this.search.addEventListener('input', () => { this.query = this.search.value.trim().toLowerCase(); this.draw(); });
    reset.addEventListener('click', () => this.zoomTo(-1));
    this.canvas.addEventListener('click', (e) => this.clicked(this.at(e)));
    this.canvas.addEventListener('mousemove', (e) => this.hover(e));
    this.canvas.addEventListener('mouseleave', () => { this.tip.style.display = 'none'; });
  }

  // The canvas's width in CSS pixels, read again once `width` is reset to 0.
  canvasWidth() { return Math.max(300, (this.wrap.clientWidth || 920) - 20); }

  // A click on frame `r` (null: on none).
  clicked(r) { if (r) this.zoomTo(r.node); }

  zoomTo(node) { this.zoom = node; this.draw(); }

  // The frames to draw: {node, x, w, d}. The whole tree's row, if any, the
  // zoomed frame's ancestors and itself at full width, its descendants (or
  // without a zoom the roots') at their weights' widths down to 0.4 pixel.
  layout(width) {
    const rects = [];
    const chain = [];
    for (let x = this.zoom; x >= 0; x = this.parent[x]) chain.unshift(x);
    let d = 0;
    if (this.allRow) rects.push({ node: -1, x: 0, w: width, d: d++ });
    for (const n of chain) rects.push({ node: n, x: 0, w: width, d: d++ });
    this.zoomRow = d - 1;
    const base = this.zoom >= 0 ? this.size(this.zoom) : this.total;
    if (!base) return rects;
    const scale = width / base;
    const walk = (node, x, d) => {
      for (const k of this.kids(node)) {
        const w = this.size(k) * scale;
        if (w >= 0.4) {
          rects.push({ node: k, x, w, d });
          if (w >= 1) walk(k, x, d + 1);
        }
        x += w;
      }
    };
    walk(this.zoom, 0, d);
    return rects;
  }

  matches(node) {
    return this.query && node >= 0 && this.name(node).toLowerCase().includes(this.query);
  }

  // The search's matches over the whole tree, for `summary`.
  found() {
    const parent = this.parent, n = parent.length, covered = new Uint8Array(n), top = [];
    let frames = 0;
    for (let i = 0; i < n; i++) {
      const up = parent[i] >= 0 && covered[parent[i]];
      const hit = this.matches(i) && this.size(i) > 0;
      if (hit) frames++;
      if (hit && !up) top.push(i);
      covered[i] = up || hit ? 1 : 0;
    }
    return { top, frames };
  }

  draw() {
    if (!this.width) this.width = this.canvasWidth();
    const width = this.width;
    this.total = 0;
    for (const r of this.kids(-1)) this.total += this.size(r);
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
    g.font = this.font;
    g.textBaseline = 'middle';
    const dim = this.dimAncestors && this.zoom >= 0;
    for (const r of rects) {
      const y = r.d * ROW;
      g.fillStyle = this.matches(r.node) ? MATCH_COLOUR : this.colour(r.node);
      g.globalAlpha = dim && r.d < this.zoomRow ? 0.55 : 1;
      g.fillRect(r.x, y, Math.max(r.w - 0.5, 0.5), ROW - 1);
      g.globalAlpha = 1;
      if (r.w > 28) {
        g.fillStyle = '#111';
        g.save();
        g.beginPath(); g.rect(r.x, y, r.w - 2, ROW); g.clip();
        g.fillText(this.name(r.node), r.x + 3, y + ROW / 2);
        g.restore();
      }
    }
    this.result.textContent = this.summary(this.query ? this.found() : null);
    this.canvas.setAttribute('data-zoom', this.zoom >= 0 ? this.name(this.zoom) : '');
  }

  at(e) {
    const box = this.canvas.getBoundingClientRect();
    const x = e.clientX - box.left, d = Math.floor((e.clientY - box.top) / ROW);
    for (const r of this.rects) if (r.d === d && x >= r.x && x < r.x + r.w) return r;
    return null;
  }

  hover(e) {
    const r = this.at(e);
    if (!r) { this.tip.style.display = 'none'; return; }
    this.tip.textContent = this.tipText(r.node);
    const box = this.wrap.getBoundingClientRect();
    this.tip.style.left = Math.min(e.clientX - box.left + 12, box.width - 260) + 'px';
    this.tip.style.top = (e.clientY - box.top + 14) + 'px';
    this.tip.style.display = 'block';
  }
}
