//! End-to-end tests of `slowlab record` and `slowlab analyze` through the
//! binary: views and exports on a committed fixture, bad input, and — when
//! perf and root are available (the test prints why it skips otherwise) —
//! a real recording by perf (`--backend perf`) analyzed end to end and
//! compared with `perf report`,
//! and read on one thread (`SLOWLAB_THREADS=1`) with the same results; and,
//! with either backend, the recorded command reads what is piped into slowlab,
//! and a recording leaves no side file of an earlier one of the same name, and
//! names the code of the vDSO (clock_gettime) from the running kernel's copy.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{json, perf_unavailable, slowlab, PERF_LOCK};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../perf/tests/fixtures")
        .join(name)
}

/// Builds the fixtures' workload (two hot functions, frame pointers).
fn build_workload(dir: &Path) -> PathBuf {
    let exe = dir.join("hot");
    let st = Command::new("cc")
        .args(["-O1", "-fno-omit-frame-pointer", "-o"])
        .arg(&exe)
        .arg(fixture("hot.c"))
        .status()
        .unwrap();
    assert!(st.success());
    exe
}

#[test]
fn default_view_json_has_documented_fields() {
    let out = slowlab()
        .args(["analyze", "--json", "--no-symbols"])
        .arg(fixture("hot-fp.perfdata"))
        .output()
        .unwrap();
    let v = json(&out);
    for k in ["samples", "lost", "duration_s", "processes", "functions"] {
        assert!(v.get(k).is_some(), "missing {k}");
    }
    assert_eq!(v["samples"], 37);
    let p = &v["processes"][0];
    assert_eq!(p["comm"], "hot");
    assert!(p["threads"][0]["tid"].is_i64());
    let f = &v["functions"][0];
    for k in ["name", "module", "self", "inclusive"] {
        assert!(f.get(k).is_some(), "function field {k}");
    }
}

