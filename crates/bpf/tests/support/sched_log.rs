//! What the scheduler-recorder tests read back from a recording: shared by the tests that
//! include it (`#[path = "support/sched_log.rs"] mod sched_log;`), apart from `support`,
//! whose path-capture helpers those tests do not use.

use slowlab_bpf::sched::format::RecordKind;
use slowlab_bpf::sched::SchedLog;

/// How many PATH records of `log` carry `path`.
pub fn path_records(log: &SchedLog, path: &str) -> usize {
    log.records
        .iter()
        .filter(|r| r.kind == RecordKind::Path && r.path() == Some(path))
        .count()
}
