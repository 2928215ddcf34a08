//! One recording cut into runs, as `lab --trace` records its scenarios (root and perf
//! needed; otherwise `SKIP:`), with perf (`PerfRuns`) and with the eBPF recorder
//! (`BpfRuns`): each run's trace holds the work of its run, none of the work before it,
//! between the runs or after them, and (perf's) the paths its syscalls looked up; an
//! interrupted run leaves no file; the stop leaves nothing beside the runs' traces; perf's
//! opening of each run's file comes before the run's work, not beside it. A long
//! run's records wait for its end in the eBPF recorder's spill file, not in memory, and
//! its trace holds all of it; so do its stacks, and every stack a run's records name is
//! in its trace, also for a thread that calls from the same site in every run.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{one_recording_at_a_time, slowlab};
use slowlab_record::{BpfRuns, Outcome, PerfRuns, RunRecorder};

/// The work each phase does: a shell named after the phase (its `comm`) that spins
/// looking up a path named after it too, long enough for samples.
const PHASES: [&str; 5] = ["before", "first", "between", "second", "after"];

/// A copy of `sh` named `runs-PHASE` in `dir`.
fn shell_for(dir: &Path, phase: &str) -> PathBuf {
    let sh = slowlab_record::find_program("sh").expect("sh is installed");
    let exe = dir.join(format!("runs-{phase}"));
    std::fs::copy(sh, &exe).expect("copy sh");
    exe
}

/// Runs phase `phase`'s work and waits for it.
fn work(dir: &Path, phase: &str) {
    let missing = format!("/nonexistent/slowlab-runs/{phase}");
    let script = format!("i=0; while [ $i -lt 4000 ]; do [ -e {missing} ]; i=$((i+1)); done");
    let status = Command::new(shell_for(dir, phase))
        .args(["-c", &script])
        .status()
        .expect("the phase's shell runs");
    assert!(status.success());
}

/// The commands (`comm`) that got CPU samples in `trace`.
fn commands_sampled(trace: &Path) -> Vec<String> {
    let out = slowlab()
        .args(["analyze", "--json", "--no-symbols"])
        .arg(trace)
        .output()
        .expect("analyze runs");
    let v = common::json(&out);
    v["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .filter_map(|p| p["comm"].as_str())
        .filter(|c| c.starts_with("runs-"))
        .map(str::to_string)
        .collect()
}

/// The CPU seconds `comm` has in `trace` from the first 10 ms in which `first` ran on.
fn cpu_from_the_start_of(trace: &Path, first: &str, comm: &str) -> f64 {
    let out = slowlab()
        .args([
            "analyze",
            "--timeline",
            "--bucket",
            "0.01",
            "--json",
            "--no-symbols",
        ])
        .arg(trace)
        .output()
        .expect("analyze runs");
    let v = common::json(&out);
    let cpu_of = |bucket: &serde_json::Value, name: &str| -> f64 {
        bucket["cpu"]
            .as_array()
            .expect("cpu")
            .iter()
            .filter(|p| p["comm"] == name)
            .filter_map(|p| p["cpu_s"].as_f64())
            .sum()
    };
    let buckets = v["buckets"].as_array().expect("buckets");
    let start = buckets
        .iter()
        .position(|b| cpu_of(b, first) > 0.0)
        .unwrap_or_else(|| panic!("{first} never ran in {}", trace.display()));
    buckets[start..].iter().map(|b| cpu_of(b, comm)).sum()
}

/// The phases whose path a `.paths` side file holds.
fn phases_looked_up(paths: &Path) -> Vec<&'static str> {
    let log = slowlab_bpf::read_paths(paths).expect("the paths read back");
    PHASES
        .into_iter()
        .filter(|phase| {
            let missing = format!("/nonexistent/slowlab-runs/{phase}");
            log.events.iter().any(|e| e.path == missing)
        })
        .collect()
}

