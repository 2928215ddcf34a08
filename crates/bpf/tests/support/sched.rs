//! What the scheduler-recorder tests share (`#[path = "support/sched.rs"] mod sched_support;`),
//! apart from `support`, whose path-capture helpers those tests do not use: starting a
//! recorder or skipping where none can run, and reading a recording back.

#![allow(dead_code)] // each test uses some of it

use slowlab_bpf::sched::format::RecordKind;
use slowlab_bpf::sched::{SchedLog, SchedRecorder};
use slowlab_bpf::BpfError;

/// The recorder `start` started, or `None` after printing `SKIP: test: …` where this
/// machine cannot run one (not root, no BPF, no BTF). Any other error fails the test.
pub fn start_or_skip(
    test: &str,
    start: impl FnOnce() -> Result<SchedRecorder, BpfError>,
) -> Option<SchedRecorder> {
    match start() {
        Ok(recorder) => Some(recorder),
        Err(e @ (BpfError::NotPermitted { .. } | BpfError::Unsupported { .. })) => {
            slowlab_testkit::skip(format_args!("{test}: {e}"));
            None
        }
        Err(e) => panic!("{test}: starting the recorder failed: {e}"),
    }
}

/// How many PATH records of `log` carry `path`.
pub fn path_records(log: &SchedLog, path: &str) -> usize {
    log.records
        .iter()
        .filter(|r| r.kind == RecordKind::Path && r.path() == Some(path))
        .count()
}
