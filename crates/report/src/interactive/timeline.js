// timeline.js — one lane per thread over time, drawn on a canvas: state
// spans coloured by state (running, runnable, blocked by kind), sample
// density on top, faults and launches as marks, wake-up arrows into the
// focused thread, and the waits of the lock chosen in the Locks table
// outlined with an arrow from the holder that released each to its waiter.
// The command's processes come first, the others grouped
// by process and folded. Ctrl+wheel or the buttons zoom, shift+wheel or a
// drag on the axis pans, a drag over the lanes selects a time range; a
// click on a lane focuses its thread, on a thread's name selects it (shift
// adds), on a process's name folds or unfolds it.
'use strict';

const LANE = 18, LABEL_W = 210, AXIS_H = 30;

function fmtTime(us) {
  const a = Math.abs(us);
  if (a >= 1e6) return (us / 1e6).toFixed(a >= 1e7 ? 1 : 3) + ' s';
  if (a >= 1e3) return (us / 1e3).toFixed(a >= 1e4 ? 1 : 2) + ' ms';
  return us.toFixed(0) + ' µs';
}

class Timeline {
  constructor(M, root, app) {
    this.M = M; this.app = app;
    this.view = { from: M.meta.from_us, to: Math.max(M.meta.to_us, M.meta.from_us + 1) };
    this.focus = -1;
    this.buildGroups();
    const bar = el('div', { class: 'tl-bar' });
    const btn = (text, f) => { const b = el('button', { text }); b.addEventListener('click', f); bar.append(b); return b; };
    btn('zoom in', () => this.zoomBy(0.5, 0.5));
    btn('zoom out', () => this.zoomBy(2, 0.5));
    btn('fit', () => { this.view = { from: M.meta.from_us, to: Math.max(M.meta.to_us, M.meta.from_us + 1) }; this.draw(); });
    btn('zoom to selection', () => { const s = this.app.sel; if (s.to > s.from) { this.view = { from: s.from, to: s.to }; this.draw(); } });
    btn('unfold all', () => { this.groups.forEach((g) => { g.open = true; }); this.layoutRows(); this.draw(); });
    btn('fold others', () => { this.groups.forEach((g) => { g.open = g.tree; }); this.layoutRows(); this.draw(); });
    const legend = el('span', { class: 'legend' });
    STATE_NAMES.forEach((n, i) => {
      const sw = el('i', { class: 'sw' }); sw.style.background = STATE_COLORS[i];
      legend.append(sw, el('span', { text: (i >= 2 ? 'blocked: ' : '') + n + '  ' }));
    });
    const sm = el('i', { class: 'sw' }); sm.style.background = '#333';
    const fm = el('i', { class: 'sw' }); fm.style.background = '#e00';
    const lm = el('i', { class: 'sw' }); lm.style.background = '#000'; lm.style.width = '2px';
    legend.append(sm, el('span', { text: 'samples  ' }), fm, el('span', { text: 'faults  ' }), lm, el('span', { text: 'launch' }));
    bar.append(legend);
    this.lockStatus = el('span', { class: 'lock-status', id: 'lock-status' });
    this.lockClear = el('button', { text: 'clear lock' });
    this.lockClear.addEventListener('click', () => this.app.selectLock(this.app.lock));
    bar.append(this.lockStatus, this.lockClear);
    this.hint = el('div', { class: 'hint', text: 'drag over the lanes to select a time range · ctrl+wheel zooms · shift+wheel or dragging the axis pans · click a lane to show the wake-ups of its thread · click a thread name to select the thread (shift adds)' });
    this.axis = el('canvas', { class: 'tl-axis' });
    this.canvas = el('canvas', { class: 'tl-canvas' });
    this.spacer = el('div');
    this.scroll = el('div', { class: 'tl-scroll' }, this.canvas, this.spacer);
    this.tip = el('div', { class: 'tip' });
    this.box = el('div', { class: 'timeline', id: 'timeline' }, bar, this.hint, this.axis, this.scroll, this.tip);
    root.append(this.box);
    this.layoutRows();
    this.scrollTop = 0;
    this.scroll.addEventListener('scroll', () => { this.scrollTop = this.scroll.scrollTop; this.draw(); });
    this.bindMouse();
  }

