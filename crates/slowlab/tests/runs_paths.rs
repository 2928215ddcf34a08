//! Many diagnose runs of one command, for real: `slowlab diagnose --repeat
//! 3` writes three complete diagnose directories whose critical paths each
//! add up (and match what the program measured itself), which `slowlab
//! diff` takes as runs and finds no significant change between; `slowlab
//! sweep --critical-path` on a program written for it
//! (`tests/fixtures/why/grow_sleep.c`: 1 ms sleeps N² times, CPU work ∝ N)
//! finds the sleeping grow as N² and the CPU as N. Bad `--repeat` values
//! are one-line errors. `--repeat` records every run with the backend given
//! (`--backend`, auto by default, as a single diagnose does).
//!
//! Each diagnose run takes about 4 s here (mostly the recording's start
//! and stop): 3 for the repeat, 9 for the sweep (a warm-up, 2 baseline
//! runs, 2 runs at each of 3 sizes). Tests skip, with the reason, where
//! perf is missing.

use std::path::Path;

mod common;
use common::{json, one_recording_at_a_time, slowlab};

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The sum of every number in a JSON object (a breakdown).
fn sum_numbers(v: &serde_json::Value) -> f64 {
    match v {
        serde_json::Value::Number(n) => n.as_f64().unwrap_or(0.0),
        serde_json::Value::Object(m) => m.values().map(sum_numbers).sum(),
        _ => 0.0,
    }
}

