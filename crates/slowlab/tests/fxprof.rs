//! The Firefox Profiler export (`analyze --fxprof`) on the committed
//! scheduler fixture (no perf or root needed): the file is a processed
//! profile the profiler can load (its meta, threads, samples, markers and
//! the shared string table), its sample counts equal `analyze --json`'s per
//! thread and in all, the filters apply, and blocked time and findings are
//! markers.

use std::io::Read;
use std::path::{Path, PathBuf};

mod common;
use common::{json, slowlab};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../perf/tests/fixtures")
        .join(name)
}

/// Runs `analyze FIXTURE --fxprof DIR/NAME ARGS…` and returns the parsed
/// profile.
fn export(fixture_name: &str, dir: &Path, name: &str, args: &[&str]) -> serde_json::Value {
    let out_file = dir.join(name);
    let out = slowlab()
        .arg("analyze")
        .arg(fixture(fixture_name))
        .arg("--fxprof")
        .arg(&out_file)
        .args(args)
        .output()
        .unwrap();
    slowlab_testkit::assert_succeeded(&out);
    let bytes = std::fs::read(&out_file).unwrap();
    let text = if name.ends_with(".gz") {
        assert_eq!(&bytes[..2], &[0x1f, 0x8b], "a .gz name gets gzip");
        let mut s = String::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_string(&mut s)
            .unwrap();
        s
    } else {
        String::from_utf8(bytes).unwrap()
    };
    serde_json::from_str(&text).expect("the profile is JSON")
}

/// Samples per thread of a profile: (tid, samples), with weights.
fn samples_per_thread(profile: &serde_json::Value) -> Vec<(i64, u64)> {
    let mut out = Vec::new();
    for t in profile["threads"].as_array().unwrap() {
        let s = &t["samples"];
        let len = s["length"].as_u64().unwrap();
        let n = match s["weight"].as_array() {
            Some(w) => w.iter().map(|x| x.as_u64().unwrap()).sum(),
            None => len,
        };
        let tid = t["tid"]
            .as_i64()
            .or_else(|| t["tid"].as_str().and_then(|s| s.parse().ok()))
            .unwrap();
        out.push((tid, n));
    }
    out.sort_unstable();
    out
}

/// Samples per thread from `analyze --json --by thread`.
fn analyze_samples_per_thread(fixture_name: &str, args: &[&str]) -> (u64, Vec<(i64, u64)>) {
    let out = slowlab()
        .arg("analyze")
        .arg(fixture(fixture_name))
        .args(["--json", "--by", "thread"])
        .args(args)
        .output()
        .unwrap();
    let v = json(&out);
    let mut rows = Vec::new();
    for r in v["rows"].as_array().unwrap() {
        rows.push((r["tid"].as_i64().unwrap(), r["samples"].as_u64().unwrap()));
    }
    rows.sort_unstable();
    (v["samples"].as_u64().unwrap(), rows)
}

#[test]
fn the_profile_is_a_processed_profile_with_the_traces_samples() {
    let dir = tempfile::tempdir().unwrap();
    let p = export(
        "hot-fp.perfdata",
        dir.path(),
        "hot.json.gz",
        &["--no-symbols"],
    );
    let meta = &p["meta"];
    assert!(meta["version"].as_u64().unwrap() >= 24, "{meta}");
    assert_eq!(meta["product"], "slowlab");
    assert!(meta["interval"].as_f64().unwrap() > 0.0);
    assert_eq!(meta["symbolicated"], true, "no symbol server is asked");
    let categories: Vec<&str> = meta["categories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for c in ["User", "Kernel", "Blocked"] {
        assert!(categories.contains(&c), "{categories:?}");
    }

    // The same samples as analyze counts, thread by thread.
    let (total, per_thread) = analyze_samples_per_thread("hot-fp.perfdata", &["--no-symbols"]);
    let exported = samples_per_thread(&p);
    let exported_with_samples: Vec<(i64, u64)> =
        exported.iter().copied().filter(|&(_, n)| n > 0).collect();
    assert_eq!(exported_with_samples, per_thread);
    assert_eq!(exported.iter().map(|&(_, n)| n).sum::<u64>(), total);
    assert!(total >= 30, "the fixture has 37 samples, not {total}");

    // Every sample's stack points into its thread's stack table, and each
    // stack's frame into the frame table.
    for t in p["threads"].as_array().unwrap() {
        let stacks = t["stackTable"]["length"].as_u64().unwrap();
        let frames = t["frameTable"]["length"].as_u64().unwrap();
        for s in t["samples"]["stack"].as_array().unwrap() {
            if let Some(s) = s.as_u64() {
                assert!(s < stacks);
            }
        }
        for f in t["stackTable"]["frame"].as_array().unwrap() {
            assert!(f.as_u64().unwrap() < frames);
        }
    }
}

