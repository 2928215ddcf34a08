//! `slowlab lab working-set-cap` run for real: at tiny size, the JSON
//! result, the direction of the effect (a cliff, robust at any size) and the
//! anonymous variant's OOM kill; then Ctrl-C while the capped scanner runs.
//! Every test checks that nothing is left behind: no cgroup named after the
//! run, no scanner process, no file in the work directory.
//!
//! Needs root and a memory cgroup controller; without them each test
//! prints SKIP.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod common;
use common::{finish, result_json};

const SLOWLAB: &str = env!("CARGO_BIN_EXE_slowlab");
const TAG_VAR: &str = "SLOWLAB_TEST_TAG";

/// The runs measure scan rates: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// The mount points of every cgroup hierarchy (v1 and v2).
fn cgroup_mounts() -> Vec<PathBuf> {
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            matches!(fields.get(2), Some(&"cgroup") | Some(&"cgroup2"))
                .then(|| PathBuf::from(fields[1]))
        })
        .collect()
}

/// Cgroups the run with this pid made (`slowlab-working-set-<pid>-*`).
fn cgroups_of(pid: u32) -> Vec<PathBuf> {
    let prefix = format!("slowlab-working-set-{pid}-");
    cgroup_mounts()
        .iter()
        .filter_map(|m| std::fs::read_dir(m).ok())
        .flat_map(|entries| entries.flatten())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

/// Live scanner processes carrying `tag` in their environment.
fn scanners(tag: &str) -> Vec<u32> {
    let marker = format!("{TAG_VAR}={tag}");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            let environ = std::fs::read(e.path().join("environ")).unwrap_or_default();
            String::from_utf8_lossy(&cmdline).contains("working-set-scan")
                && environ.split(|&b| b == 0).any(|v| v == marker.as_bytes())
        })
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// A work directory on a disk filesystem, so the scenario uses it.
fn work_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("slowlab-test-working-set-")
        .tempdir_in("/var/tmp")
        .expect("cannot create a directory in /var/tmp")
}

fn start(tag: &str, work: &Path, args: &[&str]) -> Child {
    Command::new(SLOWLAB)
        .args(["lab", "working-set-cap", "--json", "-", "--work-dir"])
        .arg(work)
        .args(args)
        .env(TAG_VAR, tag)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run slowlab")
}

/// `Some(reason)` when the scenario was skipped for a reason other than a
/// failure (no memory cgroup, …); panics on a failure.
fn skip_reason(r: &serde_json::Value) -> Option<String> {
    if r["status"] != "skipped" {
        return None;
    }
    let reason = r["reason"].as_str().unwrap_or_default().to_string();
    assert!(
        !reason.starts_with("failed"),
        "the scenario failed: {reason}"
    );
    Some(reason)
}

fn assert_nothing_left(pid: u32, tag: &str, work: &Path) {
    assert_eq!(
        cgroups_of(pid),
        Vec::<PathBuf>::new(),
        "cgroups left behind"
    );
    assert_eq!(scanners(tag), Vec::<u32>::new(), "scanner processes left");
    let left: Vec<_> = std::fs::read_dir(work)
        .expect("the work directory is gone")
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(
        left.is_empty(),
        "files left in the work directory: {left:?}"
    );
}

#[test]
fn tiny_run_is_a_cliff_and_the_anonymous_scanner_is_oom_killed() {
    require_root!("working-set-cap needs root (memory cgroups)");
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tag = format!("lab-working-set-tiny-{}", std::process::id());
    let work = work_dir();
    let child = start(&tag, work.path(), &["--tiny"]);
    let pid = child.id();
    let out = finish(child, Duration::from_secs(120));
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_nothing_left(pid, &tag, work.path());
    let r = result_json(&out, "working-set-cap");
    if let Some(reason) = skip_reason(&r) {
        slowlab_testkit::skip(format_args!("working-set-cap was skipped here: {reason}"));
        return;
    }
    assert_eq!(r["status"], "ran");
    let h = &r["headline"];
    assert_eq!(h["unit"], "scans/s");
    let (capped, normal) = (
        h["pathological"].as_f64().unwrap(),
        h["control"].as_f64().unwrap(),
    );
    // A cliff, not a slope: hundreds of times here, at every size.
    assert!(
        normal >= 10.0 * capped,
        "normal {normal} scans/s, capped {capped} scans/s"
    );
    assert_eq!(r["affected"], true);
    let variants = r["variants"].as_array().unwrap();
    let names: Vec<_> = variants
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "capped-32MiB",
            "normal",
            "madv-pageout",
            "anonymous-capped-32MiB"
        ]
    );
    let pageout = variants[2]["value"].as_f64().unwrap();
    assert!(
        pageout < normal,
        "MADV_PAGEOUT {pageout} vs normal {normal}"
    );
    let anon_note = variants[3]["note"].as_str().unwrap();
    let swap = std::fs::read_to_string("/proc/swaps")
        .map(|s| s.lines().count() > 1)
        .unwrap_or(false);
    if swap {
        assert!(anon_note.contains("swap"), "{anon_note}");
    } else {
        assert_eq!(
            anon_note,
            "OOM-killed: anonymous memory cannot be paged out without swap"
        );
        assert!(variants[3]["value"].is_null());
    }
    let lines = r["lines"].as_array().unwrap();
    let first = lines[0].as_str().unwrap();
    assert!(
        first.contains(" scans/s normal, ") && first.ends_with(" times as long."),
        "{first}"
    );
}

#[test]
fn ctrl_c_while_the_capped_scanner_runs_removes_the_cgroup_and_the_file() {
    require_root!("working-set-cap needs root (memory cgroups)");
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tag = format!("lab-working-set-sigint-{}", std::process::id());
    let work = work_dir();
    let mut child = start(&tag, work.path(), &[]);
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let capped = cgroups_of(pid)
            .iter()
            .any(|c| c.ends_with(format!("slowlab-working-set-{pid}-capped")));
        if capped && !scanners(&tag).is_empty() {
            break;
        }
        if let Ok(Some(_)) = child.try_wait() {
            let out = child.wait_with_output().expect("wait failed");
            let r = result_json(&out, "working-set-cap");
            match skip_reason(&r) {
                Some(reason) => {
                    slowlab_testkit::skip(format_args!(
                        "working-set-cap was skipped here: {reason}"
                    ));
                    return;
                }
                None => panic!("the run ended before the capped scan was seen: {r}"),
            }
        }
        assert!(
            Instant::now() < deadline,
            "the capped scanner did not start within a minute"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    // SAFETY: our own child, not yet waited for.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) };
    let out = finish(child, Duration::from_secs(60));
    assert_eq!(
        out.status.code(),
        Some(130),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_nothing_left(pid, &tag, work.path());
    let r = result_json(&out, "working-set-cap");
    assert_eq!(r["status"], "skipped");
    assert!(
        r["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("interrupted"),
        "{r}"
    );
}
