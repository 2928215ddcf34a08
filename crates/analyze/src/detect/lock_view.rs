//! `lock-contention` as a view of the locks themselves, for traces that
//! record the futex calls ([`crate::locks`]): threads of the root's process
//! tree blocked on the same mutex or rwlock for a large share of their
//! time are a finding wherever the critical path goes (a root that only
//! joins the threads that queue still gets one).
//!
//! Signature and thresholds, per lock, over the root's wall time:
//! - at least [`MIN_WAITERS`] threads of the root's
//!   tree each blocked on it for at least [`MIN_OWN_SHARE`] of their own
//!   time alive in the window (and [`MIN_WAIT_S`]);
//! - at least one wait ended by a holder's release (a lock whose waits
//!   all timed out is a poll, not a queue).
//!
//! Culprit: the holder that held it longest while others waited (its
//! process); `holder_doing`: what that holder did while holding it, from
//! its replayed states. Evidence: `lock` (`kind`, `address`, `name`),
//! `waiters` (`pid`, `tid`, `comm`, `blocked_s`, `waits`, `longest_s`),
//! `total_wait_s`, `longest_wait_s`, `hold_s` (`count`, `median`, `max`
//! of the culprit's holds that ended waits, each from the holder's
//! contended acquisition or, not seeing one, from when the waiter began
//! waiting), `all_holds_s` (the same over every holder),
//! `holder`, `holders`, `holder_doing`, `path_s` and `share_of_wall` (the
//! root's path time on the lock, 0 when the path does not go through it).
//! Cost: the longest single waiter's blocked time, or the path time if
//! larger. Up to three locks, most waited on first.

use std::collections::{BTreeMap, HashMap, HashSet};

use slowlab_model::critical_path::{ResourceKind, SegmentState};
use slowlab_model::findings::Finding;
use slowlab_model::trace::ThreadIdx;

use super::{Context, RootPath};
use crate::critical_path::waited_for;
use crate::evidence;
use crate::locks::{taken_in, Hold, Lock};
use crate::resources::{resource, wait_on};
use crate::states::SpanState;

/// Fewest distinct threads queued on one lock for a finding (both rules:
/// this view and the path-based one of `lock_contention`).
pub const MIN_WAITERS: usize = 2;

/// A waiter counts when blocked on the lock this share of its time.
pub const MIN_OWN_SHARE: f64 = 0.10;
/// … and at least this long.
pub const MIN_WAIT_S: f64 = 0.010;

/// The findings, or `None` when the trace has no futex calls (the
/// path-based detector judges it then).
pub fn detect(cx: &Context, rp: &RootPath) -> Option<Vec<Finding>> {
    if cx.states.calls.is_empty() {
        return None;
    }
    let trace = cx.trace;
    let (from, to) = rp.window;
    let clip = |a: u64, b: u64| b.min(to).saturating_sub(a.max(from));
    let tree: HashSet<ThreadIdx> = rp.tree_threads.iter().copied().collect();
    let mut out = Vec::new();
    for lock in &cx.locks().locks {
        if out.len() == 3 {
            break;
        }
        // Each waiter of the root's tree: (blocked ns, waits, longest).
        let mut by_waiter: BTreeMap<ThreadIdx, (u64, u64, u64)> = BTreeMap::new();
        for w in &lock.waits {
            if !tree.contains(&w.waiter) {
                continue;
            }
            let len = clip(w.from_ns, w.to_ns);
            if len == 0 {
                continue;
            }
            let e = by_waiter.entry(w.waiter).or_default();
            e.0 += len;
            e.1 += 1;
            e.2 = e.2.max(len);
        }
        let alive = |t: ThreadIdx| {
            let th = &trace.threads[t.ix()];
            clip(th.start_ns.unwrap_or(from), th.end_ns.unwrap_or(to)).max(1)
        };
        let queued = by_waiter
            .iter()
            .filter(|(&t, e)| {
                e.0 as f64 >= MIN_OWN_SHARE * alive(t) as f64 && e.0 as f64 / 1e9 >= MIN_WAIT_S
            })
            .count();
        let holds: Vec<&Hold> = lock
            .holds
            .iter()
            .filter(|h| clip(h.from_ns, h.to_ns) > 0)
            .collect();
        if queued < MIN_WAITERS || holds.is_empty() {
            continue;
        }
        out.push(finding(cx, rp, lock, &by_waiter, &holds));
    }
    Some(out)
}

