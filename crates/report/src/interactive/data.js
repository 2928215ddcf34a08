// data.js — decodes the report's embedded JSON into typed arrays and
// indexes, and computes what the views show for a selection (a time range
// and, optionally, a set of threads). Pure functions over the model `M`;
// no drawing and no DOM here.
'use strict';

const STATE_NAMES = ['running', 'runnable', 'lock', 'io', 'sleep', 'ipc', 'fault', 'other'];
const STATE_COLORS = ['#3a9d23', '#e6b422', '#d9534f', '#3572b0', '#c8c8c8', '#8e6bbf', '#a0522d', '#8c8c8c'];

function cumsum(deltas) {
  const out = new Float64Array(deltas.length);
  let t = 0;
  for (let i = 0; i < deltas.length; i++) { t += deltas[i]; out[i] = t; }
  return out;
}

// Indices of `n` items grouped by `key` (0..k-1), keeping their order:
// returns {off, idx} with group g's items at idx[off[g]..off[g+1]].
function groupBy(key, k) {
  const off = new Int32Array(k + 1);
  for (let i = 0; i < key.length; i++) off[key[i] + 1]++;
  for (let g = 0; g < k; g++) off[g + 1] += off[g];
  const fill = off.slice(0, k);
  const idx = new Int32Array(key.length);
  for (let i = 0; i < key.length; i++) idx[fill[key[i]]++] = i;
  return { off, idx };
}

// First index in sorted `arr[lo..hi)` whose value is >= x.
function lowerBound(arr, x, lo, hi) {
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (arr[mid] < x) lo = mid + 1; else hi = mid;
  }
  return lo;
}

function decode(D) {
  if (D.version !== 1) throw new Error('this page cannot read report data version ' + D.version);
  const M = { D, str: D.strings, meta: D.meta };
  const nThreads = D.threads.tid.length;
  M.nThreads = nThreads;
  M.nProcs = D.processes.pid.length;
  M.threadProc = Int32Array.from(D.threads.process);
  // Stacks: parents before children; depth from the parent.
  const parent = Int32Array.from(D.stacks.parent);
  const nStacks = parent.length;
  M.parent = parent;
  M.func = Int32Array.from(D.stacks.func);
  M.depth = new Int32Array(nStacks);
  for (let i = 0; i < nStacks; i++) M.depth[i] = parent[i] < 0 ? 0 : M.depth[parent[i]] + 1;
  M.nStacks = nStacks;
  M.funcName = D.funcs.name.map((s) => D.strings[s]);
  M.funcModule = D.funcs.module.map((s) => D.strings[s]);
  M.funcKind = Uint8Array.from(D.funcs.kind);
  // Children lists, for the flame graphs.
  const kids = groupBy(Int32Array.from(parent, (p) => (p < 0 ? nStacks : p)), nStacks + 1);
  M.kidOff = kids.off;
  M.kids = kids.idx;
  // Samples.
  M.sampleT = cumsum(D.samples.t);
  M.sampleThread = Int32Array.from(D.samples.thread);
  M.sampleStack = Int32Array.from(D.samples.stack);
  M.samplesByThread = groupBy(M.sampleThread, nThreads);
  M.threadSamples = new Int32Array(nThreads);
  for (let i = 0; i < M.sampleThread.length; i++) M.threadSamples[M.sampleThread[i]]++;
  // Spans: absolute start and end per span, grouped by thread already.
  const sp = D.spans;
  const n = sp.dur.length;
  M.spanOff = Int32Array.from(sp.offset);
  M.spanStart = new Float64Array(n);
  M.spanEnd = new Float64Array(n);
  for (let th = 0; th < nThreads; th++) {
    let end = 0;
    for (let i = M.spanOff[th]; i < M.spanOff[th + 1]; i++) {
      M.spanStart[i] = end + sp.gap[i];
      end = M.spanEnd[i] = M.spanStart[i] + sp.dur[i];
    }
  }
  M.spanState = Uint8Array.from(sp.state);
  M.spanStack = Int32Array.from(sp.stack);
  M.spanWaker = Int32Array.from(sp.waker);
  M.waitName = new Map();
  D.wait_names.stack.forEach((s, i) => M.waitName.set(s, D.strings[D.wait_names.name[i]]));
  // Faults (counted per bucket) and syscalls.
  M.faultT = cumsum(D.faults.t);
  M.faultBucket = D.faults.bucket_us;
  M.faultThread = Int32Array.from(D.faults.thread);
  M.faultsByThread = groupBy(M.faultThread, nThreads);
  M.sysT = cumsum(D.syscalls.t);
  M.sysThread = Int32Array.from(D.syscalls.thread);
  M.threadLabel = (t) => D.strings[D.threads.comm[t]] + ' (' + D.threads.tid[t] + ')';
  M.procLabel = (p) => D.strings[D.processes.comm[p]] + ' (' + D.processes.pid[p] + ')';
  // Locks: each one's waits as µs columns, in time order.
  M.locks = (D.locks || []).map((l, i) => {
    const n = l.waits.length;
    const L = { i, l, n, from: new Float64Array(n), to: new Float64Array(n), waiter: new Int32Array(n), holder: new Int32Array(n) };
    l.waits.forEach((w, k) => { L.from[k] = w.from_s * 1e6; L.to[k] = w.to_s * 1e6; L.waiter[k] = w.waiter; L.holder[k] = w.holder; });
    L.label = l.kind + ' ' + l.address + (l.name ? ' in ' + l.name : '');
    return L;
  });
  return M;
}

