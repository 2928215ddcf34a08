// tables.js — sortable tables (click a header; again to reverse) showing
// the largest rows first, each cell set with textContent; and the tables
// of the page, each a function of the model and the selection.
'use strict';

const TABLE_ROWS = 250;

class Table {
  // columns: [{title, get(row) → value, fmt?(value, row) → text, num?}]
  constructor(root, id, columns, opts) {
    this.columns = columns; this.opts = opts || {};
    this.sortCol = this.opts.sort ?? columns.findIndex((c) => c.num);
    this.desc = true;
    this.table = el('table', { class: 'data', id });
    this.note = el('p', { class: 'note' });
    this.filter = el('input', { type: 'search', placeholder: 'filter rows', class: 'table-filter', id: id + '-filter' });
    this.filter.addEventListener('input', () => this.render());
    if (this.opts.noFilter) this.filter.style.display = 'none';
    root.append(this.filter, this.table, this.note);
    this.rows = [];
  }

  setRows(rows) { this.rows = rows; this.render(); }

  // The cell's text as shown.
  text(col, r) {
    const v = col.get(r);
    return col.fmt ? col.fmt(v, r) : String(v);
  }

  render() {
    const c = this.columns[this.sortCol];
    const q = this.filter.value.trim().toLowerCase();
    const rows = q ? this.rows.filter((r) => this.columns.some((col) => this.text(col, r).toLowerCase().includes(q))) : this.rows.slice();
    if (c) {
      const key = rows.map((r) => c.get(r));
      const order = rows.map((_, i) => i);
      order.sort((a, b) => {
        const x = key[a], y = key[b];
        const r = typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y));
        return this.desc ? -r : r;
      });
      const unsorted = rows.slice();
      for (let i = 0; i < order.length; i++) rows[i] = unsorted[order[i]];
    }
    const head = el('tr');
    this.columns.forEach((col, i) => {
      const th = el('th', { text: col.title + (i === this.sortCol ? (this.desc ? ' ▾' : ' ▴') : ''), class: col.num ? 'num' : '' });
      th.addEventListener('click', () => {
        if (this.sortCol === i) this.desc = !this.desc; else { this.sortCol = i; this.desc = !!col.num; }
        this.render();
      });
      head.append(th);
    });
    const thead = el('thead', {}, head), tbody = el('tbody');
    for (const r of rows.slice(0, TABLE_ROWS)) {
      const tr = el('tr');
      for (const col of this.columns) tr.append(el('td', { text: this.text(col, r), class: col.num ? 'num' : '' }));
      if (this.opts.onClick) { tr.classList.add('clickable'); tr.addEventListener('click', () => this.opts.onClick(r)); }
      if (this.opts.chosen && this.opts.chosen(r)) tr.classList.add('chosen');
      tbody.append(tr);
    }
    this.table.replaceChildren(thead, tbody);
    this.note.textContent = rows.length > TABLE_ROWS ? `${rows.length} rows, the first ${TABLE_ROWS} shown (sort by a column or filter to see others)`
      : rows.length ? '' : (this.opts.empty || 'nothing in the selection');
  }
}

const NUMBER = new Intl.NumberFormat('en-US', { maximumFractionDigits: 1 });
const fmtNum = (v) => (v === '' || v === undefined ? '' : NUMBER.format(v));
const fmtUs = (v) => (v === '' || v < 0 ? '' : fmtTime(v));
const fmtPct = (v) => v.toFixed(1) + '%';
const fmtMaybeTime = (v) => (v < 0 ? '—' : fmtTime(v));

