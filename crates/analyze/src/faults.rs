//! Page faults by process and kind, their rate over time and the stacks
//! that fault most, from the `exceptions:page_fault_user/kernel` tracepoints
//! (every fault, at its start) and the `major-faults` software event (the
//! faults that needed I/O).
//!
//! Minor faults are all faults minus the major ones. Whether a fault hit a
//! file-backed or an anonymous mapping is not told apart: perf records only
//! executable mappings unless asked for data mappings too, and the fault
//! tracepoints do not say. Pure: reads the trace, prints nothing.

use std::collections::HashMap;

use slowlab_model::trace::{EventKind, ProcIdx, StackIdx, Trace};

use crate::buckets::TimeBuckets;
use crate::function_stacks::FunctionStacks;
use crate::select::{BuildFx, Selection};
use crate::waits::stack_names;
pub use slowlab_model::views::faults::{FaultsView, ProcessFaults, StackCount};

#[derive(Default)]
struct Counts {
    faults: u64,
    major: u64,
    user: u64,
    kernel: u64,
    rate: Vec<u64>,
    stacks: HashMap<Option<StackIdx>, u64, BuildFx>,
    /// The major faults' own rate and stacks: the rate and stacks of a trace whose only
    /// faults are major ones (a Windows trace's hard faults), where every fault's would
    /// be empty.
    major_rate: Vec<u64>,
    major_stacks: HashMap<Option<StackIdx>, u64, BuildFx>,
}

/// Builds the view; `top` stacks per process (all when `None`).
pub fn faults_view(
    trace: &Trace,
    sel: &Selection,
    bucket_s: f64,
    top: Option<usize>,
) -> FaultsView {
    let keep = sel.thread_mask(trace);
    let (from, to) = sel.time_range_ns(trace);
    let grid = TimeBuckets::new(trace, sel, bucket_s);
    let mut per: HashMap<ProcIdx, Counts, BuildFx> = HashMap::default();
    let mut has_fault_events = false;
    let mut shown = FunctionStacks::new(trace);
    for ev in &trace.events {
        let (is_fault, is_major, user) = match ev.kind {
            EventKind::PageFault { user, .. } => (true, false, Some(user)),
            EventKind::MajorFault { .. } => (false, true, None),
            _ => continue,
        };
        has_fault_events = true;
        if !keep.get(ev.thread.ix()).copied().unwrap_or(false)
            || ev.time_ns < from
            || ev.time_ns >= to
        {
            continue;
        }
        let proc = trace.threads[ev.thread.ix()].process;
        let c = per.entry(proc).or_default();
        if is_major {
            c.major += 1;
            if c.major_rate.is_empty() {
                c.major_rate = vec![0; grid.count()];
            }
            c.major_rate[grid.index(ev.time_ns)] += 1;
            *c.major_stacks.entry(shown.of(ev.stack)).or_default() += 1;
            continue;
        }
        if is_fault {
            c.faults += 1;
            match user {
                Some(true) => c.user += 1,
                Some(false) => c.kernel += 1,
                None => {}
            }
            if c.rate.is_empty() {
                c.rate = vec![0; grid.count()];
            }
            c.rate[grid.index(ev.time_ns)] += 1;
            *c.stacks.entry(shown.of(ev.stack)).or_default() += 1;
        }
    }
    let mut processes: Vec<ProcessFaults> = per
        .into_iter()
        .map(|(proc, mut c)| {
            let p = &trace.processes[proc.ix()];
            if c.faults == 0 {
                (c.rate, c.stacks) = (c.major_rate, c.major_stacks);
            }
            let mut stacks: Vec<StackCount> = c
                .stacks
                .into_iter()
                .map(|(stack, count)| StackCount {
                    stack: stack_names(trace, stack),
                    count,
                })
                .collect();
            stacks.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.stack.cmp(&b.stack)));
            if let Some(top) = top {
                stacks.truncate(top);
            }
            let faults = c.faults.max(c.major);
            ProcessFaults {
                pid: p.pid,
                comm: trace.str(p.comm).to_string(),
                faults,
                minor: faults - c.major.min(faults),
                major: c.major,
                user: c.user,
                kernel: c.kernel,
                rate: c.rate,
                stacks,
            }
        })
        .collect();
    processes.sort_by(|a, b| b.faults.cmp(&a.faults).then(a.pid.cmp(&b.pid)));
    FaultsView {
        total: processes.iter().map(|p| p.faults).sum(),
        major: processes.iter().map(|p| p.major).sum(),
        bucket_s: grid.width_s(),
        first_bucket_s: grid.start_s(0),
        processes,
        has_fault_events,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::small_trace;
    use slowlab_model::trace::{Event, ThreadIdx};

    #[test]
    fn faults_are_counted_by_process_kind_and_stack() {
        let mut t = small_trace();
        let fault = |user| EventKind::PageFault {
            address: 0x1000,
            ip: 0,
            error_code: 6,
            user,
            windows_kind: None,
        };
        for (i, (thread, kind, stack)) in [
            (0, fault(true), Some(1)),
            (0, fault(true), Some(1)),
            (0, fault(false), Some(2)),
            (0, EventKind::MajorFault { address: None }, None),
            (1, fault(true), Some(3)),
        ]
        .into_iter()
        .enumerate()
        {
            t.events.push(Event {
                time_ns: 1_000_000 * (i as u64 + 1),
                cpu: 0,
                thread: ThreadIdx(thread),
                stack: stack.map(StackIdx),
                kind,
            });
        }
        let v = faults_view(&t, &Selection::default(), 1.0, None);
        assert_eq!(v.total, 4);
        assert_eq!(v.major, 1);
        let app = &v.processes[0];
        assert_eq!((app.pid, app.faults, app.minor, app.major), (10, 3, 2, 1));
        assert_eq!((app.user, app.kernel), (2, 1));
        assert_eq!(app.stacks[0].stack, vec!["work", "main"]);
        assert_eq!(app.stacks[0].count, 2);
        assert_eq!(app.rate.iter().sum::<u64>(), 3);
        assert!(v.has_fault_events);
    }
}
