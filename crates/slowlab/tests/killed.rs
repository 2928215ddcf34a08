//! The critical path of commands that were killed or cut short (issue 42):
//! how a wait ended must not change what the path says about the time
//! before it. Real recordings of the `why` fixtures (`producer`, `spin`):
//! - a pipeline killed by `timeout` half-way → the producer's CPU in
//!   `slow_digest`, "sh was killed by timeout (SIGTERM)";
//! - a parent killed while its child computes → the child's `crunch`;
//! - a child killed while its parent waits → the child's `crunch`;
//! - a recording stopped by SIGINT while the command computes → `analyze`'s
//!   default root finds the child's `crunch`;
//! - a cargo build of a small crate under a `timeout` that fires during
//!   compilation → rustc's CPU, "cargo was killed by timeout";
//! - a parent waiting for its child on a pidfd (poll, not wait4) → the
//!   child's `crunch`.
//!
//! Each path adds up to the wall time. Tests skip, with the reason, where
//! perf is missing.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

mod common;
use common::{one_recording_at_a_time, slowlab};

fn program(name: &str) -> PathBuf {
    common::why_program(name)
}

/// `slowlab diagnose -o DIR -- CMD`: its `critical_path.json`.
fn diagnose(dir: &Path, cmd: &[&str], env: &[(&str, &Path)]) -> serde_json::Value {
    let mut c = slowlab();
    c.args(["diagnose", "--json", "-o"])
        .arg(dir)
        .arg("--")
        .args(cmd);
    c.env_remove("CARGO_TARGET_DIR");
    for (k, v) in env {
        c.env(k, v);
    }
    // A killed command's status is diagnose's: only the files matter here.
    let out = c.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let file = std::fs::read(dir.join("critical_path.json"))
        .unwrap_or_else(|e| panic!("no critical_path.json ({e}): {stderr}"));
    serde_json::from_slice(&file).unwrap()
}

/// The segments cover the wall time, which is `expected_s` within 10%.
fn assert_adds_up(p: &serde_json::Value, expected_s: Option<f64>) {
    let wall = p["wall_s"].as_f64().unwrap();
    let covered: f64 = p["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["to_s"].as_f64().unwrap() - s["from_s"].as_f64().unwrap())
        .sum();
    assert!(
        (covered - wall).abs() < 1e-6 * wall.max(1.0),
        "{covered} vs {wall}"
    );
    if let Some(e) = expected_s {
        assert!((wall - e).abs() <= 0.1 * e, "wall {wall} s vs {e} s");
    }
}

/// The share of the path on a CPU in `comm`, and the largest CPU part.
/// Waits until a process runs `program` (its command line's first word), at most `limit`.
fn wait_for_program(program: &Path, limit: Duration) {
    let want = program.as_os_str().as_encoded_bytes();
    let started = std::time::Instant::now();
    while started.elapsed() < limit {
        let running = std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| c.split(|&b| b == 0).next() == Some(want))
        });
        if running {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{} did not start within {limit:?}", program.display());
}

fn cpu_in(p: &serde_json::Value, comm: &str) -> (f64, serde_json::Value) {
    let parts = p["parts"].as_array().unwrap();
    let share = parts
        .iter()
        .filter(|x| x["comm"] == comm && x["state"] == "cpu")
        .map(|x| x["share"].as_f64().unwrap())
        .sum();
    let top = parts.iter().find(|x| x["state"] == "cpu").unwrap().clone();
    (share, top)
}

#[test]
fn a_pipeline_killed_by_timeout_half_way_is_its_producers_work() {
    require_perf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let producer = program("producer");
    // About 2 s of work, killed after 1 s.
    let script = format!("{} 400 3000000 | sort > /dev/null", producer.display());
    let p = diagnose(dir.path(), &["timeout", "1", "sh", "-c", &script], &[]);
    let summary = p["summary"].as_str().unwrap();
    assert_adds_up(&p, Some(1.0));
    let (share, top) = cpu_in(&p, "producer");
    assert!(share > 0.6, "{summary}");
    assert_eq!(top["function"], "slow_digest", "{summary}");
    let k = &p["killed"];
    assert_eq!(k["by"]["comm"], "timeout", "{k}");
    assert_eq!(k["process"]["comm"], "sh", "{k}");
    assert_eq!(k["signal"], "SIGTERM", "{k}");
    assert!((k["at_s"].as_f64().unwrap() - 1.0).abs() < 0.1, "{k}");
    assert!(
        summary.contains("sh was killed by timeout (SIGTERM) after 1.0")
            // slow_digest first; alone, or with the interrupts (softirqs) the host's
            // noise puts on the producer's CPU, named with their shares.
            && summary.contains("on a CPU in producer (slow_digest"),
        "{summary}"
    );
}

