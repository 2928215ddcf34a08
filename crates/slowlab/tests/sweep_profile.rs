//! `slowlab sweep --profile` on a real program (perf needed; the test
//! prints why it skips otherwise): `fixtures/profile/lin_quad.c` has a
//! linear and a quadratic function, the linear one dominating at the
//! smaller sizes. The profile must call the first linear and the second
//! superlinear with an exponent near 2, name the second in the headline,
//! and write both into the JSON and the plot. Bad settings get a one-line
//! error.

use std::path::{Path, PathBuf};

mod common;
use common::{json, one_recording_at_a_time, slowlab};

fn build(dir: &Path) -> PathBuf {
    common::compile_workload("profile/lin_quad.c", dir, "lin_quad")
}

/// One profiled sweep of `exe`: its JSON and its terminal report.
fn profiled_sweep(exe: &Path, plot: &Path) -> (serde_json::Value, String) {
    let out = {
        let _one = one_recording_at_a_time();
        slowlab()
            .args(["sweep", "--profile", "--profile-freq", "10000"])
            .args([
                "--sizes",
                "1000..8000",
                "--reps",
                "7",
                "--all-sizes",
                "--no-adapt",
            ])
            .args(["--json", "-", "--plot"])
            .arg(plot)
            .arg("--")
            .arg(exe)
            .arg("{n}")
            .output()
            .unwrap()
    };
    (
        json(&out),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn function<'a>(v: &'a serde_json::Value, name: &str, text: &str) -> &'a serde_json::Value {
    v["functions"]
        .as_array()
        .expect("functions in the JSON")
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("{name} missing: {text}"))
}

#[test]
fn the_quadratic_function_is_named_and_the_linear_one_is_linear() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path());
    let plot = dir.path().join("plot.svg");
    // A busy machine can make single runs twice as slow; an inconclusive
    // verdict (never a wrong one) gets one more sweep.
    let (v, text) = {
        let (v, text) = profiled_sweep(&exe, &plot);
        let verdicts = |v: &serde_json::Value| {
            (
                function(v, "quad_part", &text)["self_verdict"].clone(),
                function(v, "lin_part", &text)["self_verdict"].clone(),
            )
        };
        let (quad, lin) = verdicts(&v);
        assert_ne!(quad, "linear", "{text}");
        assert_ne!(lin, "superlinear", "{text}");
        if quad == "inconclusive" || lin == "inconclusive" {
            eprintln!("inconclusive on a noisy machine, sweeping once more:\n{text}");
            profiled_sweep(&exe, &plot)
        } else {
            (v, text)
        }
    };
    let quad = function(&v, "quad_part", &text);
    let lin = function(&v, "lin_part", &text);
    assert_eq!(quad["module"], "lin_quad");
    assert_eq!(quad["self_verdict"], "superlinear", "{text}");
    let k = quad["self_exponent"].as_f64().unwrap();
    assert!((1.7..=2.3).contains(&k), "quad_part N^{k}: {text}");
    assert_eq!(lin["self_verdict"], "linear", "{text}");
    let k = lin["self_exponent"].as_f64().unwrap();
    assert!((0.8..=1.2).contains(&k), "lin_part N^{k}: {text}");
    // Where the growth lives comes first, with its share at the top size.
    assert_eq!(v["functions"][0]["name"], "quad_part", "{text}");
    let share = quad["share_at_max"].as_f64().unwrap();
    assert!(share > 0.5 && share <= 1.0, "{share}");
    // The linear function dominates the smallest size.
    let at_smallest = |f: &serde_json::Value| -> u64 {
        let p = f["points"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["n"] == 1000)
            .unwrap();
        p["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .sum()
    };
    assert!(at_smallest(lin) > at_smallest(quad), "{text}");
    assert!(
        text.contains("`quad_part` (lin_quad) grows as N^"),
        "{text}"
    );
    assert!(text.contains("`lin_part` N^"), "{text}");
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(
        svg.contains("quad_part (with callees)"),
        "the plot has a line per top function"
    );
}

#[test]
fn a_bad_profile_frequency_is_a_one_line_error() {
    let out = slowlab()
        .args([
            "sweep",
            "--profile",
            "--profile-freq",
            "0",
            "--sizes",
            "1,2,4",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--profile-freq must be between 1 and"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
