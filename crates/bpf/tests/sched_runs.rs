//! One ring recording cut into runs (root or CAP_BPF+CAP_PERFMON needed; otherwise
//! `SKIP:`), as `lab --trace` records its scenarios: after `SchedRecorder::forget`, a
//! snapshot holds what came since and nothing from before, and still names the processes
//! that started before it and run on.

use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use slowlab_bpf::sched::{read_sched, RingOptions, SchedLog, SchedOptions, SchedRecorder};

#[path = "support/sched.rs"]
mod sched_support;

/// Looks up `missing` 20 times, 2 ms apart.
fn look_up(missing: &Path) {
    for _ in 0..20 {
        let _ = std::fs::metadata(missing);
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// How many lookups of each of `paths` the snapshot `file` holds.
fn lookups(log: &SchedLog, paths: &[&Path]) -> Vec<usize> {
    paths
        .iter()
        .map(|p| sched_support::path_records(log, &p.to_string_lossy()))
        .collect()
}

/// A child killed and reaped on drop, also when the test fails.
struct Sleeper(Child);

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_snapshot_after_forget_holds_only_its_run_and_names_what_runs_on() {
    let dir = tempfile::tempdir().expect("temp dir");
    let options = SchedOptions {
        record_own_process: true,
        ..SchedOptions::default()
    };
    let ring = RingOptions {
        window: Duration::from_secs(3600),
        max_bytes: 64 << 20,
        spill: false,
    };
    let Some(recorder) = sched_support::start_or_skip("runs of one recording", || {
        SchedRecorder::start_ring(&dir.path().join("last.slr"), &options, ring)
    }) else {
        return;
    };
    let paths: Vec<_> = ["before", "first", "between", "second"]
        .iter()
        .map(|name| Path::new("/nonexistent/slowlab-runs-test").join(name))
        .collect();
    let paths: Vec<&Path> = paths.iter().map(|p| p.as_path()).collect();
    // Before the first run: a lookup, and a process that lives through both runs.
    look_up(paths[0]);
    let sleeper = Sleeper(Command::new("sleep").arg("30").spawn().expect("sleep runs"));
    std::thread::sleep(Duration::from_millis(100));

    recorder.forget().expect("forget");
    look_up(paths[1]);
    let first = dir.path().join("first.slr");
    recorder.snapshot(&first).expect("the first run's snapshot");
    look_up(paths[2]);
    recorder.forget().expect("forget");
    look_up(paths[3]);
    let second = dir.path().join("second.slr");
    recorder
        .snapshot(&second)
        .expect("the second run's snapshot");
    recorder.stop().expect("the stop");

    let first = read_sched(&first).expect("the first run reads back");
    let second = read_sched(&second).expect("the second run reads back");
    assert_eq!(lookups(&first, &paths), [0, 20, 0, 0], "the first run");
    assert_eq!(lookups(&second, &paths), [0, 0, 0, 20], "the second run");
    // The process started before both runs is named in each.
    let pid = sleeper.0.id();
    for (run, log) in [("first", &first), ("second", &second)] {
        assert!(
            log.threads
                .iter()
                .any(|t| t.pid == pid && t.tid == pid && t.comm == "sleep"),
            "the {run} run does not name the sleep that runs on"
        );
    }
}