/// Records the phases (an interrupted run between them) with `runs`; returns the two
/// runs' outcomes.
fn record_phases(runs: &mut dyn RunRecorder, dir: &Path) -> [Outcome; 2] {
    work(dir, "before");
    runs.begin(&dir.join("first/trace.data")).expect("begin");
    work(dir, "first");
    let first = runs.end().expect("the first run's end");
    // An interrupted run: nothing of it is written.
    runs.begin(&dir.join("cut/trace.data")).expect("begin");
    work(dir, "between");
    runs.discard();
    runs.begin(&dir.join("second/trace.data")).expect("begin");
    work(dir, "second");
    let second = runs.end().expect("the second run's end");
    work(dir, "after");
    [first, second]
}

/// What each run's trace holds: its own work and none of the others'.
fn check_runs(dir: &Path, [first, second]: &[Outcome; 2], with_paths: bool) {
    for (run, outcome) in [("first", first), ("second", second)] {
        assert_eq!(outcome.output, dir.join(run).join("trace.data"));
        let want = vec![format!("runs-{run}")];
        assert_eq!(
            commands_sampled(&outcome.output),
            want,
            "the {run} run's trace: {:?}",
            outcome.warnings
        );
        if with_paths {
            let paths = slowlab_record::side_file(&outcome.output, "paths");
            assert!(outcome.companions.contains(&paths), "{outcome:?}");
            assert_eq!(phases_looked_up(&paths), [run], "the {run} run's paths");
        }
    }
    assert!(!dir.join("cut/trace.data").exists());
}

/// What is left in `runs_dir` besides the runs' traces and their side files.
fn left_beside(runs_dir: &Path) -> Vec<String> {
    std::fs::read_dir(runs_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !["first", "second", "cut"].contains(&n.as_str()) && !n.starts_with("runs-"))
        .collect()
}

#[test]
fn perf_cut_into_runs_gives_each_run_its_own_work_and_paths() {
    require_perf!();
    require_root!("the path capture beside perf needs root");
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    for run in ["first", "second", "cut"] {
        std::fs::create_dir(dir.path().join(run)).unwrap();
    }
    let cfg = slowlab_diagnose::recording(dir.path().join(".recording.data"), 1000, Vec::new());
    let mut runs = PerfRuns::start(&cfg).expect("perf starts");
    let outcomes = record_phases(&mut runs, dir.path());
    Box::new(runs).stop();
    check_runs(dir.path(), &outcomes, true);
    assert_eq!(left_beside(dir.path()), Vec::<String>::new());
    // perf opens each run's file (~50-80 ms of a CPU reading /proc) before the run begins,
    // not beside its work.
    for (run, outcome) in [("first", &outcomes[0]), ("second", &outcomes[1])] {
        let perf = cpu_from_the_start_of(&outcome.output, &format!("runs-{run}"), "perf");
        eprintln!("the {run} run: perf ran {perf:.3} s beside it");
        assert!(perf < 0.01, "the {run} run: perf ran {perf:.3} s beside it");
    }
}

#[test]
fn the_ebpf_recorder_cut_into_runs_gives_each_run_its_own_work() {
    require_bpf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    for run in ["first", "second", "cut"] {
        std::fs::create_dir(dir.path().join(run)).unwrap();
    }
    let options = slowlab_bpf::sched::SchedOptions::default();
    let mut runs = BpfRuns::start(&options, dir.path()).expect("the recorder starts");
    let outcomes = record_phases(&mut runs, dir.path());
    let warnings = Box::new(runs).stop();
    check_runs(dir.path(), &outcomes, false);
    assert_eq!(
        left_beside(dir.path()),
        Vec::<String>::new(),
        "{warnings:?}"
    );
}

/// The size of the file this process holds open, unlinked, at `path` (the spill).
fn unlinked_file_size(path: &Path) -> Option<u64> {
    let wanted = format!("{} (deleted)", path.display());
    std::fs::read_dir("/proc/self/fd")
        .ok()?
        .flatten()
        .find_map(|fd| {
            let target = std::fs::read_link(fd.path()).ok()?;
            (target.to_string_lossy() == wanted).then(|| std::fs::metadata(fd.path()).ok())?
        })
        .map(|m| m.len())
}

