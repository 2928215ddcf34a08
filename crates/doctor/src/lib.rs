//! `slowlab doctor`'s checks: is something on this machine slowing every
//! program down right now? Standing conditions are read from `/proc` and
//! `/sys` under a root directory (`/` on a live machine, a fake tree in
//! tests), once before and once after a short recording, so that rates
//! (refaults, throttling, stalls, namespace churn) describe that window:
//!
//! - [`notify`]: fanotify permission watchers and their marks, inotify
//!   watch counts per process;
//! - [`memcg`]: memory cgroups (v1 and v2) near their limit that refault;
//! - [`cpu_throttle`]: cgroups whose CPU quota throttles them;
//! - [`pressure`]: pressure stall information;
//! - [`process_size`]: processes with very many mappings or threads;
//! - [`namespaces`]: namespaces made and destroyed at a high rate.
//!
//! [`judge`] turns two [`Snapshot`]s and the findings of the detectors run
//! over the recording into a [`Report`]: a verdict per check and the
//! findings (`slowlab_model::findings::Finding`), most costly first, each
//! with a one-line fix. A permission watcher or a cgroup that the recording
//! shows costing time carries that cost; one that was idle says so.
//!
//! This crate only reads: it changes no setting, and it neither records
//! nor renders (the binary records, `slowlab-report` renders).

pub mod cpu_throttle;
pub mod judge;
pub mod memcg;
pub mod namespaces;
pub mod notify;
pub mod pressure;
pub mod process_size;
pub mod procfs;
#[cfg(test)]
mod testutil;

use std::path::Path;

use serde::{Deserialize, Serialize};
use slowlab_model::findings::Finding;

pub use judge::{judge, Recording};

/// What the standing checks read at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub notify: notify::NotifyScan,
    pub memcg: Result<Vec<memcg::MemcgState>, String>,
    pub cpu: Result<Vec<cpu_throttle::CpuState>, String>,
    pub pressure: Result<Vec<pressure::PressureState>, String>,
    pub sizes: process_size::SizeScan,
    pub namespaces: namespaces::NamespaceSet,
}

impl Snapshot {
    /// Reads every standing condition under `root` (`/` on a live machine).
    pub fn take(root: &Path) -> Snapshot {
        Snapshot {
            notify: notify::scan(root),
            memcg: memcg::read_all(root),
            cpu: cpu_throttle::read_all(root),
            pressure: pressure::read_all(root),
            sizes: process_size::scan(root),
            namespaces: namespaces::read_all(root),
        }
    }
}

/// A check's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Checked; nothing found.
    Ok,
    /// Checked; the findings name what.
    Found,
    /// Could not check; the detail says why and what to do.
    Skipped,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Found => "found",
            Verdict::Skipped => "skipped",
        }
    }
}

/// One check: its name, its verdict and one line of detail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// `fanotify-permission`, `inotify-watches`, `memory-cgroups`,
    /// `cpu-throttling`, `pressure`, `large-processes`, `namespace-churn`,
    /// `recording`.
    pub id: String,
    pub verdict: Verdict,
    pub detail: String,
}

/// What doctor found: the JSON of `slowlab doctor --json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Seconds between the two readings (the recording's window).
    pub seconds: f64,
    pub checks: Vec<Check>,
    /// Most costly first.
    pub findings: Vec<Finding>,
    /// 0 nothing found, 1 findings, 2 nothing found but a check could not
    /// run.
    pub exit_code: i32,
}

/// The exit status: 1 with findings, else 2 when a check was skipped, else 0.
pub fn exit_code(checks: &[Check], findings: &[Finding]) -> i32 {
    if !findings.is_empty() {
        1
    } else if checks.iter().any(|c| c.verdict == Verdict::Skipped) {
        2
    } else {
        0
    }
}
