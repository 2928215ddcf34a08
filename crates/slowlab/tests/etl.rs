//! `slowlab analyze` on Windows ETW traces (the fixtures of `crates/etl`):
//! the CPU view lists the trace's processes with their samples, `--events`
//! counts events under TraceEvent's names, hard faults have their rate and
//! stacks, and a damaged file gives a one-line error or a warning, never a panic.

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
        .args(["analyze", "--json", "--top", "1000"])
        .arg(fixture("perfview-net.4.5.2.x64.etl.zip"))
        .output()
        .unwrap();
    slowlab_testkit::assert_succeeded(&out);
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
    // Addresses are resolved to modules (no PDBs: module+offset), the
    // kernel's among them. (Functions tied in samples are ordered by name,
    // so the kernel's come after "0x…" and "clr.dll+0x…": look well past
    // the top 100.)
    let functions = v["functions"].as_array().unwrap();
    for f in functions {
        let (name, module) = (f["name"].as_str().unwrap(), f["module"].as_str().unwrap());
        if module != "[unknown]" {
            assert!(
                name.starts_with(&format!("{module}+0x")),
                "{name} in {module}"
            );
        }
    }
    assert!(functions
        .iter()
        .any(|f| f["name"].as_str().unwrap().starts_with("ntoskrnl.exe+0x")));
}

#[test]
fn without_cswitch_events_waits_and_the_path_say_how_to_record_them_on_windows() {
    // PerfView's trace has samples but no CSwitch or ReadyThread events.
    let trace = fixture("perfview-net.4.5.2.x64.etl.zip");
    let waits = slowlab()
        .arg("analyze")
        .arg("--waits")
        .arg(&trace)
        .output()
        .unwrap();
    assert!(waits.status.success());
    let text = String::from_utf8_lossy(&waits.stdout);
    assert!(text.starts_with("no scheduler events"), "{text}");
    assert!(
        text.contains("slowlab.wprp (CSwitch and ReadyThread)"),
        "{text}"
    );

    let path = slowlab()
        .args(["analyze", "--critical-path", "--root", "3676"])
        .arg(&trace)
        .output()
        .unwrap();
    assert_eq!(path.status.code(), Some(2), "cannot be computed: exit 2");
    let err = String::from_utf8_lossy(&path.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("CSwitch on Windows") && err.contains("slowlab.wprp"),
        "{err}"
    );
}

