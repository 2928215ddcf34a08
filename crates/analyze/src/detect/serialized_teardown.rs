//! `serialized-teardown`: many threads blocked on one kernel mutex that a
//! single worker holds while it tears something down — e.g. network
//! namespaces destroyed one batch at a time by `cleanup_net` holding the
//! global rtnl mutex, stalling anything else that needs rtnl.
//!
//! Signature and thresholds: time a thread spent trying to take a mutex
//! (the function that took it, e.g. `dev_ifconf` or `rtnl_lock`, names the
//! group) while a teardown held it, in two forms:
//! - *blocked*: waits whose blocking stack is in a mutex lock (`__mutex_lock`,
//!   `mutex_lock`, …) and that were ended by a waker whose stack at the
//!   wake-up is in a teardown path (`cleanup_net`, `ops_exit_list`,
//!   `unregister_netdevice_many`, …: it released the lock after tearing
//!   down);
//! - *spinning*: CPU samples in the mutex's spin loop (`mutex_spin_on_owner`,
//!   `osq_lock`) taken while another CPU was sampled in a teardown path
//!   within one sample period. With two CPUs a waiter spins rather than
//!   sleeps as long as the owner runs, so on a small machine most of a stall
//!   can be spinning.
//!
//! A thread's blocked and spinning stretches that follow each other within
//! `JOIN_GAP_NS` make one stall. For a group, at least `MIN_TOTAL_S` stalled
//! in all and a longest stall of at least `MIN_MAX_S`. The worker named is
//! the teardown thread that held the lock for the most stalled time.
//! (Under tracing, the stalls of the lab's scenario shrink to 10–60 ms, from
//! 30–160 ms untraced; the thresholds sit below that.)
//!
//! Cost: the stalled time; evidence: the stall distribution, split into
//! blocked and spinning time.

use std::collections::{BTreeSet, HashMap};

use slowlab_model::findings::Finding;
use slowlab_model::trace::{StackIdx, ThreadIdx};

use super::{heaviest, median, Context};
use crate::evidence;
use crate::select::BuildFx;

pub const MIN_TOTAL_S: f64 = 0.020;
pub const MIN_MAX_S: f64 = 0.010;
/// Stretches of one thread closer than this are one stall.
pub const JOIN_GAP_NS: u64 = 2_000_000;

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

