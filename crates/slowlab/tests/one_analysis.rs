//! One analysis per trace, through the binary: a command that shows a view,
//! writes the page and the Firefox Profiler profile and lists the findings
//! replays the scheduler once; a `slowlab diagnose` directory opens as its
//! trace; a directory without one is refused with what to give instead.
//! On a small committed recording (`crates/perf/tests/fixtures`), so no
//! root or perf is needed.

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../perf/tests/fixtures/sched.perfdata")
}

fn slowlab(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_slowlab"))
        .args(args)
        .env("SLOWLAB_COUNT_REPLAYS", "1")
        .env("SLOWLAB_CACHE_DIR", "off")
        .output()
        .expect("slowlab runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_command_with_a_view_the_page_the_profile_and_the_findings_replays_once() {
    let dir = tempfile::tempdir().unwrap();
    let (html, prof) = (dir.path().join("r.html"), dir.path().join("p.json"));
    let trace = fixture();
    let out = slowlab(&[
        "analyze",
        trace.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
        "--fxprof",
        prof.to_str().unwrap(),
        "--findings",
    ]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("slowlab: scheduler replays: 1\n"),
        "one replay for the page, the profile and the findings: {stderr}"
    );
    assert!(html.is_file() && prof.is_file(), "{stderr}");
    // The waits view alone replays once too, and says what it replayed.
    let waits = slowlab(&["analyze", trace.to_str().unwrap(), "--waits"]);
    assert!(text(&waits.stderr).contains("scheduler replays: 1"));
    assert!(
        text(&waits.stdout).contains("blocked"),
        "{}",
        text(&waits.stdout)
    );
}

#[test]
fn a_diagnose_directory_opens_as_its_trace() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(fixture(), dir.path().join("trace.data")).unwrap();
    let of_dir = slowlab(&["analyze", dir.path().to_str().unwrap(), "--waits"]);
    let of_file = slowlab(&["analyze", fixture().to_str().unwrap(), "--waits"]);
    assert!(of_dir.status.success(), "{}", text(&of_dir.stderr));
    assert_eq!(text(&of_dir.stdout), text(&of_file.stdout));

    let empty = tempfile::tempdir().unwrap();
    let refused = slowlab(&["analyze", empty.path().to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(2));
    let err = text(&refused.stderr);
    assert!(
        err.contains("without a trace.data") && err.contains("slowlab diagnose -o DIR"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "one line: {err}");
}
