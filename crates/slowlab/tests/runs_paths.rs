//! Many diagnose runs of one command, for real: `slowlab diagnose --repeat
//! 3` writes three complete diagnose directories whose critical paths each
//! add up (and match what the program measured itself), which `slowlab
//! diff` takes as runs and finds no significant change between; `slowlab
//! sweep --critical-path` on a program written for it
//! (`tests/fixtures/why/grow_sleep.c`: 1 ms sleeps N² times, CPU work ∝ N)
//! finds the sleeping grow as N² and the CPU as N. Bad `--repeat` values
//! are one-line errors. `--repeat` records every run with the backend given
//! (`--backend`, auto by default, as a single diagnose does), in one
//! recording cut into a trace per run: each run's trace has its own command
//! and not the other runs'.
//!
//! The recording starts once (~1 s with the eBPF recorder, ~4 s with perf)
//! and each run's trace is then cut from it: 3 runs for the repeat, 9 for
//! the sweep (a warm-up, 2 baseline runs, 2 runs at each of 3 sizes).
//! Tests skip, with the reason, where perf is missing.

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

/// The pids of the processes that got CPU samples in `trace`.
fn pids_sampled(trace: &Path) -> Vec<u64> {
    let out = slowlab()
        .args(["analyze", "--json", "--no-symbols"])
        .arg(trace)
        .output()
        .unwrap();
    json(&out)["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .filter_map(|p| p["pid"].as_u64())
        .collect()
}

#[test]
fn repeat_records_every_run_with_the_backend_given_each_run_in_its_own_trace() {
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
        // Each run says its pid, then spins long enough to be sampled.
        let pids_file = dir.path().join(format!("{backend}.pids"));
        let script = format!(
            "echo $$ >> {}; i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done",
            pids_file.display()
        );
        let run = {
            let _one = one_recording_at_a_time();
            slowlab()
                .args(["diagnose", "--repeat", "2", "--backend", backend, "-o"])
                .arg(&out)
                .args(["--", "sh", "-c", &script])
                .output()
                .unwrap()
        };
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(run.status.success(), "{backend}: {stderr}");
        let pids: Vec<u64> = std::fs::read_to_string(&pids_file)
            .unwrap()
            .lines()
            .map(|l| l.parse().unwrap())
            .collect();
        assert_eq!(pids.len(), 2, "{backend}: {pids:?}");
        for (k, (own, other)) in [(1, (pids[0], pids[1])), (2, (pids[1], pids[0]))] {
            assert_eq!(magic(&out, k), expected, "{backend}, run {k}");
            // Its path is its own command's; its trace has its work and not the other's
            // (one recording serves both runs).
            let run_dir = out.join(format!("run-{k}"));
            let cp = read_json(&run_dir.join("critical_path.json"));
            assert_eq!(cp["root"]["pid"], own, "{backend}, run {k}: {cp:#}");
            let sampled = pids_sampled(&run_dir.join("trace.data"));
            assert!(
                sampled.contains(&own) && !sampled.contains(&other),
                "{backend}, run {k}: sampled {sampled:?}, runs {pids:?}"
            );
        }
        // The recording leaves nothing beside the runs.
        let left: Vec<_> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with("run-"))
            .collect();
        assert!(left.is_empty(), "{backend}: {left:?}");
    }
}

/// Whether a process whose command line mentions `text` is running.
fn running_with(text: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains(text))
    })
}

#[test]
fn ctrl_c_in_a_repeats_second_run_keeps_the_first_and_leaves_nothing_running() {
    require_perf!();
    require_bpf!();
    let dir = tempfile::tempdir().unwrap();
    for backend in ["perf", "bpf"] {
        let out = dir.path().join(backend);
        let pids_file = dir.path().join(format!("{backend}.pids"));
        let script = format!("echo $$ >> {}; sleep 3", pids_file.display());
        let _one = one_recording_at_a_time();
        let child = slowlab()
            .args(["diagnose", "--repeat", "3", "--backend", backend, "-o"])
            .arg(&out)
            .args(["--", "sh", "-c", &script])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The second run's command is running once it has said its pid.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let count_pids = || std::fs::read_to_string(&pids_file).map_or(0, |t| t.lines().count());
        while count_pids() < 2 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(count_pids(), 2, "{backend}: the second run did not start");
        std::thread::sleep(std::time::Duration::from_millis(300));
        // SAFETY: signalling the slowlab this test started.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let run = common::finish(child, std::time::Duration::from_secs(60));
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(130), "{backend}: {stderr}");
        assert!(
            stderr.contains("run 2 was interrupted"),
            "{backend}: {stderr}"
        );
        // The first run is whole; nothing of the second, nor a third, nor the recording.
        for file in [
            "trace.data",
            "findings.json",
            "critical_path.json",
            "report.html",
        ] {
            assert!(out.join("run-1").join(file).is_file(), "{backend}: {file}");
        }
        let mut left: Vec<_> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["run-1"], "{backend}: {stderr}");
        let second: i32 = std::fs::read_to_string(&pids_file)
            .unwrap()
            .lines()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            !std::path::Path::new(&format!("/proc/{second}")).exists(),
            "{backend}: the second run's command is still running"
        );
        assert!(
            !running_with(&out.to_string_lossy()),
            "{backend}: a process of the recording is still running"
        );
    }
}

#[test]
fn a_repeat_of_a_command_not_found_is_one_line_and_makes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rep");
    let run = slowlab()
        .args(["diagnose", "--repeat", "2", "-o"])
        .arg(&out)
        .args(["--", "no-such-command-slowlab"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("command not found: no-such-command-slowlab"),
        "{stderr}"
    );
    assert!(!out.exists(), "{} was made", out.display());
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
