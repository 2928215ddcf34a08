// app.js — the page: the answer first (the critical path as a bar over
// time and the findings ranked by cost), then the timeline, the flame
// graphs and the tables, all following one selection (a time range and
// optionally threads). Clicking a finding or a path segment selects its
// time range and threads everywhere. Exposes `window.slowlab` (the
// selection and the last redraw's time) for tests and benchmarks. A lock
// chosen in the Locks table (`app.lock`) selects its waiters and holders
// and has the timeline draw its waits.
'use strict';

function main() {
  const t0 = performance.now();
  const M = decode(JSON.parse(document.getElementById('slowlab-data').textContent));
  const D = M.D, meta = M.meta;
  const app = { sel: { from: meta.from_us, to: meta.to_us, threads: null }, timings: {}, lock: -1 };
  window.slowlab = app;
  const root = document.getElementById('app');
  const section = (id, title) => {
    const s = el('section', { id });
    if (title) s.append(el('h2', { text: title }));
    root.append(s);
    return s;
  };

  // ---- header ----
  const head = section('head');
  head.append(el('h1', { text: meta.title }));
  const facts = [];
  if (meta.command.length) facts.push('command: ' + meta.command.join(' '));
  facts.push('trace: ' + fmtTime(meta.duration_us) + (meta.hostname ? ' on ' + meta.hostname : '') + (meta.os_release ? ' (' + meta.os_release + ')' : '') + (meta.nr_cpus ? ', ' + meta.nr_cpus + ' CPUs' : ''));
  facts.push(M.sampleT.length.toLocaleString('en-US') + ' samples of ' + (meta.sample_event || 'the sampling event') + ' (' + fmtTime(meta.sample_us) + ' of CPU each), ' + M.nThreads + ' threads in ' + M.nProcs + ' processes');
  if (meta.from_us > 0 || meta.to_us < meta.duration_us) facts.push('the report covers ' + fmtTime(meta.from_us) + ' – ' + fmtTime(meta.to_us));
  if (meta.filters.length) facts.push('filters: ' + meta.filters.join(', '));
  for (const f of facts) head.append(el('p', { class: 'fact', text: f }));
  if (meta.warnings.length) {
    const d = el('details', { class: 'warnings' }, el('summary', { text: meta.warnings.length + ' warning(s)' }));
    const ul = el('ul');
    for (const w of meta.warnings) ul.append(el('li', { text: w }));
    d.append(ul); head.append(d);
  }

  // ---- the answer: critical path and findings ----
  const answer = section('answer', 'The answer');
  const cp = D.critical_path;
  if (cp) buildPath(M, answer, cp, app);
  else answer.append(el('p', { class: 'note', text: 'No critical path (no root process, or no scheduler events in the trace).' }));
  answer.append(el('h3', { text: 'Findings, most costly first' }));
  const findings = el('ol', { class: 'findings', id: 'findings' });
  answer.append(findings);
  if (!D.findings.length) answer.insertBefore(el('p', { class: 'note', id: 'no-findings', text: 'No detector fired on this trace.' }), findings);
  D.findings.forEach((f, i) => {
    const li = el('li', { class: 'finding sev-' + f.severity, id: 'finding-' + i });
    const culprit = f.culprit.comm ? f.culprit.comm + (f.culprit.pid ? ' (' + f.culprit.pid + ')' : '') + (f.culprit.cgroup ? ' in ' + f.culprit.cgroup : '') : '—';
    li.append(el('div', { class: 'ftitle' }, el('span', { class: 'sev', text: f.severity }), el('b', { text: f.id + ': ' }), el('span', { text: f.title })));
    li.append(el('div', { class: 'fcost', text: `cost ${fmtTime(f.cost_s * 1e6)} (${(f.cost_share * 100).toFixed(1)}% of the time examined) · culprit ${culprit} · click to select its threads and time` }));
    const det = el('details', {}, el('summary', { text: 'evidence, stack and fix' }));
    const tb = el('table', { class: 'evidence' });
    for (const [k, v] of Object.entries(f.evidence)) tb.append(el('tr', {}, el('td', { text: k }), el('td', { text: typeof v === 'string' ? v : JSON.stringify(v) })));
    det.append(tb);
    if (f.stack.length) det.append(el('pre', { text: f.stack.join('\n') }));
    det.append(el('p', {}, el('b', { text: 'Fix: ' }), el('span', { text: f.fix })));
    det.addEventListener('click', (e) => e.stopPropagation());
    li.append(det);
    li.addEventListener('click', () => {
      findings.querySelectorAll('.finding').forEach((x) => x.classList.toggle('chosen', x === li));
      app.select({ from: f.from_us, to: Math.max(f.to_us, f.from_us + 1), threads: f.threads.length ? new Set(f.threads) : null });
      if (f.threads.length) app.timeline.reveal(f.threads[0]);
    });
    findings.append(li);
  });

  // ---- the selection bar ----
  const selBar = el('div', { class: 'selbar', id: 'selection' });
  const selText = el('span', { class: 'seltext' });
  const treeBtn = el('button', { text: "the command's processes" });
  const clearThreads = el('button', { text: 'all threads' });
  const clearRange = el('button', { text: 'whole trace' });
  const timing = el('span', { class: 'timing' });
  selBar.append(el('b', { text: 'Selection: ' }), selText, treeBtn, clearThreads, clearRange, timing);
  root.append(selBar);
  const tree = new Set();
  for (let t = 0; t < M.nThreads; t++) if (D.processes.tree[M.threadProc[t]]) tree.add(t);
  treeBtn.disabled = !tree.size;
  treeBtn.addEventListener('click', () => app.select({ from: app.sel.from, to: app.sel.to, threads: new Set(tree) }));
  clearThreads.addEventListener('click', () => app.select({ from: app.sel.from, to: app.sel.to, threads: null }));
  clearRange.addEventListener('click', () => app.select({ from: meta.from_us, to: meta.to_us, threads: app.sel.threads }));

  // ---- timeline, flame graphs, tables ----
  const tl = section('timeline-section', 'Timeline');
  if (!meta.has_sched_events) tl.append(el('p', { class: 'note', text: 'The trace has no scheduler events: lanes show samples only (record with slowlab record for states and wake-ups).' }));
  app.timeline = new Timeline(M, tl, app);
  const fl = section('flames', 'Flame graphs');
  fl.append(el('p', { class: 'hint', text: 'click a frame to zoom into it and see its callers and callees; the search highlights matching functions and sums their time' }));
  const cpuFlame = new ReportFlame(M, fl, 'cpu', 'CPU (sampled)', (n) => fmtTime(n * meta.sample_us) + ' · ' + Math.round(n).toLocaleString('en-US') + ' samples');
  const offFlame = new ReportFlame(M, fl, 'blocked', 'Blocked (off-CPU) time, by where threads blocked', (us) => fmtTime(us));
  const tables = section('tables', 'Tables');
  const updateTables = buildTables(M, tables, app);

  app.select = (s) => {
    const start = performance.now();
    const from = Math.max(meta.from_us, Math.min(s.from, s.to)), to = Math.min(meta.to_us, Math.max(s.from, s.to));
    app.sel = { from, to: Math.max(to, from), threads: s.threads && s.threads.size ? s.threads : null };
    const sel = app.sel, mask = threadMask(M, sel);
    const names = sel.threads ? [...sel.threads].slice(0, 4).map(M.threadLabel).join(', ') + (sel.threads.size > 4 ? ` and ${sel.threads.size - 4} more` : '') : 'all threads';
    selText.textContent = `${fmtTime(sel.from)} – ${fmtTime(sel.to)} (${fmtTime(sel.to - sel.from)}), ${names}`;
    const parts = {};
    const step = (name, f) => { const t = performance.now(); const v = f(); parts[name] = performance.now() - t; return v; };
    const cpuW = step('cpu', () => cpuWeights(M, sel, mask));
    step('cpuFlame', () => cpuFlame.setWeights(cpuW));
    step('offFlame', () => offFlame.setWeights(blockedWeights(M, sel, mask)));
    step('tables', () => updateTables(sel, mask, cpuW));
    step('timeline', () => app.timeline.draw());
    if (app.path) step('path', () => app.path.draw());
    app.timings.parts = parts;
    app.timings.select = performance.now() - start;
    timing.textContent = `redrawn in ${app.timings.select.toFixed(0)} ms`;
  };
  app.selectLock = (i) => {
    app.lock = app.lock === i ? -1 : i;
    const L = M.locks[app.lock];
    if (!L) { app.select(app.sel); return; }
    const ts = new Set();
    for (const p of L.l.waiters.concat(L.l.holders)) if (p.thread >= 0) ts.add(p.thread);
    app.timeline.show(ts);
    app.select({ from: app.sel.from, to: app.sel.to, threads: ts.size ? ts : app.sel.threads });
  };
  app.select(app.sel);
  app.timings.load = performance.now() - t0;
  window.addEventListener('resize', () => {
    app.timeline.width = cpuFlame.width = offFlame.width = 0;
    if (app.path) app.path.width = 0;
    app.select(app.sel);
  });
  document.body.dataset.ready = '1';
}

