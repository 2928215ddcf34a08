//! `slowlab diagnose --pid PID`: attached to a process already running, the
//! answer is that process's over the recorded window — the same answer
//! `diagnose -- CMD` gives for the same program — and a process that does
//! not run at all in the window looks hung, with its wait chains walked.
//! Real recordings (root and perf); each target process is killed after.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

mod common;
use common::{one_recording_at_a_time, slowlab};

fn spin() -> PathBuf {
    common::why_program("spin")
}

/// A target process, killed when dropped.
struct Target(Child);

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn diagnose_pid(dir: &Path, pid: u32, seconds: &str) -> (serde_json::Value, String) {
    let out = slowlab()
        .args(["diagnose", "-o"])
        .arg(dir)
        .args(["--pid", &pid.to_string(), "--seconds", seconds])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    let path = std::fs::read(dir.join("critical_path.json"))
        .unwrap_or_else(|e| panic!("no critical_path.json ({e}): {stdout}{stderr}"));
    (serde_json::from_slice(&path).unwrap(), stdout)
}

#[test]
fn a_running_computation_is_answered_for_over_the_window() {
    require_perf!();
    let _one = one_recording_at_a_time();
    let target = Target(Command::new(spin()).arg("0").spawn().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let (p, stdout) = diagnose_pid(dir.path(), target.0.id(), "1.5s");
    assert_eq!(p["root"]["pid"], target.0.id(), "{stdout}");
    let wall = p["wall_s"].as_f64().unwrap();
    assert!(
        (1.2..2.5).contains(&wall),
        "the window, not the process's life: {wall}"
    );
    let top = &p["parts"][0];
    assert_eq!(top["state"], "cpu", "{stdout}");
    assert_eq!(top["function"], "crunch", "{stdout}");
    assert!(!stdout.contains("looks hung"), "{stdout}");
    // The same program run by diagnose itself: the same answer.
    drop(target);
    let run = tempfile::tempdir().unwrap();
    let out = slowlab()
        .args(["diagnose", "-o"])
        .arg(run.path())
        .arg("--")
        .arg(spin())
        .arg("1")
        .output()
        .unwrap();
    slowlab_testkit::assert_succeeded(&out);
    let q: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.path().join("critical_path.json")).unwrap())
            .unwrap();
    let top_run = &q["parts"][0];
    assert_eq!(
        (&top_run["state"], &top_run["function"]),
        (&top["state"], &top["function"]),
        "{}",
        q["summary"]
    );
}

#[test]
fn a_process_that_never_runs_in_the_window_looks_hung_and_is_walked() {
    require_perf!();
    let _one = one_recording_at_a_time();
    let target = Target(Command::new("sleep").arg("600").spawn().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let (p, stdout) = diagnose_pid(dir.path(), target.0.id(), "1");
    assert_eq!(p["breakdown"]["cpu"], 0.0, "{stdout}");
    assert!(
        stdout.contains(&format!(
            "pid {} did not run at all in the 1 s window: it looks hung",
            target.0.id()
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains("sleeps on a timer (clock_nanosleep)"),
        "{stdout}"
    );
}

#[test]
fn a_pid_that_is_not_running_is_a_one_line_error_before_recording() {
    let dir = tempfile::tempdir().unwrap();
    let out = slowlab()
        .args(["diagnose", "-o"])
        .arg(dir.path())
        .args(["--pid", "999999999"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no process with pid 999999999"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(!dir.path().join("trace.data").exists());
}

#[test]
fn seconds_with_a_command_instead_of_a_pid_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = slowlab()
        .args(["diagnose", "--seconds", "3", "-o"])
        .arg(dir.path().join("d"))
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--seconds is the window recorded for --pid"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(!dir.path().join("d").exists(), "nothing recorded");
}
