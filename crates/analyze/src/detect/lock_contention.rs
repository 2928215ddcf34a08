//! `lock-contention`: the root's critical path runs through threads that
//! wait for a lock (a futex, kernel mutex or rw-semaphore) while another
//! thread holds it — threads queueing on one lock.
//!
//! Signature and thresholds, on the critical path of the root process:
//! - the path time spent in lock waits — followed into the thread that
//!   released the lock (the holder: the waker), or left as a lock wait when
//!   the holder is known but could not be followed — is at least
//!   [`MIN_PATH_SHARE`] of the root's wall time and 20 ms. A lock wait
//!   nobody was seen to end (a waiter's or a holder's) is not counted: it
//!   is as often a timed futex wait that ran out (cargo's main thread waits
//!   500 ms at a time on a condition variable, and the timer's wake-up on
//!   an idle CPU is often not in the trace) as a lock. Time the holder
//!   spent runnable is not counted: a holder waiting for a CPU makes every
//!   wait look like a queue, and that time is `cpu-starvation`'s (seen on a
//!   loaded machine, where rustc's threads waiting for each other through
//!   Rust's futex-based channels — whose user stacks end in `syscall`, like
//!   a mutex's — were blamed on a lock);
//! - at least [`MIN_WAITERS`] distinct threads queued: threads of the
//!   root's process tree blocked on locks for at least [`MIN_WAITER_SHARE`]
//!   of the root's wall time, or waiting on a lock on the path (one thread
//!   waiting for one other is a hand-off, not contention).
//!
//! Culprit: the holder with the most path time (its process), and what it
//! was doing while it held the lock ("sleeping (do_nanosleep)").
//! Evidence: `lock` (where the waiters blocked), `path_s`, `share_of_wall`,
//! `waiters` (`pid`, `tid`, `comm`, `blocked_s`, `waits`, `longest_s` of
//! each waiter's lock waits over the root's wall time), `longest_wait_s`,
//! `holder` (`pid`, `tid`, `comm`), `holders` (tids), `holder_doing`;
//! `waiters` lists every thread of the root's process tree with lock waits.
//! Cost: the path time.

use std::collections::{BTreeSet, HashMap};

use slowlab_model::critical_path::{SegmentState, WaitKind};
use slowlab_model::findings::{Culprit, Finding};

use super::{enough_of_path, heaviest, Context, RootPath};
use crate::classify;
use crate::critical_path::{describe_part, parts};
use crate::evidence;
use crate::states::SpanState;

pub const MIN_PATH_SHARE: f64 = 0.10;
pub use super::lock_view::MIN_WAITERS;
pub const MIN_WAITER_SHARE: f64 = 0.10;