  buildGroups() {
    const M = this.M, D = M.D;
    const has = new Uint8Array(M.nThreads);
    for (let t = 0; t < M.nThreads; t++) {
      has[t] = M.threadSamples[t] > 0 || M.spanOff[t + 1] > M.spanOff[t] || M.faultsByThread.off[t + 1] > M.faultsByThread.off[t] ? 1 : 0;
    }
    const byProc = new Map();
    for (let t = 0; t < M.nThreads; t++) {
      if (!has[t]) continue;
      const p = M.threadProc[t];
      if (!byProc.has(p)) byProc.set(p, []);
      byProc.get(p).push(t);
    }
    const groups = [...byProc.entries()].map(([p, threads]) => {
      let samples = 0;
      for (const t of threads) samples += M.threadSamples[t];
      const tree = D.processes.tree[p] === 1;
      return { p, threads, samples, tree, open: tree };
    });
    const start = (g) => { const s = D.processes.start[g.p]; return s < 0 ? -1 : s; };
    groups.sort((a, b) => (b.tree - a.tree) || (a.tree ? start(a) - start(b) : b.samples - a.samples) || a.p - b.p);
    // With no command tree, the busiest process starts unfolded.
    if (!groups.some((g) => g.tree) && groups.length) groups[0].open = true;
    this.groups = groups;
    // Samples of a whole process, for its folded lane.
    this.procSamples = new Map();
    for (const g of groups) {
      const idx = [];
      for (const t of g.threads) for (let k = M.samplesByThread.off[t]; k < M.samplesByThread.off[t + 1]; k++) idx.push(M.samplesByThread.idx[k]);
      idx.sort((a, b) => a - b);
      this.procSamples.set(g.p, Int32Array.from(idx));
    }
  }

  layoutRows() {
    this.rows = [];
    for (const g of this.groups) {
      this.rows.push({ group: g, thread: -1 });
      if (g.open) for (const t of g.threads) this.rows.push({ group: g, thread: t });
    }
    this.rowOf = new Map();
    this.rows.forEach((r, i) => { if (r.thread >= 0) this.rowOf.set(r.thread, i); });
    const h = Math.min(this.rows.length * LANE, 560);
    this.visibleH = Math.max(h, LANE);
    this.spacer.style.height = Math.max(0, this.rows.length * LANE - this.visibleH) + 'px';
    this.scroll.style.height = this.visibleH + 'px';
  }

  // Reveals a thread's lane (unfolding its process) and scrolls to it.
  reveal(t) {
    const g = this.groups.find((x) => x.threads.includes(t));
    if (g && !g.open) { g.open = true; this.layoutRows(); }
    const r = this.rowOf.get(t);
    if (r !== undefined) this.scroll.scrollTop = this.scrollTop = Math.max(0, r * LANE - LANE * 2);
  }

  // Unfolds the processes of threads `ts` and scrolls to the first lane.
  show(ts) {
    let changed = false, top = Infinity;
    for (const g of this.groups) if (!g.open && g.threads.some((t) => ts.has(t))) { g.open = true; changed = true; }
    if (changed) this.layoutRows();
    for (const t of ts) { const r = this.rowOf.get(t); if (r !== undefined) top = Math.min(top, r); }
    if (top < Infinity) this.scroll.scrollTop = this.scrollTop = Math.max(0, top * LANE - LANE);
  }

  x(t) { return LABEL_W + (t - this.view.from) / (this.view.to - this.view.from) * this.plotW; }
  t(x) { return this.view.from + (x - LABEL_W) / this.plotW * (this.view.to - this.view.from); }

  zoomBy(f, at) {
    const span = this.view.to - this.view.from;
    const c = this.view.from + span * at;
    let ns = Math.max(span * f, 10);
    const full = this.M.meta.to_us - this.M.meta.from_us;
    ns = Math.min(ns, Math.max(full, 1));
    let from = c - ns * at;
    from = Math.max(this.M.meta.from_us, Math.min(from, this.M.meta.to_us - ns));
    this.view = { from, to: from + ns };
    this.draw();
  }

  pan(dus) {
    const span = this.view.to - this.view.from;
    let from = Math.max(this.M.meta.from_us, Math.min(this.view.from + dus, this.M.meta.to_us - span));
    this.view = { from, to: from + span };
    this.draw();
  }

  setupCanvas(c, w, h) {
    const dpr = window.devicePixelRatio || 1;
    if (c.width !== w * dpr || c.height !== h * dpr) {
      c.width = w * dpr; c.height = h * dpr; c.style.width = w + 'px'; c.style.height = h + 'px';
    }
    const g = c.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    g.font = '11px sans-serif'; g.textBaseline = 'middle';
    return g;
  }

