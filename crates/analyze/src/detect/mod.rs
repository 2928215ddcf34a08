//! The detectors: each turns a trace into findings — a named culprit, what
//! it cost, the evidence and a fix hint — for one pathology. Each lives in
//! its own module that documents its signature and thresholds, and is
//! registered in [`DETECTORS`] through the [`Detector`] trait (its id, its
//! thresholds, how to run it). This module prepares what they share (the
//! one scheduler replay and its sums, the paired syscalls with their
//! captured paths, per-process sample counts) once in a [`Context`], runs
//! them all and ranks the findings by cost.
//!
//! Cost shares are relative to the time examined: the trace's duration
//! times its number of CPUs (the most CPU and waiting time a trace can
//! hold). Pure: reads the trace, prints nothing.

pub mod cpu_starvation;
mod heaviest;
pub mod io_wait;
pub mod kernel_dominated;
pub mod linear_probe_names;
pub mod lock_contention;
pub mod lock_view;
pub mod memcg_thrash;
pub mod notify;
pub mod serialized_teardown;
pub mod superlinear_growth;
pub mod topdown_probe;
pub mod windows;

use std::collections::HashMap;
use std::sync::OnceLock;

use slowlab_model::critical_path::CriticalPath;
use slowlab_model::findings::{Culprit, Finding, Severity};
use slowlab_model::trace::{ProcIdx, StackIdx, ThreadIdx, Trace};

use crate::critical_path::{critical_path_with, default_root, process_tree, window, PathError};
use crate::locks::Locks;
use crate::select::BuildFx;
use crate::states::{Schedule, ThreadStates};
use crate::syscalls::{attach_paths, pair_calls, Call, CapturedPath};

pub(crate) use heaviest::heaviest;

pub use slowlab_model::bundle::CgroupInfo;

/// Everything the detectors share, computed once: the scheduler replay
/// (the one every view and the critical path read), its sums, and the
/// paired syscalls (when a detector first asks for them).
pub struct Context<'a> {
    pub trace: &'a Trace,
    /// The one replay of the scheduler events.
    pub states: ThreadStates,
    /// Its sums: every thread's times and every wait that ended.
    pub schedule: Schedule,
    calls: OnceLock<Vec<Call>>,
    locks: OnceLock<Locks>,
    pub captured: Option<&'a [CapturedPath]>,
    pub cgroups: Option<&'a CgroupInfo>,
    /// Seconds of time the trace can hold: duration × CPUs.
    pub examined_s: f64,
    sample_period_s: f64,
}

impl<'a> Context<'a> {
    /// Replays the trace's scheduler events (once) and prepares the rest.
    pub fn new(
        trace: &'a Trace,
        captured: Option<&'a [CapturedPath]>,
        cgroups: Option<&'a CgroupInfo>,
    ) -> Self {
        let states = ThreadStates::build(trace);
        let schedule = Schedule::from_states(&states);
        let cpus = trace.meta.nr_cpus.unwrap_or(1).max(1) as f64;
        let sample_period_s = trace.samples.period.mean().map_or(0.0, |ns| ns / 1e9);
        Context {
            trace,
            states,
            schedule,
            calls: OnceLock::new(),
            locks: OnceLock::new(),
            captured,
            cgroups,
            examined_s: (trace.meta.duration_s() * cpus).max(1e-9),
            sample_period_s,
        }
    }

    /// The trace's syscalls, entries paired with exits, with the captured
    /// paths attached (computed on first use).
    pub fn calls(&self) -> &[Call] {
        self.calls.get_or_init(|| {
            let mut calls = pair_calls(self.trace);
            if let Some(c) = self.captured {
                attach_paths(self.trace, &mut calls, c);
            }
            calls
        })
    }

    /// The trace's locks, their waits and holds (found on first use).
    pub fn locks(&self) -> &Locks {
        self.locks
            .get_or_init(|| Locks::build(self.trace, &self.states))
    }

    /// Seconds a sample stands for (cpu-clock: 1/frequency).
    pub fn sample_s(&self) -> f64 {
        self.sample_period_s
    }

    /// The process of a thread.
    pub fn process_of(&self, thread: ThreadIdx) -> ProcIdx {
        self.trace.threads[thread.ix()].process
    }

