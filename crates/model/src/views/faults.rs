//! The faults view's result (`analyze --faults`): page faults by process and
//! kind, their rate over time and the stacks that fault most. Computed by
//! `slowlab_analyze::faults`, rendered by `slowlab_report::trace_views`.

use serde::Serialize;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StackCount {
    /// Innermost frame first.
    pub stack: Vec<String>,
    pub count: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProcessFaults {
    pub pid: i32,
    pub comm: String,
    /// All faults (the tracepoints); when only major faults were recorded,
    /// the major count.
    pub faults: u64,
    pub minor: u64,
    pub major: u64,
    /// Faults taken in user mode and in kernel mode (copying to or from
    /// user memory).
    pub user: u64,
    pub kernel: u64,
    /// Faults per bucket of `bucket_s` seconds from `first_bucket_s`.
    pub rate: Vec<u64>,
    pub stacks: Vec<StackCount>,
}

/// The `--faults` view: `{"processes":[…]}`, by fault count.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FaultsView {
    pub total: u64,
    pub major: u64,
    pub bucket_s: f64,
    /// Where the first bucket starts, in seconds from the trace's start (`--from`, or 0).
    pub first_bucket_s: f64,
    pub processes: Vec<ProcessFaults>,
    /// Whether the trace had any fault events.
    pub has_fault_events: bool,
}
