//! Sampled CPU usage: the tree grouped by any order of process, thread,
//! module and function (like a trace analyzer's "CPU Usage (Sampled)"
//! table), and the summary that `analyze --json` writes.
//!
//! Module and function keys group by the *sampled* frame (where the CPU
//! was), so a node's `samples` is its self count; each module or function
//! node also carries `inclusive`: the samples of its parent group that have
//! it anywhere on the stack (a recursive function counts once per sample).
//! Percentages are of the selected samples. No rendering here.

use std::collections::HashMap;

use slowlab_model::trace::{FuncIdx, StackIdx, Trace};
pub use slowlab_model::views::cpu::{
    pct, CpuTree, FunctionRow, Key, Node, ProcessRow, Summary, ThreadRow,
};

use crate::select::{Aggregate, Selection};
use crate::AnalyzeError;

/// Parses one grouping key (`process`, `thread`, `module`, `function` or
/// their short forms).
pub fn parse_key(s: &str) -> Result<Key, AnalyzeError> {
    Key::from_name(s).ok_or_else(|| AnalyzeError::BadKey(s.trim().to_owned()))
}

/// Parses `process,thread,module` into keys.
pub fn parse_keys(s: &str) -> Result<Vec<Key>, AnalyzeError> {
    s.split(',')
        .filter(|k| !k.trim().is_empty())
        .map(parse_key)
        .collect()
}

/// Leaf function of a stack (`None` when the sample had no stack).
fn leaf_func(trace: &Trace, stack: Option<StackIdx>) -> Option<FuncIdx> {
    let node = trace.stacks.get(stack?.ix())?;
    Some(trace.frame_function(node.frame))
}

#[derive(Default)]
struct Build {
    id: u32,
    samples: u64,
    inclusive: u64,
    children: HashMap<u32, usize>,
}

/// Builds the CPU tree for `keys` (any order, any prefix), keeping the
/// `top` largest children of each node (all when `None`).
pub fn cpu_tree(trace: &Trace, keys: &[Key], sel: &Selection, top: Option<usize>) -> CpuTree {
    let agg = sel.aggregate(trace);
    let mut nodes: Vec<Build> = vec![Build::default()];
    let inclusive = keys
        .iter()
        .any(|k| matches!(k, Key::Module | Key::Function));
    // Each group's row at every level (the root first), for the inclusive
    // counts below.
    let width = keys.len() + 1;
    let mut paths = Vec::with_capacity(if inclusive {
        agg.groups.len() * width
    } else {
        0
    });
    let nfunc = trace.functions.len();
    let nmod = trace.modules.len();
    // Stamps to count each function/module once per stack.
    let mut fstamp = vec![u32::MAX; nfunc];
    let mut mstamp = vec![u32::MAX; nmod];
    for &((thread, stack), count) in &agg.groups {
        let leaf = leaf_func(trace, stack);
        let mut cur = 0usize;
        nodes[0].samples += count;
        if inclusive {
            paths.push(cur);
        }
        for &k in keys {
            let id = key_id(trace, k, thread, leaf);
            cur = match nodes[cur].children.get(&id) {
                Some(&n) => n,
                None => {
                    let n = nodes.len();
                    nodes.push(Build {
                        id,
                        ..Build::default()
                    });
                    nodes[cur].children.insert(id, n);
                    n
                }
            };
            nodes[cur].samples += count;
            if inclusive {
                paths.push(cur);
            }
        }
    }
    // Inclusive counts for module/function levels, once every row exists:
    // a group adds to the row of each function (module) on its stack under
    // its parent row, including rows that only later groups made.
    if inclusive {
        for (gi, &((_, stack), count)) in agg.groups.iter().enumerate() {
            let path = &paths[gi * width..][..width];
            let stamp = gi as u32;
            let mut funcs = Vec::new();
            let mut mods = Vec::new();
            for frame in trace.stack_frames(stack) {
                let f = trace.frame_function(frame);
                if fstamp[f.ix()] != stamp {
                    fstamp[f.ix()] = stamp;
                    funcs.push(f.0);
                }
                let m = trace.functions[f.ix()].module;
                if mstamp[m.ix()] != stamp {
                    mstamp[m.ix()] = stamp;
                    mods.push(m.0);
                }
            }
            for (level, &k) in keys.iter().enumerate() {
                let parent = path[level];
                let ids = match k {
                    Key::Function => &funcs,
                    Key::Module => &mods,
                    _ => continue,
                };
                for id in ids {
                    if let Some(&child) = nodes[parent].children.get(id) {
                        nodes[child].inclusive += count;
                    }
                }
            }
        }
    }
    let total = agg.total;
    let mut omitted = 0;
    let rows = finish(trace, &nodes, 0, keys, 0, total, top, &mut omitted);
    CpuTree {
        keys: keys.to_vec(),
        samples: total,
        omitted_rows: omitted,
        rows,
    }
}