    /// A culprit from a process.
    pub fn culprit(&self, proc: ProcIdx) -> Culprit {
        let p = &self.trace.processes[proc.ix()];
        Culprit {
            pid: Some(p.pid),
            comm: Some(self.trace.str(p.comm).to_string()),
            cgroup: self
                .cgroups
                .and_then(|c| c.process_cgroup.get(&p.pid).cloned()),
        }
    }

    /// Whether any frame of the stack is a function whose name satisfies `pred`.
    pub fn stack_has(&self, stack: Option<StackIdx>, pred: &dyn Fn(&str) -> bool) -> bool {
        self.trace
            .stack_frames(stack)
            .any(|f| pred(self.trace.function_name(self.trace.frame_function(f))))
    }

    /// [`Context::stack_has`] judging each distinct stack once, for loops
    /// over every wait or event (a build's trace has many more waits than
    /// stacks).
    pub fn stack_test<'p>(
        &'p self,
        pred: &'p dyn Fn(&str) -> bool,
    ) -> impl FnMut(Option<StackIdx>) -> bool + 'p {
        judged_once(move |stack| self.stack_has(stack, pred))
    }

    /// A test of a whole stack's names (as [`Context::names`] gives them,
    /// innermost first), judging each distinct stack once, as
    /// [`Context::stack_test`] does.
    pub fn stack_names_test<'p>(
        &'p self,
        pred: &'p dyn Fn(&[String]) -> bool,
    ) -> impl FnMut(Option<StackIdx>) -> bool + 'p {
        judged_once(move |stack| pred(&self.names(stack)))
    }

    /// Function names of a stack, innermost first; code without symbols is
    /// named by its binary ("liblzma.so.5 (no symbols)"), never by the
    /// next frame that has a name (see [`crate::unnamed`]).
    pub fn names(&self, stack: Option<StackIdx>) -> Vec<String> {
        crate::waits::stack_names(self.trace, stack)
    }

    /// User-space frames of a stack only (the call site in the program),
    /// named as [`Context::names`] names them.
    pub fn user_names(&self, stack: Option<StackIdx>) -> Vec<String> {
        let user = self
            .trace
            .stack_frames(stack)
            .filter(|&f| !self.trace.frames[f.ix()].kernel);
        crate::unnamed::frame_labels(self.trace, user)
    }

    /// Per process: (samples, samples with a frame whose name satisfies `pred`).
    pub fn samples_by_process(
        &self,
        pred: &dyn Fn(&str) -> bool,
    ) -> HashMap<ProcIdx, (u64, u64), BuildFx> {
        self.samples_where(&|stack| self.stack_has(stack, pred))
    }

    /// Per process: (samples, samples whose stack satisfies `pred`); each
    /// distinct stack is judged once.
    pub fn samples_where(
        &self,
        pred: &dyn Fn(Option<StackIdx>) -> bool,
    ) -> HashMap<ProcIdx, (u64, u64), BuildFx> {
        let mut verdict: HashMap<Option<StackIdx>, bool, BuildFx> = HashMap::default();
        let mut out: HashMap<ProcIdx, (u64, u64), BuildFx> = HashMap::default();
        let s = &self.trace.samples;
        for i in 0..s.len() {
            let stack = s.stack[i];
            let hit = *verdict.entry(stack).or_insert_with(|| pred(stack));
            let e = out.entry(self.process_of(s.thread[i])).or_default();
            e.0 += 1;
            if hit {
                e.1 += 1;
            }
        }
        out
    }

    /// A finding with the shared fields filled in.
    #[allow(clippy::too_many_arguments)]
    pub fn finding(
        &self,
        id: &str,
        title: String,
        cost_s: f64,
        culprit: Culprit,
        evidence: serde_json::Map<String, serde_json::Value>,
        stack: Vec<String>,
        fix: &str,
    ) -> Finding {
        let share = (cost_s / self.examined_s).clamp(0.0, 1.0);
        let mut evidence = evidence;
        if let Some(why) = crate::unnamed::why_no_symbols(self.trace, &title, &stack) {
            evidence.insert("no_symbols".into(), why.into());
        }
        Finding {
            id: id.to_string(),
            title,
            severity: Severity::from_share(share),
            cost_s,
            cost_share: share,
            culprit,
            evidence,
            stack,
            fix: fix.to_string(),
        }
    }
}