fn read_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn repeat_3_writes_three_diagnoses_whose_paths_add_up_and_do_not_differ() {
    require_perf!();
    let prog = common::why_program("grow_sleep");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("why");
    let run = {
        let _one = one_recording_at_a_time();
        slowlab()
            .args(["diagnose", "--repeat", "3", "--json", "-o"])
            .arg(&out)
            .arg("--")
            .arg(&prog)
            .arg("4")
            .output()
            .unwrap()
    };
    let stderr = String::from_utf8_lossy(&run.stderr).to_string();
    let summary = json(&run);
    // What the program measured itself, run by run.
    let measured: Vec<f64> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("wall_s="))
        .map(|v| v.trim().parse().unwrap())
        .collect();
    assert_eq!(measured.len(), 3, "{stderr}");
    let runs = summary["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3, "{summary:#}");
    for (i, r) in runs.iter().enumerate() {
        let run_dir = out.join(format!("run-{}", i + 1));
        assert_eq!(r["dir"], run_dir.display().to_string());
        for file in [
            "trace.data",
            "critical_path.json",
            "findings.json",
            "report.html",
        ] {
            assert!(run_dir.join(file).is_file(), "no {file} in run {}", i + 1);
        }
        let cp = read_json(&run_dir.join("critical_path.json"));
        let wall = f(&cp["wall_s"]);
        assert!((f(&r["wall_s"]) - wall).abs() < 1e-9, "{summary:#}");
        let segments: f64 = cp["segments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| f(&s["to_s"]) - f(&s["from_s"]))
            .sum();
        assert!(
            (segments - wall).abs() < 1e-6,
            "segments {segments} wall {wall}"
        );
        let breakdown = sum_numbers(&cp["breakdown"]);
        assert!(
            (breakdown - wall).abs() < 1e-6,
            "breakdown {breakdown} wall {wall}"
        );
        // The path covers the program's run (plus its start and exit: exec, loading and
        // exit, traced, can take tens of ms on a starved machine).
        assert!(
            wall >= measured[i] && wall - measured[i] <= 0.1 * wall + 0.1,
            "run {}: path {wall:.3} s, the program measured {:.3} s",
            i + 1,
            measured[i]
        );
    }
    // The median run is the middle one by wall time.
    let mut walls: Vec<(f64, u64)> = runs
        .iter()
        .map(|r| (f(&r["wall_s"]), r["run"].as_u64().unwrap()))
        .collect();
    walls.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert_eq!(summary["median_run"].as_u64(), Some(walls[1].1));
    assert!((f(&summary["median_s"]) - walls[1].0).abs() < 1e-9);
    assert!(stderr.contains("the median run (run "), "{stderr}");

    // diff takes them as runs. Run 2 is on both sides, so the interval of
    // every change spans zero: whatever the noise, nothing is significant.
    let runs_of = |ks: &[usize]| -> Vec<std::path::PathBuf> {
        ks.iter().map(|k| out.join(format!("run-{k}"))).collect()
    };
    let d = json(
        &slowlab()
            .args(["diff", "--json"])
            .args(runs_of(&[1, 2]))
            .arg("--")
            .args(runs_of(&[2, 3]))
            .output()
            .unwrap(),
    );
    assert_eq!(d["significant"], false, "{d:#}");
    assert!(
        d["summary"]
            .as_str()
            .unwrap()
            .starts_with("No significant change"),
        "{d:#}"
    );
    assert_eq!(d["a"]["runs_s"].as_array().unwrap().len(), 2);
}

#[test]
fn sweep_critical_path_finds_the_sleeping_grow_as_n2_and_the_cpu_as_n() {
    require_perf!();
    let prog = common::why_program("grow_sleep");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sweep.json");
    let out = {
        let _one = one_recording_at_a_time();
        slowlab()
            .args([
                "sweep",
                "--critical-path",
                "--sizes",
                "4,8,16",
                "--reps",
                "2",
                "--all-sizes",
                "--no-adapt",
                "--json",
            ])
            .arg(&file)
            .arg("--")
            .arg(&prog)
            .arg("{n}")
            .output()
            .unwrap()
    };
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = read_json(&file);
    let group = |state: &str| {
        r["cause_groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["state"] == state && g["thread"] == "grow_sleep")
            .unwrap_or_else(|| panic!("no {state} group: {r:#}"))
    };
    let sleep = group("blocked");
    assert_eq!(sleep["kind"], "sleep", "{r:#}");
    let k = f(&sleep["exponent"]);
    assert!((k - 2.0).abs() <= 0.4, "sleeping grows as N^{k:.2}: {r:#}");
    let cpu = group("cpu");
    let k = f(&cpu["exponent"]);
    assert!((k - 1.0).abs() <= 0.4, "the CPU grows as N^{k:.2}: {r:#}");
    // The points hold every measured run: 2 per size and the baseline.
    let sizes: Vec<u64> = sleep["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            assert_eq!(p["seconds"].as_array().unwrap().len(), 2, "{p}");
            p["n"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(sizes, [0, 4, 8, 16]);
    assert!(!r["causes"].as_array().unwrap().is_empty());
    // The terminal says it in one line, the sleeping first.
    let line = stdout
        .lines()
        .find(|l| l.contains("grows as N^"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(line.trim_start().starts_with("sleeping"), "{stdout}");
}

#[test]
fn repeat_records_every_run_with_the_backend_given() {
    require_perf!();
    require_bpf!();
    let dir = tempfile::tempdir().unwrap();
    // What each run's trace begins with: perf.data's magic, or the eBPF recorder's.
    let magic = |out: &Path, run: usize| -> Vec<u8> {
        let trace = out.join(format!("run-{run}")).join("trace.data");
        let bytes = std::fs::read(&trace).unwrap_or_else(|e| panic!("{}: {e}", trace.display()));
        bytes[..8].to_vec()
    };
    for (backend, expected) in [("perf", &b"PERFILE2"[..]), ("bpf", &b"SLSCHED\x01"[..])] {
        let out = dir.path().join(backend);
        let run = {
            let _one = one_recording_at_a_time();
            slowlab()
                .args(["diagnose", "--repeat", "2", "--backend", backend, "-o"])
                .arg(&out)
                .args(["--", "sleep", "0.1"])
                .output()
                .unwrap()
        };
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(run.status.success(), "{backend}: {stderr}");
        for k in [1, 2] {
            assert_eq!(magic(&out, k), expected, "{backend}, run {k}");
        }
        // Each run's path is the command's, whichever recorded it.
        let cp = read_json(&out.join("run-1").join("critical_path.json"));
        assert_eq!(cp["root"]["comm"], "sleep", "{backend}: {cp:#}");
    }
}

#[test]
fn a_bad_repeat_count_is_a_one_line_error() {
    for bad in ["0", "three", "101"] {
        let out = slowlab()
            .args(["diagnose", "--repeat", bad, "--", "true"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("--repeat takes a whole number of runs from 1 to 100"),
            "{stderr}"
        );
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    }
}
