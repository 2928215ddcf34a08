//! `slowlab sweep` as a user runs it: real tiny commands, every export, bad
//! input, a failing command and Ctrl-C. The statistics themselves are tested
//! exactly in crates/sweep/tests/engine.rs; here the wiring is.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const SLOWLAB: &str = env!("CARGO_BIN_EXE_slowlab");

/// The tests that measure CPU time run one at a time: two at once on this 2-core machine
/// would measure each other.
static MEASURING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_measurement_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    MEASURING.lock().unwrap_or_else(|p| p.into_inner())
}

fn slowlab(args: &[&str]) -> Output {
    Command::new(SLOWLAB)
        .args(args)
        .output()
        .expect("cannot run slowlab")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A bad-input run: non-zero exit, one line on stderr naming the problem, no
/// panic.
fn assert_one_line_error(o: &Output, expect: &str) {
    let err = stderr(o);
    assert!(!o.status.success(), "exit 0 for bad input; stderr: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    assert!(err.contains(expect), "expected `{expect}` in: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
}

#[test]
fn zero_size_is_refused() {
    assert_one_line_error(
        &slowlab(&["sweep", "--sizes", "0", "--", "true", "{n}"]),
        "positive",
    );
}

#[test]
fn non_numeric_sizes_are_refused() {
    assert_one_line_error(
        &slowlab(&["sweep", "--sizes", "abc", "--", "true", "{n}"]),
        "not a size",
    );
}

#[test]
fn decreasing_sizes_are_refused() {
    assert_one_line_error(
        &slowlab(&["sweep", "--sizes", "4000,2000", "--", "true", "{n}"]),
        "must increase",
    );
}

#[test]
fn a_missing_command_is_named() {
    assert_one_line_error(
        &slowlab(&[
            "sweep",
            "--sizes",
            "1,2",
            "--",
            "no-such-command-xyz",
            "{n}",
        ]),
        "command not found: `no-such-command-xyz`",
    );
}

#[test]
fn a_bad_budget_is_refused() {
    assert_one_line_error(
        &slowlab(&["sweep", "--sizes", "1,2", "--budget", "soon", "--", "true"]),
        "not a duration",
    );
}

#[test]
fn an_export_that_cannot_be_written_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let touch = format!("touch {}", ran.display());
    for flag in ["--json", "--csv", "--markdown", "--plot"] {
        assert_one_line_error(
            &slowlab(&[
                "sweep",
                "--sizes",
                "1,2",
                flag,
                "/nonexistent-slowlab/out",
                "--",
                "sh",
                "-c",
                &touch,
            ]),
            "/nonexistent-slowlab/out: there is no directory /nonexistent-slowlab",
        );
        assert!(!ran.exists(), "{flag}: the sweep ran before the check");
    }
}

#[test]
fn a_command_without_placeholder_runs_with_a_warning() {
    let o = slowlab(&["sweep", "--sizes", "1,2,4", "--reps", "1", "--", "true"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("warning: the command has no {n}"), "{out}");
}

#[test]
fn a_failing_run_stops_the_sweep_with_its_size_and_stderr() {
    let o = slowlab(&[
        "sweep",
        "--sizes",
        "1000,2000,4000,8000",
        "--reps",
        "1",
        "--",
        "sh",
        "-c",
        "if [ {n} -ge 8000 ]; then echo 'cannot handle {n} items' >&2; exit 4; fi",
    ]);
    assert_one_line_error(&o, "n=8000");
    let err = stderr(&o);
    assert!(err.contains("exit code 4"), "{err}");
    assert!(err.contains("cannot handle 8000 items"), "{err}");
}

#[test]
fn a_quadratic_command_is_superlinear_and_every_export_is_written() {
    let _one = one_measurement_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let o = slowlab(&[
        "sweep",
        "--sizes",
        "2000..8000",
        "--json",
        &path("r.json"),
        "--csv",
        &path("r.csv"),
        "--markdown",
        &path("r.md"),
        "--plot",
        &path("r.svg"),
        "--",
        SLOWLAB,
        "__child",
        "burn",
        "n2",
        "{n}",
        "--scale",
        "6",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path("r.json")).unwrap()).unwrap();
    assert_eq!(json["verdict"], "superlinear", "{json:#}");
    let k = json["exponent"].as_f64().unwrap();
    // Within the ±0.5 the host's wandering speed can move an exponent.
    assert!((1.5..=2.5).contains(&k), "exponent {k}");
    assert_eq!(json["points"][0]["n"], 2000);
    assert!(json["points"][0]["cpu_s"].as_array().unwrap().len() >= 3);
    assert_eq!(json["baseline"]["n"], 0);

    let csv = std::fs::read_to_string(path("r.csv")).unwrap();
    assert!(csv.lines().count() >= 4, "{csv}");
    let md = std::fs::read_to_string(path("r.md")).unwrap();
    assert!(md.contains("| 8000 |"), "{md}");
    let svg = std::fs::read_to_string(path("r.svg")).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("superlinear"),
        "{svg}"
    );

    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("superlinear: ≈N^"), "{out}");
}

#[test]
fn a_linear_command_is_linear() {
    let _one = one_measurement_at_a_time();
    let o = slowlab(&[
        "sweep", "--sizes", "20M..80M", "--json", "-", "--", SLOWLAB, "__child", "burn", "n", "{n}",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(json["verdict"], "linear", "{json:#}");
    // With --json - the human table goes to stderr.
    assert!(stderr(&o).contains("linear: ≈N^"));
}

#[test]
fn ctrl_c_kills_the_running_command_and_prints_what_was_measured() {
    // Ctrl-C, and SIGTERM as a service manager sends it: 128 + the signal either way.
    for sig in [libc::SIGINT, libc::SIGTERM] {
        stopped_by(sig);
    }
}

fn stopped_by(sig: i32) {
    let _one = one_measurement_at_a_time();
    // A marker argument to find stray processes afterwards.
    let marker = format!("{}", 900_000 + std::process::id() % 99_999);
    let child = Command::new(SLOWLAB)
        .args([
            "sweep", "--sizes", "1M,2M,4G", "--reps", "1", "--warmup", "0", "--", SLOWLAB,
            "__child", "burn", "n", "{n}", "--scale", &marker,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Let it measure the small sizes and get stuck in the 4G one.
    std::thread::sleep(Duration::from_millis(2500));
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
    let start = Instant::now();
    let o = child.wait_with_output().unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "did not stop promptly"
    );
    assert_eq!(o.status.code(), Some(128 + sig), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("interrupted"), "{out}");
    // No burner with our marker survives.
    std::thread::sleep(Duration::from_millis(200));
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            assert!(
                !(cmdline.contains("burn") && cmdline.contains(&marker)),
                "stray process: {cmdline}"
            );
        }
    }
}