fn key_id(
    trace: &Trace,
    k: Key,
    thread: slowlab_model::trace::ThreadIdx,
    leaf: Option<FuncIdx>,
) -> u32 {
    match k {
        Key::Process => trace.threads[thread.ix()].process.0,
        Key::Thread => thread.0,
        Key::Module => leaf.map_or(u32::MAX, |f| trace.functions[f.ix()].module.0),
        Key::Function => leaf.map_or(u32::MAX, |f| f.0),
    }
}

#[allow(clippy::too_many_arguments)]
fn finish(
    trace: &Trace,
    nodes: &[Build],
    n: usize,
    keys: &[Key],
    level: usize,
    total: u64,
    top: Option<usize>,
    omitted: &mut u64,
) -> Vec<Node> {
    let Some(&key) = keys.get(level) else {
        return Vec::new();
    };
    let mut kids: Vec<usize> = nodes[n].children.values().copied().collect();
    kids.sort_by(|&a, &b| {
        let (ia, ib) = (nodes[a].id, nodes[b].id);
        nodes[b]
            .samples
            .cmp(&nodes[a].samples)
            .then_with(|| match key {
                // Functions are numbered in the order they were named,
                // which depends on how many threads named them.
                Key::Function => by_name(trace, FuncIdx(ia), FuncIdx(ib)),
                _ => ia.cmp(&ib),
            })
    });
    if let Some(t) = top {
        if kids.len() > t {
            *omitted += (kids.len() - t) as u64;
            kids.truncate(t);
        }
    }
    kids.into_iter()
        .map(|c| {
            let b = &nodes[c];
            let mut node = label(trace, key, b.id);
            node.samples = b.samples;
            node.percent = pct(b.samples, total);
            if matches!(key, Key::Module | Key::Function) {
                node.inclusive = Some(b.inclusive.max(b.samples));
            }
            node.children = finish(trace, nodes, c, keys, level + 1, total, top, omitted);
            node
        })
        .collect()
}

fn label(trace: &Trace, key: Key, id: u32) -> Node {
    let mut node = Node {
        key,
        label: String::new(),
        pid: None,
        tid: None,
        module: None,
        samples: 0,
        percent: 0.0,
        inclusive: None,
        children: Vec::new(),
    };
    match key {
        Key::Process => {
            let p = &trace.processes[id as usize];
            node.label = format!("{} ({})", trace.str(p.comm), p.pid);
            node.pid = Some(p.pid);
        }
        Key::Thread => {
            let t = &trace.threads[id as usize];
            node.label = format!("{} ({})", trace.str(t.comm), t.tid);
            node.tid = Some(t.tid);
        }
        Key::Module => {
            node.label = match trace.modules.get(id as usize) {
                Some(m) => trace.str(m.name).to_owned(),
                None => "[no stack]".into(),
            };
        }
        Key::Function => match trace.functions.get(id as usize) {
            Some(f) => {
                node.label = crate::unnamed::label(trace, FuncIdx(id)).into_owned();
                node.module = Some(trace.str(trace.modules[f.module.ix()].name).to_owned());
            }
            None => node.label = "[no stack]".into(),
        },
    }
    node
}

