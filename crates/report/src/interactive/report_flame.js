// report_flame.js — the report's flame graphs (CPU samples, blocked time)
// of the stack tree, drawn by flame.js: weights from the selection, a row
// for everything on top, frames coloured by their function's kind and
// name, and the butterfly of the clicked function (its callers and callees).
'use strict';

function hashHue(s) {
  let h = 0;
  for (let i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) | 0;
  return Math.abs(h);
}

class ReportFlame extends FlameGraph {
  // `fmt(weight)` formats a weight for people (samples as time, µs); the
  // box's id is ID-flame.
  constructor(M, root, id, title, fmt) {
    super(root, id, M.parent);
    this.M = M; this.fmt = fmt; this.focusFunc = -1; this.allRow = true;
    this.w = new Float64Array(M.nStacks); this.incl = new Float64Array(M.nStacks);
    this.zoomLabel = el('span', { class: 'zoom-label' });
    this.bar.prepend(el('h3', { text: title }));
    this.bar.append(this.zoomLabel);
    this.butterfly = el('div', { class: 'butterfly' });
    this.box.append(this.butterfly);
  }

  setWeights(w) {
    const M = this.M;
    this.w = w;
    const incl = Float64Array.from(w);
    for (let i = M.nStacks - 1; i >= 0; i--) if (M.parent[i] >= 0) incl[M.parent[i]] += incl[i];
    this.incl = incl;
    if (this.zoom >= 0 && !incl[this.zoom]) this.zoom = -1;
    this.draw();
    this.drawButterfly();
  }

  kids(node) {
    const M = this.M, incl = this.incl, n = node < 0 ? M.nStacks : node, kids = [];
    for (let k = M.kidOff[n]; k < M.kidOff[n + 1]; k++) if (incl[M.kids[k]] > 0) kids.push(M.kids[k]);
    return kids.sort((p, q) => (M.funcName[M.func[p]] < M.funcName[M.func[q]] ? -1 : 1));
  }

  size(node) { return this.incl[node]; }

  name(node) { return node < 0 ? 'all (' + this.fmt(this.total) + ')' : this.M.funcName[this.M.func[node]]; }

  colour(node) {
    const M = this.M;
    if (node < 0) return '#bbb';
    const f = M.func[node];
    if (M.funcKind[f] === 2) return '#c9c9c9';
    const h = hashHue(M.funcName[f]);
    return M.funcKind[f] === 1 ? `hsl(${20 + (h % 25)},75%,${62 + (h % 10)}%)` : `hsl(${h % 50},80%,${55 + (h % 12)}%)`;
  }

  tipText(node) {
    const M = this.M;
    const v = node < 0 ? this.total : this.incl[node];
    const name = node < 0 ? 'all' : M.funcName[M.func[node]];
    const mod = node < 0 ? '' : M.funcModule[M.func[node]];
    const pct = this.total ? (100 * v / this.total).toFixed(2) : '0';
    const self = node < 0 ? '' : ', self ' + this.fmt(this.w[node]);
    return `${name}${mod ? ' [' + mod + ']' : ''}\n${this.fmt(v)} (${pct}%)${self}`;
  }

  // The sum of the matching frames, nested matches counted once.
  summary(m) {
    if (!this.total) return 'nothing in the selection';
    if (!m) return '';
    let sum = 0;
    for (const n of m.top) sum += this.incl[n];
    return `${m.frames} matching frames: ${this.fmt(sum)} (${(100 * sum / this.total).toFixed(1)}%)`;
  }

  draw() {
    super.draw();
    this.zoomLabel.textContent = this.zoom >= 0 ? 'zoomed into ' + this.M.funcName[this.M.func[this.zoom]] : '';
  }

  zoomTo(node) {
    const M = this.M;
    this.focusFunc = node >= 0 && M.funcKind[M.func[node]] !== 2 ? M.func[node] : -1;
    super.zoomTo(node);
    this.drawButterfly();
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
