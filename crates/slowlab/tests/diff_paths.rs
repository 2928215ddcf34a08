//! `slowlab diff A B` on real `slowlab diagnose` outputs of a small program
//! written for it (`tests/fixtures/why/regress.c`) with one regression
//! injected at a time: more fsyncs on a disk filesystem, a lock held by a
//! helper thread that sleeps, a retry loop that sleeps, more CPU in one
//! function, the same work at a lower priority beside a busy loop on its CPU. For each, the first cause of the diff (by state, kind, process
//! and thread) must be the regression, and the causes' changes must add up
//! to the wall-time change: exactly to the critical paths', and within 10%
//! to the program's own measured wall times. Three runs of the same
//! program per side must be "no significant change".
//!
//! The baseline is recorded once and shared; each run takes 0.2–0.7 s.
//! Tests skip, with the reason, where perf is missing.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

mod common;
use common::{json, one_recording_at_a_time, slowlab};

struct Run {
    _dir: tempfile::TempDir,
    path: PathBuf,
    /// What the program measured itself (`wall_s=` on its stderr).
    wall_s: f64,
}

/// Diagnoses `regress MODE` into a fresh directory. The caller holds the
/// recording lock.
fn diagnose(mode: &str) -> Run {
    diagnose_under(&[], mode)
}

/// [`diagnose`] of the program started through `launcher` (`nice -n 5`).
fn diagnose_under(launcher: &[&str], mode: &str) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d");
    let prog = common::why_program("regress");
    // /var/tmp: a disk filesystem (fsync on tmpfs waits for nothing).
    let file = format!("/var/tmp/slowlab-regress-{}-{mode}", std::process::id());
    let out = slowlab()
        .args(["diagnose", "-o"])
        .arg(&path)
        .arg("--")
        .args(launcher)
        .arg(&prog)
        .args([mode, &file])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "diagnose failed: {stderr}");
    let wall_s = stderr
        .lines()
        .find_map(|l| l.strip_prefix("wall_s="))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no wall_s= in {stderr}"));
    Run {
        _dir: dir,
        path,
        wall_s,
    }
}

/// The baseline, recorded once for every test of this file.
fn baseline() -> &'static Run {
    static BASE: OnceLock<Run> = OnceLock::new();
    BASE.get_or_init(|| diagnose("base"))
}

