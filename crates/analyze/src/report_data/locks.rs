//! The locks of the interactive report: each mutex or rwlock of the
//! trace's [`Locks`] with waits by the report's threads in its time range,
//! with its waiters and holders (their time clipped to the range), and its
//! waits one by one for the timeline's holder → waiter arrows.
//!
//! A lock's name is where its waiters took it: the innermost function of
//! their user stacks outside the lock's own code (glibc's `__lll_lock_wait`,
//! `pthread_mutex_lock`, the futex wrapper) and the thread's start
//! (`start_thread`, `clone3`), weighted by wait time; none when no stack
//! has one (glibc has no frame pointers: the caller of
//! `pthread_mutex_lock` is often lost, and the kernel's part of the stack
//! is futex code for every lock).
//!
//! It does not find locks (`crate::locks` does) nor draw anything.

use std::collections::HashMap;

use slowlab_model::trace::{StackIdx, ThreadIdx};
use slowlab_model::views::report_data::{
    LockData, LockHolder, LockWaitData, LockWaiter, MAX_LOCKS, MAX_LOCK_WAITS,
};

use super::events::Scope;
use crate::locks::{taken_in as site, LockWait, Locks};
use crate::select::BuildFx;

/// The most waits of all locks together the page ships (~150 bytes each
/// in the JSON): the most waited-on locks get theirs first.
pub const MAX_WAITS: usize = 20_000;

/// The locks with waits by kept threads in the scope's range, most
/// waited-on (in the range) first.
pub fn locks(scope: &Scope, locks: &Locks) -> Vec<LockData> {
    let trace = scope.trace;
    let clip = |from: u64, to: u64| to.min(scope.to_ns).saturating_sub(from.max(scope.from_ns));
    let secs = |ns: u64| ns as f64 / 1e9;
    let after_start = |ns: u64| secs(ns.saturating_sub(scope.start_ns));
    let shown = |t: ThreadIdx| {
        scope
            .thread_ix
            .get(t.ix())
            .copied()
            .flatten()
            .map_or(-1, |i| i as i32)
    };
    let tid = |t: ThreadIdx| trace.threads[t.ix()].tid;
    let comm = |t: ThreadIdx| trace.str(trace.threads[t.ix()].comm).to_string();
    let mut out: Vec<(u64, LockData, Vec<&LockWait>)> = Vec::new();
    for lock in &locks.locks {
        let waits: Vec<_> = lock
            .waits
            .iter()
            .filter(|w| shown(w.waiter) >= 0 && clip(w.from_ns, w.to_ns) > 0)
            .collect();
        if waits.is_empty() {
            continue;
        }
        // Waiters, most blocked first (ties: by tid).
        let mut by_waiter: HashMap<ThreadIdx, (u64, usize), BuildFx> = HashMap::default();
        let mut sites: HashMap<Option<StackIdx>, u64, BuildFx> = HashMap::default();
        for w in &waits {
            let e = by_waiter.entry(w.waiter).or_default();
            e.0 += clip(w.from_ns, w.to_ns);
            e.1 += 1;
            *sites.entry(w.stack).or_default() += clip(w.from_ns, w.to_ns);
        }
        let total: u64 = by_waiter.values().map(|v| v.0).sum();
        let mut waiters: Vec<_> = by_waiter.into_iter().collect();
        waiters.sort_by_key(|&(t, (ns, _))| (std::cmp::Reverse(ns), tid(t)));
        // Holders: their holds in the range.
        let mut by_holder: HashMap<ThreadIdx, (u64, usize), BuildFx> = HashMap::default();
        let mut longest = 0;
        for h in &lock.holds {
            let held = clip(h.from_ns, h.to_ns);
            if held == 0 {
                continue;
            }
            let e = by_holder.entry(h.holder).or_default();
            e.0 += held;
            e.1 += 1;
            longest = longest.max(held);
        }
        let mut holders: Vec<_> = by_holder.into_iter().collect();
        holders.sort_by_key(|&(t, (ns, _))| (std::cmp::Reverse(ns), tid(t)));
        let name = sites
            .into_iter()
            .filter_map(|(stack, ns)| site(trace, stack).map(|s| (s, ns)))
            .fold(HashMap::<String, u64>::new(), |mut m, (s, ns)| {
                *m.entry(s).or_default() += ns;
                m
            })
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
            .map(|(s, _)| s);
        let process = trace
            .processes
            .iter()
            .find(|p| p.pid == lock.key.0)
            .map_or_else(String::new, |p| trace.str(p.comm).to_string());
        out.push((
            total,
            LockData {
                address: lock.address(),
                kind: lock.kind,
                pid: lock.key.0,
                process,
                name,
                waiters: waiters
                    .into_iter()
                    .map(|(t, (ns, n))| LockWaiter {
                        tid: tid(t),
                        comm: comm(t),
                        thread: shown(t),
                        blocked_s: secs(ns),
                        waits: n,
                    })
                    .collect(),
                holders: holders
                    .into_iter()
                    .map(|(t, (ns, n))| LockHolder {
                        tid: tid(t),
                        comm: comm(t),
                        thread: shown(t),
                        held_s: secs(ns),
                        holds: n,
                    })
                    .collect(),
                total_wait_s: secs(total),
                longest_hold_s: secs(longest),
                waits_total: waits.len(),
                waits: Vec::new(),
            },
            waits,
        ));
    }
    out.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.address.cmp(&b.1.address)));
    out.truncate(MAX_LOCKS);
    // The waits shipped, most waited-on lock first, within the budget.
    let mut budget = MAX_WAITS;
    out.into_iter()
        .map(|(_, mut l, waits)| {
            let kept = shipped(&waits, budget.min(MAX_LOCK_WAITS));
            budget -= kept.len();
            l.waits = kept
                .into_iter()
                .map(|w| LockWaitData {
                    waiter_tid: tid(w.waiter),
                    holder_tid: w.holder.map(tid),
                    waiter: shown(w.waiter),
                    holder: w.holder.map_or(-1, shown),
                    from_s: after_start(w.from_ns),
                    to_s: after_start(w.to_ns),
                })
                .collect();
            l
        })
        .collect()
}