  draw() {
    const M = this.M, D = M.D, sel = this.app.sel;
    // The width is read on resize only: reading layout here would force
    // the browser to lay out the page's tables again on every draw.
    if (!this.width) this.width = Math.max(500, this.box.clientWidth || 1000);
    const width = this.width;
    this.plotW = width - LABEL_W - 4;
    // Axis: ticks, launches of every process, the selection.
    const a = this.setupCanvas(this.axis, width, AXIS_H);
    const span = this.view.to - this.view.from;
    const step = Math.pow(10, Math.floor(Math.log10(span / 8)));
    const tick = [1, 2, 5, 10].map((k) => k * step).find((s) => span / s <= 10) || step * 10;
    a.fillStyle = '#444'; a.strokeStyle = '#ccc';
    for (let t = Math.ceil(this.view.from / tick) * tick; t <= this.view.to; t += tick) {
      const x = this.x(t);
      a.fillRect(x, AXIS_H - 8, 1, 8);
      a.fillText(fmtTime(t), x + 3, 9);
    }
    a.fillStyle = '#000';
    for (let p = 0; p < M.nProcs; p++) {
      const s = D.processes.start[p];
      if (s >= this.view.from && s <= this.view.to) a.fillRect(this.x(s), AXIS_H - 14, 1, 5);
    }
    a.fillStyle = '#555';
    a.fillText('time (launches ▾)', 4, 9);
    this.shadeSelection(a, AXIS_H);
    // Lanes.
    const g = this.setupCanvas(this.canvas, width, this.visibleH);
    const top = this.scrollTop;
    const first = Math.floor(top / LANE), last = Math.min(this.rows.length, Math.ceil((top + this.visibleH) / LANE) + 1);
    const selected = sel.threads || new Set();
    for (let r = first; r < last; r++) {
      const row = this.rows[r], y = r * LANE - top;
      g.fillStyle = r % 2 ? '#fafafa' : '#f1f1f1';
      g.fillRect(0, y, width, LANE);
      if (row.thread < 0) this.drawProcRow(g, row.group, y, selected);
      else this.drawThreadRow(g, row.thread, y, selected.has(row.thread));
    }
    g.fillStyle = '#ddd'; g.fillRect(LABEL_W - 1, 0, 1, this.visibleH);
    this.shadeSelection(g, this.visibleH);
    if (this.focus >= 0) this.drawWakeups(g, top);
    this.drawLock(g, top);
    if (this.dragFrom !== undefined && this.dragTo !== undefined) {
      g.fillStyle = 'rgba(0,100,255,0.2)';
      const x0 = Math.min(this.dragFrom, this.dragTo), x1 = Math.max(this.dragFrom, this.dragTo);
      g.fillRect(x0, 0, x1 - x0, this.visibleH);
    }
  }

  shadeSelection(g, h) {
    const s = this.app.sel, M = this.M;
    if (s.from <= M.meta.from_us && s.to >= M.meta.to_us) return;
    g.fillStyle = 'rgba(0,0,0,0.12)';
    const x0 = this.x(s.from), x1 = this.x(s.to);
    if (x0 > LABEL_W) g.fillRect(LABEL_W, 0, x0 - LABEL_W, h);
    if (x1 < LABEL_W + this.plotW) g.fillRect(Math.max(x1, LABEL_W), 0, LABEL_W + this.plotW - Math.max(x1, LABEL_W), h);
    g.fillStyle = 'rgba(0,90,255,0.8)';
    if (x0 >= LABEL_W) g.fillRect(x0, 0, 1, h);
    if (x1 <= LABEL_W + this.plotW) g.fillRect(x1, 0, 1, h);
  }

  label(g, text, y, indent, bold, highlight) {
    if (highlight) { g.fillStyle = '#cfe3ff'; g.fillRect(0, y, LABEL_W - 1, LANE); }
    g.fillStyle = '#222';
    g.font = (bold ? 'bold ' : '') + '11px sans-serif';
    g.save(); g.beginPath(); g.rect(0, y, LABEL_W - 4, LANE); g.clip();
    g.fillText(text, 4 + indent, y + LANE / 2);
    g.restore();
    g.font = '11px sans-serif';
  }