// Builds every table of the page into `root` (a tab per table); returns an
// update function taking the selection.
function buildTables(M, root, app) {
  const D = M.D, S = M.str;
  // Only the shown table is computed; the others when their tab is opened.
  let active = null, state = null;
  const done = new Set();
  const refresh = () => {
    if (!state || done.has(active)) return;
    done.add(active);
    fill[active](state.sel, state.mask, state.cpuW);
  };
  const tabs = el('div', { class: 'tabs' });
  const panes = el('div');
  root.append(tabs, panes);
  const make = (id, title) => {
    const pane = el('div', { class: 'pane', id: 'pane-' + id });
    const b = el('button', { text: title, class: 'tab', 'data-pane': id });
    b.addEventListener('click', () => {
      panes.querySelectorAll('.pane').forEach((p) => { p.style.display = p === pane ? '' : 'none'; });
      tabs.querySelectorAll('.tab').forEach((x) => x.classList.toggle('active', x === b));
      active = id;
      refresh();
    });
    tabs.append(b); panes.append(pane);
    if (panes.children.length > 1) pane.style.display = 'none'; else { b.classList.add('active'); active = id; }
    return pane;
  };
  const proc = (t) => M.threadProc[t];
  const sampleTime = (n) => n * M.meta.sample_us;
  const selectThread = (t) => app.select({ from: app.sel.from, to: app.sel.to, threads: new Set([t]) });
  const selectProc = (p) => {
    const ts = new Set();
    for (let t = 0; t < M.nThreads; t++) if (M.threadProc[t] === p) ts.add(t);
    app.select({ from: app.sel.from, to: app.sel.to, threads: ts });
  };

  const threads = new Table(make('threads', 'Processes and threads'), 'threads-table', [
    { title: 'pid', get: (r) => D.processes.pid[proc(r.t)], num: true, fmt: String },
    { title: 'process', get: (r) => S[D.processes.comm[proc(r.t)]] },
    { title: 'tid', get: (r) => D.threads.tid[r.t], num: true, fmt: String },
    { title: 'thread', get: (r) => S[D.threads.comm[r.t]] },
    { title: 'CPU (sampled)', get: (r) => sampleTime(r.samples), num: true, fmt: fmtUs },
    { title: 'samples', get: (r) => r.samples, num: true, fmt: fmtNum },
    { title: 'running', get: (r) => r.states[0], num: true, fmt: fmtUs },
    { title: 'runnable', get: (r) => r.states[1], num: true, fmt: fmtUs },
    { title: 'blocked', get: (r) => r.blocked, num: true, fmt: fmtUs },
    { title: 'faults', get: (r) => r.faults, num: true, fmt: fmtNum },
    { title: 'syscalls', get: (r) => r.syscalls, num: true, fmt: fmtNum },
  ], { onClick: (r) => selectThread(r.t), sort: 4 });

  const functions = new Table(make('functions', 'Functions (CPU)'), 'functions-table', [
    { title: 'function', get: (r) => M.funcName[r.func] },
    { title: 'module', get: (r) => M.funcModule[r.func] },
    { title: 'self', get: (r) => r.self, num: true, fmt: fmtNum },
    { title: 'self %', get: (r) => r.selfPct, num: true, fmt: fmtPct },
    { title: 'inclusive', get: (r) => r.incl, num: true, fmt: fmtNum },
    { title: 'inclusive %', get: (r) => r.inclPct, num: true, fmt: fmtPct },
  ], { sort: 2, empty: 'no CPU samples in the selection' });

  const wakerText = (w) => (w >= 0 ? M.threadLabel(w) : ['?', '[not woken / unknown]', '[interrupt]', '[timer]', '[device]'][-w] || '?');
  const waits = new Table(make('waits', 'Waits'), 'waits-table', [
    { title: 'thread', get: (r) => M.threadLabel(r.thread) },
    { title: 'process', get: (r) => M.procLabel(proc(r.thread)) },
    { title: 'kind', get: (r) => STATE_NAMES[r.state] },
    { title: 'blocked in', get: (r) => M.waitName.get(r.stack) || leafName(M, r.stack) },
    { title: 'blocked', get: (r) => r.us, num: true, fmt: fmtUs },
    { title: 'waits', get: (r) => r.count, num: true, fmt: fmtNum },
    { title: 'longest', get: (r) => r.max, num: true, fmt: fmtUs },
    { title: 'woken by (time)', get: (r) => [...r.wakers.entries()].sort((a, b) => b[1] - a[1]).slice(0, 3).map(([w, us]) => wakerText(w) + ' ' + fmtTime(us)).join(', ') },
    { title: 'stack (innermost first)', get: (r) => stackNames(M, r.stack, 8).join(' ← ') },
  ], { onClick: (r) => selectThread(r.thread), sort: 4, empty: 'no blocked time in the selection (the trace needs sched_switch: record with slowlab record)' });

  const faults = new Table(make('faults', 'Faults'), 'faults-table', [
    { title: 'process', get: (r) => M.procLabel(proc(r.thread)) },
    { title: 'thread', get: (r) => M.threadLabel(r.thread) },
    { title: 'faults', get: (r) => r.count, num: true, fmt: fmtNum },
    { title: 'major', get: (r) => r.major, num: true, fmt: fmtNum },
    { title: 'where', get: (r) => leafName(M, r.stack) },
    { title: 'stack (innermost first)', get: (r) => stackNames(M, r.stack, 8).join(' ← ') },
  ], { onClick: (r) => selectThread(r.thread), sort: 2, empty: 'no page faults in the selection' });

  const errText = (m) => [...m.entries()].sort((a, b) => b[1] - a[1]).map(([e, n]) => S[e] + ' ' + n).join(', ');
  const sysPane = make('syscalls', 'Syscalls');
  sysPane.append(el('h4', { text: 'By process and syscall' }));
  const syscalls = new Table(sysPane, 'syscalls-table', [
    { title: 'process', get: (r) => M.procLabel(r.proc) },
    { title: 'syscall', get: (r) => S[r.name] },
    { title: 'calls', get: (r) => r.count, num: true, fmt: fmtNum },
    { title: 'time', get: (r) => r.us, num: true, fmt: fmtUs },
    { title: 'longest', get: (r) => r.max, num: true, fmt: fmtUs },
    { title: 'errors', get: (r) => [...r.errors.values()].reduce((a, b) => a + b, 0), num: true, fmt: fmtNum },
    { title: 'which', get: (r) => errText(r.errors) },
  ], { onClick: (r) => selectProc(r.proc), sort: 2, empty: 'no syscalls recorded in the selection' });
  sysPane.append(el('h4', { text: 'Paths (numbers folded to N), failing first' }));
  const paths = new Table(sysPane, 'paths-table', [
    { title: 'process', get: (r) => M.procLabel(r.proc) },
    { title: 'syscall', get: (r) => S[r.name] },
    { title: 'path', get: (r) => S[r.path] },
    { title: 'calls', get: (r) => r.count, num: true, fmt: fmtNum },
    { title: 'failed', get: (r) => r.failed, num: true, fmt: fmtNum },
    { title: 'errors', get: (r) => errText(r.errors) },
  ], { onClick: (r) => selectProc(r.proc), sort: 4, empty: 'no captured paths in the selection' });
  if (D.syscalls.uncaptured_paths) sysPane.append(el('p', { class: 'note', text: D.syscalls.uncaptured_paths + ' calls took a path that was not captured' }));

  const lifetimes = new Table(make('lifetimes', 'Process lifetimes'), 'lifetimes-table', [
    { title: 'pid', get: (p) => D.processes.pid[p], num: true, fmt: String },
    { title: 'parent', get: (p) => D.processes.ppid[p], num: true, fmt: (v) => (v < 0 ? '' : String(v)) },
    { title: 'process', get: (p) => S[D.processes.comm[p]] },
    { title: 'started', get: (p) => D.processes.start[p], num: true, fmt: fmtMaybeTime },
    { title: 'exec', get: (p) => D.processes.exec[p], num: true, fmt: fmtMaybeTime },
    { title: 'ended', get: (p) => D.processes.end[p], num: true, fmt: fmtMaybeTime },
    { title: 'lifetime', get: (p) => lifetime(p), num: true, fmt: fmtMaybeTime },
    { title: 'threads', get: (p) => threadCount[p], num: true, fmt: String },
    { title: 'command tree', get: (p) => (D.processes.tree[p] ? 'yes' : '') },
  ], { onClick: selectProc, sort: 3, empty: 'no process lived in the selection' });
  const threadCount = new Int32Array(M.nProcs);
  for (let t = 0; t < M.nThreads; t++) threadCount[M.threadProc[t]]++;
  function lifetime(p) {
    const s = D.processes.start[p] >= 0 ? D.processes.start[p] : D.processes.exec[p];
    const e = D.processes.end[p];
    return s >= 0 && e >= 0 ? e - s : -1;
  }

  const lockPane = make('locks', 'Locks');
  lockPane.append(el('p', { class: 'hint', text: 'mutexes and rwlocks threads waited on, with the threads whose release ended the waits (holders); click a lock to draw its waits and holder → waiter arrows on the timeline (again to clear). Figures are over the report\'s time range.' }));
  const people = (list, secs) => list.slice(0, 2).map((p) => p.comm + ' (' + p.tid + ') ' + fmtTime(p[secs] * 1e6)).join(', ') + (list.length > 2 ? ', …' : '');
  const locks = new Table(lockPane, 'locks-table', [
    { title: 'lock', get: (L) => L.l.address + (L.l.name ? ' in ' + L.l.name : '') },
    { title: 'kind', get: (L) => L.l.kind },
    { title: 'process', get: (L) => L.l.process + ' (' + L.l.pid + ')' },
    { title: 'waiters', get: (L) => L.l.waiters.length, fmt: (n, L) => n + ': ' + people(L.l.waiters, 'blocked_s') },
    { title: 'holders', get: (L) => L.l.holders.length, fmt: (n, L) => n + ': ' + people(L.l.holders, 'held_s') },
    { title: 'total wait', get: (L) => L.l.total_wait_s * 1e6, num: true, fmt: fmtUs },
    { title: 'longest hold', get: (L) => L.l.longest_hold_s * 1e6, num: true, fmt: fmtUs },
    { title: 'waits', get: (L) => L.l.waits_total, num: true, fmt: (n, L) => fmtNum(n) + (L.n < n ? ` (${L.n} longest drawn)` : '') },
  ], { onClick: (L) => app.selectLock(L.i), chosen: (L) => app.lock === L.i, sort: 5, empty: 'no lock waits in the selection (they need the futex calls slowlab record records)' });

  const fill = {
    threads(sel, mask) {
      const st = threadStats(M, sel, mask);
      const trows = [];
      for (let t = 0; t < M.nThreads; t++) {
        if (mask && !mask[t]) continue;
        let blocked = 0;
        for (let k = 2; k < 8; k++) blocked += st.states[k][t];
        const r = { t, samples: st.samples[t], states: [st.states[0][t], st.states[1][t]], blocked, faults: st.faults[t], syscalls: st.syscalls[t] };
        if (r.samples || r.states[0] || r.states[1] || blocked || r.faults || r.syscalls) trows.push(r);
      }
      threads.setRows(trows);
    },
    functions(sel, mask, cpuW) {
      const frows = functionRows(M, cpuW);
      let total = 0;
      for (let n = 0; n < cpuW.length; n++) total += cpuW[n];
      for (const r of frows) { r.selfPct = total ? 100 * r.self / total : 0; r.inclPct = total ? 100 * r.incl / total : 0; }
      functions.setRows(frows);
    },
    waits(sel, mask) { waits.setRows(waitRows(M, sel, mask)); },
    locks(sel, mask) { locks.setRows(lockRows(M, sel, mask)); },
    faults(sel, mask) { faults.setRows(faultRows(M, sel, mask)); },
    syscalls(sel, mask) {
      const sc = syscallRows(M, sel, mask);
      syscalls.setRows(sc.names);
      paths.setRows(sc.paths);
    },
    lifetimes(sel, mask) {
      const keep = new Uint8Array(M.nProcs);
      for (let t = 0; t < M.nThreads; t++) if (!mask || mask[t]) keep[M.threadProc[t]] = 1;
      const procs = [];
      for (let p = 0; p < M.nProcs; p++) {
        const s = D.processes.start[p] >= 0 ? D.processes.start[p] : -Infinity;
        const e = D.processes.end[p] >= 0 ? D.processes.end[p] : Infinity;
        if (keep[p] && s < sel.to && e >= sel.from) procs.push(p);
      }
      lifetimes.setRows(procs);
    },
  };

  return function update(sel, mask, cpuW) {
    state = { sel, mask, cpuW };
    done.clear();
    refresh();
  };
}