/// Threads that walk the stacks of [`function_counts_by_stack`], at most.
const WALK_THREADS: usize = 4;

/// Stack nodes below which a thread of its own does not pay (the 382
/// thousand nodes of a 96 MB build trace: 10.5 ms on one thread, 8.1-9.4
/// on two).
const NODES_PER_WALK_THREAD: usize = 1 << 17;

/// Zeroed counts, one per stack node: megabytes on a big trace (14 MB for
/// the 1.7 M nodes of a 1.23 GB build trace read in one pass), every page of which
/// a summary writes. Backed by transparent huge pages where the system
/// leaves that to each program (`enabled` = `madvise`, the usual default):
/// faulting the pages in 2 MiB at a time instead of 4 KiB took a 30 MB
/// array from 12.5 to 4 ms. Only a hint: a refusal changes nothing but
/// speed. (The same hint as `slowlab-perf`'s interning tables take; this
/// crate does not depend on that one.)
fn node_counts(nodes: usize) -> Vec<u64> {
    const HUGE: usize = 2 << 20;
    let mut counts: Vec<u64> = Vec::with_capacity(nodes);
    let start = counts.as_ptr() as usize;
    let end = start + nodes * std::mem::size_of::<u64>();
    let (from, to) = (start.next_multiple_of(HUGE), end / HUGE * HUGE);
    if to > from {
        // SAFETY: `from..to` lies inside the allocation just made, which
        // this function owns; MADV_HUGEPAGE changes how it is backed,
        // never its contents.
        unsafe { libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_HUGEPAGE) };
    }
    counts.resize(nodes, 0);
    counts
}

/// Per-function self and inclusive counts of the selection, hottest self
/// first (then inclusive).
pub fn function_counts(trace: &Trace, agg: &Aggregate) -> Vec<(FuncIdx, u64, u64)> {
    let mut per_stack = node_counts(trace.stacks.len());
    for &((_, stack), count) in &agg.groups {
        if let Some(s) = stack {
            per_stack[s.ix()] += count;
        }
    }
    function_counts_by_stack(trace, &per_stack)
}

/// Per-function self and inclusive counts from the samples ending in each
/// stack node (`per_stack[node]`), hottest self first (then inclusive).
/// Each sampled stack is walked to its root once, in node order (callers
/// were made before their callees, so neighbouring walks share them in
/// cache); a function counts once per stack however often it recurses.
///
/// The walks are a chain of loads each waiting for the one before: a big
/// tree's nodes are split in ranges walked on up to [`WALK_THREADS`]
/// threads, whose counts are added up (33 → 22 ms on two cores for a tree
/// of 3.8 M nodes).
pub fn function_counts_by_stack(trace: &Trace, per_stack: &[u64]) -> Vec<(FuncIdx, u64, u64)> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |t| t.get())
        .min(WALK_THREADS)
        .min(per_stack.len() / NODES_PER_WALK_THREAD);
    function_counts_walked(trace, per_stack, threads)
}

