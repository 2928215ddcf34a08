//! Process lifetimes: fork, exec and exit times, the parent/child tree,
//! durations, creation and destruction rates over time, and the slowest
//! launches — from perf's fork/comm/exit bookkeeping in the trace model.
//!
//! Times are seconds from the trace start; a process that existed before the
//! trace began has no start, one still alive at its end has no end. Pure.

use serde::Serialize;
use slowlab_model::trace::Trace;

use crate::select::Selection;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProcView {
    pub pid: i32,
    pub ppid: Option<i32>,
    pub comm: String,
    pub start_s: Option<f64>,
    pub exec_s: Option<f64>,
    pub end_s: Option<f64>,
    /// From fork (or exec) to exit, when both are in the trace.
    pub duration_s: Option<f64>,
    pub threads: usize,
}

/// The `--procs` view: `{"processes":[…]}` in start order.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProcsView {
    pub processes: Vec<ProcView>,
    pub bucket_s: f64,
    /// Processes created and ended per bucket.
    pub created: Vec<u64>,
    pub ended: Vec<u64>,
    /// pids of the processes with the longest lifetimes that both started
    /// and ended in the trace, longest first.
    pub slowest: Vec<i32>,
}

pub fn procs_view(trace: &Trace, sel: &Selection, bucket_s: f64, slowest: usize) -> ProcsView {
    let keep = sel.thread_mask(trace);
    let start = trace.meta.start_ns;
    let rel = |ns: u64| ns.saturating_sub(start) as f64 / 1e9;
    let bucket_ns = (bucket_s.max(1e-3) * 1e9) as u64;
    let buckets = (trace.meta.end_ns.saturating_sub(start) / bucket_ns + 1) as usize;
    let mut created = vec![0u64; buckets];
    let mut ended = vec![0u64; buckets];
    let bucket = |ns: u64| ((ns.saturating_sub(start) / bucket_ns) as usize).min(buckets - 1);

    let mut processes: Vec<ProcView> = trace
        .processes
        .iter()
        .filter(|p| {
            p.threads
                .iter()
                .any(|t| keep.get(t.ix()).copied().unwrap_or(false))
                || sel.filters.is_empty()
        })
        .map(|p| {
            if let Some(s) = p.start_ns {
                created[bucket(s)] += 1;
            }
            if let Some(e) = p.end_ns {
                ended[bucket(e)] += 1;
            }
            let began = p.start_ns.or(p.exec_ns);
            ProcView {
                pid: p.pid,
                ppid: p.ppid,
                comm: trace.str(p.comm).to_string(),
                start_s: p.start_ns.map(rel),
                exec_s: p.exec_ns.map(rel),
                end_s: p.end_ns.map(rel),
                duration_s: match (began, p.end_ns) {
                    (Some(b), Some(e)) => Some(e.saturating_sub(b) as f64 / 1e9),
                    _ => None,
                },
                threads: p.threads.len(),
            }
        })
        .collect();
    processes.sort_by(|a, b| {
        a.start_s
            .unwrap_or(-1.0)
            .total_cmp(&b.start_s.unwrap_or(-1.0))
            .then(a.pid.cmp(&b.pid))
    });
    let mut by_duration: Vec<&ProcView> = processes
        .iter()
        .filter(|p| p.duration_s.is_some())
        .collect();
    by_duration.sort_by(|a, b| {
        b.duration_s
            .unwrap_or(0.0)
            .total_cmp(&a.duration_s.unwrap_or(0.0))
    });
    ProcsView {
        slowest: by_duration.iter().take(slowest).map(|p| p.pid).collect(),
        processes,
        bucket_s,
        created,
        ended,
    }
}

/// The parent/child tree as indented lines (`pid comm duration`), roots
/// first; children of a process in start order.
pub fn tree_lines(view: &ProcsView) -> Vec<String> {
    use std::collections::HashMap;
    let known: std::collections::HashSet<i32> = view.processes.iter().map(|p| p.pid).collect();
    let mut children: HashMap<i32, Vec<&ProcView>> = HashMap::new();
    let mut roots = Vec::new();
    for p in &view.processes {
        match p.ppid.filter(|pp| known.contains(pp) && *pp != p.pid) {
            Some(pp) => children.entry(pp).or_default().push(p),
            None => roots.push(p),
        }
    }
    let mut lines = Vec::new();
    let mut stack: Vec<(&ProcView, usize)> = roots.into_iter().rev().map(|p| (p, 0)).collect();
    let mut seen = std::collections::HashSet::new();
    while let Some((p, depth)) = stack.pop() {
        if !seen.insert(p.pid) {
            continue;
        }
        let duration = p
            .duration_s
            .map_or(String::new(), |d| format!(" ({:.3} s)", d));
        lines.push(format!(
            "{}{} {}{duration}",
            "  ".repeat(depth),
            p.pid,
            p.comm
        ));
        if let Some(kids) = children.get(&p.pid) {
            for k in kids.iter().rev() {
                stack.push((k, depth + 1));
            }
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::small_trace;
    use slowlab_model::trace::{Process, StrIdx};

    #[test]
    fn lifetimes_tree_rates_and_slowest() {
        let mut t = small_trace();
        t.meta.start_ns = 0;
        t.meta.end_ns = 3_000_000_000;
        for (pid, start, end) in [
            (30, 500_000_000u64, 2_500_000_000u64),
            (31, 1_200_000_000, 1_300_000_000),
        ] {
            t.processes.push(Process {
                pid,
                ppid: Some(10),
                comm: StrIdx(0),
                start_ns: Some(start),
                exec_ns: Some(start + 1000),
                end_ns: Some(end),
                threads: vec![],
            });
        }
        let v = procs_view(&t, &Selection::default(), 1.0, 5);
        assert_eq!(v.processes.len(), 4);
        let p30 = v.processes.iter().find(|p| p.pid == 30).unwrap();
        assert!((p30.duration_s.unwrap() - 2.0).abs() < 1e-9);
        assert_eq!(p30.ppid, Some(10));
        assert_eq!(v.created, vec![1, 1, 0, 0]);
        assert_eq!(v.ended, vec![0, 1, 1, 0]);
        assert_eq!(v.slowest, vec![30, 31]);
        let tree = tree_lines(&v);
        assert!(tree.contains(&"10 app".to_string()), "{tree:?}");
        assert!(tree.contains(&"  30 app (2.000 s)".to_string()), "{tree:?}");
    }
}
