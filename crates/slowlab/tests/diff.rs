//! `slowlab diff` on real recordings (perf needed; the test prints why it
//! skips otherwise): a program with a fixed, a linear and a quadratic part
//! (`fixtures/diff/growth.c`) recorded at two sizes. The quadratic part must
//! rank first, a function called only at the larger size must be new, the
//! fixed part must have shrunk, the differential flame graph must be
//! written, and the interactive page (`--html`) must sort, filter, search
//! and zoom in headless Chromium (`tests/report/check_diff.py`). Bad input gets a one-line error.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::browser::{require_browser, run_check, screenshot_dir};
use common::{json, one_recording_at_a_time, slowlab};

fn build(dir: &Path) -> PathBuf {
    common::compile_workload("diff/growth.c", dir, "growth")
}

/// Records `exe n` with perf (per process, frame-pointer stacks).
fn record(exe: &Path, n: u32, out: &Path) {
    let st = Command::new("perf")
        .args(["record", "-q", "-F", "1999", "-g", "-e", "cpu-clock", "-o"])
        .arg(out)
        .arg("--")
        .arg(exe)
        .arg(n.to_string())
        .status()
        .expect("perf record");
    assert!(st.success(), "perf record failed");
}

#[test]
fn the_function_that_grows_ranks_first() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path());
    let (small, big) = (dir.path().join("small.data"), dir.path().join("big.data"));
    {
        let _one = one_recording_at_a_time();
        record(&exe, 500, &small);
        record(&exe, 2000, &big);
    }
    let svg = dir.path().join("diff.svg");
    let out = slowlab()
        .arg("diff")
        .args([&small, &big])
        .args(["--json", "--filter", "process=growth", "--flamegraph"])
        .arg(&svg)
        .output()
        .unwrap();
    let v = json(&out);
    let rows = v["functions"].as_array().unwrap();
    let row = |name: &str| {
        rows.iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing: {v}"))
    };
    assert_eq!(rows[0]["name"], "quad_part", "{v:#}");
    let quad = row("quad_part");
    // 7% of the small run's samples, about 25% of the big one's.
    assert!(quad["ratio"].as_f64().unwrap() > 2.5, "{quad}");
    assert_eq!(quad["module"], "growth");
    assert_eq!(row("big_only")["status"], "new");
    assert!(row("const_part")["delta"].as_f64().unwrap() < -10.0);
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.contains("<svg") && svg.contains("quad_part"));

    // The interactive page, driven in Chromium.
    let page = dir.path().join("diff.html");
    let out = slowlab()
        .arg("diff")
        .args([&small, &big])
        .args(["--filter", "process=growth", "--html"])
        .arg(&page)
        .output()
        .unwrap();
    slowlab_testkit::assert_succeeded(&out);
    require_browser();
    let shots = screenshot_dir("diff");
    run_check(
        "check_diff.py",
        &[page.as_os_str(), shots.as_os_str(), "quad_part".as_ref()],
    );

    // The text lists the same first row.
    let out = slowlab().arg("diff").args([&small, &big]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let first = text
        .lines()
        .skip_while(|l| !l.ends_with("function [module]"))
        .nth(1)
        .unwrap_or("");
    assert!(first.contains("quad_part"), "{text}");

    // Per second, the traces of different lengths still rank quad_part first.
    let out = slowlab()
        .arg("diff")
        .args([&small, &big])
        .args([
            "--json",
            "--normalize",
            "duration",
            "--filter",
            "process=growth",
        ])
        .output()
        .unwrap();
    let v = json(&out);
    assert_eq!(v["functions"][0]["name"], "quad_part", "{v:#}");
    assert!(v["b"]["duration_s"].as_f64().unwrap() > v["a"]["duration_s"].as_f64().unwrap());
}

#[test]
fn bad_arguments_give_one_line_errors() {
    let fixture =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../perf/tests/fixtures/hot-fp.perfdata");
    for (args, says) in [
        (vec!["--by", "colour"], "colour"),
        (vec!["--normalize", "wrong"], "normalisation"),
        (
            vec!["--from", "2", "--to", "1"],
            "--from 2 is not before --to 1",
        ),
    ] {
        let out = slowlab()
            .arg("diff")
            .args([&fixture, &fixture])
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(
            err.contains(says) && err.trim().lines().count() == 1,
            "{err}"
        );
    }
    let out = slowlab()
        .arg("diff")
        .arg(&fixture)
        .arg("/nonexistent.data")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("/nonexistent.data") && err.trim().lines().count() == 1,
        "{err}"
    );
    // The same trace twice: nothing changed.
    let out = slowlab()
        .arg("diff")
        .args([&fixture, &fixture])
        .args(["--json", "--no-symbols"])
        .output()
        .unwrap();
    let v = json(&out);
    assert!(v["functions"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["delta"].as_f64().unwrap().abs() < 1e-9));
}