fn finding(
    cx: &Context,
    rp: &RootPath,
    lock: &Lock,
    by_waiter: &BTreeMap<ThreadIdx, (u64, u64, u64)>,
    holds: &[&Hold],
) -> Finding {
    let trace = cx.trace;
    let secs = |ns: u64| ns as f64 / 1e9;
    let mut held_by: HashMap<ThreadIdx, u64> = HashMap::new();
    for h in holds {
        *held_by.entry(h.holder).or_default() += h.to_ns - h.from_ns;
    }
    let mut holders: Vec<(ThreadIdx, u64)> = held_by.into_iter().collect();
    holders.sort_by_key(|&(t, ns)| (std::cmp::Reverse(ns), t));
    let holder = holders[0].0;
    let stats = |holds: &mut dyn Iterator<Item = &&Hold>| {
        let mut lengths: Vec<f64> = holds.map(|h| secs(h.to_ns - h.from_ns)).collect();
        lengths.sort_by(f64::total_cmp);
        let median = slowlab_sweep::stats::median(&lengths);
        (
            lengths.len(),
            median,
            lengths.last().copied().unwrap_or(0.0),
        )
    };
    // The culprit's holds, and every holder's (the waiters take it too,
    // briefly, and hand it on).
    let (count, median, max) = stats(&mut holds.iter().filter(|h| h.holder == holder));
    let all = stats(&mut holds.iter());
    let holder_doing = holder_doing(cx, holder, holds);
    let waiter_rows: Vec<serde_json::Value> = by_waiter
        .iter()
        .map(|(&t, &(ns, n, longest))| {
            let th = &trace.threads[t.ix()];
            serde_json::json!({
                "pid": trace.thread_process(t).pid, "tid": th.tid,
                "comm": trace.str(th.comm), "blocked_s": secs(ns), "waits": n,
                "longest_s": secs(longest),
            })
        })
        .collect();
    let total: u64 = by_waiter.values().map(|e| e.0).sum();
    let longest_waiter = by_waiter.values().map(|e| e.0).max().unwrap_or(0);
    let longest_wait = by_waiter.values().map(|e| e.2).max().unwrap_or(0);
    // The root's path time on this lock: its waits, and its holders'
    // segments followed from them.
    let address = lock.address();
    let on_lock = |r: &Option<slowlab_model::critical_path::Resource>| {
        r.as_ref()
            .is_some_and(|r| r.address.as_deref() == Some(address.as_str()))
    };
    let path = &rp.path;
    let path_s: f64 = path
        .segments
        .iter()
        .filter(|s| {
            (s.state == SegmentState::Blocked && on_lock(&s.resource))
                || (s.state != SegmentState::Runnable && on_lock(&s.via_resource))
        })
        .map(|s| s.duration_s())
        .fold(0.0, |a, b| a + b);
    let share = path_s / path.wall_s.max(1e-9);
    let first_wait = lock
        .waits
        .iter()
        .find(|w| by_waiter.contains_key(&w.waiter))
        .or(lock.waits.first());
    // Where the waiters took it, the longest-waited site first.
    let mut sites: HashMap<String, u64> = HashMap::new();
    for w in lock
        .waits
        .iter()
        .filter(|w| by_waiter.contains_key(&w.waiter))
    {
        if let Some(site) = taken_in(trace, w.stack) {
            *sites.entry(site).or_default() += w.to_ns - w.from_ns;
        }
    }
    let name = sites
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        .map(|(site, _)| site);
    let kind = lock.kind.as_str();
    let hth = &trace.threads[holder.ix()];
    let holder_comm = trace.str(hth.comm).to_string();
    let holder_pid = trace.thread_process(holder).pid;
    let title = format!(
        "{} threads of {} wait on {kind} {address}, {:.2} s in all (the longest {:.2} s); {} [{}] held it {} times (median {:.0} ms, longest {:.0} ms) and was {holder_doing}",
        by_waiter.len(),
        path.root.comm,
        secs(total),
        secs(longest_waiter),
        holder_comm,
        hth.tid,
        count,
        median * 1e3,
        max * 1e3,
    );
    let stack = first_wait.map(|w| cx.names(w.stack)).unwrap_or_default();
    cx.finding(
        "lock-contention",
        title,
        secs(longest_waiter).max(path_s),
        cx.culprit(hth.process),
        evidence! {
            "lock" => serde_json::json!({"kind": kind, "address": address, "name": name}),
            "path_s" => path_s,
            "share_of_wall" => share,
            "waiters" => waiter_rows,
            "total_wait_s" => secs(total),
            "longest_wait_s" => secs(longest_wait),
            "hold_s" => serde_json::json!({"count": count, "median": median, "max": max}),
            "all_holds_s" => serde_json::json!({"count": all.0, "median": all.1, "max": all.2}),
            "holder" => serde_json::json!({"pid": holder_pid, "tid": hth.tid, "comm": holder_comm}),
            "holders" => holders.iter().map(|h| trace.threads[h.0.ix()].tid).collect::<Vec<_>>(),
            "holder_doing" => holder_doing,
        },
        stack,
        "hold the lock for less time: move sleeps, I/O and waits out of the section it guards, or split the lock; `slowlab analyze TRACE --critical-path` says what each holder did",
    )
}

/// What `holder` did while it held the lock: its largest activity over
/// its holds, in words, with its share ("sleeping (clock_nanosleep) 98%
/// of the time it held it").
fn holder_doing(cx: &Context, holder: ThreadIdx, holds: &[&Hold]) -> String {
    let trace = cx.trace;
    let mut by: HashMap<String, u64> = HashMap::new();
    let mut total = 0;
    for h in holds.iter().filter(|h| h.holder == holder) {
        for span in cx.states.spans_in(holder, h.from_ns, h.to_ns) {
            let len = span.end_ns.min(h.to_ns) - span.start_ns.max(h.from_ns);
            total += len;
            let what = match span.state {
                SpanState::Running { .. } => "on a CPU".to_string(),
                SpanState::Runnable => "waiting for a CPU".to_string(),
                SpanState::Blocked(b) => {
                    let on = wait_on(trace, &cx.states, holder, &b, span.start_ns);
                    let r = resource(trace, &on);
                    let names = crate::classify::names(trace, b.stack);
                    let f = crate::classify::blocked_in(&names);
                    if r.kind == ResourceKind::Timer && r.name.is_none() {
                        format!("sleeping ({})", f.unwrap_or("a timer"))
                    } else {
                        waited_for(&r, f, trace.thread_process(holder).pid)
                    }
                }
            };
            *by.entry(what).or_default() += len;
        }
    }
    let Some((what, ns)) = by
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
    else {
        return "holding it".into();
    };
    format!(
        "{what} {:.0}% of the time it held it",
        ns as f64 * 100.0 / total.max(1) as f64
    )
}
