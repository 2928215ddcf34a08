//! The procs view's result (`analyze --procs`): process lifetimes, the
//! creation and exit rates, and the slowest launches. Computed by
//! `slowlab_analyze::procs`, rendered by `slowlab_report::trace_views`.

use serde::Serialize;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProcView {
    pub pid: i32,
    pub ppid: Option<i32>,
    pub comm: String,
    pub start_s: Option<f64>,
    pub exec_s: Option<f64>,
    pub end_s: Option<f64>,
    /// From fork (or exec) to exit, when both are in the trace.
    pub duration_s: Option<f64>,
    pub threads: usize,
}

/// The `--procs` view: `{"processes":[…]}` in start order.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProcsView {
    pub processes: Vec<ProcView>,
    pub bucket_s: f64,
    /// Where the first bucket starts, in seconds from the trace's start (`--from`, or 0).
    pub first_bucket_s: f64,
    /// Processes created and ended per bucket.
    pub created: Vec<u64>,
    pub ended: Vec<u64>,
    /// pids of the processes with the longest lifetimes that both started
    /// and ended in the trace, longest first.
    pub slowest: Vec<i32>,
}
