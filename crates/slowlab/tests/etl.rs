//! `slowlab analyze` on Windows ETW traces (the fixtures of `crates/etl`):
//! the CPU view lists the trace's processes with their samples, `--events`
//! counts events under TraceEvent's names, and a damaged file gives a
//! one-line error or a warning, never a panic.

mod common;

use std::path::PathBuf;

use common::{json, slowlab};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../etl/tests/fixtures")
        .join(name)
}

#[test]
fn the_cpu_view_of_an_etl_zip_lists_its_processes_with_samples() {
    let out = slowlab()
        .args(["analyze", "--json", "--top", "100"])
        .arg(fixture("perfview-net.4.5.2.x64.etl.zip"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    // TraceEvent's baseline counts 6320 non-idle samples in this trace.
    assert_eq!(v["samples"], 6320);
    let procs = v["processes"].as_array().unwrap();
    let samples_of = |comm: &str, pid: i64| {
        procs
            .iter()
            .find(|p| p["comm"] == comm && p["pid"] == pid)
            .map(|p| p["samples"].as_u64().unwrap())
    };
    // The traced program (started during the trace) dominates; PerfView
    // itself and the system's processes follow.
    let test = samples_of("Test.x64.exe", 3676).expect("Test.x64.exe is listed");
    assert!(test > 5000, "{test}");
    assert!(samples_of("PerfView.exe", 3988).is_some_and(|n| n > 100));
    assert!(samples_of("System", 4).is_some_and(|n| n > 0));
    let total: u64 = procs.iter().map(|p| p["samples"].as_u64().unwrap()).sum();
    assert_eq!(total, 6320);
    // Stacks are resolved to modules (no PDBs: module+offset).
    let functions = v["functions"].as_array().unwrap();
    assert!(functions
        .iter()
        .any(|f| f["name"].as_str().unwrap().starts_with("ntoskrnl.exe+0x")));
}

#[test]
fn events_counts_use_traceevents_names() {
    let out = slowlab()
        .args(["analyze", "--events", "--json"])
        .arg(fixture("perfview-net.4.5.2.x64.etl.zip"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    let events = &v["events"];
    assert_eq!(events["Windows Kernel/Process/DCStart"], 32);
    assert_eq!(events["Windows Kernel/Image/Load"], 35);
    assert_eq!(events["Windows Kernel/Memory/HardFault"], 153);
    // Every event of the file, idle samples included (TraceEvent drops those).
    assert_eq!(events["Windows Kernel/PerfInfo/Sample"], 79528);
}

#[test]
fn the_other_fixtures_read_without_error() {
    for name in [
        "perfview-gcevents.etl.zip",
        "perfview-primitive-types.etl.zip",
        "perfview-SelfDescribingSingleEvent.etl",
        "etlparser-lxcore_kernel.etl",
        "etlparser-AMSITrace.etl",
    ] {
        let out = slowlab()
            .args(["analyze", "--events", "--json"])
            .arg(fixture(name))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v = json(&out);
        assert!(
            v["events"].as_object().is_some_and(|m| !m.is_empty()),
            "{name}"
        );
    }
}

#[test]
fn a_truncated_etl_warns_and_a_non_etl_gives_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let whole = std::fs::read(fixture("etlparser-AMSITrace.etl")).unwrap();
    let cut = dir.path().join("cut.etl");
    std::fs::write(&cut, &whole[..whole.len() / 2 + 1000]).unwrap();
    let out = slowlab().arg("analyze").arg(&cut).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("warning: the last buffer is cut short"),
        "{stderr}"
    );

    let junk = dir.path().join("junk.etl");
    std::fs::write(
        &junk,
        b"this is not a trace at all, just some text.........................................",
    )
    .unwrap();
    let out = slowlab().arg("analyze").arg(&junk).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("not an ETL trace"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