#[test]
fn hard_faults_have_their_rate_and_stacks_and_no_mode_made_up() {
    let out = slowlab()
        .args(["analyze", "--faults", "--json", "--no-symbols"])
        .arg(fixture("perfview-net.4.5.2.x64.etl.zip"))
        .output()
        .unwrap();
    slowlab_testkit::assert_succeeded(&out);
    let v = json(&out);
    let test = v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["comm"] == "Test.x64.exe")
        .expect("Test.x64.exe faulted");
    let faults = test["faults"].as_u64().unwrap();
    assert!(
        faults > 0 && test["major"] == faults,
        "hard faults only: {test}"
    );
    let in_rate: u64 = test["rate"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(in_rate, faults, "every fault in the rate: {test}");
    let in_stacks: u64 = test["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["count"].as_u64().unwrap())
        .sum();
    assert_eq!(in_stacks, faults, "every fault in a stack: {test}");
    // The text does not call them 0 user and 0 kernel faults.
    let out = slowlab()
        .args(["analyze", "--faults", "--no-symbols"])
        .arg(fixture("perfview-net.4.5.2.x64.etl.zip"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let row = text
        .lines()
        .find(|l| l.contains("Test.x64.exe"))
        .expect("its row");
    assert_eq!(row.matches('–').count(), 2, "{row}");
}

#[test]
fn events_counts_use_traceevents_names() {
    let out = slowlab()
        .args(["analyze", "--events", "--json"])
        .arg(fixture("perfview-net.4.5.2.x64.etl.zip"))
        .output()
        .unwrap();
    slowlab_testkit::assert_succeeded(&out);
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

/// A 32-bit ETL written here (`slowlab_etl::synth`; no public trace shows a
/// Windows pathology): 12 launches of verifier.exe, launch i opening the
/// taken log names `C:\Logs\app.0.dat` … `app.{2i}.dat` (found) and then
/// `app.{2i+1}.dat` (not found, so created), each open a `FileIO/Create`
/// ended by its `OperationEnd`.
fn log_probe_etl() -> Vec<u8> {
    use slowlab_etl::synth::*;
    const T0: i64 = 1_000_000;
    let at = |us: i64| T0 + us * (FREQ as i64 / 1_000_000);
    let mut events = vec![header_event(T0, 1, 0)];
    let mut irp = 0x100u32;
    for i in 0..12u32 {
        let (pid, tid) = (1000 + i, 2000 + i);
        let start = 20_000 * i as i64 + 10;
        // Process events in version 4's layout, thread events in 3's.
        let sys = |hook: u16, us, payload: &[u8]| {
            let version = match hook >> 8 {
                3 => 4,
                5 => 3,
                _ => 2,
            };
            system_event(1, hook, version, tid, pid, at(us), payload)
        };
        events.push(sys(
            0x0301,
            start,
            &process(pid, 4, "verifier.exe", "verifier.exe"),
        ));
        events.push(sys(0x0501, start + 1, &thread(pid, tid, "")));
        let mut us = start + 10;
        for k in 0..=2 * i + 1 {
            irp += 1;
            let path = format!("\\Device\\HarddiskVolume2\\Logs\\app.{k}.dat");
            let status = if k == 2 * i + 1 { 0xC000_0034 } else { 0 };
            events.push(sys(0x0440, us, &file_create(irp, tid, 0x9000 + k, &path)));
            events.push(sys(0x044c, us + 80, &file_op_end(irp, status)));
            us += 100;
        }
        events.push(sys(
            0x0302,
            us + 10,
            &process(pid, 4, "verifier.exe", "verifier.exe"),
        ));
    }
    let mut volume = utf16("\\Device\\HarddiskVolume2\\");
    volume.extend_from_slice(&utf16("C:\\"));
    events.push(system_event(1, 0xf023, 2, 0, 0, at(300_000), &volume));
    buffer(0, &events, false)
}

#[test]
fn findings_of_an_etl_name_numbered_log_probes_at_each_launch() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("probe.etl");
    std::fs::write(&file, log_probe_etl()).unwrap();
    let out = slowlab()
        .args(["analyze", "--findings", "--json"])
        .arg(&file)
        .output()
        .unwrap();
    slowlab_testkit::assert_succeeded(&out);
    let v = json(&out);
    let findings = v.as_array().expect("an array of findings");
    let probe = findings
        .iter()
        .find(|f| f["id"] == "linear-probe-names")
        .unwrap_or_else(|| panic!("no linear-probe-names finding: {v}"));
    assert_eq!(probe["culprit"]["comm"], "verifier.exe");
    let title = probe["title"].as_str().unwrap();
    assert!(title.contains("C:\\Logs\\app.N.dat"), "{title}");

    // The syscalls view lists the creates with their paths and failures.
    let out = slowlab()
        .args(["analyze", "--syscalls"])
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    slowlab_testkit::assert_succeeded(&out);
    assert!(text.contains("FileIO/Create"), "{text}");
    assert!(text.contains("app.N.dat"), "{text}");
}

/// A 32-bit trace whose samples fall in the functions of the real
/// `prog.exe` (`crates/etl/tests/fixtures/pdb/`, addresses from its linker
/// map) and whose `DbgID_RSDS` event names `pdb`.
fn prog_etl(pdb: &slowlab_etl::pdb_ids::PdbId) -> Vec<u8> {
    prog_etl_with(pdb, 0)
}

/// `prog.exe` sampled 5 times in `busy_leaf` (under `busy_middle`), and
/// `in_middle` times in `busy_middle` itself.
fn prog_etl_with(pdb: &slowlab_etl::pdb_ids::PdbId, in_middle: usize) -> Vec<u8> {
    let map = std::fs::read_to_string(fixture("pdb/prog.map")).unwrap();
    let va = |name: &str| {
        map.lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|w| w.len() >= 3 && w[1] == name)
            .map(|w| u64::from_str_radix(w[2], 16).unwrap() - 0x1_4000_0000)
            .unwrap_or_else(|| panic!("{name} in prog.map")) as u32
    };
    let base = 0x0040_0000;
    let stack = vec![
        base + va("busy_leaf") + 1,
        base + va("busy_middle") + 4,
        base + va("mainCRTStartup") + 4,
    ];
    assert!(map.contains("Preferred load address is 0000000140000000"));
    let mut stacks = vec![stack.clone(); 5];
    stacks.extend(std::iter::repeat_n(stack[1..].to_vec(), in_middle));
    slowlab_etl::synth::image_trace(100, base, 0x4000, r"C:\app\prog.exe", pdb, &stacks)
}

fn prog_pdb_id() -> slowlab_etl::pdb_ids::PdbId {
    let exe = std::fs::read(fixture("pdb/prog.exe")).unwrap();
    slowlab_etl::pe::codeview_pdb(&exe).unwrap()
}

#[test]
fn symbols_name_the_functions_of_an_etl_from_a_matching_pdb_only() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("prog.etl");
    let symbols = fixture("pdb");
    let run = |id: &slowlab_etl::pdb_ids::PdbId| {
        std::fs::write(&file, prog_etl(id)).unwrap();
        let out = slowlab()
            .args(["analyze", "--json", "--symbols"])
            .arg(&symbols)
            .arg(&file)
            .output()
            .unwrap();
        slowlab_testkit::assert_succeeded(&out);
        json(&out)
    };
    let names = |v: &serde_json::Value| -> Vec<(String, String)> {
        v["functions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f["name"].as_str().unwrap().to_string(),
                    f["module"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };

    let id = prog_pdb_id();
    let v = run(&id);
    let functions = names(&v);
    for want in ["busy_leaf", "busy_middle", "mainCRTStartup"] {
        assert!(
            functions.contains(&(want.to_string(), "prog.exe".to_string())),
            "{want} in {functions:?}"
        );
    }
    let leaf = &v["functions"].as_array().unwrap()[0];
    assert_eq!(
        (leaf["name"].as_str(), leaf["self"].as_u64()),
        (Some("busy_leaf"), Some(5))
    );

    // The same trace naming another age of the PDB: refused, with a warning.
    let mut other = id.clone();
    other.age += 1;
    let v = run(&other);
    assert!(
        names(&v).iter().all(|(n, _)| n.starts_with("prog.exe+0x")),
        "{v}"
    );
    let warnings = v["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().any(|w| {
            let w = w.as_str().unwrap();
            w.contains("prog.pdb") && w.contains("not used") && w.contains(&other.key())
        }),
        "{warnings:?}"
    );
}

#[test]
fn diff_names_the_functions_of_two_etl_traces_from_their_pdb() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.etl"), dir.path().join("b.etl"));
    let id = prog_pdb_id();
    std::fs::write(&a, prog_etl_with(&id, 0)).unwrap();
    std::fs::write(&b, prog_etl_with(&id, 15)).unwrap();
    let diff = |symbols: bool| {
        let mut cmd = slowlab();
        cmd.args(["diff", "--json"]);
        if symbols {
            cmd.arg("--symbols").arg(fixture("pdb"));
        }
        let out = cmd.arg(&a).arg(&b).output().unwrap();
        slowlab_testkit::assert_succeeded(&out);
        json(&out)
    };
    let v = diff(true);
    let first = &v["functions"][0];
    assert_eq!(first["name"], "busy_middle", "{v}");
    assert_eq!(first["module"], "prog.exe", "{v}");
    let a_share = first["a"].as_f64().unwrap();
    let b_share = first["b"].as_f64().unwrap();
    assert!(a_share < 0.01 && b_share > 0.5, "{first}");
    // Without --symbols the same rows are module offsets.
    let v = diff(false);
    let names: Vec<&str> = v["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert!(
        names.iter().all(|n| n.starts_with("prog.exe+0x")),
        "{names:?}"
    );
}

#[test]
fn symbols_on_a_perf_trace_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("perf.data");
    std::fs::write(&file, b"PERFILE2").unwrap();
    let out = slowlab()
        .args(["analyze", "--symbols", "/tmp"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--symbols names PDB directories"), "{err}");
}