/// [`function_counts_by_stack`] on `threads` threads (at least one).
fn function_counts_walked(
    trace: &Trace,
    per_stack: &[u64],
    threads: usize,
) -> Vec<(FuncIdx, u64, u64)> {
    let n = trace.functions.len();
    // Each frame's function in a column of its own: the walks read it at
    // random, 4 bytes a frame instead of a 24-byte `Frame` (5 ms of 37 on
    // a 96 MB trace).
    let function_of: Vec<u32> = trace.frames.iter().map(|f| f.function.0).collect();
    let walk = |nodes: std::ops::Range<usize>| {
        let mut counts = (vec![0u64; n], vec![0u64; n]);
        let (selfc, incl) = &mut counts;
        let mut stamp = vec![u32::MAX; n];
        let sampled = per_stack[nodes.clone()]
            .iter()
            .enumerate()
            .filter(|&(_, &c)| c > 0);
        for (walk, (node, &count)) in sampled.enumerate() {
            let stack = Some(StackIdx((nodes.start + node) as u32));
            let functions = trace
                .stack_frames(stack)
                .map(|frame| function_of[frame.ix()] as usize);
            for (depth, f) in functions.enumerate() {
                if depth == 0 {
                    selfc[f] += count;
                }
                if stamp[f] != walk as u32 {
                    stamp[f] = walk as u32;
                    incl[f] += count;
                }
            }
        }
        counts
    };
    let threads = threads.max(1);
    let step = per_stack.len().div_ceil(threads);
    let len = per_stack.len();
    let mut ranges = (0..threads).map(|i| (i * step).min(len)..((i + 1) * step).min(len));
    let first = ranges.next().unwrap_or(0..0);
    let parts: Vec<(Vec<u64>, Vec<u64>)> = std::thread::scope(|s| {
        let spawned: Vec<_> = ranges.map(|r| s.spawn(|| walk(r))).collect();
        let first = walk(first);
        std::iter::once(first)
            .chain(
                spawned
                    .into_iter()
                    .map(|h| h.join().expect("a stack walk panicked")),
            )
            .collect()
    });
    let (mut selfc, mut incl) = (vec![0u64; n], vec![0u64; n]);
    for (s, i) in parts {
        selfc.iter_mut().zip(s).for_each(|(a, b)| *a += b);
        incl.iter_mut().zip(i).for_each(|(a, b)| *a += b);
    }
    let mut rows: Vec<(FuncIdx, u64, u64)> = (0..n)
        .filter(|&i| incl[i] > 0)
        .map(|i| (FuncIdx(i as u32), selfc[i], incl[i]))
        .collect();
    rows.sort_by(|a, b| {
        b.1.cmp(&a.1)
            .then(b.2.cmp(&a.2))
            .then_with(|| by_name(trace, a.0, b.0))
    });
    rows
}

/// Functions in the order of their names, then their modules' names (not
/// their indices: functions are numbered in the order they were named,
/// which depends on how many threads named them). An index not in the
/// trace (`u32::MAX`: no stack) comes last.
fn by_name(trace: &Trace, a: FuncIdx, b: FuncIdx) -> std::cmp::Ordering {
    let key = |f: FuncIdx| {
        trace.functions.get(f.ix()).map(|func| {
            let module = trace
                .modules
                .get(func.module.ix())
                .map(|m| trace.str(m.name));
            (trace.str(func.name), module, func.kernel)
        })
    };
    match (key(a), key(b)) {
        (Some(x), Some(y)) => x.cmp(&y).then(a.cmp(&b)),
        (x, y) => x.is_none().cmp(&y.is_none()).then(a.cmp(&b)),
    }
}