  // Sample counts per pixel column of a sorted list of sample indices.
  density(g, idx, lo, hi, y, h, color) {
    const M = this.M, bins = new Float32Array(Math.ceil(this.plotW) + 1);
    const T = M.sampleT;
    let a = lo, b = hi;
    while (a < b) { const m = (a + b) >>> 1; if (T[idx[m]] < this.view.from) a = m + 1; else b = m; }
    let max = 0;
    for (let k = a; k < hi; k++) {
      const t = T[idx[k]];
      if (t >= this.view.to) break;
      const bin = Math.floor(this.x(t) - LABEL_W);
      if (++bins[bin] > max) max = bins[bin];
    }
    if (!max) return;
    g.fillStyle = color;
    const usPerPx = (this.view.to - this.view.from) / this.plotW;
    // Full height when the samples cover the column's time on one CPU.
    const full = Math.max(1, usPerPx / M.meta.sample_us);
    for (let i = 0; i < bins.length; i++) {
      if (bins[i]) { const v = Math.min(1, bins[i] / full); g.fillRect(LABEL_W + i, y + h * (1 - v), 1, Math.max(1, h * v)); }
    }
  }

  drawProcRow(g, grp, y, selected) {
    const M = this.M, D = M.D;
    const any = grp.threads.some((t) => selected.has(t));
    this.label(g, (grp.open ? '▾ ' : '▸ ') + M.procLabel(grp.p) + (grp.open ? '' : ' · ' + grp.threads.length + ' thr'), y, 0, true, any);
    const idx = this.procSamples.get(grp.p);
    this.density(g, idx, 0, idx.length, y + 2, LANE - 4, grp.tree ? '#2d6a1f' : '#555');
    const s = D.processes.start[grp.p], e = D.processes.end[grp.p];
    g.fillStyle = '#000';
    if (s >= this.view.from && s <= this.view.to) g.fillRect(this.x(s), y, 2, LANE);
    if (e >= this.view.from && e <= this.view.to) g.fillRect(this.x(e), y + LANE / 2, 2, LANE / 2);
  }

  drawThreadRow(g, t, y, isSel) {
    const M = this.M, D = M.D;
    this.label(g, M.threadLabel(t), y, 14, false, isSel || t === this.focus);
    // State spans, one pixel at least; in a crowded pixel blocked and
    // runnable win over running so short waits stay visible.
    let lastX = -1, lastState = -1;
    eachSpan(M, t, this.view.from, this.view.to, (i, a, b) => {
      const x0 = this.x(a), x1 = this.x(b), st = M.spanState[i];
      const px = Math.floor(x0);
      if (px === lastX && (st === lastState || st === 0) && x1 - x0 < 1) return;
      g.fillStyle = STATE_COLORS[st];
      g.fillRect(x0, y + 6, Math.max(1, x1 - x0), LANE - 8);
      lastX = Math.floor(x1); lastState = st;
    });
    this.density(g, M.samplesByThread.idx, M.samplesByThread.off[t], M.samplesByThread.off[t + 1], y + 1, 4, '#333');
    // Faults: a red tick per bucket with faults.
    g.fillStyle = '#e00';
    for (let k = M.faultsByThread.off[t]; k < M.faultsByThread.off[t + 1]; k++) {
      const ft = M.faultT[M.faultsByThread.idx[k]];
      if (ft >= this.view.from && ft <= this.view.to) g.fillRect(this.x(ft), y + LANE - 3, 1, 3);
    }
    const s = D.threads.start[t];
    g.fillStyle = '#000';
    if (s >= this.view.from && s <= this.view.to) g.fillRect(this.x(s), y, 2, LANE);
  }

  // Arrows from each waker's lane to the focused thread where it was woken.
  drawWakeups(g, top) {
    const M = this.M, t = this.focus, fr = this.rowOf.get(t);
    if (fr === undefined) return;
    const ty = fr * LANE - top + LANE / 2;
    g.strokeStyle = '#0050c8'; g.fillStyle = '#0050c8'; g.lineWidth = 1;
    let drawn = 0;
    eachSpan(M, t, this.view.from, this.view.to, (i) => {
      const w = M.spanWaker[i];
      if (M.spanState[i] < 2 || drawn > 400 || M.spanEnd[i] > this.view.to) return;
      const x = this.x(M.spanEnd[i]);
      const wr = w >= 0 ? this.rowOf.get(w) : undefined;
      const wy = wr !== undefined ? wr * LANE - top + LANE / 2 : (w >= 0 ? -4 : ty - LANE);
      g.beginPath(); g.moveTo(x - 6, wy); g.lineTo(x, ty); g.stroke();
      g.beginPath(); g.moveTo(x, ty); g.lineTo(x - 4, ty - (ty > wy ? 6 : -6)); g.lineTo(x + 3, ty - (ty > wy ? 5 : -5)); g.fill();
      drawn++;
    });
  }

