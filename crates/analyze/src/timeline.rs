//! The trace in time buckets (default 1 s): CPU by process (from the
//! samples), page faults, time threads spent blocked (from the waits, split
//! across the buckets they span) and process starts and exits; over the
//! selection's threads and its time range (waits cut to it). Pure.

use std::collections::HashMap;

use slowlab_model::trace::{EventKind, ProcIdx, Trace};

use crate::buckets::TimeBuckets;
use crate::select::{BuildFx, Selection};
use crate::states::Schedule;
pub use slowlab_model::views::timeline::{Bucket, ProcessCpu, TimelineView};

/// Buckets of `bucket_s` seconds (wider over a very long span: [`TimeBuckets`]); `top`
/// processes per bucket.
pub fn timeline_view(
    trace: &Trace,
    sched: &Schedule,
    sel: &Selection,
    bucket_s: f64,
    top: usize,
) -> TimelineView {
    let keep = sel.thread_mask(trace);
    let (from, to) = sel.time_range_ns(trace);
    let in_range = |ns: u64| from <= ns && ns < to;
    let grid = TimeBuckets::new(trace, sel, bucket_s);
    let count = grid.count();
    let index = |ns: u64| grid.index(ns);

    let mut cpu: Vec<HashMap<ProcIdx, u64, BuildFx>> = vec![HashMap::default(); count];
    let s = &trace.samples;
    for i in 0..s.len() {
        let th = s.thread[i];
        if keep.get(th.ix()).copied().unwrap_or(false) && in_range(s.time_ns[i]) {
            let ns = cpu[index(s.time_ns[i])]
                .entry(trace.threads[th.ix()].process)
                .or_default();
            *ns = ns.saturating_add(s.period[i]); // a damaged period may be 2^63
        }
    }
    let mut faults = vec![0u64; count];
    for ev in &trace.events {
        if matches!(ev.kind, EventKind::PageFault { .. })
            && keep.get(ev.thread.ix()).copied().unwrap_or(false)
            && in_range(ev.time_ns)
        {
            faults[index(ev.time_ns)] += 1;
        }
    }
    let mut blocked = vec![0u64; count];
    for w in sched.waits.iter().filter(|w| keep[w.thread.ix()]) {
        // Split the wait, cut to the range, over the buckets it spans.
        let mut t = w.start_ns.max(grid.start_ns(0));
        let end = w.end_ns.min(to);
        while t < end {
            let b = index(t);
            let until = end.min(grid.end_ns(b));
            blocked[b] += until - t;
            if b + 1 >= count {
                break;
            }
            t = until;
        }
    }
    let (mut starts, mut exits) = (vec![0u64; count], vec![0u64; count]);
    for p in &trace.processes {
        if !(sel.filters.is_empty() || p.threads.iter().any(|t| keep[t.ix()])) {
            continue;
        }
        if let Some(s) = p.start_ns.filter(|&s| in_range(s)) {
            starts[index(s)] += 1;
        }
        if let Some(e) = p.end_ns.filter(|&e| in_range(e)) {
            exits[index(e)] += 1;
        }
    }
    let buckets = (0..count)
        .map(|b| {
            let mut procs: Vec<ProcessCpu> = cpu[b]
                .iter()
                .map(|(&p, &ns)| {
                    let process = &trace.processes[p.ix()];
                    ProcessCpu {
                        pid: process.pid,
                        comm: trace.str(process.comm).to_string(),
                        cpu_s: ns as f64 / 1e9,
                    }
                })
                .collect();
            procs.sort_by(|a, b| b.cpu_s.total_cmp(&a.cpu_s).then(a.pid.cmp(&b.pid)));
            // From +0.0: an empty f64 sum is -0.0, which JSON would keep.
            let cpu_s = procs.iter().fold(0.0, |sum, p| sum + p.cpu_s);
            procs.truncate(top);
            Bucket {
                start_s: grid.start_s(b),
                cpu: procs,
                cpu_s,
                faults: faults[b],
                blocked_s: blocked[b] as f64 / 1e9,
                starts: starts[b],
                exits: exits[b],
            }
        })
        .collect();
    TimelineView {
        bucket_s: grid.width_s(),
        buckets,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::small_trace;

    #[test]
    fn samples_land_in_their_buckets() {
        let t = small_trace();
        // Samples at 1..6 ms after a start of 1 ms; buckets of 2 ms.
        let sched = crate::states::Schedule::from_states(&crate::states::ThreadStates::build(&t));
        let v = timeline_view(&t, &sched, &Selection::default(), 0.002, 5);
        assert_eq!(v.buckets.len(), 3);
        let total: f64 = v.buckets.iter().map(|b| b.cpu_s).sum();
        assert!((total - 0.006).abs() < 1e-12, "{total}");
        assert_eq!(v.buckets[0].cpu[0].comm, "app");

        // [2, 4) ms after the start: the samples at 2 and 3 ms, in buckets from 2 ms.
        let range = Selection::parse(&[], Some(0.002), Some(0.004)).unwrap();
        let v = timeline_view(&t, &sched, &range, 0.001, 5);
        let starts: Vec<f64> = v.buckets.iter().map(|b| b.start_s).collect();
        assert_eq!(starts, vec![0.002, 0.003]);
        let total: f64 = v.buckets.iter().map(|b| b.cpu_s).sum();
        assert!((total - 0.002).abs() < 1e-12, "{total}");
    }
}
