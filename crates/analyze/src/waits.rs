//! Precise CPU and waits from the scheduler's events: for every thread the
//! time it ran, was blocked, and was runnable but waiting for a CPU; where it
//! blocked (the stack of the switch that put it to sleep) and who woke it
//! (the waking thread, its process and its stack at the wake-up),
//! aggregated so that the longest waits and their wakers come first — the
//! ReadyThread view of a Windows trace analyzer.
//!
//! The times and waits are those of the one replay of the scheduler
//! ([`crate::states`], summed up in [`Schedule`]), so this view and the
//! critical path agree on every thread. Pure: reads the trace model and the
//! replay, prints nothing.

use std::collections::HashMap;

use slowlab_model::trace::{EventKind, StackIdx, ThreadIdx, Trace};

use crate::function_stacks::FunctionStacks;
use crate::select::{BuildFx, Selection};
pub use crate::states::{Schedule, ThreadTimes, Wait};
pub use slowlab_model::views::waits::{ThreadView, WaitView, WaitsView, WakerView};

/// Builds the waits view for the threads the selection keeps, `top` waits
/// per thread (all when `None`).
pub fn waits_view(
    trace: &Trace,
    sched: &Schedule,
    sel: &Selection,
    top: Option<usize>,
) -> WaitsView {
    let keep = sel.thread_mask(trace);
    let has_sched_events = trace
        .events
        .iter()
        .any(|e| matches!(e.kind, EventKind::Switch { .. }));

    // (thread, stack) → (total, count, max, wakers: (waker, waker stack) → (total, count))
    type WakerKey = (Option<ThreadIdx>, Option<StackIdx>);
    #[derive(Default)]
    struct Agg {
        total: u64,
        count: u64,
        max: u64,
        wakers: HashMap<WakerKey, (u64, u64), BuildFx>,
    }
    let mut per: HashMap<(ThreadIdx, Option<StackIdx>), Agg, BuildFx> = HashMap::default();
    let mut shown = FunctionStacks::new(trace);
    for w in &sched.waits {
        if !keep[w.thread.ix()] {
            continue;
        }
        let len = w.end_ns - w.start_ns;
        let a = per.entry((w.thread, shown.of(w.stack))).or_default();
        a.total += len;
        a.count += 1;
        a.max = a.max.max(len);
        let wk = a
            .wakers
            .entry((w.waker, shown.of(w.waker_stack)))
            .or_default();
        wk.0 += len;
        wk.1 += 1;
    }
    let mut by_thread: HashMap<ThreadIdx, Vec<WaitView>, BuildFx> = HashMap::default();
    for ((thread, stack), a) in per {
        let mut wakers: Vec<WakerView> = a
            .wakers
            .into_iter()
            .map(|((waker, wstack), (total, count))| {
                let (pid, tid, comm) = match waker {
                    Some(w) => {
                        let th = &trace.threads[w.ix()];
                        (
                            Some(trace.thread_process(w).pid),
                            Some(th.tid),
                            trace.str(th.comm).to_string(),
                        )
                    }
                    None => (None, None, "[interrupt]".to_string()),
                };
                WakerView {
                    pid,
                    tid,
                    comm,
                    wait_s: ns_to_s(total),
                    count,
                    stack: stack_names(trace, wstack),
                }
            })
            .collect();
        // Ties in the order of what is printed, not of the hash map.
        wakers.sort_by(|a, b| {
            (b.wait_s.total_cmp(&a.wait_s))
                .then(b.count.cmp(&a.count))
                .then_with(|| (a.tid, &a.comm, &a.stack).cmp(&(b.tid, &b.comm, &b.stack)))
        });
        by_thread.entry(thread).or_default().push(WaitView {
            stack: stack_names(trace, stack),
            wait_s: ns_to_s(a.total),
            count: a.count,
            max_s: ns_to_s(a.max),
            wakers,
        });
    }
    let mut threads: Vec<ThreadView> = sched
        .times
        .iter()
        .enumerate()
        .filter(|(i, t)| keep[*i] && (t.running_ns + t.blocked_ns + t.runnable_ns) > 0)
        .map(|(i, t)| {
            let idx = ThreadIdx(i as u32);
            let th = &trace.threads[i];
            let mut waits = by_thread.remove(&idx).unwrap_or_default();
            waits.sort_by(|a, b| {
                (b.wait_s.total_cmp(&a.wait_s))
                    .then(b.count.cmp(&a.count))
                    .then_with(|| a.stack.cmp(&b.stack))
            });
            if let Some(top) = top {
                waits.truncate(top);
            }
            ThreadView {
                pid: trace.thread_process(idx).pid,
                tid: th.tid,
                comm: trace.str(th.comm).to_string(),
                running_s: ns_to_s(t.running_ns),
                blocked_s: ns_to_s(t.blocked_ns),
                runnable_s: ns_to_s(t.runnable_ns),
                waits,
            }
        })
        .collect();
    threads.sort_by(|a, b| {
        let longest = |t: &ThreadView| t.waits.first().map_or(0.0, |w| w.wait_s);
        longest(b)
            .total_cmp(&longest(a))
            .then(b.blocked_s.total_cmp(&a.blocked_s))
    });
    WaitsView {
        threads,
        has_sched_events,
    }
}

