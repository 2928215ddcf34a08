//! Process lifetimes: fork, exec and exit times, the parent/child tree,
//! durations, creation and destruction rates over time, and the slowest
//! launches — from perf's fork/comm/exit bookkeeping in the trace model.
//!
//! Times are seconds from the trace start; a process that existed before the
//! trace began has no start, one still alive at its end has no end. With a
//! time range, the processes alive in it, and the launches and exits in it.
//! Pure.

use slowlab_model::trace::Trace;

use crate::buckets::TimeBuckets;
use crate::select::Selection;
pub use slowlab_model::views::procs::{ProcView, ProcsView};

pub fn procs_view(trace: &Trace, sel: &Selection, bucket_s: f64, slowest: usize) -> ProcsView {
    let keep = sel.thread_mask(trace);
    let (from, to) = sel.time_range_ns(trace);
    let in_range = |ns: u64| from <= ns && ns < to;
    let start = trace.meta.start_ns;
    let rel = |ns: u64| ns.saturating_sub(start) as f64 / 1e9;
    let grid = TimeBuckets::new(trace, sel, bucket_s);
    let mut created = vec![0u64; grid.count()];
    let mut ended = vec![0u64; grid.count()];
    let bucket = |ns: u64| grid.index(ns);

    let mut processes: Vec<ProcView> = trace
        .processes
        .iter()
        .filter(|p| {
            p.threads
                .iter()
                .any(|t| keep.get(t.ix()).copied().unwrap_or(false))
                || sel.filters.is_empty()
        })
        // Alive in the range: begun before its end, not ended before its start.
        .filter(|p| {
            p.start_ns.or(p.exec_ns).is_none_or(|s| s < to) && p.end_ns.is_none_or(|e| e >= from)
        })
        .map(|p| {
            if let Some(s) = p.start_ns.filter(|&s| in_range(s)) {
                created[bucket(s)] += 1;
            }
            if let Some(e) = p.end_ns.filter(|&e| in_range(e)) {
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
        bucket_s: grid.width_s(),
        first_bucket_s: grid.start_s(0),
        created,
        ended,
    }
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

        // [1.4, 2.6): 31 ended before it; 30 ends in it; the two older ones live on.
        let range = Selection::parse(&[], Some(1.4), Some(2.6)).unwrap();
        let v = procs_view(&t, &range, 0.5, 5);
        let pids: Vec<i32> = v.processes.iter().map(|p| p.pid).collect();
        assert!(!pids.contains(&31) && pids.contains(&30), "{pids:?}");
        assert_eq!(v.processes.len(), 3);
        assert_eq!(v.first_bucket_s, 1.4);
        assert_eq!(v.created, vec![0, 0, 0]);
        assert_eq!(v.ended, vec![0, 0, 1], "2.5 s is in [2.4, 2.9)");
    }
}