  // The chosen lock's waits in view: each outlined on its waiter's lane,
  // and an arrow at its end from the lane of the holder that released it
  // (a folded process's lane stands for its threads). One arrow per pixel
  // column and pair of lanes, so thousands of waits stay readable.
  // Records what it drew in `app.lockDrawn` for tests.
  drawLock(g, top) {
    const L = this.M.locks[this.app.lock];
    this.lockClear.style.display = L ? '' : 'none';
    if (!L) { this.lockStatus.textContent = ''; this.app.lockDrawn = null; return; }
    const vf = this.view.from, vt = this.view.to, h = this.visibleH;
    const groupRow = new Map();
    this.rows.forEach((r, i) => { if (r.thread < 0) groupRow.set(r.group, i); });
    const laneY = (t) => {
      if (t < 0) return undefined;
      let r = this.rowOf.get(t);
      if (r === undefined) { const grp = this.groups.find((x) => x.threads.includes(t)); r = grp && groupRow.get(grp); }
      return r === undefined ? undefined : r * LANE - top;
    };
    const yOf = new Map();
    const y = (t) => { if (!yOf.has(t)) yOf.set(t, laneY(t)); return yOf.get(t); };
    g.save(); g.beginPath(); g.rect(LABEL_W, 0, this.plotW, h); g.clip();
    let waits = 0, arrows = 0, released = 0;
    const seen = new Set();
    g.lineWidth = 1;
    for (let k = 0; k < L.n; k++) {
      const a = L.from[k], b = L.to[k];
      if (b < vf || a > vt) continue;
      const wy = y(L.waiter[k]);
      if (wy === undefined || wy <= -LANE || wy >= h) continue;
      waits++;
      const x0 = this.x(Math.max(a, vf)), x1 = this.x(Math.min(b, vt));
      g.fillStyle = 'rgba(176,0,140,0.18)'; g.fillRect(x0, wy + 2, Math.max(1, x1 - x0), LANE - 4);
      g.strokeStyle = '#b0008c'; g.strokeRect(x0 + 0.5, wy + 2.5, Math.max(1, x1 - x0 - 1), LANE - 5);
    }
    g.strokeStyle = '#b0008c'; g.fillStyle = '#b0008c';
    for (let k = 0; k < L.n; k++) {
      const b = L.to[k];
      if (b < vf || b > vt || L.holder[k] < 0) continue;
      released++;
      const wy = y(L.waiter[k]), hy = y(L.holder[k]);
      if (wy === undefined || hy === undefined) continue;
      const ty = wy + LANE / 2, fy = hy + LANE / 2;
      if ((ty < 0 && fy < 0) || (ty > h && fy > h) || ty === fy) continue;
      const x = Math.round(this.x(b));
      const key = x + ':' + fy + ':' + ty;
      if (seen.has(key)) continue;
      seen.add(key);
      const dir = ty > fy ? 1 : -1;
      g.beginPath(); g.arc(x, fy, 2, 0, 2 * Math.PI); g.fill();
      g.beginPath(); g.moveTo(x, fy); g.lineTo(x, ty - dir * 2); g.stroke();
      g.beginPath(); g.moveTo(x, ty); g.lineTo(x - 3, ty - dir * 6); g.lineTo(x + 3, ty - dir * 6); g.fill();
      arrows++;
    }
    g.restore();
    this.app.lockDrawn = { lock: L.i, address: L.l.address, waits, arrows, released };
    this.lockStatus.textContent = `${L.label}: ${waits} waits in view, ${released} released by a holder (${arrows} arrows drawn)` + (L.n < L.l.waits_total ? ` · the ${L.n} longest of ${L.l.waits_total} waits are drawn` : '');
  }

  rowAt(clientY) {
    const box = this.canvas.getBoundingClientRect();
    const r = Math.floor((clientY - box.top + this.scrollTop) / LANE);
    return this.rows[r];
  }

