//! Which process a critical path is about and over what time: the root a
//! command names, the default root (the longest-running process that
//! started in the trace), a process by pid, a process's tree, its main
//! thread and its lifetime window. Pure.

use std::collections::HashMap;

use slowlab_model::trace::{ProcIdx, ThreadIdx, Trace};

use super::PathError;
use crate::select::BuildFx;

/// Every process's children, by the parent's pid, in start order.
pub(super) fn children_by_pid(trace: &Trace) -> HashMap<i32, Vec<ProcIdx>, BuildFx> {
    let mut out: HashMap<i32, Vec<ProcIdx>, BuildFx> = HashMap::default();
    for (i, p) in trace.processes.iter().enumerate() {
        if let Some(pp) = p.ppid {
            out.entry(pp).or_default().push(ProcIdx(i as u32));
        }
    }
    out
}

/// The main thread of a process: the one whose tid is the pid.
pub(super) fn main_thread(trace: &Trace, proc: ProcIdx) -> Option<ThreadIdx> {
    let p = &trace.processes[proc.ix()];
    p.threads
        .iter()
        .copied()
        .find(|t| trace.threads[t.ix()].tid == p.pid)
        .or_else(|| p.threads.first().copied())
}

/// The wall-time window of a process: fork (or exec) to exit, clipped to
/// the trace.
pub fn window(trace: &Trace, proc: ProcIdx) -> (u64, u64) {
    let p = &trace.processes[proc.ix()];
    // `clamp` needs its bounds in order, even for a damaged trace.
    let s = trace.meta.start_ns;
    let e = trace.meta.end_ns.max(s);
    let start = p.start_ns.or(p.exec_ns).unwrap_or(s).clamp(s, e);
    let end = p.end_ns.unwrap_or(e).clamp(start, e);
    (start, end)
}

/// The default root: the recorded command's process when the trace names it
/// ([`slowlab_model::trace::TraceMeta::command_pid`], as the eBPF recorder's
/// traces do) or when perf's command line shows the command it ran
/// (`perf record … -- COMMAND…`, as slowlab records), else the longest-running
/// process that started (was forked or exec'd) during the trace.
pub fn default_root(trace: &Trace) -> Option<ProcIdx> {
    trace
        .meta
        .command_pid
        .and_then(|pid| process_by_pid(trace, pid).ok())
        .or_else(|| recorded_command(trace).and_then(|c| perf_workload(trace, c)))
        .or_else(|| longest_started(trace))
}

/// The command after `--` in the trace's perf command line, if any.
fn recorded_command(trace: &Trace) -> Option<&[String]> {
    let cmdline = &trace.meta.cmdline;
    let at = cmdline.iter().position(|a| a == "--")?;
    Some(&cmdline[at + 1..]).filter(|c| !c.is_empty())
}

/// The longest-running process that started during the trace.
fn longest_started(trace: &Trace) -> Option<ProcIdx> {
    trace
        .processes
        .iter()
        .enumerate()
        .filter(|(_, p)| p.start_ns.is_some() || p.exec_ns.is_some())
        .map(|(i, _)| {
            let (s, e) = window(trace, ProcIdx(i as u32));
            (ProcIdx(i as u32), e - s)
        })
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        .map(|(i, _)| i)
}

/// The process of `pid` (its last lifetime in the trace).
pub fn process_by_pid(trace: &Trace, pid: i32) -> Result<ProcIdx, PathError> {
    trace
        .processes
        .iter()
        .rposition(|p| p.pid == pid)
        .map(|i| ProcIdx(i as u32))
        .ok_or(PathError::NoSuchPid(pid))
}

/// The process that ran `command` under `perf record … -- command`: a child
/// of a `perf` process that exec'd during the trace, preferring one named
/// like the command; else the default root.
pub fn command_root(trace: &Trace, command: &[String]) -> Option<ProcIdx> {
    perf_workload(trace, command).or_else(|| default_root(trace))
}

/// A child of a `perf` process that exec'd during the trace, preferring one
/// named like `command`'s program (as the kernel shortens it, 15 bytes).
fn perf_workload(trace: &Trace, command: &[String]) -> Option<ProcIdx> {
    let perf_pids: Vec<i32> = trace
        .processes
        .iter()
        .filter(|p| trace.str(p.comm) == "perf")
        .map(|p| p.pid)
        .collect();
    let want: String = command
        .first()
        .map(|c| c.rsplit('/').next().unwrap_or(c).chars().take(15).collect())
        .unwrap_or_default();
    let children: Vec<ProcIdx> = trace
        .processes
        .iter()
        .enumerate()
        .filter(|(_, p)| p.exec_ns.is_some() && p.ppid.is_some_and(|pp| perf_pids.contains(&pp)))
        .map(|(i, _)| ProcIdx(i as u32))
        .collect();
    children
        .iter()
        .copied()
        .find(|&i| trace.str(trace.processes[i.ix()].comm) == want)
        .or_else(|| children.first().copied())
}

/// The process and its descendants (by recorded parent), root first.
pub fn process_tree(trace: &Trace, root: ProcIdx) -> Vec<ProcIdx> {
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let parent = &trace.processes[tree[i].ix()];
        let (ps, pe) = window(trace, tree[i]);
        for (k, p) in trace.processes.iter().enumerate() {
            let k = ProcIdx(k as u32);
            let started = p.start_ns.or(p.exec_ns);
            if p.ppid == Some(parent.pid)
                && !tree.contains(&k)
                && started.is_some_and(|s| s >= ps && s <= pe)
            {
                tree.push(k);
            }
        }
        i += 1;
    }
    tree
}