/// The waits shipped: all, or the `max` longest, in time order.
fn shipped<'l>(waits: &[&'l LockWait], max: usize) -> Vec<&'l LockWait> {
    let mut kept = waits.to_vec();
    if kept.len() > max {
        kept.sort_by_key(|w| (std::cmp::Reverse(w.to_ns - w.from_ns), w.from_ns));
        kept.truncate(max);
    }
    kept.sort_by_key(|w| (w.from_ns, w.to_ns, w.waiter));
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_keeps_the_longest_waits_in_time_order() {
        let w = |from: u64, to: u64| LockWait {
            waiter: ThreadIdx(0),
            from_ns: from,
            to_ns: to,
            holder: None,
            stack: None,
        };
        let waits = [w(0, 10), w(20, 80), w(100, 101), w(200, 250)];
        let refs: Vec<&LockWait> = waits.iter().collect();
        let kept: Vec<u64> = shipped(&refs, 2).iter().map(|w| w.from_ns).collect();
        assert_eq!(kept, [20, 200]);
        assert_eq!(shipped(&refs, 9).len(), 4);
    }

    #[test]
    fn a_lock_is_named_by_the_function_that_took_it() {
        let mut b = crate::testutil::TraceBuilder::default();
        let kernel = ["do_futex", "futex_wait_queue", "schedule"];
        let named = b.mixed_stack(
            &[
                "start_thread",
                "worker",
                "pthread_mutex_lock",
                "__lll_lock_wait",
            ],
            &kernel,
        );
        // glibc without frame pointers: the caller is lost.
        let lost = b.mixed_stack(&["start_thread", "__GI___lll_lock_wait"], &kernel);
        let t = b.build();
        assert_eq!(site(&t, named).as_deref(), Some("worker"));
        assert_eq!(site(&t, lost), None);
    }
}