/// The critical path of the root process, for the detectors of everyday
/// waits (`lock-contention`, `io-wait`, `cpu-starvation`), which judge
/// what the root waited for rather than the whole system.
pub struct RootPath {
    pub root: ProcIdx,
    pub path: CriticalPath,
    /// The root's wall time (ns on the trace clock).
    pub window: (u64, u64),
    /// The threads of the root's process tree.
    pub tree_threads: Vec<ThreadIdx>,
}

impl RootPath {
    /// The path of `root`, or of the default root (the longest-running
    /// process that started in the trace), over the replayed `states`.
    pub fn new(
        trace: &Trace,
        states: &ThreadStates,
        root: Option<ProcIdx>,
    ) -> Result<RootPath, PathError> {
        RootPath::with_locks(trace, states, &Locks::build(trace, states), root)
    }

    /// [`RootPath::new`] with the trace's locks already found.
    pub fn with_locks(
        trace: &Trace,
        states: &ThreadStates,
        locks: &Locks,
        root: Option<ProcIdx>,
    ) -> Result<RootPath, PathError> {
        let root = root
            .or_else(|| default_root(trace))
            .ok_or(PathError::NoRoot)?;
        let path = critical_path_with(trace, states, locks, root)?;
        let tree_threads = process_tree(trace, root)
            .into_iter()
            .flat_map(|p| trace.processes[p.ix()].threads.iter().copied())
            .collect();
        Ok(RootPath {
            root,
            path,
            window: window(trace, root),
            tree_threads,
        })
    }
}

impl RootPath {
    /// The thread `tid` names on the path: the one in the root's tree, else
    /// its last lifetime in the trace.
    pub fn thread(&self, trace: &Trace, tid: i32) -> Option<ThreadIdx> {
        self.tree_threads
            .iter()
            .copied()
            .find(|t| trace.threads[t.ix()].tid == tid)
            .or_else(|| {
                trace
                    .threads
                    .iter()
                    .rposition(|t| t.tid == tid)
                    .map(|i| ThreadIdx(i as u32))
            })
    }

    /// The process `pid` names on the path (see [`RootPath::thread`]).
    pub fn process(&self, trace: &Trace, pid: i32) -> Option<ProcIdx> {
        self.tree_threads
            .iter()
            .map(|&t| trace.threads[t.ix()].process)
            .find(|p| trace.processes[p.ix()].pid == pid)
            .or_else(|| {
                trace
                    .processes
                    .iter()
                    .rposition(|p| p.pid == pid)
                    .map(|i| ProcIdx(i as u32))
            })
    }
}

/// One detector: its finding's id, the thresholds its module documents,
/// and how it runs. Every detector is registered in [`DETECTORS`].
pub trait Detector: Sync {
    /// The id of the findings it makes (`lock-contention`, …).
    fn id(&self) -> &'static str;
    /// Its thresholds, by the name of the module's constant, with their
    /// values.
    fn thresholds(&self) -> &'static [(&'static str, f64)];
    /// Whether it judges the critical path of a root process (and so does
    /// not run without one) rather than the whole trace.
    fn needs_root(&self) -> bool;
    /// Its findings on the trace (`root`: the path it judges, if any).
    fn run(&self, cx: &Context, root: Option<&RootPath>) -> Vec<Finding>;
}

/// A detector that is one function of its module.
struct Registered {
    id: &'static str,
    thresholds: &'static [(&'static str, f64)],
    run: Run,
}

/// How a registered detector runs: on the whole trace, or on a root's path.
enum Run {
    Trace(fn(&Context) -> Vec<Finding>),
    Path(fn(&Context, &RootPath) -> Vec<Finding>),
}

impl Detector for Registered {
    fn id(&self) -> &'static str {
        self.id
    }
    fn thresholds(&self) -> &'static [(&'static str, f64)] {
        self.thresholds
    }
    fn needs_root(&self) -> bool {
        matches!(self.run, Run::Path(_))
    }
    fn run(&self, cx: &Context, root: Option<&RootPath>) -> Vec<Finding> {
        match (&self.run, root) {
            (Run::Trace(f), _) => f(cx),
            (Run::Path(f), Some(rp)) => f(cx, rp),
            (Run::Path(_), None) => Vec::new(),
        }
    }
}