  bindMouse() {
    const c = this.canvas;
    const px = (e) => e.clientX - c.getBoundingClientRect().left;
    c.addEventListener('mousedown', (e) => {
      this.down = { x: px(e), y: e.clientY, shift: e.shiftKey };
      if (this.down.x > LABEL_W) { this.dragFrom = this.down.x; this.dragTo = undefined; }
      e.preventDefault();
    });
    window.addEventListener('mousemove', (e) => {
      if (!this.down || this.dragFrom === undefined) return;
      this.dragTo = Math.max(LABEL_W, Math.min(px(e), LABEL_W + this.plotW));
      this.draw();
    });
    window.addEventListener('mouseup', (e) => {
      if (!this.down) return;
      const d = this.down; this.down = undefined;
      const moved = this.dragTo !== undefined && Math.abs(this.dragTo - this.dragFrom) > 3;
      if (moved) {
        const a = this.t(Math.min(this.dragFrom, this.dragTo)), b = this.t(Math.max(this.dragFrom, this.dragTo));
        this.dragFrom = this.dragTo = undefined;
        this.app.select({ from: a, to: b, threads: this.app.sel.threads });
        return;
      }
      this.dragFrom = this.dragTo = undefined;
      const row = this.rowAt(d.y);
      if (!row) { this.draw(); return; }
      if (d.x <= LABEL_W && row.thread < 0) { row.group.open = !row.group.open; this.layoutRows(); this.draw(); return; }
      if (d.x <= LABEL_W) {
        const cur = new Set(d.shift && this.app.sel.threads ? this.app.sel.threads : []);
        if (cur.has(row.thread)) cur.delete(row.thread); else cur.add(row.thread);
        this.app.select({ from: this.app.sel.from, to: this.app.sel.to, threads: cur.size ? cur : null });
        return;
      }
      if (row.thread >= 0) { this.focus = this.focus === row.thread ? -1 : row.thread; this.draw(); }
    });
    c.addEventListener('wheel', (e) => {
      const at = (px(e) - LABEL_W) / this.plotW;
      if (e.ctrlKey || e.metaKey || e.altKey) { e.preventDefault(); this.zoomBy(e.deltaY > 0 ? 1.25 : 0.8, Math.max(0, Math.min(1, at))); }
      else if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) { e.preventDefault(); this.pan((e.deltaX || e.deltaY) / this.plotW * (this.view.to - this.view.from)); }
    }, { passive: false });
    let pan;
    this.axis.addEventListener('mousedown', (e) => { pan = e.clientX; e.preventDefault(); });
    window.addEventListener('mousemove', (e) => {
      if (pan === undefined) return;
      this.pan(-(e.clientX - pan) / this.plotW * (this.view.to - this.view.from));
      pan = e.clientX;
    });
    window.addEventListener('mouseup', () => { pan = undefined; });
    c.addEventListener('mousemove', (e) => this.hover(e));
    c.addEventListener('mouseleave', () => { this.tip.style.display = 'none'; });
  }

  hover(e) {
    const row = this.rowAt(e.clientY), x = e.clientX - this.canvas.getBoundingClientRect().left;
    if (!row || x <= LABEL_W || this.down) { this.tip.style.display = 'none'; return; }
    const M = this.M, t = this.t(x);
    let text = (row.thread >= 0 ? M.threadLabel(row.thread) : M.procLabel(row.group.p)) + ' at ' + fmtTime(t);
    if (row.thread >= 0) {
      eachSpan(M, row.thread, t, t + 1e-6, (i) => {
        text += '\n' + STATE_NAMES[M.spanState[i]] + (M.spanState[i] >= 2 ? ' (blocked)' : '') + ' for ' + fmtTime(M.spanEnd[i] - M.spanStart[i]);
        if (M.spanState[i] >= 2) {
          text += '\nin ' + (M.waitName.get(M.spanStack[i]) || leafName(M, M.spanStack[i]));
          const w = M.spanWaker[i];
          text += '\nwoken by ' + (w >= 0 ? M.threadLabel(w) : ['?', 'nobody (still blocked or unknown)', 'an interrupt', 'a timer', 'a device'][-w] || '?');
        }
      });
      const L = M.locks[this.app.lock];
      for (let k = 0; L && k < L.n; k++) {
        if (L.waiter[k] !== row.thread || L.from[k] > t || L.to[k] < t) continue;
        text += '\nwaiting on ' + L.label + (L.holder[k] >= 0 ? ', released by ' + M.threadLabel(L.holder[k]) + ' at ' + fmtTime(L.to[k]) : '');
      }
    }
    this.tip.textContent = text;
    const box = this.box.getBoundingClientRect();
    this.tip.style.left = Math.min(e.clientX - box.left + 12, box.width - 280) + 'px';
    this.tip.style.top = (e.clientY - box.top + 14) + 'px';
    this.tip.style.display = 'block';
  }
}