// The critical path: its summary, its breakdown, and its segments as a
// bar over the root's wall time (one row per depth of followed waits).
function buildPath(M, root, cp, app) {
  root.append(el('p', { class: 'summary', id: 'path-summary', text: cp.summary }));
  const b = cp.breakdown;
  const parts = [['on a CPU', b.cpu, 0], ['runnable', b.runnable, 1]];
  ['lock', 'io', 'sleep', 'ipc', 'fault', 'other'].forEach((k, i) => parts.push(['blocked: ' + k, b.blocked[k], 2 + i]));
  const legend = el('div', { class: 'breakdown' });
  for (const [name, s, code] of parts) {
    if (!(s > 0)) continue;
    const sw = el('i', { class: 'sw' }); sw.style.background = STATE_COLORS[code];
    legend.append(sw, el('span', { text: `${name} ${fmtTime(s * 1e6)} (${(100 * s / cp.wall_s).toFixed(0)}%)  ` }));
  }
  root.append(legend);
  const canvas = el('canvas', { class: 'path-canvas', id: 'path-canvas' });
  const tip = el('div', { class: 'tip' });
  const wrap = el('div', { class: 'path-wrap' }, canvas, tip);
  root.append(el('p', { class: 'hint', text: `The critical path of ${cp.root.comm} (${cp.root.pid}) over its ${fmtTime(cp.wall_s * 1e6)}: each row is one more wait followed into the thread that ended it. Click a segment to select its time and thread.` }), wrap);
  const n = cp.from.length;
  let maxDepth = 0;
  for (let i = 0; i < n; i++) maxDepth = Math.max(maxDepth, cp.depth[i]);
  const rowH = 16, from = n ? cp.from[0] : 0, to = n ? cp.to[n - 1] : 1;
  const label = (i) => (cp.thread[i] >= 0 ? M.threadLabel(cp.thread[i]) : '?') + ': ' + STATE_NAMES[cp.state[i]] + (cp.label[i] >= 0 ? ' in ' + M.str[cp.label[i]] : '') + ', ' + fmtTime(cp.to[i] - cp.from[i]);
  const path = {
    draw() {
      if (!this.width) this.width = Math.max(400, wrap.clientWidth || 900);
      const width = this.width, h = (maxDepth + 1) * rowH + 14;
      const dpr = window.devicePixelRatio || 1;
      canvas.width = width * dpr; canvas.height = h * dpr; canvas.style.width = width + 'px'; canvas.style.height = h + 'px';
      const g = canvas.getContext('2d');
      g.setTransform(dpr, 0, 0, dpr, 0, 0);
      const x = (t) => (t - from) / Math.max(to - from, 1) * width;
      for (let i = 0; i < n; i++) {
        g.fillStyle = STATE_COLORS[cp.state[i]];
        g.fillRect(x(cp.from[i]), cp.depth[i] * rowH, Math.max(1, x(cp.to[i]) - x(cp.from[i])), rowH - 2);
      }
      const s = app.sel;
      g.fillStyle = 'rgba(0,90,255,0.9)';
      if (s.from > from || s.to < to) { g.fillRect(x(s.from), 0, 1, h); g.fillRect(x(s.to), 0, 1, h); }
      g.fillStyle = '#444'; g.font = '10px sans-serif'; g.textBaseline = 'bottom';
      g.fillText(fmtTime(from), 2, h);
      const end = fmtTime(to);
      g.fillText(end, width - g.measureText(end).width - 2, h);
      this.x = x;
    },
    at(e) {
      const box = canvas.getBoundingClientRect();
      const px = e.clientX - box.left, d = Math.floor((e.clientY - box.top) / rowH);
      const t = from + px / this.width * (to - from);
      for (let i = 0; i < n; i++) if (cp.depth[i] === d && cp.from[i] <= t && t < cp.to[i]) return i;
      return -1;
    },
  };
  canvas.addEventListener('click', (e) => {
    const i = path.at(e);
    if (i < 0) return;
    app.select({ from: cp.from[i], to: cp.to[i], threads: cp.thread[i] >= 0 ? new Set([cp.thread[i]]) : null });
    if (cp.thread[i] >= 0) app.timeline.reveal(cp.thread[i]);
  });
  canvas.addEventListener('mousemove', (e) => {
    const i = path.at(e);
    if (i < 0) { tip.style.display = 'none'; return; }
    tip.textContent = label(i);
    const box = wrap.getBoundingClientRect();
    tip.style.left = Math.min(e.clientX - box.left + 12, box.width - 280) + 'px';
    tip.style.top = (e.clientY - box.top + 14) + 'px';
    tip.style.display = 'block';
  });
  canvas.addEventListener('mouseleave', () => { tip.style.display = 'none'; });
  app.path = path;
  // The path grouped, largest first (as the terminal shows it).
  const tbl = new Table(root, 'path-parts', [
    { title: 'process', get: (p) => p.comm + ' (' + p.pid + ')' },
    { title: 'state', get: (p) => p.state + (p.kind ? ': ' + p.kind : '') },
    { title: 'function', get: (p) => p.function || '' },
    // What the part's thread waited for (blocked), or what the thread
    // the path was followed from waited for (e.g. "join ← main").
    { title: 'waits on', get: (p) => resourceText(p.resource) },
    { title: 'via', get: (p) => p.via_resource ? resourceText(p.via_resource, true) + (p.waiter ? ' ← ' + p.waiter : '') : (p.via || '') },
    { title: 'time', get: (p) => p.seconds * 1e6, num: true, fmt: fmtUs },
    { title: 'share', get: (p) => p.share * 100, num: true, fmt: fmtPct },
  ], { sort: 5, noFilter: true });
  tbl.setRows(cp.parts.slice(0, 15));
}

/** A resource of the critical path in a few words: its kind, address or
 * name, and (unless `noHolder`) its holder. */
function resourceText(r, noHolder) {
  if (!r) return '';
  let t = r.kind;
  if (r.address) t += ' ' + r.address;
  else if (r.name) t += ' ' + r.name;
  if (r.holder && !noHolder) t += ' (' + r.holder.comm + ')';
  return t;
}

try {
  main();
} catch (e) {
  const p = document.createElement('pre');
  p.className = 'fatal';
  p.textContent = 'The report could not be drawn: ' + (e && e.stack ? e.stack : e);
  document.body.prepend(p);
  throw e;
}