fn diff(a: &[&Path], b: &[&Path]) -> serde_json::Value {
    let mut cmd = slowlab();
    cmd.args(["diff", "--json"]).args(a);
    if a.len() > 1 || b.len() > 1 {
        cmd.arg("--");
    }
    json(&cmd.args(b).output().unwrap())
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Diagnoses the regression, diffs it with the baseline, checks the sums,
/// and returns the diff's first group (by state, kind, process, thread),
/// the diff, and the run (kept for a test that diffs it again).
fn first_group(mode: &str) -> (serde_json::Value, serde_json::Value, Run) {
    first_group_of(|| diagnose(mode))
}

/// [`first_group`] of the run `regressed` records against the baseline.
fn first_group_of(regressed: impl FnOnce() -> Run) -> (serde_json::Value, serde_json::Value, Run) {
    let (base, run) = {
        let _one = one_recording_at_a_time();
        (baseline(), regressed())
    };
    let d = diff(&[&base.path], &[&run.path]);
    let delta = f(&d["delta_s"]);
    let sum: f64 = d["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| f(&c["delta_s"]))
        .sum();
    let walls = f(&d["b"]["wall_s"]) - f(&d["a"]["wall_s"]);
    assert!(
        (sum - delta).abs() < 1e-6 && (walls - delta).abs() < 1e-6,
        "{sum} {walls} {d:#}"
    );
    let measured = run.wall_s - base.wall_s;
    assert!(
        (sum - measured).abs() <= 0.1 * run.wall_s,
        "causes add up to {sum:.3} s, the program measured {measured:.3} s: {d:#}"
    );
    assert!(d["significant"].as_bool().unwrap(), "{d:#}");
    (d["groups"][0].clone(), d, run)
}

#[test]
fn more_fsyncs_are_time_waiting_for_the_disk() {
    require_perf!();
    let (g, d, _) = first_group("fsync");
    assert_eq!(
        (&g["state"], &g["kind"]),
        (&"blocked".into(), &"io".into()),
        "{d:#}"
    );
    assert_eq!(g["thread"], "regress", "{d:#}");
    assert!(f(&g["delta_s"]) > 0.08, "{d:#}");
    assert!(
        d["summary"]
            .as_str()
            .unwrap()
            .contains("waiting for the disk"),
        "{d:#}"
    );
}

#[test]
fn a_lock_held_by_another_thread_is_that_threads_time() {
    require_perf!();
    let (g, d, _) = first_group("lock");
    // The main thread's lock wait is followed into the holder, which slept.
    assert_eq!(g["thread"], "holder", "{d:#}");
    assert_eq!(g["process"], "regress", "{d:#}");
    assert_eq!(
        (&g["state"], &g["kind"]),
        (&"blocked".into(), &"sleep".into()),
        "{d:#}"
    );
    assert!(f(&g["delta_s"]) > 0.2, "{d:#}");
}

#[test]
fn a_retry_loop_that_sleeps_is_sleep() {
    require_perf!();
    let (g, d, _) = first_group("sleep");
    assert_eq!(
        (&g["state"], &g["kind"]),
        (&"blocked".into(), &"sleep".into()),
        "{d:#}"
    );
    assert_eq!(g["thread"], "regress", "{d:#}");
    assert!(f(&g["delta_s"]) > 0.2, "{d:#}");
}

#[test]
fn more_work_in_one_function_is_cpu_in_that_function() {
    require_perf!();
    let (g, d, run) = first_group("cpu");
    assert_eq!(g["state"], "cpu", "{d:#}");
    assert_eq!(g["mostly"], "render_page", "{d:#}");
    assert!(f(&g["delta_s"]) > 0.1, "{d:#}");
    let first = &d["causes"][0];
    assert_eq!(first["function"], "render_page", "{d:#}");
    assert!(first["interval"].is_null(), "one run per side: {d:#}");

    // The page of the same pair: both critical paths as bars as long as
    // the wall times, and the causes, the first one first.
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("diff.html");
    let out = slowlab()
        .args(["diff", "--html"])
        .arg(&page)
        .arg(&baseline().path)
        .arg(&run.path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let html = std::fs::read_to_string(&page).unwrap();
    let data = html
        .split("id=\"slowlab-data\">")
        .nth(1)
        .and_then(|s| s.split("</script>").next())
        .expect("the page's data");
    let v: serde_json::Value = serde_json::from_str(data).unwrap();
    let paths = &v["paths"];
    assert_eq!(paths["diff"]["causes"][0], *first, "{:#}", paths["diff"]);
    for (i, side) in ["a", "b"].into_iter().enumerate() {
        let bar = &paths["bars"][i];
        let wall = f(&d[side]["wall_s"]);
        assert!((f(&bar["wall_s"]) - wall).abs() < 1e-9, "{bar:#}");
        let pieces = bar["pieces"].as_array().unwrap();
        let last = f(&pieces[pieces.len() - 1]["to_s"]);
        assert!((last - wall).abs() < 1e-6, "{bar:#}");
    }
    // The sampled CPU of the pair below it, from their traces.
    assert!(v["view"]["functions"].is_array(), "no CPU part: {out:?}");
    // Kept for a look: SLOWLAB_KEEP_DIFF_PAGE=FILE copies the page there.
    if let Ok(keep) = std::env::var("SLOWLAB_KEEP_DIFF_PAGE") {
        std::fs::copy(&page, keep).unwrap();
    }
}

#[test]
fn the_same_program_three_times_per_side_is_no_significant_change() {
    require_perf!();
    let runs: Vec<Run> = {
        let _one = one_recording_at_a_time();
        baseline();
        (0..5).map(|_| diagnose("base")).collect()
    };
    let base = baseline();
    // The sides take turns in time (base, then runs 0–4 alternately), so
    // the machine's load drifting over the test does not make one side
    // slower than the other.
    let a = [base.path.as_path(), &runs[1].path, &runs[3].path];
    let b = [&*runs[0].path, &runs[2].path, &runs[4].path];
    let d = diff(&a, &b);
    assert_eq!(d["significant"], false, "{d:#}");
    let [lo, hi] = [f(&d["interval"][0]), f(&d["interval"][1])];
    assert!(lo <= hi, "{d:#}");
    assert!(
        d["summary"]
            .as_str()
            .unwrap()
            .starts_with("No significant change"),
        "{d:#}"
    );
    let sum: f64 = d["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| f(&c["delta_s"]))
        .sum();
    assert!((sum - f(&d["delta_s"])).abs() < 1e-6, "{d:#}");
}

#[test]
fn bad_input_gets_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = slowlab()
        .arg("diff")
        .arg(dir.path())
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("critical_path.json"), "{stderr}");
    let out = slowlab().args(["diff", "a", "b", "c"]).output().unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("A1 A2"),
        "{out:?}"
    );
}

/// A busy loop on CPU 0, killed when dropped. One per CPU, left to the
/// scheduler, once let the program run unslowed (0.02 s lost in a CI run):
/// pinned beside it on one CPU, it cannot be placed elsewhere.
struct Hog(std::process::Child);

impl Hog {
    fn start() -> Hog {
        Hog(std::process::Command::new("taskset")
            .args(["-c", "0", "sh", "-c", "while :; do :; done"])
            .spawn()
            .unwrap())
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_same_work_at_a_lower_priority_beside_a_cpu_hog_waits_for_a_cpu() {
    require_perf!();
    // The baseline's work, at nice 5 on the CPU where a busy loop runs: the
    // time it lost is time runnable, waiting for a CPU.
    let (g, d, _) = first_group_of(|| {
        let _hog = Hog::start();
        diagnose_under(&["taskset", "-c", "0", "nice", "-n", "5"], "base")
    });
    assert_eq!(
        (&g["state"], &g["kind"]),
        (&"runnable".into(), &serde_json::Value::Null),
        "{d:#}"
    );
    assert_eq!(g["thread"], "regress", "{d:#}");
    assert!(f(&g["delta_s"]) > 0.1, "{d:#}");
}
