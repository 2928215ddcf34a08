//! The interactive `report.html` in a real browser: `slowlab diagnose`
//! records a command whose processes are named like markup (a thread named
//! `<b>hb</b>` with `prctl(PR_SET_NAME)`, a program copied to a file named
//! `<img src=x onerror=alert(1)>`, a failing open of a path holding the
//! same), and a shell loop probing numbered names (so that a finding,
//! `linear-probe-names`, exists to be clicked); then `tests/report/check.py`
//! drives the report in headless Chromium with Playwright (see its doc for
//! the checks) and keeps a screenshot of each view in
//! `target/report-screenshots/`. `slowlab analyze --html` is checked on the
//! same trace with a time range. The Locks table on a recording of the
//! `lock_hold` fixture (a holder sleeping with a mutex held while three
//! threads queue on it): `tests/report/check_locks.py` finds the mutex the
//! program printed with its three waiters and its holder, and the arrows
//! choosing it draws. Skips without perf; a missing Chromium,
//! Python or Playwright fails (`scripts/setup.sh` installs them).

use std::path::Path;

mod common;
use common::browser::{require_browser, run_check, screenshot_dir};
use common::{diagnose, one_recording_at_a_time, slowlab, why_program};

fn check(report: &Path, shots: &Path, hostile: &[&str]) {
    let mut args = vec![report.as_os_str(), shots.as_os_str()];
    args.extend(hostile.iter().map(std::ffi::OsStr::new));
    run_check("check.py", &args);
}

const IMG: &str = "<img src=x onerror=alert(1)>";

#[test]
fn the_interactive_report_is_explorable_and_shows_hostile_names_as_text() {
    require_perf!();
    require_browser();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let busy = dir.path().join(IMG);
    std::fs::copy("/usr/bin/yes", &busy).unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    let script = format!(
        "python3 -c 'import ctypes, time\n\
         ctypes.CDLL(None).prctl(15, b\"<b>hb</b>\", 0, 0, 0)\n\
         t = time.time()\n\
         while time.time() - t < 0.3: pass'\n\
         timeout 0.3 '{busy}' > /dev/null\n\
         cat '/nonexistent/{IMG}' 2> /dev/null\n\
         for i in $(seq 120); do sh -c 'n=0; while [ -e {logs}/log.$n ]; do n=$((n+1)); done; : > {logs}/log.$n'; done\n\
         true",
        busy = busy.display(),
        logs = logs.display(),
    );
    let out_dir = dir.path().join("d");
    let out = slowlab()
        .args(["diagnose", "-o"])
        .arg(&out_dir)
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "diagnose failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = out_dir.join("report.html");
    let html = std::fs::read_to_string(&report).unwrap();
    // The names are in the embedded data with `<` escaped, never raw.
    assert!(html.contains("\\u003cb>hb\\u003c/b>"), "the thread's name");
    assert!(!html.contains("<b>hb"), "a raw name in the page");
    assert!(!html.contains("<img"), "a raw name in the page");
    check(
        &report,
        &screenshot_dir("diagnose"),
        &[
            "<b>hb</b>",
            "<img src=x oner",
            "/nonexistent/<img src=x onerror=alert(N)>",
        ],
    );

    // `analyze --html` with a time range: a page of that range only.
    let part = dir.path().join("part.html");
    let out = slowlab()
        .arg("analyze")
        .arg(out_dir.join("trace.data"))
        .args(["--from", "0.01", "--to", "60", "--html"])
        .arg(&part)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "analyze --html failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(&part).unwrap();
    assert!(
        html.contains("\"from_us\":10000"),
        "the range is in the page"
    );
    check(&part, &screenshot_dir("analyze"), &["<b>hb</b>"]);
}

#[test]
fn the_locks_table_lists_a_mutex_and_draws_its_holder_to_waiter_arrows() {
    require_perf!();
    require_browser();
    let _one = one_recording_at_a_time();
    let program = why_program("lock_hold");
    let dir = tempfile::tempdir().unwrap();
    let d = diagnose(dir.path(), &[program.to_str().unwrap()]);
    let lock = d
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("lock="))
        .unwrap_or_else(|| panic!("no lock= on stderr: {}", d.stderr))
        .trim()
        .to_string();
    let report = dir.path().join("report.html");
    run_check(
        "check_locks.py",
        &[
            report.as_os_str(),
            screenshot_dir("locks").as_os_str(),
            std::ffi::OsStr::new(&lock),
        ],
    );
}