#[test]
fn blocked_time_becomes_markers_with_the_waker() {
    let dir = tempfile::tempdir().unwrap();
    let p = export("sched.perfdata", dir.path(), "sched.json", &[]);
    let schemas: Vec<&str> = p["meta"]["markerSchema"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert!(schemas.contains(&"SlowlabBlocked"), "{schemas:?}");
    let blocked: usize = p["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let data = t["markers"]["data"].as_array().unwrap();
            data.iter()
                .filter(|d| d["type"] == "SlowlabBlocked")
                .count()
        })
        .sum();
    assert!(
        blocked > 0,
        "no blocked markers in a trace with sched_switch"
    );
}

#[test]
fn the_profile_holds_symbolized_names() {
    let dir = tempfile::tempdir().unwrap();
    let p = export("sched.perfdata", dir.path(), "sched.json", &[]);
    let out = slowlab()
        .arg("analyze")
        .arg(fixture("sched.perfdata"))
        .arg("--json")
        .output()
        .unwrap();
    let v = json(&out);
    let named: Vec<&str> = v["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .filter(|n| *n != "[unknown]")
        .take(5)
        .collect();
    assert!(!named.is_empty(), "the fixture has named functions");
    let strings: Vec<&str> = p["threads"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["stringArray"].as_array().unwrap())
        .map(|s| s.as_str().unwrap())
        .collect();
    for n in named {
        assert!(
            strings.contains(&n),
            "{n} missing from the profile's strings"
        );
    }
}

#[test]
fn filters_select_the_threads_and_samples() {
    let dir = tempfile::tempdir().unwrap();
    // sched.perfdata: `sh -c 'cat …; sleep 0.05 | cat'`, several processes.
    let sched = "sched.perfdata";
    let all = export(sched, dir.path(), "all.json", &["--no-symbols"]);
    let pid_of = |t: &serde_json::Value| t["pid"].to_string().trim_matches('"').to_owned();
    let sleep = all["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "sleep")
        .map(pid_of)
        .expect("a sleep thread");
    let filter = format!("pid={sleep}");
    let some = export(
        sched,
        dir.path(),
        "pid.json",
        &["--no-symbols", "--filter", &filter],
    );
    let (total, per_thread) =
        analyze_samples_per_thread(sched, &["--no-symbols", "--filter", &filter]);
    let exported = samples_per_thread(&some);
    assert_eq!(exported.iter().map(|&(_, n)| n).sum::<u64>(), total);
    assert!(per_thread
        .iter()
        .all(|&(tid, _)| exported.iter().any(|&(t, _)| t == tid)));
    let threads = some["threads"].as_array().unwrap();
    assert!(!threads.is_empty());
    for t in threads {
        assert_eq!(pid_of(t), sleep, "only the filtered process's threads");
    }
    assert!(
        all["threads"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| pid_of(t) != sleep),
        "unfiltered, the other processes are there"
    );
    // A time range past the trace's end keeps no samples.
    let none = export(
        sched,
        dir.path(),
        "late.json",
        &["--no-symbols", "--from", "100"],
    );
    assert_eq!(
        samples_per_thread(&none)
            .iter()
            .map(|&(_, n)| n)
            .sum::<u64>(),
        0
    );
}