/// Function names of a stack, innermost first; code without symbols in a
/// binary is named by the binary, a run of it once
/// ([`crate::unnamed::stack_labels`]).
pub fn stack_names(trace: &Trace, stack: Option<StackIdx>) -> Vec<String> {
    crate::unnamed::stack_labels(trace, stack)
}

pub fn ns_to_s(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Folded off-CPU stacks weighted by microseconds blocked (process;outer;…;inner µs).
pub fn offcpu_collapsed_lines(trace: &Trace, sched: &Schedule, sel: &Selection) -> Vec<String> {
    let keep = sel.thread_mask(trace);
    let mut weights: HashMap<(u32, Option<StackIdx>), u64, BuildFx> = HashMap::default();
    let mut shown = FunctionStacks::new(trace);
    for w in sched.waits.iter().filter(|w| keep[w.thread.ix()]) {
        let comm = trace.thread_process(w.thread).comm.0;
        *weights.entry((comm, shown.of(w.stack))).or_default() += (w.end_ns - w.start_ns) / 1000;
    }
    let mut lines: Vec<String> = weights
        .into_iter()
        .filter(|(_, us)| *us > 0)
        .map(|((comm, stack), us)| {
            let mut names = stack_names(trace, stack);
            names.reverse();
            let mut line = trace
                .str(slowlab_model::trace::StrIdx(comm))
                .replace(';', ":");
            for n in names {
                line.push(';');
                line.push_str(&n.replace(';', ":"));
            }
            format!("{line} {us}")
        })
        .collect();
    lines.sort_unstable();
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::small_trace;
    use slowlab_model::trace::{Event, ThreadIdx};

    fn ev(t: &mut Trace, time_ms: u64, thread: u32, stack: Option<u32>, kind: EventKind) {
        t.events.push(Event {
            time_ns: time_ms * 1_000_000,
            cpu: 0,
            thread: ThreadIdx(thread),
            stack: stack.map(StackIdx),
            kind,
        });
    }

    fn sched(t: &Trace) -> Schedule {
        Schedule::from_states(&crate::states::ThreadStates::build(t))
    }

    /// `app` (tid 10) runs, blocks in main→work at 10 ms, is woken by
    /// `other` (tid 20, stack idle) at 210 ms, waits 5 ms for the CPU, runs.
    fn pipe_like() -> Trace {
        let mut t = small_trace();
        t.events.clear();
        let sw = |prev, state, next| EventKind::Switch {
            prev_tid: prev,
            prev_state: state,
            next_tid: next,
            next_prio: 120,
            windows: None,
        };
        ev(&mut t, 5, 10, None, sw(20, 0, 10));
        ev(&mut t, 10, 10, Some(1), sw(10, 1, 20));
        ev(
            &mut t,
            210,
            1,
            Some(3),
            EventKind::Waking {
                tid: 10,
                target_cpu: 0,
            },
        );
        ev(&mut t, 215, 1, None, sw(20, 0, 10));
        ev(&mut t, 300, 10, Some(1), sw(10, 0, 20));
        t.meta.start_ns = 0;
        t.meta.end_ns = 300_000_000;
        t
    }

    #[test]
    fn a_wait_is_attributed_to_its_stack_and_waker() {
        let t = pipe_like();
        let view = waits_view(&t, &sched(&t), &Selection::default(), None);
        let app = view.threads.iter().find(|t| t.tid == 10).unwrap();
        assert!((app.blocked_s - 0.200).abs() < 1e-9, "{app:?}");
        assert!((app.runnable_s - 0.005).abs() < 1e-9, "{app:?}");
        assert!((app.running_s - (0.005 + 0.085)).abs() < 1e-9, "{app:?}");
        let w = &app.waits[0];
        assert_eq!(w.count, 1);
        assert_eq!(w.stack, vec!["work", "main"]);
        assert_eq!(w.wakers[0].comm, "other");
        assert_eq!(w.wakers[0].pid, Some(20));
        assert_eq!(w.wakers[0].stack, vec!["idle"]);
        assert!(view.has_sched_events);
        // The thread with the longest wait comes first.
        assert_eq!(view.threads[0].tid, 10);
    }

    #[test]
    fn a_time_range_counts_the_part_of_each_state_inside_it() {
        let t = pipe_like();
        // [100, 212) ms: 110 of the 200 ms blocked (10..210), then 2 of the 5 runnable.
        let range = Selection::parse(&[], Some(0.100), Some(0.212)).unwrap();
        let (from, to) = range.time_range_ns(&t);
        let states = crate::states::ThreadStates::build(&t);
        let view = waits_view(&t, &Schedule::within(&states, from, to), &range, None);
        let app = view.threads.iter().find(|t| t.tid == 10).unwrap();
        assert!((app.blocked_s - 0.110).abs() < 1e-9, "{app:?}");
        assert!((app.runnable_s - 0.002).abs() < 1e-9, "{app:?}");
        assert_eq!(app.running_s, 0.0, "{app:?}");
        assert!((app.waits[0].max_s - 0.110).abs() < 1e-9, "{app:?}");
        assert_eq!(
            app.waits[0].wakers[0].comm, "other",
            "the waker stays named"
        );
        // The whole trace's range is the whole replay.
        let all = Selection::parse(&[], Some(0.0), Some(1.0)).unwrap();
        let (from, to) = all.time_range_ns(&t);
        assert_eq!(
            Schedule::within(&states, from, to).times,
            Schedule::from_states(&states).times
        );
    }

    #[test]
    fn a_preempted_thread_is_runnable_not_blocked() {
        let t = pipe_like();
        let sched = sched(&t);
        // tid 20 was switched out with state 0 at 5 ms and 215 ms.
        let other = &sched.times[1];
        assert_eq!(other.blocked_ns, 0);
        assert!(other.runnable_ns > 0);
    }

    #[test]
    fn off_cpu_lines_weigh_microseconds_blocked() {
        let t = pipe_like();
        let lines = offcpu_collapsed_lines(&t, &sched(&t), &Selection::default());
        assert_eq!(lines, vec!["app;main;work 200000"]);
    }

    #[test]
    fn summaries_skip_scheduler_plumbing() {
        let names: Vec<String> = [
            "__schedule",
            "schedule",
            "schedule_preempt_disabled",
            "__mutex_lock",
            "dev_ifconf",
            "sock_ioctl",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            crate::classify::summarize_stack(&names, 2),
            "__mutex_lock ← dev_ifconf"
        );
        assert_eq!(crate::classify::summarize_stack(&[], 2), "[no stack]");
    }
}