#[test]
fn a_parent_killed_while_its_child_computes_is_the_childs_work() {
    require_perf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let spin = program("spin");
    // The shell waits for spin; a subshell kills the shell after 0.8 s
    // (spin goes on alone for a while).
    let script = format!(
        "S=$$; (sleep 0.8; kill $S) & {} 1.5; echo not reached",
        spin.display()
    );
    let p = diagnose(dir.path(), &["sh", "-c", &script], &[]);
    let summary = p["summary"].as_str().unwrap();
    // The kill comes after the subshell's 0.8 s sleep, later on a busy machine.
    assert_adds_up(&p, None);
    let wall = p["wall_s"].as_f64().unwrap();
    assert!(wall > 0.7 && wall < 1.5, "{summary}");
    let (share, top) = cpu_in(&p, "spin");
    assert!(share > 0.7, "{summary}");
    assert_eq!(top["function"], "crunch", "{summary}");
    let k = &p["killed"];
    assert_eq!(k["process"]["pid"], p["root"]["pid"], "{k}");
    assert_eq!(k["by"]["comm"], "sh", "{k}");
    assert_eq!(k["signal"], "SIGTERM", "{k}");
    assert!(
        summary.contains(", killed by sh (SIGTERM) after 0."),
        "{summary}"
    );
}