/// The summary; `top` limits the functions (all when `None`).
pub fn summary(trace: &Trace, sel: &Selection, top: Option<usize>) -> Summary {
    // Counts by index, straight from the samples: per thread, per process
    // and per stack node (tables cost less than grouping by hash).
    let keep = sel.thread_mask(trace);
    let (from, to) = sel.time_range_ns(trace);
    let s = &trace.samples;
    let mut thread_counts = vec![0u64; trace.threads.len()];
    let mut per_stack = node_counts(trace.stacks.len());
    let mut total = 0;
    for i in 0..s.len() {
        let th = s.thread[i].ix();
        let t = s.time_ns[i];
        if !keep.get(th).copied().unwrap_or(false) || t < from || t >= to {
            continue;
        }
        total += 1;
        thread_counts[th] += 1;
        if let Some(stack) = s.stack[i] {
            per_stack[stack.ix()] += 1;
        }
    }
    let mut proc_counts = vec![0u64; trace.processes.len()];
    for (th, &count) in thread_counts.iter().enumerate() {
        proc_counts[trace.threads[th].process.ix()] += count;
    }
    let mut processes: Vec<ProcessRow> = proc_counts
        .iter()
        .enumerate()
        .filter(|&(_, &samples)| samples > 0)
        .map(|(p, &samples)| {
            let pr = &trace.processes[p];
            let mut threads: Vec<ThreadRow> = pr
                .threads
                .iter()
                .filter_map(|t| {
                    let samples = *thread_counts.get(t.ix()).filter(|&&n| n > 0)?;
                    let th = &trace.threads[t.ix()];
                    Some(ThreadRow {
                        tid: th.tid,
                        comm: trace.str(th.comm).to_owned(),
                        samples,
                    })
                })
                .collect();
            threads.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.tid.cmp(&b.tid)));
            ProcessRow {
                pid: pr.pid,
                comm: trace.str(pr.comm).to_owned(),
                samples,
                threads,
            }
        })
        .collect();
    // The idle task (pid 0, `swapper`) is where a CPU goes when nothing
    // runs: it never leads the table, however many samples it has.
    processes.sort_by(|a, b| {
        (a.pid == 0)
            .cmp(&(b.pid == 0))
            .then(b.samples.cmp(&a.samples))
            .then(a.pid.cmp(&b.pid))
    });
    let mut funcs = function_counts_by_stack(trace, &per_stack);
    if let Some(t) = top {
        funcs.truncate(t);
    }
    let functions = funcs
        .into_iter()
        .map(|(f, s, i)| FunctionRow {
            name: crate::unnamed::label(trace, f).into_owned(),
            module: trace.function_module(f).to_owned(),
            self_samples: s,
            inclusive: i,
        })
        .collect();
    Summary {
        samples: total,
        lost: trace.stats.lost_events,
        duration_s: trace.meta.duration_s(),
        sample_event: trace.meta.sample_event.clone(),
        sample_freq: trace.meta.sample_freq,
        processes,
        functions,
        warnings: trace.stats.warnings.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::small_trace;

    #[test]
    fn the_counts_are_the_same_on_any_number_of_threads() {
        let mut b = crate::testutil::TraceBuilder::default();
        let app = b.process(10, "app");
        let names = ["main", "f", "g", "h", "k"];
        // Stacks of every depth, with recursion, sampled unevenly.
        for i in 0..200u64 {
            let depth = 1 + (i % 7) as usize;
            let stack: Vec<&str> = (0..depth)
                .map(|d| names[((i / 3 + d as u64 * 7) % 5) as usize])
                .collect();
            let stack = b.stack(&stack);
            for s in 0..(i % 4) {
                b.sample((i * 10 + s) * 1_000_000, app, 0, stack);
            }
        }
        let t = b.build();
        let mut per_stack = vec![0u64; t.stacks.len()];
        for s in t.samples.stack.iter().flatten() {
            per_stack[s.ix()] += 1;
        }
        let one = function_counts_walked(&t, &per_stack, 1);
        assert!(one.iter().any(|&(_, s, i)| i > s), "no caller counted");
        // More threads than nodes too: ranges past the end are empty.
        for threads in [2, 3, 7, t.stacks.len() + 5] {
            assert_eq!(function_counts_walked(&t, &per_stack, threads), one);
        }
    }

    #[test]
    fn a_recursive_function_counts_once_per_sample() {
        let mut b = crate::testutil::TraceBuilder::default();
        let app = b.process(10, "app");
        let recursive = b.stack(&["main", "f", "g", "f"]);
        let other = b.stack(&["main", "h"]);
        for (ms, stack) in [(1, recursive), (2, recursive), (3, other), (4, recursive)] {
            b.sample(ms * 1_000_000, app, 0, stack);
        }
        let t = b.build();
        let s = summary(&t, &Selection::default(), None);
        let counts: Vec<(&str, u64, u64)> = s
            .functions
            .iter()
            .map(|f| (f.name.as_str(), f.self_samples, f.inclusive))
            .collect();
        assert_eq!(
            counts,
            vec![("f", 3, 3), ("h", 1, 1), ("main", 0, 4), ("g", 0, 3)]
        );
        assert_eq!(s.samples, 4);
        assert_eq!(s.processes[0].samples, 4);
    }

    #[test]
    fn tree_by_process_function_counts_self_and_inclusive() {
        let t = small_trace();
        let tree = cpu_tree(
            &t,
            &[Key::Process, Key::Function],
            &Selection::default(),
            None,
        );
        assert_eq!(tree.samples, 6);
        let p = &tree.rows[0];
        assert_eq!(p.label, "app (10)");
        assert_eq!(p.samples, 5);
        let leaf = &p.children[0];
        assert_eq!(leaf.label, "memset");
        assert_eq!(leaf.samples, 3);
        assert_eq!(leaf.inclusive, Some(3));
        let work = p.children.iter().find(|n| n.label == "work").unwrap();
        assert_eq!(work.samples, 2);
        assert_eq!(work.inclusive, Some(5));
    }

    #[test]
    fn inclusive_counts_stacks_seen_before_the_function_was_sampled() {
        // `helper` is a caller in the first stack sampled, and the leaf
        // only of a later one: its row is made by the later stack, and the
        // earlier stack's samples count in its inclusive all the same.
        let t = crate::testutil::stacks_trace(&[
            (&["main", "helper", "leaf"], 3),
            (&["main", "helper"], 2),
        ]);
        let tree = cpu_tree(
            &t,
            &[Key::Process, Key::Function],
            &Selection::default(),
            None,
        );
        let row = |name: &str| {
            let r = tree.rows[0].children.iter().find(|n| n.label == name);
            r.map(|r| (r.samples, r.inclusive)).unwrap()
        };
        assert_eq!(row("leaf"), (3, Some(3)));
        assert_eq!(row("helper"), (2, Some(5)));
        let by_module = cpu_tree(&t, &[Key::Module], &Selection::default(), None);
        assert_eq!(by_module.rows[0].inclusive, Some(5));
    }

    #[test]
    fn summary_matches_documented_shape() {
        let t = small_trace();
        let s = summary(&t, &Selection::default(), None);
        let v = serde_json::to_value(&s).unwrap();
        for k in ["samples", "lost", "duration_s", "processes", "functions"] {
            assert!(v.get(k).is_some(), "{k}");
        }
        assert_eq!(v["processes"][0]["threads"][0]["tid"], 10);
        let f = &v["functions"][0];
        assert_eq!(f["name"], "memset");
        assert_eq!(f["self"], 3);
        let main = s.functions.iter().find(|f| f.name == "main").unwrap();
        assert_eq!((main.self_samples, main.inclusive), (0, 5));
    }

    #[test]
    fn filter_and_time_range() {
        let t = small_trace();
        let sel = Selection {
            filters: vec!["process=other".parse().unwrap()],
            ..Selection::default()
        };
        assert_eq!(summary(&t, &sel, None).samples, 1);
        let sel = Selection {
            from_s: Some(0.0),
            to_s: Some(0.0025),
            ..Selection::default()
        };
        assert_eq!(summary(&t, &sel, None).samples, 3);
    }

    #[test]
    fn the_idle_task_never_leads_the_process_table() {
        let mut t = small_trace();
        t.processes[1].pid = 0;
        t.threads[1].tid = 0;
        for i in 0..10 {
            t.samples.time_ns.push(7_000_000 + i);
            t.samples.thread.push(slowlab_model::trace::ThreadIdx(1));
            t.samples.cpu.push(1);
            t.samples
                .stack
                .push(Some(slowlab_model::trace::StackIdx(3)));
            t.samples.period.push(1_000_000);
        }
        let s = summary(&t, &Selection::default(), None);
        assert_eq!(s.processes[0].pid, 10);
        assert_eq!(s.processes[1].pid, 0);
        assert!(s.processes[1].samples > s.processes[0].samples);
    }
}
