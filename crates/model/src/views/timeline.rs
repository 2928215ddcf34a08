//! The timeline view's result (`analyze --timeline`): the trace in time
//! buckets, with CPU by process, faults, blocked time, starts and exits.
//! Computed by `slowlab_analyze::timeline`, rendered by
//! `slowlab_report::trace_views`.

use serde::Serialize;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProcessCpu {
    pub pid: i32,
    pub comm: String,
    pub cpu_s: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Bucket {
    pub start_s: f64,
    /// The busiest processes of the bucket, busiest first.
    pub cpu: Vec<ProcessCpu>,
    pub cpu_s: f64,
    pub faults: u64,
    pub blocked_s: f64,
    pub starts: u64,
    pub exits: u64,
}

/// The `--timeline` view.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TimelineView {
    pub bucket_s: f64,
    pub buckets: Vec<Bucket>,
}
