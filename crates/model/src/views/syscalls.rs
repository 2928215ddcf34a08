//! The syscalls view's result (`analyze --syscalls`): per process the calls
//! by count and time, their errors and call sites, and the file paths they
//! probed folded into patterns. Computed by `slowlab_analyze::syscalls`,
//! rendered by `slowlab_report::trace_views`.

use std::collections::BTreeMap;

use serde::Serialize;

use super::faults::StackCount;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SyscallStat {
    pub name: String,
    pub count: u64,
    /// Summed entry-to-exit time of the calls with both.
    pub time_s: f64,
    pub errors: BTreeMap<String, u64>,
    /// Where it was called from, most frequent first.
    pub sites: Vec<StackCount>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PathPattern {
    pub pattern: String,
    pub count: u64,
    /// Calls that succeeded ("found") and failed ("missing" for ENOENT).
    pub found: u64,
    pub failed: u64,
    pub errors: BTreeMap<String, u64>,
    /// The first and last path of the pattern, in call order.
    pub first: String,
    pub last: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProcSyscalls {
    pub pid: i32,
    pub comm: String,
    pub syscalls: Vec<SyscallStat>,
    pub paths: Vec<PathPattern>,
}

/// The `--syscalls` view.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SyscallsView {
    pub processes: Vec<ProcSyscalls>,
    /// Calls whose path string was captured and matched.
    pub paths_matched: u64,
    /// Calls of path-taking syscalls without a matched path.
    pub paths_missing: u64,
    /// Why paths are missing, when they are.
    pub paths_note: Option<String>,
}