// ---- selection-dependent aggregates --------------------------------------

// A mask of the selected threads, or null for all.
function threadMask(M, sel) {
  if (!sel.threads) return null;
  const m = new Uint8Array(M.nThreads);
  for (const t of sel.threads) m[t] = 1;
  return m;
}

// Samples per stack node in the selection.
function cpuWeights(M, sel, mask) {
  const w = new Float64Array(M.nStacks);
  const lo = lowerBound(M.sampleT, sel.from, 0, M.sampleT.length);
  const hi = lowerBound(M.sampleT, sel.to, lo, M.sampleT.length);
  for (let i = lo; i < hi; i++) {
    if (mask && !mask[M.sampleThread[i]]) continue;
    w[M.sampleStack[i]] += 1;
  }
  return w;
}

// Calls `f(spanIndex, clippedFrom, clippedTo)` for every span of thread
// `th` overlapping the selection.
function eachSpan(M, th, from, to, f) {
  const a = M.spanOff[th], b = M.spanOff[th + 1];
  for (let i = lowerBound(M.spanEnd, from + 1e-9, a, b); i < b && M.spanStart[i] < to; i++) {
    f(i, Math.max(from, M.spanStart[i]), Math.min(to, M.spanEnd[i]));
  }
}

// Microseconds blocked per blocking stack node in the selection.
function blockedWeights(M, sel, mask) {
  const w = new Float64Array(M.nStacks);
  for (let th = 0; th < M.nThreads; th++) {
    if (mask && !mask[th]) continue;
    eachSpan(M, th, sel.from, sel.to, (i, a, b) => {
      if (M.spanState[i] >= 2 && M.spanStack[i] >= 0) w[M.spanStack[i]] += b - a;
    });
  }
  return w;
}

// Per thread: samples, µs per state, faults and syscalls in the selection.
function threadStats(M, sel, mask) {
  const n = M.nThreads;
  const st = { samples: new Float64Array(n), states: [], faults: new Float64Array(n), syscalls: new Float64Array(n) };
  for (let k = 0; k < 8; k++) st.states.push(new Float64Array(n));
  const lo = lowerBound(M.sampleT, sel.from, 0, M.sampleT.length);
  const hi = lowerBound(M.sampleT, sel.to, lo, M.sampleT.length);
  for (let i = lo; i < hi; i++) st.samples[M.sampleThread[i]]++;
  for (let th = 0; th < n; th++) {
    if (mask && !mask[th]) continue;
    eachSpan(M, th, sel.from, sel.to, (i, a, b) => { st.states[M.spanState[i]][th] += b - a; });
  }
  const count = M.D.faults.count;
  for (let i = 0; i < M.faultT.length; i++) {
    if (M.faultT[i] + M.faultBucket > sel.from && M.faultT[i] < sel.to) st.faults[M.faultThread[i]] += count[i];
  }
  const slo = lowerBound(M.sysT, sel.from, 0, M.sysT.length);
  const shi = lowerBound(M.sysT, sel.to, slo, M.sysT.length);
  for (let i = slo; i < shi; i++) st.syscalls[M.sysThread[i]]++;
  return st;
}

// Waits in the selection by (thread, blocking stack), with their wakers.
function waitRows(M, sel, mask) {
  const by = new Map();
  for (let th = 0; th < M.nThreads; th++) {
    if (mask && !mask[th]) continue;
    eachSpan(M, th, sel.from, sel.to, (i, a, b) => {
      const state = M.spanState[i];
      if (state < 2) return;
      const key = th * 4194304 + (M.spanStack[i] + 1);
      let r = by.get(key);
      if (!r) { r = { thread: th, stack: M.spanStack[i], state, us: 0, count: 0, max: 0, wakers: new Map() }; by.set(key, r); }
      const d = b - a;
      r.us += d; r.count++; r.max = Math.max(r.max, d);
      const w = M.spanWaker[i];
      r.wakers.set(w, (r.wakers.get(w) || 0) + d);
    });
  }
  return [...by.values()];
}