#[test]
fn a_long_run_of_the_ebpf_recorder_waits_on_disk_and_is_kept_whole() {
    require_bpf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let options = slowlab_bpf::sched::SchedOptions::default();
    let mut runs = BpfRuns::start(&options, dir.path()).expect("the recorder starts");
    let big = dir.path().join("big.data");
    runs.begin(&big).expect("begin");
    // 2.5 s of another process's work (the recorder leaves this one's out): a launch
    // every few milliseconds, each tens of records.
    let status = Command::new("sh")
        .args([
            "-c",
            "i=0; while [ $i -lt 5000 ]; do /bin/true; i=$((i+1)); done & sleep 2.5; kill $!",
        ])
        .status()
        .expect("sh runs");
    assert!(status.success());
    // The run's records wait in the spill file beside the runs, unlinked, not in memory.
    let spilled = unlinked_file_size(&dir.path().join(".recording.data.partial"))
        .expect("the recorder's spill file, open and unlinked");
    let outcome = runs.end().expect("end");
    let warnings = Box::new(runs).stop();
    let trace = std::fs::metadata(&outcome.output).unwrap().len();
    assert!(
        spilled > 1 << 20 && spilled * 2 > trace,
        "{spilled} bytes spilled for a trace of {trace}"
    );
    // All of the run is in its trace, from its begin: 2.5 s.
    let out = slowlab()
        .args(["analyze", "--json", "--no-symbols"])
        .arg(&outcome.output)
        .output()
        .unwrap();
    let duration = common::json(&out)["duration_s"].as_f64().unwrap();
    assert!(duration > 2.4, "{duration} s of a 2.5 s run: {warnings:?}");
    assert_eq!(left_beside(dir.path()), ["big.data"]);
}

/// The stack ids the records of `log` name that it has no stack of, and how many
/// records named a user stack.
fn stacks_missing(log: &slowlab_bpf::sched::SchedLog) -> (Vec<u32>, usize) {
    let known: std::collections::HashSet<u32> = log.stacks.iter().map(|s| s.id).collect();
    let mut missing: Vec<u32> = log
        .records
        .iter()
        .flat_map(|r| [r.kstack, r.ustack])
        .flatten()
        .filter(|id| !known.contains(id))
        .collect();
    missing.sort_unstable();
    missing.dedup();
    let user = log.records.iter().filter(|r| r.ustack.is_some()).count();
    (missing, user)
}

#[test]
fn every_stack_a_run_of_the_ebpf_recorder_names_is_in_its_trace() {
    require_bpf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let options = slowlab_bpf::sched::SchedOptions::default();
    let mut runs = BpfRuns::start(&options, dir.path()).expect("the recorder starts");
    // A shell that looks up a path from the same call site through both runs and the
    // time between them: a thread reuses its last site's stack id, and the stacks of the
    // first run go with its trace.
    let looker =
        common::Workload::start("while :; do [ -e /nonexistent/slowlab-stacks ]; done", None);
    let mut traces = Vec::new();
    for run in ["first", "second"] {
        let trace = dir.path().join(format!("{run}.data"));
        runs.begin(&trace).expect("begin");
        std::thread::sleep(std::time::Duration::from_millis(700));
        traces.push(runs.end().expect("end").output);
    }
    drop(looker);
    let warnings = Box::new(runs).stop();
    for (run, trace) in ["first", "second"].iter().zip(&traces) {
        let log = slowlab_bpf::sched::read_sched(trace).expect("the run reads back");
        let (missing, user) = stacks_missing(&log);
        assert!(
            user > 100,
            "the {run} run: {user} records with a user stack"
        );
        assert!(
            missing.is_empty(),
            "the {run} run names {} stacks it does not have ({:?} …): {warnings:?}",
            missing.len(),
            &missing[..missing.len().min(5)]
        );
    }
}
