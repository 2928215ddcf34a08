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
//! Also where the fuzz targets' committed inputs are (`fuzz/corpus/TARGET`
//! and `fuzz/regressions/TARGET`), for the tests that replay them.
//!
//! And [`has_tool`], [`perf_record`], the plain `perf record -g` of one program that the
//! symbolizer's tests read back, and [`assert_succeeded`], which shows a failed command's
//! stderr.
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

/// Panics with the command's stderr unless it exited with success.
#[track_caller]
pub fn assert_succeeded(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether the shell finds `tool` on the PATH (`command -v`).
pub fn has_tool(tool: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Records `program` with `perf record -g` at 999 Hz of cpu-clock into
/// `trace`, without perf's build-id cache (`-N`, which would keep a copy of
/// the binary); `false`, after a [`skip`] that says why, when perf cannot.
pub fn perf_record(trace: &Path, program: &Path) -> bool {
    let recorded = std::process::Command::new("perf")
        .args([
            "record",
            "-q",
            "-N",
            "-e",
            "cpu-clock",
            "-F",
            "999",
            "-g",
            "-o",
        ])
        .arg(trace)
        .arg("--")
        .arg(program)
        .stdout(std::process::Stdio::null())
        .output();
    let why = match recorded {
        Ok(out) if out.status.success() => return true,
        Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_string(),
        Err(e) => format!("cannot run perf: {e}"),
    };
    skip(format_args!(
        "perf record failed (perf_event_paranoid? not root?): {why}"
    ));
    false
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

/// The committed corpus of the fuzz target `target` (`fuzz/corpus/TARGET`),
/// sorted. Panics when it is missing or empty: a replay of nothing would
/// pass without meaning anything.
pub fn fuzz_corpus(target: &str) -> Vec<PathBuf> {
    let files = fuzz_files("corpus", target);
    assert!(
        !files.is_empty(),
        "fuzz/corpus/{target} is missing or empty: the fuzz corpus must be committed"
    );
    files
}

/// The inputs fuzzing found to crash the target `target`, each fixed since
/// (`fuzz/regressions/TARGET`), sorted; none when the directory is absent.
pub fn fuzz_regressions(target: &str) -> Vec<PathBuf> {
    fuzz_files("regressions", target)
}

fn fuzz_files(kind: &str, target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz")
        .join(kind)
        .join(target);
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .map(|e| e.expect("a directory entry").path())
            .filter(|p| p.is_file())
            .collect(),
        Err(_) => Vec::new(),
    };
    files.sort();
    files
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
    fn the_committed_fuzz_corpora_are_found() {
        for target in [
            "perf_data",
            "paths_capture",
            "cgroup_notes",
            "lab_import",
            "etl",
        ] {
            assert!(fuzz_corpus(target).iter().all(|p| p.is_file()));
        }
        assert!(fuzz_regressions("no-such-target").is_empty());
    }

    #[test]
    #[should_panic(expected = "is missing or empty")]
    fn a_missing_corpus_fails() {
        fuzz_corpus("no-such-target");
    }

    #[test]
    #[should_panic(expected = "cannot append")]
    fn a_skip_that_cannot_be_logged_fails_the_test() {
        let unwritable = Path::new("/nonexistent-slowlab-dir/skips");
        report_skip("c::test", "x", &mut Vec::new(), Some(unwritable));
    }
}
