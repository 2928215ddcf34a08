//! A trace with what `slowlab record` writes beside it: the path strings of
//! the path-taking syscalls (`FILE.paths`, captured with eBPF) and the
//! memory-cgroup notes (`FILE.cgroups.json`). The types the readers fill and
//! the analyses read; reading the files is the binary's (`trace_input`).

use std::collections::HashMap;

use crate::trace::Trace;

/// A path captured at a syscall's entry (on the trace's clock).
#[derive(Debug, Clone, PartialEq)]
pub struct CapturedPath {
    pub time_ns: u64,
    pub tid: i32,
    /// The tracepoint's syscall name: `openat`, `newfstatat`, …
    pub syscall: String,
    pub path: String,
}

/// Memory-cgroup facts recorded beside a trace (see `slowlab record`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CgroupInfo {
    /// pid → memory cgroup path.
    pub process_cgroup: HashMap<i32, String>,
    /// cgroup path → memory limit in bytes (absent: no limit).
    pub limits: HashMap<String, u64>,
    /// cgroup path → pages it refaulted (read back in soon after evicting
    /// them) while the trace was recorded.
    pub refaults: HashMap<String, u64>,
}

/// A trace and its side files (each absent when it was not recorded or
/// could not be read).
#[derive(Debug, Clone, Default)]
pub struct TraceBundle {
    pub trace: Trace,
    pub paths: Option<Vec<CapturedPath>>,
    pub cgroups: Option<CgroupInfo>,
    /// What could not be read beside the trace, each with what to do.
    pub warnings: Vec<String>,
}