/// Every detector, in the order they run (findings are ranked by cost
/// afterwards, so the order only breaks ties of equal cost and id).
pub static DETECTORS: &[&dyn Detector] = &[
    &Registered {
        id: "topdown-probe",
        thresholds: &[
            ("MIN_FAILED", topdown_probe::MIN_FAILED as f64),
            (
                "MIN_FAILURES_PER_MAPPING",
                topdown_probe::MIN_FAILURES_PER_MAPPING,
            ),
            ("GROWTH", topdown_probe::GROWTH),
            ("MIN_MAPPINGS", topdown_probe::MIN_MAPPINGS as f64),
        ],
        run: Run::Trace(topdown_probe::detect),
    },
    &Registered {
        id: "notify-permission",
        thresholds: &[
            ("MIN_PERMISSION_WAITS", notify::MIN_PERMISSION_WAITS as f64),
            ("MIN_PERMISSION_WAIT_S", notify::MIN_PERMISSION_WAIT_S),
        ],
        run: Run::Trace(notify::detect_permission),
    },
    &Registered {
        id: "notify-overhead",
        thresholds: &[
            ("MIN_OVERHEAD_SHARE", notify::MIN_OVERHEAD_SHARE),
            ("MIN_FILE_OP_SAMPLES", notify::MIN_FILE_OP_SAMPLES as f64),
        ],
        run: Run::Trace(notify::detect_overhead),
    },
    &Registered {
        id: "linear-probe-names",
        thresholds: &[
            ("MIN_LAUNCHES", linear_probe_names::MIN_LAUNCHES as f64),
            ("MIN_TREND", linear_probe_names::MIN_TREND),
            ("MIN_MAX_PROBES", linear_probe_names::MIN_MAX_PROBES as f64),
        ],
        run: Run::Trace(linear_probe_names::detect),
    },
    &Registered {
        id: "serialized-teardown",
        thresholds: &[
            ("MIN_TOTAL_S", serialized_teardown::MIN_TOTAL_S),
            ("MIN_MAX_S", serialized_teardown::MIN_MAX_S),
            ("JOIN_GAP_NS", serialized_teardown::JOIN_GAP_NS as f64),
        ],
        run: Run::Trace(serialized_teardown::detect),
    },
    &Registered {
        id: "memcg-thrash",
        thresholds: &[
            ("MIN_PAGE_IN_SHARE", memcg_thrash::MIN_PAGE_IN_SHARE),
            ("MIN_RECLAIM_SHARE", memcg_thrash::MIN_RECLAIM_SHARE),
            ("MIN_COST_S", memcg_thrash::MIN_COST_S),
            ("MIN_REFAULTED_LIMITS", memcg_thrash::MIN_REFAULTED_LIMITS),
        ],
        run: Run::Trace(memcg_thrash::detect),
    },
    &Registered {
        id: "kernel-dominated",
        thresholds: &[
            ("MIN_SAMPLES", kernel_dominated::MIN_SAMPLES as f64),
            ("MIN_TRACE_SHARE", kernel_dominated::MIN_TRACE_SHARE),
            ("MIN_KERNEL_SHARE", kernel_dominated::MIN_KERNEL_SHARE),
            ("MIN_ENTRY_SHARE", kernel_dominated::MIN_ENTRY_SHARE),
        ],
        run: Run::Trace(kernel_dominated::detect),
    },
    &Registered {
        id: "superlinear-growth",
        thresholds: &[
            ("MIN_LAUNCHES", superlinear_growth::MIN_LAUNCHES as f64),
            ("MIN_TREND", superlinear_growth::MIN_TREND),
            ("MIN_GROWTH", superlinear_growth::MIN_GROWTH),
        ],
        run: Run::Trace(superlinear_growth::detect),
    },
    &Registered {
        id: "notify-buffer",
        thresholds: &[
            (
                "MIN_ZEROING_SAMPLES",
                windows::notify_buffer::MIN_ZEROING_SAMPLES as f64,
            ),
            (
                "MIN_PROCESS_SHARE",
                windows::notify_buffer::MIN_PROCESS_SHARE,
            ),
        ],
        run: Run::Trace(windows::notify_buffer::detect),
    },
    &Registered {
        id: "teardown-lock",
        thresholds: &[
            ("MIN_TOTAL_S", windows::teardown_lock::MIN_TOTAL_S),
            ("MIN_MAX_S", windows::teardown_lock::MIN_MAX_S),
            ("MIN_EXITING", windows::teardown_lock::MIN_EXITING as f64),
            (
                "EXIT_WINDOW_NS",
                windows::teardown_lock::EXIT_WINDOW_NS as f64,
            ),
        ],
        run: Run::Trace(windows::teardown_lock::detect),
    },
    &Registered {
        id: "working-set-cap",
        thresholds: &[
            ("MIN_SAMPLES", windows::working_set::MIN_SAMPLES as f64),
            ("MIN_FAULT_SHARE", windows::working_set::MIN_FAULT_SHARE),
            (
                "MIN_TRANSITION_FAULTS",
                windows::working_set::MIN_TRANSITION_FAULTS as f64,
            ),
            (
                "MIN_TRANSITION_SHARE",
                windows::working_set::MIN_TRANSITION_SHARE,
            ),
            (
                "MAX_HARD_PER_TRANSITION",
                windows::working_set::MAX_HARD_PER_TRANSITION,
            ),
        ],
        run: Run::Trace(windows::working_set::detect),
    },
    &Registered {
        id: "topdown-alloc",
        thresholds: &[
            ("MIN_TOPDOWN", windows::topdown_alloc::MIN_TOPDOWN as f64),
            ("MIN_LIVE", windows::topdown_alloc::MIN_LIVE as f64),
            (
                "MIN_PATH_SAMPLES",
                windows::topdown_alloc::MIN_PATH_SAMPLES as f64,
            ),
            ("GROWTH", windows::topdown_alloc::GROWTH),
        ],
        run: Run::Trace(windows::topdown_alloc::detect),
    },
    &Registered {
        id: "lock-contention",
        thresholds: &[
            ("MIN_PATH_SHARE", lock_contention::MIN_PATH_SHARE),
            ("MIN_WAITERS", lock_contention::MIN_WAITERS as f64),
            ("MIN_WAITER_SHARE", lock_contention::MIN_WAITER_SHARE),
            ("MIN_OWN_SHARE", lock_view::MIN_OWN_SHARE),
            ("MIN_WAIT_S", lock_view::MIN_WAIT_S),
        ],
        run: Run::Path(lock_contention::detect),
    },
    &Registered {
        id: "io-wait",
        thresholds: &[("MIN_PATH_SHARE", io_wait::MIN_PATH_SHARE)],
        run: Run::Path(io_wait::detect),
    },
    &Registered {
        id: "cpu-starvation",
        thresholds: &[("MIN_PATH_SHARE", cpu_starvation::MIN_PATH_SHARE)],
        run: Run::Path(cpu_starvation::detect),
    },
];

