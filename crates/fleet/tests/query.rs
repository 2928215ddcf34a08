//! The DuckDB layer on synthetic fleets: a 20-host fleet with a culprit
//! planted on some hosts (top-findings names exactly those), a release
//! that makes one function hotter (regressions puts it first), runs that
//! are not whole stay invisible, and errors in one line.
#![cfg(feature = "duckdb")]

mod synth;

use std::path::Path;

use slowlab_analyze::states::ThreadStates;
use slowlab_fleet::query::Fleet;
use slowlab_fleet::{named, Partition, RunExport};

fn export(
    root: &Path,
    host: &str,
    run: &str,
    stacks: &[(&[&str], usize)],
    findings: &[slowlab_model::findings::Finding],
) {
    let trace = synth::trace(host, stacks);
    let mut e = RunExport::new(1_795_465_541_000_000);
    e.add_trace("trace.data", &trace, &ThreadStates::build(&trace), findings)
        .unwrap();
    e.write(root, &Partition::new(host, run).unwrap()).unwrap();
}

fn rows(fleet: &Fleet, sql: &str) -> Vec<serde_json::Map<String, serde_json::Value>> {
    fleet.query(sql).unwrap().json_rows().unwrap()
}

#[test]
fn top_findings_names_exactly_the_hosts_with_the_planted_culprit() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let culprits: Vec<usize> = vec![2, 5, 11, 17];
    for h in 0..20 {
        let host = format!("host{h:02}");
        let mut findings = vec![synth::finding("cpu-starvation", "app", 0.1)];
        if culprits.contains(&h) {
            findings.push(synth::finding("memcg-thrash", "java", 3.0 + h as f64));
        }
        export(root, &host, "r1", &[(&["main", "work"], 10 + h)], &findings);
    }
    let fleet = Fleet::open(root).unwrap();
    let top = rows(&fleet, named::TOP_FINDINGS);
    assert_eq!(top[0]["id"], "memcg-thrash", "{top:?}");
    assert_eq!(top[0]["hosts"], 4);
    assert_eq!(top[0]["host_list"], "host02,host05,host11,host17");
    assert_eq!(top[0]["severity"], "high");
    let want_cost: f64 = culprits.iter().map(|&h| 3.0 + h as f64).sum();
    assert!((top[0]["total_cost_s"].as_f64().unwrap() - want_cost).abs() < 1e-9);
    assert_eq!(top[1]["id"], "cpu-starvation");
    assert_eq!(top[1]["hosts"], 20);
    // The same question in plain SQL.
    let hosts = rows(
        &fleet,
        "SELECT host FROM findings WHERE culprit_comm = 'java' ORDER BY host",
    );
    let hosts: Vec<&str> = hosts.iter().map(|r| r["host"].as_str().unwrap()).collect();
    assert_eq!(hosts, ["host02", "host05", "host11", "host17"]);
    // Per-host CPU samples: 10 + h each, joined across hosts by stack.
    let per_host = rows(
        &fleet,
        "SELECT host, SUM(weight) AS w FROM samples WHERE kind = 'cpu' GROUP BY host ORDER BY host",
    );
    assert_eq!(per_host.len(), 20);
    for (h, r) in per_host.iter().enumerate() {
        assert_eq!(r["w"], 10 + h as i64, "{r:?}");
    }
    let stacks = rows(&fleet, "SELECT COUNT(DISTINCT stack_id) AS n, COUNT(DISTINCT host) AS hosts FROM samples WHERE kind = 'cpu'");
    assert_eq!(stacks[0]["n"], 1, "one stack on every host");
    assert_eq!(stacks[0]["hosts"], 20);
}

#[test]
fn regressions_put_the_function_that_grew_first() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for host in ["web1", "web2"] {
        export(
            root,
            host,
            "v1",
            &[(&["main", "parse"], 50), (&["main", "render"], 50)],
            &[],
        );
        export(
            root,
            host,
            "v2",
            &[(&["main", "parse"], 20), (&["main", "render"], 80)],
            &[],
        );
    }
    let fleet = Fleet::open(root).unwrap();
    let r = rows(&fleet, &named::regressions("v1", "v2"));
    assert_eq!(r[0]["function"], "render", "{r:?}");
    assert_eq!(r[0]["before_pct"].as_f64(), Some(50.0));
    assert_eq!(r[0]["after_pct"].as_f64(), Some(80.0));
    assert_eq!(r[0]["change_pct"].as_f64(), Some(30.0));
    let last = r.last().unwrap();
    assert_eq!(last["function"], "parse");
    assert_eq!(last["change_pct"].as_f64(), Some(-30.0));
}

#[test]
fn partitions_without_a_runs_row_are_not_shown() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    export(root, "a", "r1", &[(&["main"], 7)], &[]);
    export(root, "b", "r1", &[(&["main"], 9)], &[]);
    // As if b's export had been killed before its runs partition moved.
    std::fs::remove_dir_all(root.join("runs/host=b")).unwrap();
    let fleet = Fleet::open(root).unwrap();
    let r = rows(
        &fleet,
        "SELECT host, SUM(weight) AS w FROM samples WHERE kind = 'cpu' GROUP BY host",
    );
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(r[0]["host"], "a");
    assert_eq!(r[0]["w"], 7);
}

#[test]
fn errors_are_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let err = Fleet::open(&missing).err().unwrap().to_string();
    assert!(err.contains("not a directory"), "{err}");
    let err = Fleet::open(dir.path()).err().unwrap().to_string();
    assert!(
        err.contains("no slowlab export") && err.contains("slowlab export"),
        "{err}"
    );
    export(dir.path(), "a", "r1", &[(&["main"], 1)], &[]);
    let fleet = Fleet::open(dir.path()).unwrap();
    for bad in [
        "SELEC 1",
        "SELECT nope FROM samples",
        "SELECT * FROM no_table",
    ] {
        let err = fleet.query(bad).unwrap_err().to_string();
        assert!(!err.contains('\n'), "{err}");
        assert!(err.starts_with("query failed: "), "{err}");
    }
    let answer = fleet.query("SELECT 1 AS one WHERE false").unwrap();
    assert!(answer.table_text().unwrap().contains("(no rows)"));
    assert!(answer.json_rows().unwrap().is_empty());
    let text = fleet
        .query("SELECT host, run FROM runs")
        .unwrap()
        .table_text()
        .unwrap();
    assert!(text.contains("| a ") && text.contains("r1"), "{text}");
}
