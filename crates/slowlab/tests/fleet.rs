//! `slowlab export` and `slowlab fleet` end to end: two pretend hosts
//! exported from the committed perf.data fixtures (per-host CPU totals
//! equal `analyze --json`'s, stacks join across hosts, a bad trace is a
//! one-line error that leaves no run), a diagnosed recording whose
//! findings land in `findings`, a 20-host fleet with a culprit planted on
//! some hosts that `fleet top-findings` names exactly, and PySpark reading
//! the same directory with the same answers as DuckDB.
#![cfg(feature = "duckdb")]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{json, one_recording_at_a_time, slowlab};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../perf/tests/fixtures")
        .join(name)
}

fn export(dir: &Path, host: &str, run: &str, traces: &[&Path], symbols: bool) {
    let mut cmd = slowlab();
    cmd.arg("export").args(traces).arg("--parquet").arg(dir);
    cmd.args(["--host", host, "--run", run]);
    if !symbols {
        cmd.arg("--no-symbols");
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "export failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn query(dir: &Path, sql: &str) -> Vec<serde_json::Value> {
    let out = slowlab()
        .args(["fleet", "query"])
        .arg(dir)
        .arg(sql)
        .arg("--json")
        .output()
        .unwrap();
    json(&out).as_array().unwrap().clone()
}

/// One line on stderr, exit status 2.
fn assert_one_line_error(out: &Output, contains: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains(contains), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

fn analyze_samples(trace: &Path) -> i64 {
    let out = slowlab()
        .arg("analyze")
        .arg(trace)
        .args(["--json", "--no-symbols"])
        .output()
        .unwrap();
    json(&out)["samples"].as_i64().unwrap()
}

#[test]
fn two_hosts_match_analyze_and_share_stacks() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("fleet");
    let (hot, sched) = (fixture("hot-fp.perfdata"), fixture("sched.perfdata"));
    export(&root, "alpha", "r1", &[&hot], false);
    export(&root, "beta", "r1", &[&hot, &sched], false);
    let totals = query(
        &root,
        "SELECT host, SUM(weight) AS w FROM samples WHERE kind = 'cpu' GROUP BY host ORDER BY host",
    );
    let (hot_n, sched_n) = (analyze_samples(&hot), analyze_samples(&sched));
    assert!(hot_n > 0 && sched_n > 0);
    assert_eq!(totals[0]["host"], "alpha");
    assert_eq!(totals[0]["w"], hot_n);
    assert_eq!(totals[1]["host"], "beta");
    assert_eq!(totals[1]["w"], hot_n + sched_n);
    let runs = query(
        &root,
        "SELECT host, trace, cpu_samples FROM runs ORDER BY host, trace",
    );
    assert_eq!(runs.len(), 3, "{runs:?}");

    // Every stack alpha sampled is one beta sampled too (same content id),
    // and every sampled stack resolves to frames.
    let shared = query(
        &root,
        "SELECT (SELECT COUNT(DISTINCT stack_id) FROM samples WHERE host = 'alpha') AS alpha,
                COUNT(*) AS shared
         FROM (SELECT DISTINCT stack_id FROM samples WHERE host = 'alpha') a
         JOIN (SELECT DISTINCT stack_id FROM samples WHERE host = 'beta') b ON a.stack_id = b.stack_id",
    );
    assert!(shared[0]["alpha"].as_i64().unwrap() > 0, "{shared:?}");
    assert_eq!(shared[0]["alpha"], shared[0]["shared"]);
    let unresolved = query(
        &root,
        "SELECT COUNT(*) AS n FROM samples s
         LEFT JOIN (SELECT DISTINCT k.stack_id FROM stacks k JOIN frames f ON k.frame_id = f.frame_id) r
           ON s.stack_id = r.stack_id
         WHERE s.stack_id IS NOT NULL AND r.stack_id IS NULL",
    );
    assert_eq!(unresolved[0]["n"], 0);

    // A bad trace: one line, and no run of it appears.
    let not_a_trace = dir.path().join("notes.txt");
    std::fs::write(&not_a_trace, b"not a trace").unwrap();
    let out = slowlab()
        .arg("export")
        .arg(&hot)
        .arg(&not_a_trace)
        .arg("--parquet")
        .arg(&root)
        .args(["--host", "gamma", "--run", "r1", "--no-symbols"])
        .output()
        .unwrap();
    assert_one_line_error(&out, "notes.txt");
    assert_eq!(
        query(&root, "SELECT * FROM runs WHERE host = 'gamma'").len(),
        0
    );
    assert!(!root.join("samples/host=gamma").exists());
    // The same run twice: refused.
    let out = slowlab()
        .arg("export")
        .arg(&hot)
        .arg("--parquet")
        .arg(&root)
        .args(["--host", "alpha", "--run", "r1", "--no-symbols"])
        .output()
        .unwrap();
    assert_one_line_error(&out, "already");
}

#[test]
fn fleet_errors_are_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| slowlab().arg("fleet").args(args).output().unwrap();
    let missing = dir.path().join("nope");
    assert_one_line_error(
        &run(&["query", missing.to_str().unwrap(), "SELECT 1"]),
        "not a directory",
    );
    let empty = dir.path().to_str().unwrap();
    assert_one_line_error(&run(&["top-findings", empty]), "no slowlab export");
    let root = dir.path().join("fleet");
    export(&root, "alpha", "r1", &[&fixture("hot-fp.perfdata")], false);
    let root = root.to_str().unwrap();
    assert_one_line_error(&run(&["query", root, "SELEC 1"]), "syntax error");
    assert_one_line_error(&run(&["query", root, "SELECT x FROM nowhere"]), "nowhere");
    let out = run(&["query", root, "SELECT host, run FROM runs"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("alpha") && text.contains("r1"), "{text}");
}

#[test]
fn only_the_query_binary_loads_duckdb_and_fleet_says_when_it_is_missing() {
    // `slowlab` itself does not link libduckdb.so (11 ms and 9 MB for
    // every command); `slowlab-fleet-query` beside it does.
    let needed = |bin: &str| {
        let out = Command::new("ldd").arg(bin).output().unwrap();
        String::from_utf8_lossy(&out.stdout).contains("libduckdb")
    };
    assert!(!needed(env!("CARGO_BIN_EXE_slowlab")));
    assert!(needed(env!("CARGO_BIN_EXE_slowlab-fleet-query")));
    // A `slowlab` copied alone says what is missing, in one line.
    let dir = tempfile::tempdir().unwrap();
    let alone = dir.path().join("slowlab");
    std::fs::copy(env!("CARGO_BIN_EXE_slowlab"), &alone).unwrap();
    let out = Command::new(&alone)
        .args(["fleet", "query"])
        .arg(dir.path())
        .arg("SELECT 1")
        .output()
        .unwrap();
    assert_one_line_error(&out, "slowlab-fleet-query is missing");
}

/// Records `mutex_sleep` with `diagnose --parquet`, checks its findings
/// are in the export, and returns the trace (lock contention in it).
fn diagnosed_culprit(dir: &Path) -> PathBuf {
    // glibc has the pthread functions in libc: no -pthread needed.
    let prog = common::compile_workload("why/mutex_sleep.c", dir, "mutex_sleep");
    let out_dir = dir.join("diagnose");
    let parquet = dir.join("diagnosed");
    let out = {
        let _one = one_recording_at_a_time();
        slowlab()
            .args(["diagnose", "--json", "-o"])
            .arg(&out_dir)
            .arg("--parquet")
            .arg(&parquet)
            .args(["--", prog.to_str().unwrap(), "3", "4"])
            .output()
            .unwrap()
    };
    let findings = json(&out);
    let mut want: Vec<&str> = findings
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    want.sort();
    assert!(want.contains(&"lock-contention"), "{want:?}");
    let got = query(
        &parquet,
        "SELECT id, culprit_comm FROM findings ORDER BY id",
    );
    let got_ids: Vec<&str> = got.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(got_ids, want);
    let lock = got.iter().find(|r| r["id"] == "lock-contention").unwrap();
    assert_eq!(lock["culprit_comm"], "mutex_sleep");
    out_dir.join("trace.data")
}

/// 20 hosts: the culprit trace on `culprits`, the clean fixture elsewhere.
fn twenty_hosts(root: &Path, culprit_trace: &Path, culprits: &[usize]) -> String {
    let clean = fixture("hot-fp.perfdata");
    for h in 0..20 {
        let host = format!("host{h:02}");
        if culprits.contains(&h) {
            export(root, &host, "r1", &[culprit_trace], true);
        } else {
            export(root, &host, "r1", &[&clean], false);
        }
    }
    culprits
        .iter()
        .map(|h| format!("host{h:02}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[test]
fn a_diagnosed_culprit_planted_on_some_hosts_is_found_on_exactly_those() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let trace = diagnosed_culprit(dir.path());
    let root = dir.path().join("fleet");
    let want = twenty_hosts(&root, &trace, &[3, 7, 12, 19]);
    let out = slowlab()
        .args(["fleet", "top-findings"])
        .arg(&root)
        .arg("--json")
        .output()
        .unwrap();
    let top = json(&out);
    let rows = top.as_array().unwrap();
    assert!(rows.iter().any(|r| r["id"] == "lock-contention"), "{top}");
    for r in rows {
        // The clean fixture has no findings: every finding is the culprit's.
        assert_eq!(r["host_list"], want.as_str(), "{r}");
        assert_eq!(r["hosts"], 4, "{r}");
    }
    let hosts = query(
        &root,
        "SELECT DISTINCT host FROM findings WHERE culprit_comm = 'mutex_sleep' ORDER BY host",
    );
    let hosts: Vec<&str> = hosts.iter().map(|r| r["host"].as_str().unwrap()).collect();
    assert_eq!(hosts.join(","), want);
    let text = slowlab()
        .args(["fleet", "top-findings"])
        .arg(&root)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&text.stdout).contains("lock-contention"));
}

/// Why PySpark cannot run here, if it cannot.
fn spark_unavailable() -> Option<String> {
    let java = Command::new("java").arg("-version").output();
    if !java.is_ok_and(|o| o.status.success()) {
        return Some("java is not installed (PySpark needs a JVM)".into());
    }
    let py = Command::new("python3")
        .args(["-c", "import pyspark"])
        .output();
    match py {
        Ok(o) if o.status.success() => None,
        Ok(_) => Some("the Python package pyspark is not installed (pip install pyspark)".into()),
        Err(_) => Some("python3 is not installed".into()),
    }
}

#[test]
fn pyspark_reads_the_same_answers_as_duckdb() {
    require_perf!();
    if let Some(why) = spark_unavailable() {
        slowlab_testkit::skip(format_args!("{why}"));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = diagnosed_culprit(dir.path());
    let root = dir.path().join("fleet");
    twenty_hosts(&root, &trace, &[1, 4, 9]);
    // A release on one host: run v1 the clean fixture, v2 the culprit.
    export(&root, "rel", "v1", &[&fixture("hot-fp.perfdata")], true);
    export(&root, "rel", "v2", &[&trace], true);
    let duck = |args: &[&str], file: &str| -> PathBuf {
        let out = slowlab()
            .arg("fleet")
            .args(args)
            .arg("--json")
            .output()
            .unwrap();
        let rows = json(&out);
        assert!(
            !rows.as_array().unwrap().is_empty(),
            "{args:?} gave no rows"
        );
        let path = dir.path().join(file);
        std::fs::write(&path, rows.to_string()).unwrap();
        path
    };
    let r = root.to_str().unwrap();
    let totals = duck(
        &["query", r, "SELECT host, SUM(weight) AS w FROM samples WHERE kind = 'cpu' GROUP BY host ORDER BY host"],
        "totals.json",
    );
    let top = duck(&["top-findings", r], "top.json");
    let regr = duck(
        &["regressions", r, "--before", "v1", "--after", "v2"],
        "regr.json",
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fleet/spark_check.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(&root)
        .args(["v1", "v2"])
        .args([&totals, &top, &regr])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "Spark and DuckDB differ:\n{stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for name in ["per-host CPU samples", "top-findings", "regressions"] {
        assert!(stdout.contains(&format!("{name}: same")), "{stdout}");
    }
}
