//! Test support shared by slowlab's crates: how a test that cannot run here
//! says so.
//!
//! A test that needs root, perf, a cgroup controller or a tool the machine
//! lacks calls [`skip`] and returns. The line goes straight to the process's
//! stderr (not through `eprintln!`, which the test harness captures and
//! hides for passing tests), so a CI log shows every skip. When
//! `SLOWLAB_SKIP_LOG` names a file, the reason is also appended to it:
//! `scripts/test.sh` sets it and fails the run if any test skipped, since
//! CI runs as root with every capability the tests need.
//!
//! It does not decide whether a capability is present; each test checks
//! what it needs.

use std::fmt::Display;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Environment variable naming the file each skip is appended to.
pub const SKIP_LOG_VAR: &str = "SLOWLAB_SKIP_LOG";

/// Reports that the calling test is skipped, and why. The caller returns
/// right after.
pub fn skip(reason: impl Display) {
    let test = std::thread::current()
        .name()
        .unwrap_or("unnamed test")
        .to_string();
    // Unbuffered and uncaptured: the harness only captures `print!`/`eprint!`.
    let log = std::env::var_os(SKIP_LOG_VAR).map(PathBuf::from);
    report_skip(&test, reason, &mut std::io::stderr(), log.as_deref());
}

/// Writes `SKIP: test: reason` to `out` and appends it to `log`. Panics if
/// the log cannot be written: a lost skip would let CI pass silently.
fn report_skip(test: &str, reason: impl Display, out: &mut dyn Write, log: Option<&Path>) {
    let line = format!("SKIP: {test}: {reason}\n");
    let _ = out.write_all(line.as_bytes());
    if let Some(log) = log {
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = appended {
            panic!("cannot append to {SKIP_LOG_VAR}={}: {e}", log.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_is_written_out_and_appended_to_the_log() {
        let dir = std::env::temp_dir().join(format!("slowlab-testkit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("skips");
        let mut out = Vec::new();
        report_skip(
            "a::test",
            format_args!("needs {}", "root"),
            &mut out,
            Some(&log),
        );
        report_skip("b::test", "no perf", &mut out, Some(&log));
        let text = std::fs::read_to_string(&log).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(text, "SKIP: a::test: needs root\nSKIP: b::test: no perf\n");
        assert_eq!(String::from_utf8(out).unwrap(), text);
    }

    #[test]
    #[should_panic(expected = "cannot append")]
    fn a_skip_that_cannot_be_logged_fails_the_test() {
        let unwritable = Path::new("/nonexistent-slowlab-dir/skips");
        report_skip("c::test", "x", &mut Vec::new(), Some(unwritable));
    }
}
