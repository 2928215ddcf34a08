//! The detectors: each turns a trace into findings — a named culprit, what
//! it cost, the evidence and a fix hint — for one pathology. Each lives in
//! its own module that documents its signature and thresholds; this module
//! prepares what they share (the scheduler replay, the paired syscalls with
//! their captured paths, per-process sample counts) once, runs them all and
//! ranks the findings by cost.
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
pub mod memcg_thrash;
pub mod notify;
pub mod serialized_teardown;
pub mod superlinear_growth;
pub mod topdown_probe;
pub mod windows;

use std::collections::HashMap;

use slowlab_model::critical_path::CriticalPath;
use slowlab_model::findings::{Culprit, Finding, Severity};
use slowlab_model::trace::{ProcIdx, StackIdx, ThreadIdx, Trace};

use crate::critical_path::{critical_path, default_root, process_tree, window, PathError};
use crate::states::ThreadStates;

use crate::select::BuildFx;
use crate::syscalls::{attach_paths, pair_calls, Call, CapturedPath};
use crate::waits::{schedule, Schedule};

pub(crate) use heaviest::heaviest;

pub use slowlab_model::bundle::CgroupInfo;

/// Everything the detectors share, computed once.
pub struct Context<'a> {
    pub trace: &'a Trace,
    pub schedule: Schedule,
    pub calls: Vec<Call>,
    pub captured: Option<&'a [CapturedPath]>,
    pub cgroups: Option<&'a CgroupInfo>,
    /// Seconds of time the trace can hold: duration × CPUs.
    pub examined_s: f64,
    /// Per thread: samples whose stack contains a function, by name — built
    /// lazily by `samples_with`.
    sample_period_s: f64,
}

impl<'a> Context<'a> {
    pub fn new(
        trace: &'a Trace,
        captured: Option<&'a [CapturedPath]>,
        cgroups: Option<&'a CgroupInfo>,
    ) -> Self {
        let mut calls = pair_calls(trace);
        if let Some(c) = captured {
            attach_paths(trace, &mut calls, c);
        }
        let cpus = trace.meta.nr_cpus.unwrap_or(1).max(1) as f64;
        let sample_period_s = if trace.samples.is_empty() {
            0.0
        } else {
            trace.samples.period.iter().sum::<u64>() as f64 / trace.samples.len() as f64 / 1e9
        };
        Context {
            trace,
            schedule: schedule(trace),
            calls,
            captured,
            cgroups,
            examined_s: (trace.meta.duration_s() * cpus).max(1e-9),
            sample_period_s,
        }
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

    /// Function names of a stack, innermost first.
    pub fn names(&self, stack: Option<StackIdx>) -> Vec<String> {
        crate::waits::stack_names(self.trace, stack)
    }

    /// User-space frames of a stack only (the call site in the program).
    pub fn user_names(&self, stack: Option<StackIdx>) -> Vec<String> {
        self.trace
            .stack_frames(stack)
            .filter(|&f| !self.trace.frames[f.ix()].kernel)
            .map(|f| {
                self.trace
                    .function_name(self.trace.frame_function(f))
                    .to_string()
            })
            .collect()
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
    pub states: ThreadStates,
    /// The root's wall time (ns on the trace clock).
    pub window: (u64, u64),
    /// The threads of the root's process tree.
    pub tree_threads: Vec<ThreadIdx>,
}

impl RootPath {
    /// The path of `root`, or of the default root (the longest-running
    /// process that started in the trace).
    pub fn new(trace: &Trace, root: Option<ProcIdx>) -> Result<RootPath, PathError> {
        let root = root
            .or_else(|| default_root(trace))
            .ok_or(PathError::NoRoot)?;
        let states = ThreadStates::build(trace);
        let path = critical_path(trace, &states, root)?;
        let tree_threads = process_tree(trace, root)
            .into_iter()
            .flat_map(|p| trace.processes[p.ix()].threads.iter().copied())
            .collect();
        Ok(RootPath {
            root,
            path,
            states,
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

/// Every detector, for `--findings` and `diagnose`; the everyday-wait
/// detectors examine the critical path of `root` (default: see
/// [`RootPath::new`]).
pub fn run_all(
    trace: &Trace,
    captured: Option<&[CapturedPath]>,
    cgroups: Option<&CgroupInfo>,
    root: Option<&RootPath>,
) -> Vec<Finding> {
    let cx = Context::new(trace, captured, cgroups);
    let mut findings = Vec::new();
    findings.extend(topdown_probe::detect(&cx));
    findings.extend(notify::detect_permission(&cx));
    findings.extend(notify::detect_overhead(&cx));
    findings.extend(linear_probe_names::detect(&cx));
    findings.extend(serialized_teardown::detect(&cx));
    findings.extend(memcg_thrash::detect(&cx));
    findings.extend(kernel_dominated::detect(&cx));
    findings.extend(superlinear_growth::detect(&cx));
    findings.extend(windows::notify_buffer::detect(&cx));
    findings.extend(windows::teardown_lock::detect(&cx));
    findings.extend(windows::working_set::detect(&cx));
    findings.extend(windows::topdown_alloc::detect(&cx));
    if let Some(rp) = root {
        findings.extend(lock_contention::detect(&cx, rp));
        findings.extend(io_wait::detect(&cx, rp));
        findings.extend(cpu_starvation::detect(&cx, rp));
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trend_of_increasing_decreasing_and_flat_sequences() {
        assert!((trend(&[1.0, 2.0, 3.0, 4.0]) - 1.0).abs() < 1e-12);
        assert!((trend(&[4.0, 3.0, 2.0, 1.0]) + 1.0).abs() < 1e-12);
        assert_eq!(trend(&[2.0, 2.0, 2.0]), 0.0);
        assert!(trend(&[1.0, 3.0, 2.0, 5.0, 4.0, 6.0]) > 0.7);
    }
}