/// Every detector of [`DETECTORS`] on a prepared context, ranked by cost;
/// those of everyday waits examine the critical path of `root`.
pub fn run_all(cx: &Context, root: Option<&RootPath>) -> Vec<Finding> {
    run_all_with(cx, || root)
}

/// [`run_all`], with the detectors of the whole trace run on a thread of
/// their own while `root` finds the path the others examine.
pub fn run_all_with<'r>(cx: &Context, root: impl FnOnce() -> Option<&'r RootPath>) -> Vec<Finding> {
    let (of_path, of_trace): (Vec<_>, Vec<_>) = DETECTORS
        .iter()
        .enumerate()
        .partition(|(_, d)| d.needs_root());
    let mut by_detector: Vec<(usize, Vec<Finding>)> = std::thread::scope(|s| {
        let trace_side = s.spawn(|| {
            let found = of_trace.iter().map(|&(i, d)| (i, d.run(cx, None)));
            (found.collect::<Vec<_>>(), crate::states::replays())
        });
        let root = root();
        let mut found: Vec<_> = of_path.iter().map(|&(i, d)| (i, d.run(cx, root))).collect();
        let (of_trace, replays) = trace_side
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        crate::states::credit_replays(replays);
        found.extend(of_trace);
        found
    });
    // In the detectors' order, as they ran before (ties keep it).
    by_detector.sort_by_key(|(i, _)| *i);
    let mut findings: Vec<Finding> = by_detector.into_iter().flat_map(|(_, f)| f).collect();
    findings.sort_by(|a, b| b.cost_s.total_cmp(&a.cost_s).then_with(|| a.id.cmp(&b.id)));
    findings
}