pub fn detect(cx: &Context, rp: &RootPath) -> Vec<Finding> {
    if let Some(found) = super::lock_view::detect(cx, rp) {
        return found;
    }
    let path = &rp.path;
    let is_lock = |s: &slowlab_model::critical_path::Segment| {
        let blocked_on_lock = s.state == SegmentState::Blocked && s.kind == Some(WaitKind::Lock);
        if blocked_on_lock && s.woken_by.is_none() {
            return false;
        }
        blocked_on_lock || (s.via == Some(WaitKind::Lock) && s.state != SegmentState::Runnable)
    };
    let mut path_s = 0.0;
    let mut waiters: BTreeSet<i32> = BTreeSet::new();
    let mut by_holder: HashMap<i32, f64> = HashMap::new();
    for s in path.segments.iter().filter(|s| is_lock(s)) {
        path_s += s.duration_s();
        if s.via == Some(WaitKind::Lock) {
            if let Some(w) = &s.waiter {
                waiters.insert(w.tid);
            }
            *by_holder.entry(s.tid).or_default() += s.duration_s();
        } else {
            waiters.insert(s.tid);
            if let Some(h) = &s.woken_by {
                *by_holder.entry(h.tid).or_default() += s.duration_s();
            }
        }
    }
    if !enough_of_path(path_s, path.wall_s, MIN_PATH_SHARE) {
        return Vec::new();
    }
    let Some((&holder_tid, _)) = heaviest(by_holder.iter()) else {
        return Vec::new();
    };
    let trace = cx.trace;
    let (from, to) = rp.window;
    let thread_of = |tid: i32| rp.thread(trace, tid);
    // Each waiter's lock waits over the root's wall time.
    let mut lock_sites: HashMap<String, f64> = HashMap::new();
    let mut waiter_rows = Vec::new();
    let mut longest = 0.0f64;
    let mut top_stack: HashMap<Vec<String>, f64> = HashMap::new();
    let mut queued: BTreeSet<i32> = waiters.clone();
    // Every thread of the root's tree that waited on a lock, not only
    // those the path went through.
    for &t in &rp.tree_threads {
        let tid = trace.threads[t.ix()].tid;
        let (mut blocked, mut count, mut max) = (0.0, 0u64, 0.0f64);
        for span in cx.states.spans_in(t, from, to) {
            let SpanState::Blocked(b) = span.state else {
                continue;
            };
            if classify::span_kind(trace, &b) != WaitKind::Lock {
                continue;
            }
            let len = (span.end_ns.min(to) - span.start_ns.max(from)) as f64 / 1e9;
            blocked += len;
            count += 1;
            max = max.max(len);
            let names = classify::names(trace, b.stack);
            if let Some(site) = classify::blocked_in(&names) {
                *lock_sites.entry(site.to_string()).or_default() += len;
            }
            *top_stack.entry(cx.names(b.stack)).or_default() += len;
        }
        if count == 0 {
            continue;
        }
        if blocked >= MIN_WAITER_SHARE * path.wall_s {
            queued.insert(tid);
        }
        longest = longest.max(max);
        let th = &trace.threads[t.ix()];
        waiter_rows.push(serde_json::json!({
            "pid": trace.thread_process(t).pid, "tid": tid, "comm": trace.str(th.comm),
            "blocked_s": blocked, "waits": count, "longest_s": max,
        }));
    }
    if queued.len() < MIN_WAITERS {
        return Vec::new();
    }
    let lock = heaviest(lock_sites.iter())
        .map(|(s, _)| s.clone())
        .unwrap_or_else(|| "a lock".into());
    // What the holder did while the waiters waited.
    let held: Vec<_> = path
        .segments
        .iter()
        .filter(|s| s.tid == holder_tid && s.via == Some(WaitKind::Lock))
        .cloned()
        .collect();
    let holder_doing = parts(&held, path.wall_s)
        .into_iter()
        .next()
        .map(|mut p| {
            p.via = None;
            p.via_resource = None;
            p.waiter = None;
            describe_part(&p, p.pid)
        })
        .unwrap_or_else(|| "holding it".into());
    let holder = thread_of(holder_tid);
    let (holder_pid, holder_comm) = holder.map_or((None, String::new()), |t| {
        (
            Some(trace.thread_process(t).pid),
            trace.str(trace.threads[t.ix()].comm).to_string(),
        )
    });
    let culprit = match holder {
        Some(t) => cx.culprit(trace.threads[t.ix()].process),
        None => Culprit::default(),
    };
    let mut holders: Vec<(i32, f64)> = by_holder.into_iter().collect();
    holders.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let share = path_s / path.wall_s.max(1e-9);
    let title = format!(
        "{} threads of {} queue on a lock ({lock}): {:.0}% of {}'s {:.2} s; the holder {} [{}] was {holder_doing} while holding it",
        queued.len(),
        rp.path.root.comm,
        share * 100.0,
        rp.path.root.comm,
        path.wall_s,
        holder_comm,
        holder_tid,
    );
    let stack = heaviest(top_stack).map(|(s, _)| s).unwrap_or_default();
    vec![cx.finding(
        "lock-contention",
        title,
        path_s,
        culprit,
        evidence! {
            "lock" => lock,
            "path_s" => path_s,
            "share_of_wall" => share,
            "waiters" => waiter_rows,
            "longest_wait_s" => longest,
            "holder" => serde_json::json!({"pid": holder_pid, "tid": holder_tid, "comm": holder_comm}),
            "holders" => holders.iter().map(|h| h.0).collect::<Vec<_>>(),
            "holder_doing" => holder_doing,
        },
        stack,
        "hold the lock for less time: move sleeps, I/O and waits out of the section it guards, or split the lock; `slowlab analyze TRACE --waits` lists each wait and who ended it",
    )]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::states::ThreadStates;
    use crate::testutil::TraceBuilder;

    fn ms(v: u64) -> u64 {
        v * 1_000_000
    }

    /// `app`'s main thread waits for `workers` threads that take turns
    /// holding one mutex across a 40 ms sleep; the first holds it from the
    /// start. The last one ends the main thread's wait by exiting (a join)
    /// or, with `main_locks`, by releasing a lock the main thread waits on.
    fn queue(workers: i32, main_locks: bool) -> slowlab_model::trace::Trace {
        queue_holding(workers, main_locks, Holding::Sleeping, 0)
    }

    /// What each worker does while it holds the mutex.
    #[derive(PartialEq)]
    enum Holding {
        /// Sleeps 40 ms (blocked; a timer wakes it).
        Sleeping,
        /// Is preempted for 40 ms (runnable: the machine's CPUs are busy).
        Preempted,
    }

    /// The queue; after it, the main thread computes for `tail_ns` more
    /// before it ends (which dilutes the lock's share of its wall time).
    fn queue_holding(
        workers: i32,
        main_locks: bool,
        holding: Holding,
        tail_ns: u64,
    ) -> slowlab_model::trace::Trace {
        queue_beside(workers, main_locks, holding, tail_ns, 0)
    }

    /// The queue, and beside it (on CPU 2) thread 20 of `app`, which waits
    /// `side_ns` on the lock at 2 ms, off the main thread's path, until the
    /// first worker releases it (no waiter when 0).
    fn queue_beside(
        workers: i32,
        main_locks: bool,
        holding: Holding,
        tail_ns: u64,
        side_ns: u64,
    ) -> slowlab_model::trace::Trace {
        let mut b = TraceBuilder::default();
        let main = b.process(10, "app");
        let end = ms(2 + 41 * workers as u64) + tail_ns;
        b.lifetime(main, None, 0, Some(end));
        let join = b.stack(&["do_futex", "futex_wait_queue", "schedule"]);
        let lock = b.stack(&["do_futex", "futex_wait_queue", "schedule"]);
        let sleep = b.stack(&["hrtimer_nanosleep", "do_nanosleep", "schedule"]);
        let release = b.stack(&["do_futex", "futex_wake"]);
        let exit = b.stack(&["do_exit", "mm_release", "futex_wake"]);
        let timer = b.stack(&["asm_sysvec_apic_timer_interrupt", "hrtimer_wakeup"]);
        let threads: Vec<_> = (0..workers)
            .map(|i| b.thread(main, 11 + i, "app"))
            .collect();
        if side_ns > 0 {
            b.thread(main, 20, "app");
            b.switch(ms(1) + 500, 2, 0, 0, 20, None);
            b.switch(ms(2), 2, 20, 1, 0, lock);
            b.waking(ms(2) + side_ns, 2, threads[0], 20, release);
            b.switch(ms(2) + side_ns + 10, 2, 0, 0, 20, None);
            b.switch(ms(2) + side_ns + 20, 2, 20, 16, 0, None);
        }
        b.switch(0, 0, 0, 0, 10, None);
        b.switch(ms(1), 0, 10, 1, 11, join); // main joins; worker 11 runs
        for i in 1..workers {
            b.switch(ms(1) + 10 * i as u64, 1, 0, 0, 11 + i, None);
            b.switch(ms(1) + 10 * i as u64 + 5, 1, 11 + i, 1, 0, lock); // waits
        }
        let mut t = ms(1);
        for i in 0..workers {
            let tid = 11 + i;
            if holding == Holding::Sleeping {
                b.switch(t + 100, 0, tid, 1, 0, sleep); // holds the lock, sleeps
                t += ms(40);
                b.waking(t, 0, threads[0], tid, timer);
            } else {
                b.switch(t + 100, 0, tid, 0, 0, None); // holds it, preempted
                t += ms(40);
            }
            b.switch(t + 10, 0, 0, 0, tid, None);
            if i + 1 < workers {
                b.waking(t + 20, 0, threads[i as usize], tid + 1, release);
                b.switch(t + 30, 0, tid, 16, tid + 1, None); // exits
            } else {
                let how = if main_locks { release } else { exit };
                b.waking(t + 20, 0, threads[i as usize], 10, how);
                b.switch(t + 30, 0, tid, 16, 10, None);
            }
            t += ms(1);
        }
        b.end(end);
        b.build()
    }

    fn findings(t: &slowlab_model::trace::Trace) -> Vec<Finding> {
        let cx = Context::new(t, None, None);
        let rp = RootPath::new(
            t,
            &cx.states,
            crate::critical_path::process_by_pid(t, 10).ok(),
        )
        .unwrap();
        detect(&cx, &rp)
    }

    #[test]
    fn threads_queueing_on_a_lock_held_across_sleeps_are_found() {
        let t = queue(3, false);
        let f = findings(&t);
        assert_eq!(f.len(), 1, "{f:?}");
        let f = &f[0];
        assert_eq!(f.id, "lock-contention");
        assert_eq!(f.culprit.comm.as_deref(), Some("app"));
        assert!(
            f.evidence["waiters"].as_array().unwrap().len() >= 2,
            "{f:?}"
        );
        let doing = f.evidence["holder_doing"].as_str().unwrap();
        assert!(doing.starts_with("sleeping"), "{doing}");
        assert!(f.evidence["share_of_wall"].as_f64().unwrap() > 0.5, "{f:?}");
    }

    #[test]
    fn holders_waiting_for_a_cpu_are_not_lock_contention() {
        // The same queue, but each holder is preempted rather than asleep:
        // the waits are as long, and a CPU, not the lock, is what is short.
        let t = queue_holding(3, false, Holding::Preempted, 0);
        let rp = RootPath::new(
            &t,
            &ThreadStates::build(&t),
            crate::critical_path::process_by_pid(&t, 10).ok(),
        )
        .unwrap();
        assert!(
            rp.path.breakdown.runnable > 0.05,
            "the path runs through the runnable holders: {:?}",
            rp.path.breakdown
        );
        assert!(findings(&t).is_empty(), "{:?}", findings(&t));
    }

    #[test]
    fn futex_waits_nobody_was_seen_to_end_are_not_lock_contention() {
        // `app`'s main thread waits in a futex until its worker wakes it;
        // the worker had itself waited in a futex that no wake-up ended (a
        // timed wait running out, its timer's wake-up not in the trace): it
        // is simply seen on a CPU again 500 ms later.
        let mut b = TraceBuilder::default();
        let main = b.process(10, "app");
        b.lifetime(main, None, 0, Some(ms(503)));
        let worker = b.thread(main, 11, "app");
        let futex = b.stack(&["do_futex", "futex_wait_queue", "schedule"]);
        let release = b.stack(&["do_futex", "futex_wake"]);
        b.switch(0, 0, 0, 0, 10, None);
        b.switch(ms(1), 0, 10, 1, 11, futex);
        b.switch(ms(1) + 10, 0, 11, 1, 0, futex);
        b.switch(ms(501), 0, 0, 0, 11, None);
        b.waking(ms(502), 0, worker, 10, release);
        b.switch(ms(502) + 10, 0, 11, 1, 10, futex);
        b.end(ms(503));
        let t = b.build();
        let rp = RootPath::new(
            &t,
            &ThreadStates::build(&t),
            crate::critical_path::process_by_pid(&t, 10).ok(),
        )
        .unwrap();
        let unended: f64 = rp
            .path
            .segments
            .iter()
            .filter(|s| s.tid == 11 && s.state == SegmentState::Blocked && s.woken_by.is_none())
            .map(|s| s.duration_s())
            .sum();
        assert!(
            unended > 0.4,
            "the worker's unended wait is on the path: {:?}",
            rp.path.segments
        );
        assert!(findings(&t).is_empty(), "{:?}", findings(&t));
    }

    #[test]
    fn one_thread_waiting_on_a_lock_held_by_one_other_is_not_contention() {
        let t = queue(1, true);
        let rp = RootPath::new(
            &t,
            &ThreadStates::build(&t),
            crate::critical_path::process_by_pid(&t, 10).ok(),
        )
        .unwrap();
        assert!(
            rp.path.breakdown.blocked.sleep > 0.03,
            "{:?}",
            rp.path.breakdown
        );
        assert!(findings(&t).is_empty());
    }

    #[test]
    fn min_waiters_is_the_edge() {
        // With `main_locks`, every worker but the first and the main thread
        // wait on the lock: `workers` threads queue.
        let too_few = queue(MIN_WAITERS as i32 - 1, true);
        assert!(findings(&too_few).is_empty(), "{:?}", findings(&too_few));
        let f = findings(&queue(MIN_WAITERS as i32, true));
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].title
                .starts_with(&format!("{MIN_WAITERS} threads of app queue")),
            "{}",
            f[0].title
        );
    }

    #[test]
    fn min_path_share_is_the_edge() {
        // The lock's path time does not change with the main thread's
        // computing afterwards; its share of the wall time does.
        let queue_with_tail = |tail_ns| queue_holding(2, true, Holding::Sleeping, tail_ns);
        let f = findings(&queue_with_tail(0));
        assert_eq!(f.len(), 1, "{f:?}");
        let path_s = f[0].evidence["path_s"].as_f64().unwrap();
        let wall_s = path_s / f[0].evidence["share_of_wall"].as_f64().unwrap();
        // The tail that puts the share exactly at the threshold.
        let edge_tail_s = path_s / MIN_PATH_SHARE - wall_s;
        let tail = |factor: f64| (edge_tail_s * factor * 1e9) as u64;
        let f = findings(&queue_with_tail(tail(1.02)));
        assert!(f.is_empty(), "{f:?}");
        let f = findings(&queue_with_tail(tail(0.98)));
        assert_eq!(f.len(), 1, "{f:?}");
        let share = f[0].evidence["share_of_wall"].as_f64().unwrap();
        assert!(
            (MIN_PATH_SHARE..MIN_PATH_SHARE * 1.03).contains(&share),
            "{share}"
        );
    }

    #[test]
    fn min_waiter_share_is_the_edge() {
        // One worker queues on the path (too few alone); a second thread of
        // `app` waits on the lock off the path, and queues too once its
        // wait is MIN_WAITER_SHARE of the main thread's wall time.
        let wall_ns = ms(2 + 41);
        let side = |factor: f64| (wall_ns as f64 * MIN_WAITER_SHARE * factor) as u64;
        let t = queue_beside(1, true, Holding::Sleeping, 0, side(0.95));
        assert!(findings(&t).is_empty(), "{:?}", findings(&t));
        let t = queue_beside(1, true, Holding::Sleeping, 0, side(1.05));
        let f = findings(&t);
        assert_eq!(f.len(), 1, "{f:?}");
        let waiters = f[0].evidence["waiters"].as_array().unwrap();
        assert!(waiters.iter().any(|w| w["tid"] == 20), "{waiters:?}");
    }
}
