//! `serialized-teardown`: many threads blocked on one kernel mutex that a
//! single worker holds while it tears something down — e.g. network
//! namespaces destroyed one batch at a time by `cleanup_net` holding the
//! global rtnl mutex, stalling anything else that needs rtnl.
//!
//! Signature and thresholds: waits whose blocking stack is in a mutex lock
//! (`__mutex_lock`, `mutex_lock`, …) and that were ended by a waker whose
//! stack at the wake-up is in a teardown path (`cleanup_net`,
//! `ops_exit_list`, `unregister_netdevice_many`, …: it released the lock
//! after tearing down), grouped by the function that took the lock (its
//! caller, e.g. `dev_ifconf`, `rtnl_lock`); for a group, at least
//! `MIN_TOTAL_S` blocked in all and a longest stall of at least `MIN_MAX_S`.
//! The worker named is the teardown waker with the most blocked time.
//! (Under tracing, the stalls of the lab's scenario shrink to 10–30 ms, from
//! 30–160 ms untraced; the thresholds sit below that.)
//!
//! Cost: the blocked time; evidence: the stall distribution.

use std::collections::HashMap;

use slowlab_model::findings::Finding;
use slowlab_model::trace::{StackIdx, ThreadIdx};

use super::{median, Context};
use crate::evidence;
use crate::select::BuildFx;

pub const MIN_TOTAL_S: f64 = 0.020;
pub const MIN_MAX_S: f64 = 0.010;

fn is_mutex_lock(name: &str) -> bool {
    matches!(
        name,
        "__mutex_lock"
            | "mutex_lock"
            | "__mutex_lock_slowpath"
            | "mutex_lock_killable"
            | "mutex_lock_interruptible"
            | "__mutex_lock_killable_slowpath"
            | "__mutex_lock_interruptible_slowpath"
            | "mutex_lock_nested"
    ) || name.starts_with("__mutex_lock.")
}

fn is_teardown(name: &str) -> bool {
    matches!(
        name,
        "cleanup_net"
            | "ops_exit_list"
            | "ops_undo_list"
            | "unregister_netdevice_many"
            | "unregister_netdevice_many_notify"
            | "default_device_exit_batch"
            | "default_device_exit_net"
            | "free_nsproxy"
            | "put_net"
    )
}

/// The function that took the lock: the first frame outward of the mutex
/// functions.
fn lock_site(cx: &Context, stack: Option<StackIdx>) -> Option<String> {
    let names = cx.names(stack);
    let i = names.iter().rposition(|n| is_mutex_lock(n))?;
    names.get(i + 1).cloned()
}

#[derive(Default)]
struct Group {
    stalls: Vec<f64>,
    threads: std::collections::BTreeSet<ThreadIdx>,
    by_waker: HashMap<Option<ThreadIdx>, (f64, Option<StackIdx>), BuildFx>,
    stack: Option<StackIdx>,
}

pub fn detect(cx: &Context) -> Vec<Finding> {
    let mut groups: HashMap<String, Group> = HashMap::new();
    for w in &cx.schedule.waits {
        let Some(site) = lock_site(cx, w.stack) else {
            continue;
        };
        // Only stalls ended by a teardown releasing the lock count.
        if !cx.stack_has(w.waker_stack, &is_teardown) {
            continue;
        }
        let g = groups.entry(site).or_default();
        let len = (w.end_ns - w.start_ns) as f64 / 1e9;
        g.stalls.push(len);
        g.threads.insert(w.thread);
        if g.stack.is_none() {
            g.stack = w.stack;
        }
        let e = g.by_waker.entry(w.waker).or_insert((0.0, w.waker_stack));
        e.0 += len;
        if e.1.is_none() {
            e.1 = w.waker_stack;
        }
    }
    let mut findings = Vec::new();
    for (site, g) in groups {
        let total: f64 = g.stalls.iter().sum();
        let max = g.stalls.iter().copied().fold(0.0, f64::max);
        if total < MIN_TOTAL_S || max < MIN_MAX_S {
            continue;
        }
        let Some((&waker, &(waker_s, waker_stack))) =
            g.by_waker.iter().max_by(|a, b| a.1 .0.total_cmp(&b.1 .0))
        else {
            continue;
        };
        let worker = waker
            .map(|t| cx.culprit(cx.process_of(t)))
            .unwrap_or_default();
        let worker_comm = waker
            .map(|t| cx.trace.str(cx.trace.threads[t.ix()].comm).to_string())
            .unwrap_or_else(|| "?".into());
        let teardown_fn = cx
            .names(waker_stack)
            .into_iter()
            .find(|n| is_teardown(n))
            .unwrap_or_default();
        let mut sorted = g.stalls.clone();
        sorted.sort_by(f64::total_cmp);
        let p90 = sorted[((sorted.len() as f64 * 0.9) as usize).min(sorted.len() - 1)];
        let victims: Vec<String> = g
            .threads
            .iter()
            .map(|t| cx.trace.str(cx.trace.threads[t.ix()].comm).to_string())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        findings.push(cx.finding(
            "serialized-teardown",
            format!(
                "{} thread(s) ({}) blocked {:.0} ms on the mutex taken in {site}, held by \
                 {worker_comm} tearing down in {teardown_fn}; longest stall {:.0} ms",
                g.threads.len(),
                victims.join(", "),
                total * 1e3,
                max * 1e3
            ),
            total,
            worker,
            evidence! {
                "lock_site" => site,
                "blocked_threads" => g.threads.len(),
                "stalls" => g.stalls.len(),
                "blocked_s" => total,
                "max_stall_s" => max,
                "median_stall_s" => median(&g.stalls),
                "p90_stall_s" => p90,
                "worker_comm" => worker_comm,
                "worker_share" => waker_s / total,
                "teardown_function" => teardown_fn,
                "waker_stack" => cx.names(waker_stack),
            },
            cx.names(g.stack),
            "tear down fewer namespaces at once or reuse them (a pool), and keep latency-sensitive \
             callers off calls that take the global rtnl lock (SIOCGIFCONF, link dumps)",
        ));
    }
    findings
}