/// The loop a mutex waiter spins in while the owner runs.
fn is_spin(name: &str) -> bool {
    matches!(name, "mutex_spin_on_owner" | "osq_lock")
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

/// A stretch of time one thread spent on the lock, and who held it.
struct Stretch {
    thread: ThreadIdx,
    start_ns: u64,
    end_ns: u64,
    spinning: bool,
    holder: Option<ThreadIdx>,
    holder_stack: Option<StackIdx>,
}

#[derive(Default)]
struct Group {
    stretches: Vec<Stretch>,
    /// The first blocking (or spinning) stack seen.
    stack: Option<StackIdx>,
}

impl Group {
    fn add(&mut self, stretch: Stretch, stack: Option<StackIdx>) {
        if self.stack.is_none() {
            self.stack = stack;
        }
        self.stretches.push(stretch);
    }

    /// Lengths of the stalls: each thread's stretches joined where they
    /// follow each other within `JOIN_GAP_NS`.
    fn stalls(&self) -> Vec<f64> {
        let mut spans: Vec<(ThreadIdx, u64, u64)> = self
            .stretches
            .iter()
            .map(|s| (s.thread, s.start_ns, s.end_ns))
            .collect();
        spans.sort_unstable();
        let mut stalls = Vec::new();
        let mut current: Option<(ThreadIdx, u64, u64)> = None;
        for (thread, start, end) in spans {
            match &mut current {
                Some((t, _, e)) if *t == thread && start <= e.saturating_add(JOIN_GAP_NS) => {
                    *e = (*e).max(end);
                }
                _ => {
                    if let Some((_, s, e)) = current {
                        stalls.push((e - s) as f64 / 1e9);
                    }
                    current = Some((thread, start, end));
                }
            }
        }
        if let Some((_, s, e)) = current {
            stalls.push((e - s) as f64 / 1e9);
        }
        stalls
    }
}

/// Blocked waits on a mutex ended by a teardown releasing it, by lock site.
/// Each stack is looked at once (a build's trace has many more waits than
/// stacks).
fn blocked_stretches(cx: &Context, groups: &mut HashMap<String, Group>) {
    let mut site_of: HashMap<Option<StackIdx>, Option<String>, BuildFx> = HashMap::default();
    let mut by_teardown = cx.stack_test(&is_teardown);
    for w in &cx.schedule.waits {
        let site = site_of
            .entry(w.stack)
            .or_insert_with(|| lock_site(cx, w.stack));
        let Some(site) = site else {
            continue;
        };
        if !by_teardown(w.waker_stack) {
            continue;
        }
        let site = site.clone();
        let stretch = Stretch {
            thread: w.thread,
            start_ns: w.start_ns,
            end_ns: w.end_ns,
            spinning: false,
            holder: w.waker,
            holder_stack: w.waker_stack,
        };
        groups.entry(site).or_default().add(stretch, w.stack);
    }
}

/// Samples spinning on a mutex while another CPU ran a teardown, by lock
/// site; each stands for one sample period of spinning.
fn spinning_stretches(cx: &Context, groups: &mut HashMap<String, Group>) {
    let s = &cx.trace.samples;
    let mut teardown: HashMap<Option<StackIdx>, bool, BuildFx> = HashMap::default();
    let mut spin_site: HashMap<Option<StackIdx>, Option<String>, BuildFx> = HashMap::default();
    // Samples in a teardown path, in time order: (time, cpu, index).
    let mut tearing: Vec<(u64, u32, usize)> = Vec::new();
    for i in 0..s.len() {
        let stack = s.stack[i];
        if *teardown
            .entry(stack)
            .or_insert_with(|| cx.stack_has(stack, &is_teardown))
        {
            tearing.push((s.time_ns[i], s.cpu[i], i));
        }
    }
    if tearing.is_empty() {
        return;
    }
    for i in 0..s.len() {
        let stack = s.stack[i];
        let site = spin_site.entry(stack).or_insert_with(|| {
            if cx.stack_has(stack, &is_spin) {
                lock_site(cx, stack)
            } else {
                None
            }
        });
        let Some(site) = site else {
            continue;
        };
        let (t, period) = (s.time_ns[i], s.period[i]);
        // Saturating: a damaged trace's period may be 2^63.
        let from = tearing.partition_point(|&(time, _, _)| time.saturating_add(period) < t);
        let holder = tearing[from..]
            .iter()
            .take_while(|&&(time, _, _)| time <= t.saturating_add(period))
            .find(|&&(_, cpu, _)| cpu != s.cpu[i]);
        let Some(&(_, _, j)) = holder else {
            continue;
        };
        let stretch = Stretch {
            thread: s.thread[i],
            start_ns: t.saturating_sub(period),
            end_ns: t,
            spinning: true,
            holder: Some(s.thread[j]),
            holder_stack: s.stack[j],
        };
        groups.entry(site.clone()).or_default().add(stretch, stack);
    }
}

pub fn detect(cx: &Context) -> Vec<Finding> {
    let mut groups: HashMap<String, Group> = HashMap::new();
    blocked_stretches(cx, &mut groups);
    spinning_stretches(cx, &mut groups);
    let mut findings = Vec::new();
    for (site, g) in groups {
        let stalls = g.stalls();
        let total: f64 = stalls.iter().sum();
        let max = stalls.iter().copied().fold(0.0, f64::max);
        if total < MIN_TOTAL_S || max < MIN_MAX_S {
            continue;
        }
        let (mut blocked_s, mut spin_s) = (0.0, 0.0);
        let mut by_holder: HashMap<Option<ThreadIdx>, (f64, Option<StackIdx>), BuildFx> =
            HashMap::default();
        let mut threads = BTreeSet::new();
        for st in &g.stretches {
            let len = (st.end_ns - st.start_ns) as f64 / 1e9;
            if st.spinning {
                spin_s += len;
            } else {
                blocked_s += len;
            }
            threads.insert(st.thread);
            let e = by_holder.entry(st.holder).or_insert((0.0, st.holder_stack));
            e.0 += len;
        }
        let holders = by_holder.iter().map(|(h, &(s, stack))| ((h, stack), s));
        let Some(((&waker, waker_stack), waker_s)) = heaviest(holders) else {
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
        let mut sorted = stalls.clone();
        sorted.sort_by(f64::total_cmp);
        let p90 = sorted[((sorted.len() as f64 * 0.9) as usize).min(sorted.len() - 1)];
        let victims: Vec<String> = threads
            .iter()
            .map(|t| cx.trace.str(cx.trace.threads[t.ix()].comm).to_string())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        findings.push(cx.finding(
            "serialized-teardown",
            format!(
                "{} thread(s) ({}) stalled {:.0} ms ({:.0} ms of it spinning) on the mutex taken \
                 in {site}, held by {worker_comm} tearing down in {teardown_fn}; longest stall \
                 {:.0} ms",
                threads.len(),
                victims.join(", "),
                total * 1e3,
                spin_s * 1e3,
                max * 1e3
            ),
            total,
            worker,
            evidence! {
                "lock_site" => site,
                "blocked_threads" => threads.len(),
                "stalls" => stalls.len(),
                "stalled_s" => total,
                "blocked_s" => blocked_s,
                "spinning_s" => spin_s,
                "max_stall_s" => max,
                "median_stall_s" => median(&stalls),
                "p90_stall_s" => p90,
                "worker_comm" => worker_comm,
                "worker_share" => waker_s / (blocked_s + spin_s),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TraceBuilder;

    const SPIN: &[&str] = &[
        "sock_ioctl",
        "dev_ifconf",
        "__mutex_lock.constprop.0",
        "mutex_spin_on_owner",
    ];
    const TEARDOWN: &[&str] = &[
        "worker_thread",
        "process_one_work",
        "cleanup_net",
        "ops_undo_list",
        "default_device_exit_batch",
    ];

    /// A monitor spinning on CPU 0 for `spin_ms` samples while a worker on
    /// CPU 1 runs `worker` for the same milliseconds.
    fn spinning_trace(spin_ms: u64, worker: &[&str]) -> slowlab_model::trace::Trace {
        let mut b = TraceBuilder::default();
        let monitor = b.process(100, "rtnl-monitor");
        let kworker = b.process(32, "kworker/u8:1");
        let spin = b.stack(SPIN);
        let work = b.stack(worker);
        for ms in 1..=spin_ms {
            b.sample(ms * 1_000_000, monitor, 0, spin);
            b.sample(ms * 1_000_000 + 10_000, kworker, 1, work);
        }
        b.build()
    }

    #[test]
    fn spinning_on_a_mutex_held_by_a_teardown_is_a_stall() {
        // On a 2-CPU machine the monitor spins while cleanup_net runs: no
        // blocked wait at all, yet a 40 ms stall.
        let trace = spinning_trace(40, TEARDOWN);
        let f = detect(&Context::new(&trace, None, None));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].evidence["lock_site"], "dev_ifconf");
        assert_eq!(f[0].evidence["max_stall_s"], 0.04);
        let spinning = f[0].evidence["spinning_s"].as_f64().unwrap();
        assert!((spinning - 0.04).abs() < 1e-9, "{spinning}");
        assert_eq!(f[0].evidence["worker_comm"], "kworker/u8:1");
        assert_eq!(f[0].culprit.pid, Some(32));
    }

    #[test]
    fn spinning_on_a_mutex_while_no_teardown_runs_is_ordinary_contention() {
        let trace = spinning_trace(40, &["worker_thread", "process_one_work", "flush_to_ldisc"]);
        assert!(detect(&Context::new(&trace, None, None)).is_empty());
    }

    /// Stalls of `lens` milliseconds each (a monitor spinning while the
    /// teardown runs), 5 ms apart: more than `JOIN_GAP_NS`, so each is its
    /// own stall.
    fn stalls_trace(lens: &[u64]) -> slowlab_model::trace::Trace {
        let mut b = TraceBuilder::default();
        let monitor = b.process(100, "rtnl-monitor");
        let kworker = b.process(32, "kworker/u8:1");
        let spin = b.stack(SPIN);
        let work = b.stack(TEARDOWN);
        let mut at = 1;
        for &len in lens {
            for ms in at..at + len {
                b.sample(ms * 1_000_000, monitor, 0, spin);
                b.sample(ms * 1_000_000 + 10_000, kworker, 1, work);
            }
            at += len + 5;
        }
        b.build()
    }

    fn stalls_found(lens: &[u64]) -> usize {
        detect(&Context::new(&stalls_trace(lens), None, None)).len()
    }

    /// Whole milliseconds just below and just above `edge_s`.
    fn ms_around(edge_s: f64) -> (u64, u64) {
        let ms = (edge_s * 1000.0).round() as u64;
        (ms - 1, ms + 1)
    }

    #[test]
    fn min_total_s_is_the_edge() {
        // One stall: its length is both the total and the longest.
        let (below, above) = ms_around(MIN_TOTAL_S);
        assert!(below as f64 / 1000.0 >= MIN_MAX_S);
        assert_eq!(stalls_found(&[below]), 0);
        assert_eq!(stalls_found(&[above]), 1);
    }

    #[test]
    fn min_max_s_is_the_edge() {
        // Three stalls: together well above the total's threshold.
        let (below, above) = ms_around(MIN_MAX_S);
        assert!(3.0 * below as f64 / 1000.0 >= MIN_TOTAL_S);
        assert_eq!(stalls_found(&[below; 3]), 0);
        assert_eq!(stalls_found(&[below, above, below]), 1);
    }

    #[test]
    fn a_short_spin_is_below_the_thresholds() {
        let trace = spinning_trace(5, TEARDOWN);
        assert!(detect(&Context::new(&trace, None, None)).is_empty());
    }
}