#[test]
fn a_child_killed_while_its_parent_waits_is_the_childs_work() {
    require_perf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let spin = program("spin");
    let pidfile = dir.path().join("spin.pid");
    let script = format!(
        "{} 3 & echo $! > {}; wait; echo done",
        spin.display(),
        pidfile.display()
    );
    // This test kills spin after 0.8 s, from outside the command.
    let killer = {
        let pidfile = pidfile.clone();
        std::thread::spawn(move || {
            let start = std::time::Instant::now();
            while start.elapsed() < Duration::from_secs(20) {
                if let Some(pid) = std::fs::read_to_string(&pidfile)
                    .ok()
                    .and_then(|s| s.trim().parse::<i32>().ok())
                {
                    std::thread::sleep(Duration::from_millis(800));
                    // SAFETY: signalling the spin this test started.
                    unsafe { libc::kill(pid, libc::SIGTERM) };
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let p = diagnose(&dir.path().join("d"), &["sh", "-c", &script], &[]);
    killer.join().unwrap();
    let summary = p["summary"].as_str().unwrap();
    assert_adds_up(&p, None);
    let wall = p["wall_s"].as_f64().unwrap();
    assert!(wall > 0.7 && wall < 1.5, "{summary}");
    let (share, top) = cpu_in(&p, "spin");
    assert!(share > 0.7, "{summary}");
    assert_eq!(top["function"], "crunch", "{summary}");
    let k = &p["killed"];
    assert_eq!(k["process"]["comm"], "spin", "{k}");
    assert_eq!(k["signal"], "SIGTERM", "{k}");
    assert!(summary.contains("spin was killed by "), "{summary}");
}

#[test]
fn a_recording_stopped_by_sigint_while_the_command_computes() {
    require_perf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let spin = program("spin");
    let trace = dir.path().join("trace.data");
    // `; true` keeps sh from exec'ing spin: sh waits for its child.
    let script = format!("{} 6; true", spin.display());
    let child = slowlab()
        .args(["record", "-o"])
        .arg(&trace)
        .args(["--", "sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Two seconds of spin's own, however long the recorder took to start.
    wait_for_program(&spin, Duration::from_secs(60));
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: signalling the slowlab this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    // (slowlab stops perf and its command's group with SIGINT.)
    let out = common::finish(child, Duration::from_secs(120));
    assert!(trace.exists(), "no trace; status {:?}", out.status);
    let a = slowlab()
        .arg("analyze")
        .arg(&trace)
        .args(["--critical-path", "--json"])
        .output()
        .unwrap();
    let p = common::json(&a);
    let summary = p["summary"].as_str().unwrap();
    assert_eq!(p["root"]["comm"], "sh", "{summary}");
    assert_adds_up(&p, None);
    assert!(p["wall_s"].as_f64().unwrap() > 1.5, "{summary}");
    let (share, top) = cpu_in(&p, "spin");
    assert!(share > 0.7, "{summary}");
    assert_eq!(top["function"], "crunch", "{summary}");
}

#[test]
fn a_cargo_build_killed_by_timeout_during_compilation_is_rustcs_work() {
    require_perf!();
    if Command::new("cargo").arg("--version").output().is_err() {
        slowlab_testkit::skip("cargo is not installed");
        return;
    }
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let krate = dir.path().join("tiny");
    std::fs::create_dir_all(krate.join("src")).unwrap();
    std::fs::write(
        krate.join("Cargo.toml"),
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    // Enough functions to keep rustc busy well past the time-out.
    let mut src = String::from("fn main() {\n    let mut s = 0u64;\n");
    for i in 0..1500 {
        src.push_str(&format!("    s = s.wrapping_add(f{i}(s));\n"));
    }
    src.push_str("    println!(\"{s}\");\n}\n");
    for i in 0..1500 {
        src.push_str(&format!(
            "#[inline(never)]\nfn f{i}(x: u64) -> u64 {{\n    let v: Vec<u64> = (0..{}).map(|k| k * x + {i}).collect();\n    v.iter().sum::<u64>() ^ {i}\n}}\n",
            i % 7 + 3
        ));
    }
    std::fs::write(krate.join("src/main.rs"), src).unwrap();
    let manifest = krate.join("Cargo.toml");
    let target = dir.path().join("target");
    let p = diagnose(
        &dir.path().join("d"),
        &[
            "timeout",
            "3",
            "cargo",
            "build",
            "--offline",
            "--quiet",
            "--manifest-path",
            manifest.to_str().unwrap(),
        ],
        &[("CARGO_TARGET_DIR", &target)],
    );
    let summary = p["summary"].as_str().unwrap();
    assert_adds_up(&p, Some(3.0));
    let k = &p["killed"];
    assert_eq!(k["by"]["comm"], "timeout", "{k}");
    assert_eq!(k["process"]["comm"], "cargo", "{k}");
    let (share, top) = cpu_in(&p, "rustc");
    assert!(share > 0.5, "{summary}");
    assert_eq!(top["comm"], "rustc", "{summary}");
    assert!(summary.contains("cargo was killed by timeout"), "{summary}");
    // Issue 37: cargo's and rustc's threads wait on condition variables,
    // channels and the jobserver, not on a lock they queue for.
    let findings: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("d").join("findings.json")).unwrap())
            .unwrap();
    let ids: Vec<&str> = findings
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["id"].as_str())
        .collect();
    assert!(!ids.contains(&"lock-contention"), "{findings}");
}

#[test]
fn a_parent_waiting_on_a_pidfd_is_its_childs_work() {
    require_perf!();
    let _one = one_recording_at_a_time();
    if Command::new("python3").arg("-V").output().is_err() {
        slowlab_testkit::skip(format_args!("the pidfd waiter: python3 is not on PATH"));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let spin = program("spin");
    // The parent waits for its child in poll on a pidfd (not wait4): the
    // path still finds the child's work.
    let code = "import os, select, subprocess, sys\n\
                p = subprocess.Popen([sys.argv[1], '0.8'])\n\
                fd = os.pidfd_open(p.pid)\n\
                select.select([fd], [], [])\n\
                p.wait()\n";
    let p = diagnose(
        dir.path(),
        &["python3", "-c", code, spin.to_str().unwrap()],
        &[],
    );
    let summary = p["summary"].as_str().unwrap();
    assert_adds_up(&p, None);
    let (share, top) = cpu_in(&p, "spin");
    assert!(share > 0.6, "{summary}");
    assert_eq!(top["function"], "crunch", "{summary}");
    assert!(p["killed"].is_null(), "nobody was killed: {summary}");
}
