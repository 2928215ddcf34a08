//! Reading capture files that are damaged or are not captures: a cut last record reads
//! with a warning; an empty or garbage file is a clear error. No BPF needed.

use std::fs;
use std::path::Path;

use slowlab_bpf::{read_paths, BpfError, PathEvent, PathLogWriter, Syscall};

fn event(i: u64) -> PathEvent {
    PathEvent {
        time_ns: 1_000 + i,
        pid: 42,
        tid: 42,
        syscall: Syscall::Newfstatat,
        arg: 0,
        path: format!("name.{i}.dat"),
        truncated: false,
        unreadable: false,
    }
}

/// A capture of `n` stat events; without `finish`, what a killed capture leaves (header
/// and records, no end record).
fn capture_bytes(n: u64, finish: bool) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut w = PathLogWriter::new(&mut buf, 1, 2, &[Syscall::Newfstatat]).expect("vec");
    for i in 0..n {
        w.event(&event(i)).expect("vec");
    }
    if finish {
        w.finish(9_999, 0).expect("vec");
    }
    buf
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let p = dir.join(name);
    fs::write(&p, bytes).expect("write test file");
    p
}

#[test]
fn a_cut_last_record_reads_with_a_warning() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut bytes = capture_bytes(10, false);
    bytes.truncate(bytes.len() - 5);
    let log = read_paths(&write(dir.path(), "cut.slp", &bytes)).expect("reads");
    assert_eq!(log.events.len(), 9);
    assert_eq!(log.events[8].path, "name.8.dat");
    assert_eq!(log.truncated_records, 1);
    assert!(log.end.is_none());
    assert!(!log.is_complete());
    assert!(
        log.warnings
            .iter()
            .any(|w| w.contains("middle of a record")),
        "{:?}",
        log.warnings
    );
}

#[test]
fn a_file_without_end_record_reads_with_a_warning() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = read_paths(&write(dir.path(), "open.slp", &capture_bytes(3, false))).expect("reads");
    assert_eq!(log.events.len(), 3);
    assert_eq!(log.truncated_records, 0);
    assert!(log.warnings.iter().any(|w| w.contains("no end record")));
}

#[test]
fn a_complete_file_has_no_warnings() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = read_paths(&write(dir.path(), "ok.slp", &capture_bytes(3, true))).expect("reads");
    assert!(log.is_complete());
    assert!(log.warnings.is_empty(), "{:?}", log.warnings);
    assert_eq!(log.attached, vec![Syscall::Newfstatat]);
}

fn format_error(bytes: &[u8]) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    match read_paths(&write(dir.path(), "bad.slp", bytes)) {
        Err(e @ BpfError::Format { .. }) => e.to_string(),
        other => panic!("expected a format error, got {other:?}"),
    }
}

#[test]
fn an_empty_file_is_a_clear_error() {
    let msg = format_error(b"");
    assert!(msg.contains("empty"), "{msg}");
    assert!(msg.contains("bad.slp"), "{msg}");
}

#[test]
fn a_garbage_file_is_a_clear_error() {
    let msg = format_error(b"PERFILE2 this is a perf.data, not a path capture");
    assert!(msg.contains("bad magic"), "{msg}");
    let msg = format_error(&[0xff; 100]);
    assert!(msg.contains("bad magic"), "{msg}");
}

#[test]
fn a_cut_header_or_unknown_version_is_a_clear_error() {
    let whole = capture_bytes(1, true);
    let msg = format_error(&whole[..20]);
    assert!(msg.contains("header is cut short"), "{msg}");
    let mut future = whole.clone();
    future[8] = 9;
    let msg = format_error(&future);
    assert!(msg.contains("version 9"), "{msg}");
}

#[test]
fn a_missing_file_is_an_io_error_naming_it() {
    let err = read_paths(Path::new("/nonexistent/paths.slp")).expect_err("no such file");
    assert!(matches!(err, BpfError::Io { .. }));
    assert!(err.to_string().contains("/nonexistent/paths.slp"));
}