#[test]
fn grouping_filters_and_butterfly() {
    let file = fixture("hot-fp.perfdata");
    let out = slowlab()
        .args([
            "analyze",
            "--json",
            "--no-symbols",
            "--by",
            "thread,module",
            "--top",
            "2",
        ])
        .arg(&file)
        .output()
        .unwrap();
    let v = json(&out);
    assert_eq!(v["samples"], 37);
    assert_eq!(v["rows"][0]["key"], "thread");
    assert_eq!(v["rows"][0]["children"][0]["key"], "module");
    // A filter that matches nothing: zero samples, not an error.
    let out = slowlab()
        .args(["analyze", "--json", "--no-symbols", "--filter", "pid=1"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(json(&out)["samples"], 0);
    // Bad filter: one-line error, exit 2.
    let out = slowlab()
        .args(["analyze", "--filter", "colour=red"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // Butterfly on an unsymbolized module name.
    let out = slowlab()
        .args([
            "analyze",
            "--json",
            "--no-symbols",
            "--callers",
            "[unknown]",
        ])
        .arg(&file)
        .output()
        .unwrap();
    let v = json(&out);
    assert!(v["inclusive"].as_u64().unwrap() > 0);
}

#[test]
fn exports_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("cpu.svg");
    let folded = dir.path().join("cpu.folded");
    let pprof = dir.path().join("cpu.pb.gz");
    let out = slowlab()
        .args(["analyze", "--no-symbols", "--flamegraph"])
        .arg(&svg)
        .arg("--collapsed")
        .arg(&folded)
        .arg("--pprof")
        .arg(&pprof)
        .arg(fixture("hot-fp.perfdata"))
        .output()
        .unwrap();
    slowlab_testkit::assert_succeeded(&out);
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
    let text = std::fs::read_to_string(&folded).unwrap();
    let total: u64 = text
        .lines()
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, 37);
    assert_eq!(&std::fs::read(&pprof).unwrap()[..2], &[0x1f, 0x8b]);
}

#[test]
fn bad_input_gives_one_line_errors_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.data");
    std::fs::write(&empty, b"").unwrap();
    let random = dir.path().join("random.data");
    let bytes: Vec<u8> = (0..50_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(&random, bytes).unwrap();
    for (file, needle) in [
        (empty.clone(), "empty"),
        (random.clone(), "not a perf.data file"),
        (dir.path().join("missing.data"), "cannot open"),
    ] {
        let out = slowlab().arg("analyze").arg(&file).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{err}");
        assert!(!err.contains("panicked"));
    }
    // A recording killed mid-way: partial analysis with a warning.
    let out = slowlab()
        .args(["analyze", "--json", "--no-symbols"])
        .arg(fixture("killed.perfdata"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = json(&out);
    assert!(v["samples"].as_u64().unwrap() > 100);
    assert!(err.contains("not finished"), "{err}");
}

#[test]
fn help_teaches_with_examples() {
    for cmd in ["analyze", "record"] {
        let out = slowlab().args([cmd, "--help"]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Examples:"), "{cmd}");
        assert!(text.contains("slowlab analyze"), "{cmd}");
    }
    // Every example of `sweep --help` keeps its size placeholder (clap
    // turns `{n}` in a help text into a line break).
    let out = slowlab().args(["sweep", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for line in text
        .lines()
        .filter(|l| l.trim_start().starts_with("slowlab sweep"))
    {
        assert!(line.contains("{N}"), "{line}");
    }
}

#[test]
fn record_then_analyze_end_to_end() {
    if let Some(why) = perf_unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let _one = PERF_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let exe = build_workload(dir.path());
    let trace = dir.path().join("t.data");
    let script = format!(
        "{0} >/dev/null; {0} >/dev/null; {0} >/dev/null; exit 3",
        exe.display()
    );
    let out = slowlab()
        .args(["record", "--backend", "perf", "--freq", "999", "-o"])
        .arg(&trace)
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "CMD's exit code: {err}");
    assert!(err.contains("slowlab analyze"), "{err}");
    let out = slowlab()
        .args(["analyze", "--json"])
        .arg(&trace)
        .output()
        .unwrap();
    let v = json(&out);
    assert!(v["samples"].as_u64().unwrap() > 50, "{v}");
    same_on_one_thread(
        &trace,
        &[&["--json", "--waits"], &["--json", "--critical-path"]],
    );
    same_by_function(
        &trace,
        &[
            &["--json", "--waits"],
            &["--json", "--critical-path"],
            &["--json", "--syscalls"],
            &["--json", "--faults"],
            &["--json", "--timeline"],
        ],
    );
    let funcs = v["functions"].as_array().unwrap();
    let spin = funcs
        .iter()
        .find(|f| f["name"] == "spin")
        .expect("spin symbolized");
    assert_eq!(spin["module"], "hot");
    assert!(spin["self"].as_u64().unwrap() > 20);
    let main = funcs
        .iter()
        .find(|f| f["name"] == "main" && f["module"] == "hot")
        .unwrap();
    assert!(main["inclusive"].as_u64().unwrap() > 0);
    // Scheduler and process events were recorded too.
    let out = Command::new("perf")
        .args(["evlist", "-i"])
        .arg(&trace)
        .output()
        .unwrap();
    let ev = String::from_utf8_lossy(&out.stdout);
    assert!(
        ev.contains("sched:sched_switch") && ev.contains("syscalls:sys_enter_openat"),
        "{ev}"
    );
    // A command that does not exist: one-line error, no trace attempt.
    let out = slowlab()
        .args(["record", "-o"])
        .arg(dir.path().join("x.data"))
        .args(["--", "surely-not-a-command-xyz"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("command not found"));
    // `diagnose` the same: and the directory it made for the run is not left empty.
    let run = dir.path().join("run");
    let out = slowlab()
        .args(["diagnose", "-o"])
        .arg(&run)
        .args(["--", "surely-not-a-command-xyz"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("command not found"));
    assert!(!run.exists(), "an empty {} is left", run.display());
}

/// Parses `perf report --stdio -g none` lines: `  3.95%  [k] name`.
fn perf_report_shares(file: &Path) -> Vec<(String, f64)> {
    let out = Command::new("perf")
        .args([
            "report",
            "--no-children",
            "--sort",
            "sym",
            "--stdio",
            "-g",
            "none",
            "-i",
        ])
        .arg(file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut rows: Vec<(String, f64)> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let Some((pct, rest)) = line.split_once('%') else {
            continue;
        };
        let Ok(pct) = pct.trim().parse::<f64>() else {
            continue;
        };
        let rest = rest.trim();
        let name = rest
            .strip_prefix("[k] ")
            .or_else(|| rest.strip_prefix("[.] "))
            .unwrap_or(rest)
            .trim()
            .to_string();
        match rows.iter_mut().find(|(n, _)| *n == name) {
            Some(r) => r.1 += pct,
            None => rows.push((name, pct)),
        }
    }
    rows
}

#[test]
fn agrees_with_perf_report_on_the_20_hottest_symbols() {
    if let Some(why) = perf_unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let _one = PERF_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let exe = build_workload(dir.path());
    let trace = dir.path().join("p.data");
    let script = format!(
        "for i in 1 2 3 4 5; do {} >/dev/null; ls -R /usr/share/doc >/dev/null; done",
        exe.display()
    );
    let st = Command::new("perf")
        .args(["record", "-q", "-a", "-g", "-F", "999", "-o"])
        .arg(&trace)
        .args(["--", "sh", "-c", &script])
        .status()
        .unwrap();
    assert!(st.success());
    let perf = perf_report_shares(&trace);
    let out = slowlab()
        .args(["analyze", "--json"])
        .arg(&trace)
        .output()
        .unwrap();
    let v = json(&out);
    let total = v["samples"].as_u64().unwrap() as f64;
    let mut ours: std::collections::HashMap<String, f64> = Default::default();
    for f in v["functions"].as_array().unwrap() {
        let name = f["name"].as_str().unwrap().to_string();
        *ours.entry(name).or_default() += f["self"].as_u64().unwrap() as f64 * 100.0 / total;
    }
    // Unresolved addresses: perf shows each as a hex address, slowlab
    // groups them as [unknown] per module; they are not compared. Nor are
    // C++ templates (libLLVM's, when a build runs beside): perf's demangler
    // writes `2u` and `> >` where the `cpp_demangle` crate writes
    // `(unsigned int)2` and `>>`.
    let top: Vec<&(String, f64)> = perf
        .iter()
        .filter(|(n, _)| !n.starts_with("0x") && !n.starts_with('[') && !n.contains('<'))
        .take(20)
        .collect();
    assert!(top.len() >= 5, "perf report gave too little: {perf:?}");
    for (name, pct) in top {
        let mine = ours.get(name).copied().unwrap_or(0.0);
        assert!(
            (mine - pct).abs() <= 0.5,
            "{name}: perf report {pct:.2}%, slowlab {mine:.2}%"
        );
    }
    same_on_one_thread(
        &trace,
        &[
            &["--json"],
            &["--json", "--by", "process,function"],
            &["--json", "--by", "module,function", "--top", "1000"],
            &["--json", "--callees", "main"],
        ],
    );
    same_by_function(
        &trace,
        &[
            &["--json"],
            &["--json", "--by", "process,thread,function", "--top", "1000"],
            &["--json", "--by", "module,function", "--top", "1000"],
            &["--json", "--callees", "main"],
            &["--json", "--callers", "spin"],
        ],
    );
    same_with_a_symbol_cache(
        &trace,
        &[
            &["--json"],
            &["--json", "--by", "module,function", "--top", "1000"],
        ],
    );
}

/// `slowlab analyze VIEW TRACE` with the environment variable `var` set to
/// `value`, or unset.
fn analyze_with(
    trace: &Path,
    view: &[&str],
    var: &str,
    value: Option<&str>,
) -> std::process::Output {
    let mut cmd = slowlab();
    cmd.arg("analyze").args(view).arg(trace);
    match value {
        Some(v) => cmd.env(var, v),
        None => cmd.env_remove(var),
    };
    cmd.output().unwrap()
}

/// Read in two passes with the frames of each function merged (as a trace
/// over the memory budget is: `SLOWLAB_MEMORY` below its size),
/// the trace gives the very same `views`; only its warnings say so. A
/// budget that is not a size is a one-line error.
fn same_by_function(trace: &Path, views: &[&[&str]]) {
    for &view in views {
        let run = |memory| {
            let out = analyze_with(trace, view, "SLOWLAB_MEMORY", memory);
            let err = String::from_utf8_lossy(&out.stderr).into_owned();
            let mut v = json(&out);
            if let Some(o) = v.as_object_mut() {
                o.remove("warnings");
            }
            (v, err)
        };
        let ((whole, err), (by_function, said)) = (run(None), run(Some("1K")));
        assert!(!err.contains("two passes"), "{err}");
        assert!(said.contains("read in two passes"), "{view:?}: {said}");
        assert!(
            whole == by_function,
            "{view:?} differs read by function:\n{whole}\n{by_function}"
        );
    }
    for bad in ["0", "lots", "-5", "1.5G"] {
        refused(trace, "SLOWLAB_MEMORY", bad);
    }
}

/// With no symbol cache, a new one (filled by the run), the same one
/// (read by the run) and that one with every file damaged (each noticed,
/// and written again), the trace gives the very same `views`. The trace
/// has kernel frames, so at least the parsed kallsyms is kept.
fn same_with_a_symbol_cache(trace: &Path, views: &[&[&str]]) {
    let dir = tempfile::tempdir().unwrap();
    let kept = |cache: &Path| -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut todo = vec![cache.to_owned()];
        while let Some(d) = todo.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                match e.path() {
                    p if p.is_dir() => todo.push(p),
                    p => out.push(p),
                }
            }
        }
        out.sort();
        out
    };
    let var = "SLOWLAB_CACHE_DIR";
    for (i, &view) in views.iter().enumerate() {
        let cache = dir.path().join(format!("cache-{i}"));
        let cache_str = cache.to_str().unwrap();
        let without = json(&analyze_with(trace, view, var, Some("off")));
        assert!(kept(&cache).is_empty());
        let filling = json(&analyze_with(trace, view, var, Some(cache_str)));
        let files = kept(&cache);
        assert!(
            files
                .iter()
                .any(|f| f.to_string_lossy().contains("kallsyms")),
            "{files:?}"
        );
        let whole: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
        let reading = json(&analyze_with(trace, view, var, Some(cache_str)));
        for (f, bytes) in files.iter().zip(&whole) {
            let mut bad = bytes.clone();
            let mid = bad.len() / 2;
            bad[mid] ^= 0x55;
            std::fs::write(f, bad).unwrap();
        }
        let damaged = json(&analyze_with(trace, view, var, Some(cache_str)));
        for (f, bytes) in files.iter().zip(&whole) {
            if f.to_string_lossy().contains("kallsyms") {
                assert_eq!(&std::fs::read(f).unwrap(), bytes, "{f:?} not written again");
            }
        }
        for (what, v) in [
            ("filling", &filling),
            ("reading", &reading),
            ("damaged", &damaged),
        ] {
            assert!(
                *v == without,
                "{view:?} differs with the cache {what}:\n{without}\n{v}"
            );
        }
    }
}

/// `slowlab analyze TRACE` with `var=value` fails with a one-line error
/// naming `var`, exit code 2.
fn refused(trace: &Path, var: &str, value: &str) {
    let out = analyze_with(trace, &[], var, Some(value));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(var) && err.lines().count() == 1, "{err}");
}

/// Read and symbolized on one thread, the trace gives the very same
/// `views` as with the threads that name binaries while the records are
/// read (functions are numbered in another order then: no output may show
/// it).
fn same_on_one_thread(trace: &Path, views: &[&[&str]]) {
    for &view in views {
        let run = |threads| json(&analyze_with(trace, view, "SLOWLAB_THREADS", threads));
        let (many, one) = (run(None), run(Some("1")));
        assert!(
            many == one,
            "{view:?} differs on one thread:\n{many}\n{one}"
        );
    }
    refused(trace, "SLOWLAB_THREADS", "0");
}

#[test]
fn the_command_reads_what_is_piped_in_and_a_new_recording_leaves_no_old_side_file() {
    if let Some(why) = perf_unavailable() {
        slowlab_testkit::skip(format_args!("{why}"));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Both into one name: perf's recording writes t.data.paths, the eBPF one none.
    let trace = dir.path().join("t.data");
    let paths = dir.path().join("t.data.paths");
    for backend in ["perf", "bpf"] {
        let out = {
            let _one = common::one_recording_at_a_time();
            let mut child = slowlab()
                .args(["record", "--backend", backend, "-o"])
                .arg(&trace)
                .args(["--", "sh", "-c", "read line; echo \"read [$line]\""])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let mut stdin = child.stdin.take().unwrap();
            std::io::Write::write_all(&mut stdin, b"from the pipe\n").unwrap();
            drop(stdin);
            child.wait_with_output().unwrap()
        };
        slowlab_testkit::assert_succeeded(&out);
        let out = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.trim(), "read [from the pipe]", "{backend}");
        assert_eq!(
            paths.exists(),
            backend == "perf",
            "{backend}: perf's paths, and none left beside the next recording"
        );
    }
}

#[test]
fn the_vdso_is_named_with_either_backend() {
    if let Some(why) = perf_unavailable() {
        slowlab_testkit::skip(format_args!("{why}"));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("clock.c");
    std::fs::write(
        &source,
        "#include <time.h>\nint main(void) { struct timespec ts; long s = 0;\n\
         for (long i = 0; i < 20000000; i++) { clock_gettime(CLOCK_MONOTONIC, &ts); s += ts.tv_nsec; }\n\
         return s == 42; }\n",
    )
    .unwrap();
    let exe = dir.path().join("clockloop");
    let built = Command::new("cc")
        .args(["-O1", "-fno-omit-frame-pointer", "-o"])
        .arg(&exe)
        .arg(&source)
        .status()
        .unwrap();
    assert!(built.success());
    for backend in ["bpf", "perf"] {
        let trace = dir.path().join(format!("{backend}.data"));
        let out = {
            let _one = common::one_recording_at_a_time();
            slowlab()
                .args(["record", "--backend", backend, "-o"])
                .arg(&trace)
                .arg("--")
                .arg(&exe)
                .output()
                .unwrap()
        };
        slowlab_testkit::assert_succeeded(&out);
        let out = slowlab()
            .arg("analyze")
            .arg(&trace)
            .args(["--filter", "process=clockloop", "--json"])
            .output()
            .unwrap();
        let v = json(&out);
        let top = &v["functions"][0];
        assert_eq!(top["module"], "[vdso]", "{backend}: {top}");
        assert!(
            top["name"]
                .as_str()
                .is_some_and(|n| n.contains("clock_gettime")),
            "{backend}: the vDSO's function is named: {top}"
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("[vdso]:"), "no warning about it: {stderr}");
    }
}

/// The tracepoints `pid`'s BPF links are on (their `tp_name` in its fdinfo), once its path
/// capture has attached (its raw `sys_exit` program is there); `None` if it never does.
fn path_capture_tracepoints(pid: u32) -> Option<Vec<String>> {
    common::link_tracepoints(pid, |names| {
        names.iter().any(|n| n == "sys_exit") && names.len() > 1
    })
}

#[test]
fn a_commands_perf_recording_takes_the_paths_perf_does_not_record_from_the_raw_sys_enter() {
    require_perf!();
    let _one = PERF_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();

    // The machine's recording (no command): stopped with SIGINT.
    let mut machine = slowlab()
        .args(["record", "--backend", "perf", "-o"])
        .arg(dir.path().join("machine.data"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let names = path_capture_tracepoints(machine.id());
    common::interrupt_then_kill(machine.id() as i32, &mut machine);
    let names = names.expect("the machine's path capture attached its programs");
    assert!(
        names.iter().any(|n| n == "sys_enter_openat") && !names.iter().any(|n| n == "sys_enter"),
        "the machine's recording: {names:?}"
    );

    // A command's: one program on the raw sys_enter for the syscalls perf does not record
    // (mkdir), their own tracepoints for those it does (openat), and its paths captured.
    let trace = dir.path().join("command.data");
    let command = slowlab()
        .args(["record", "--backend", "perf", "-o"])
        .arg(&trace)
        .args([
            "--",
            "sh",
            "-c",
            "sleep 1; cat /nonexistent/slowlab-raw-enter 2>/dev/null; \
             mkdir /nonexistent/slowlab-raw-enter 2>/dev/null; true",
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let names = path_capture_tracepoints(command.id());
    let out = common::finish(command, std::time::Duration::from_secs(60));
    slowlab_testkit::assert_succeeded(&out);
    let names = names.expect("the command's path capture attached its programs");
    assert!(
        names.iter().any(|n| n == "sys_enter")
            && names.iter().any(|n| n == "sys_enter_openat")
            && !names.iter().any(|n| n == "sys_enter_mkdir"),
        "the command's recording: {names:?}"
    );
    let out = slowlab()
        .args(["analyze", "--syscalls", "--json", "--no-symbols"])
        .arg(&trace)
        .output()
        .unwrap();
    let v = json(&out);
    let cat_paths: Vec<&str> = v["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .filter(|p| p["comm"] == "cat")
        .flat_map(|p| p["paths"].as_array().into_iter().flatten())
        .filter_map(|p| p["first"].as_str())
        .collect();
    assert!(
        cat_paths.contains(&"/nonexistent/slowlab-raw-enter"),
        "cat's openat of the missing file, with its path: {cat_paths:?}"
    );
    // mkdir's path, from the raw program, in the capture file (perf records no mkdir).
    let log = slowlab_bpf::read_paths(&dir.path().join("command.data.paths")).expect("paths");
    assert!(
        log.events
            .iter()
            .any(|e| e.syscall.name() == "mkdir" && e.path == "/nonexistent/slowlab-raw-enter"),
        "mkdir's path"
    );
}
