//! Whose syscalls the scheduler recorder leaves out (root or CAP_BPF+CAP_PERFMON needed;
//! otherwise `SKIP:`): by default its whole process's; with
//! `SchedOptions::record_own_process` only its draining thread's, so that a caller whose
//! other threads do the work recorded (`lab --trace`) sees that work.

use std::path::Path;
use std::time::Duration;

use slowlab_bpf::sched::format::RecordKind;
use slowlab_bpf::sched::{read_sched, SchedOptions, SchedRecorder};

#[path = "support/sched.rs"]
mod sched_support;

/// Records while a thread of this process looks up `missing` 20 times; returns how many
/// of those lookups' paths the recording has, and how many syscalls of the recorder's
/// draining thread (`slowlab-sched`) it has; `None` when the recorder cannot run here.
fn record_own_lookups(record_own_process: bool, missing: &Path) -> Option<(usize, usize)> {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("own.slr");
    let options = SchedOptions {
        record_own_process,
        ..SchedOptions::default()
    };
    let recorder =
        sched_support::start_or_skip("own process", || SchedRecorder::start(&out, &options))?;
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for _ in 0..20 {
                let _ = std::fs::metadata(missing);
                std::thread::sleep(Duration::from_millis(5));
            }
        });
    });
    // The drain reads /proc meanwhile (its syscalls, if any were recorded).
    std::thread::sleep(Duration::from_millis(200));
    recorder.stop().expect("the stop");
    let log = read_sched(&out).expect("the recording reads back");
    let lookups = sched_support::path_records(&log, &missing.to_string_lossy());
    let pid = std::process::id();
    let drain: Vec<u32> = log
        .threads
        .iter()
        .filter(|t| t.pid == pid && t.comm == "slowlab-sched")
        .map(|t| t.tid)
        .collect();
    assert!(
        !record_own_process || !drain.is_empty(),
        "the draining thread is not named in the recording"
    );
    let drain_calls = log
        .records
        .iter()
        .filter(|r| r.kind == RecordKind::SysCall && drain.contains(&r.tid))
        .count();
    Some((lookups, drain_calls))
}

#[test]
fn the_recorders_process_is_left_out_unless_asked_but_its_draining_thread_always() {
    let missing = Path::new("/nonexistent/slowlab-own-process-test");
    let Some((lookups, _)) = record_own_lookups(false, missing) else {
        return;
    };
    assert_eq!(lookups, 0, "the recorder's own process was recorded");
    let Some((lookups, drain_calls)) = record_own_lookups(true, missing) else {
        return;
    };
    assert_eq!(lookups, 20, "its other threads' lookups are recorded");
    assert_eq!(
        drain_calls, 0,
        "the draining thread's syscalls are left out"
    );
}
