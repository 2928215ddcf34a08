//! Driving a page slowlab wrote in headless Chromium: the Playwright
//! scripts under `tests/report/` are run with python3, screenshots go to
//! `target/report-screenshots/NAME/`. A missing browser, Python or
//! Playwright fails the test (setup installs them), never skips it.

use std::path::{Path, PathBuf};
use std::process::Command;

pub fn screenshot_dir(name: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("report-screenshots").join(name)
}

/// Fails (not skips) when the browser side is missing: setup installs it.
pub fn require_browser() {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&chromium).exists(),
        "{chromium} is missing: run scripts/setup.sh (apt-get install chromium)"
    );
    let playwright = Command::new("python3")
        .args(["-c", "import playwright.sync_api"])
        .output();
    assert!(
        playwright.is_ok_and(|o| o.status.success()),
        "python3 with Playwright is missing: run scripts/setup.sh (pip install playwright)"
    );
}

/// Runs `tests/report/SCRIPT` with `args`; fails with its output unless
/// it succeeds, and prints its summary line.
pub fn run_check(script: &str, args: &[&std::ffi::OsStr]) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/report")
        .join(script);
    let out = Command::new("python3")
        .arg(script)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the page failed in Chromium: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{}", String::from_utf8_lossy(&out.stdout).trim());
}