/// Whether `seconds` of a root's path are enough to report: at least
/// `share` of its wall time and 20 ms.
pub fn enough_of_path(seconds: f64, wall_s: f64, share: f64) -> bool {
    seconds >= (share * wall_s).max(0.020)
}

/// Builds an evidence map from pairs.
#[macro_export]
macro_rules! evidence {
    ($($key:expr => $value:expr),* $(,)?) => {{
        let mut map = serde_json::Map::new();
        $(map.insert($key.to_string(), serde_json::json!($value));)*
        map
    }};
}

/// Spearman's rank correlation of a sequence with its index (1 = strictly
/// increasing); ties get their average rank.
pub fn trend(values: &[f64]) -> f64 {
    let n = values.len();
    if n < 3 {
        return 0.0;
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    let mut ranks = vec![0.0; n];
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && values[order[j + 1]] == values[order[i]] {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0;
        for k in i..=j {
            ranks[order[k]] = avg;
        }
        i = j + 1;
    }
    let mean = (n - 1) as f64 / 2.0;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (k, r) in ranks.iter().enumerate() {
        let (dx, dy) = (k as f64 - mean, r - mean);
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    if sxx == 0.0 || syy == 0.0 {
        0.0
    } else {
        sxy / (sxx * syy).sqrt()
    }
}

/// The median of the sweep statistics (NaN when empty): one median in the
/// workspace.
pub use slowlab_sweep::stats::median;

/// `verdict` of each distinct stack, computed the first time the stack is
/// asked about and remembered.
fn judged_once<'p>(
    verdict: impl Fn(Option<StackIdx>) -> bool + 'p,
) -> impl FnMut(Option<StackIdx>) -> bool + 'p {
    let mut judged: HashMap<Option<StackIdx>, bool, BuildFx> = HashMap::default();
    move |stack| *judged.entry(stack).or_insert_with(|| verdict(stack))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The README's table of detectors (under `slowlab diagnose`) lists
    /// exactly the registered ones, and every detector has thresholds.
    #[test]
    fn the_readme_lists_every_registered_detector() {
        let readme = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"));
        let table = readme
            .split_once("| id | signature |")
            .map(|(_, rest)| rest.split("\n\n").next().unwrap_or(""))
            .expect("the README has a detector table");
        let mut listed: Vec<&str> = table
            .lines()
            .filter_map(|l| l.strip_prefix("| `")?.split_once('`').map(|(id, _)| id))
            .collect();
        let mut registered: Vec<&str> = DETECTORS.iter().map(|d| d.id()).collect();
        listed.sort_unstable();
        registered.sort_unstable();
        assert_eq!(listed, registered);
        for d in DETECTORS {
            assert!(!d.thresholds().is_empty(), "{} has no thresholds", d.id());
        }
        let on_the_path: Vec<&str> = DETECTORS
            .iter()
            .filter(|d| d.needs_root())
            .map(|d| d.id())
            .collect();
        assert_eq!(
            on_the_path,
            ["lock-contention", "io-wait", "cpu-starvation"]
        );
    }

    #[test]
    fn trend_of_increasing_decreasing_and_flat_sequences() {
        assert!((trend(&[1.0, 2.0, 3.0, 4.0]) - 1.0).abs() < 1e-12);
        assert!((trend(&[4.0, 3.0, 2.0, 1.0]) + 1.0).abs() < 1e-12);
        assert_eq!(trend(&[2.0, 2.0, 2.0]), 0.0);
        assert!(trend(&[1.0, 3.0, 2.0, 5.0, 4.0, 6.0]) > 0.7);
    }
}