// The locks with a shipped wait in the selection's time whose waiter or
// holder is selected (the figures are the report's, not the selection's).
function lockRows(M, sel, mask) {
  return M.locks.filter((L) => {
    for (let k = 0; k < L.n; k++) {
      if (L.to[k] <= sel.from || L.from[k] >= sel.to) continue;
      if (!mask || (L.waiter[k] >= 0 && mask[L.waiter[k]]) || (L.holder[k] >= 0 && mask[L.holder[k]])) return true;
    }
    return false;
  });
}

// Faults in the selection by (thread, stack).
function faultRows(M, sel, mask) {
  const by = new Map();
  const F = M.D.faults;
  for (let i = 0; i < M.faultT.length; i++) {
    if (M.faultT[i] + M.faultBucket <= sel.from || M.faultT[i] >= sel.to) continue;
    const th = M.faultThread[i];
    if (mask && !mask[th]) continue;
    const key = th * 4194304 + F.stack[i];
    let r = by.get(key);
    if (!r) { r = { thread: th, stack: F.stack[i], count: 0, major: 0 }; by.set(key, r); }
    if (F.major[i]) r.major += F.count[i]; else r.count += F.count[i];
  }
  return [...by.values()];
}

// Syscalls in the selection by (process, name), and by (process, path).
function syscallRows(M, sel, mask) {
  const S = M.D.syscalls;
  const byName = new Map(), byPath = new Map();
  const lo = lowerBound(M.sysT, sel.from, 0, M.sysT.length);
  const hi = lowerBound(M.sysT, sel.to, lo, M.sysT.length);
  for (let i = lo; i < hi; i++) {
    const th = M.sysThread[i];
    if (mask && !mask[th]) continue;
    const p = M.threadProc[th];
    const k = p * 2097152 + S.name[i];
    let r = byName.get(k);
    if (!r) { r = { proc: p, name: S.name[i], count: 0, us: 0, max: 0, errors: new Map() }; byName.set(k, r); }
    r.count++;
    if (S.dur[i] > 0) { r.us += S.dur[i]; r.max = Math.max(r.max, S.dur[i]); }
    if (S.error[i] >= 0) r.errors.set(S.error[i], (r.errors.get(S.error[i]) || 0) + 1);
    if (S.path[i] >= 0) {
      let inner = byPath.get(k);
      if (!inner) { inner = new Map(); byPath.set(k, inner); }
      let q = inner.get(S.path[i]);
      if (!q) { q = { proc: p, name: S.name[i], path: S.path[i], count: 0, failed: 0, errors: new Map() }; inner.set(S.path[i], q); }
      q.count++;
      if (S.error[i] >= 0) { q.failed++; q.errors.set(S.error[i], (q.errors.get(S.error[i]) || 0) + 1); }
    }
  }
  return { names: [...byName.values()], paths: [...byPath.values()].flatMap((m) => [...m.values()]) };
}

// Self and inclusive weight per function from per-node weights.
function functionRows(M, w) {
  const self = new Float64Array(M.funcName.length);
  const incl = new Float64Array(M.funcName.length);
  const seen = new Int32Array(M.funcName.length).fill(-1);
  for (let n = 0; n < M.nStacks; n++) {
    if (!w[n]) continue;
    self[M.func[n]] += w[n];
    // Each function once per stack, however often it recurs.
    for (let x = n; x >= 0; x = M.parent[x]) {
      const f = M.func[x];
      if (seen[f] !== n) { seen[f] = n; incl[f] += w[n]; }
    }
  }
  const rows = [];
  for (let f = 0; f < self.length; f++) {
    if (incl[f] > 0 && M.funcKind[f] !== 2) rows.push({ func: f, self: self[f], incl: incl[f] });
  }
  return rows;
}

// The innermost function of a stack that is not its process node.
function leafName(M, node) {
  if (node < 0) return '[no stack]';
  return M.funcKind[M.func[node]] === 2 ? '[no stack]' : M.funcName[M.func[node]];
}

// Function names of a stack, innermost first (process node left out).
function stackNames(M, node, max) {
  const out = [];
  for (let x = node; x >= 0 && out.length < max; x = M.parent[x]) {
    if (M.funcKind[M.func[x]] !== 2) out.push(M.funcName[M.func[x]]);
  }
  return out;
}
