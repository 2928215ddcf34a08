//! `slowlab record --backend bpf` into a file on a disk that fills while it records (a
//! 4 MiB tmpfs with 64 KiB left): the recording ends there with one line that says the
//! disk is full and what to do, exits non-zero and leaves no file behind, neither the
//! trace nor its unfinished `.partial`;
//! - without a command, it ends by itself at once, not when a stop signal comes (a
//!   recorder that goes on as if it recorded would let a user wait for nothing);
//! - with a command, the command runs to its end, told that it runs unrecorded.
//!
//! The flight recorder's full disk is `ring_bpf.rs`'s. Tests skip, with the reason, where
//! the process is not root or no tmpfs can be mounted.

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

mod common;
use common::ring::Tmpfs;
use common::{one_recording_at_a_time, slowlab};

/// A 4 MiB tmpfs filled until 64 KiB are free, or `None` (with the printed reason).
fn a_nearly_full_disk() -> Option<Tmpfs> {
    if !common::is_root() {
        slowlab_testkit::skip(format_args!("the eBPF recorder needs root"));
        return None;
    }
    match Tmpfs::mount(4) {
        Ok(fs) => {
            fs.fill(64 << 10);
            Some(fs)
        }
        Err(why) => {
            slowlab_testkit::skip(format_args!("cannot mount a tmpfs: {why}"));
            None
        }
    }
}

/// Work that makes records while it runs (processes started, files listed), about `secs`
/// seconds of it.
const BUSY: &str = "end=$(($(date +%s) + $1)); n=0; \
    while [ $(date +%s) -lt $end ]; do ls /usr/bin > /dev/null; n=$((n+1)); done; \
    echo \"busy: $n rounds\"";

/// What a recording that the full disk ended must say and leave: exit 2, the disk's line
/// last, no advice to switch backends, and only the filler file on the disk.
fn ended_by_the_full_disk(out: &Output, dir: &Path) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let last = err.trim_end().lines().last().unwrap_or("");
    assert!(
        last.starts_with(&format!(
            "slowlab: error: the disk filled while recording into {}",
            dir.display()
        )) && last.contains("MB free there now")
            && last.contains("free some space or write elsewhere with -o"),
        "{err}"
    );
    assert!(!err.contains("--backend perf"), "{err}");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list the disk")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["fill"], "nothing unfinished is left: {err}");
}

#[test]
fn a_recording_without_a_command_ends_when_the_disk_fills() {
    let _one = one_recording_at_a_time();
    let Some(fs) = a_nearly_full_disk() else {
        return;
    };
    let mut busy = std::process::Command::new("sh")
        .args(["-c", BUSY, "busy", "60"])
        .stdout(Stdio::null())
        .spawn()
        .expect("start the busy work");
    let recording = slowlab()
        .args(["record", "--backend", "bpf", "-o"])
        .arg(fs.path().join("y.data"))
        .stderr(Stdio::piped())
        .spawn()
        .expect("start slowlab");
    // No stop signal comes: the recorder must end by itself (it fills 64 KiB in about a
    // second here). Killed, and failed, after 40 s.
    let out = common::finish(recording, Duration::from_secs(40));
    let _ = busy.kill();
    let _ = busy.wait();
    ended_by_the_full_disk(&out, fs.path());
}

#[test]
fn a_command_runs_to_its_end_when_the_disk_fills_under_its_recording() {
    let _one = one_recording_at_a_time();
    let Some(fs) = a_nearly_full_disk() else {
        return;
    };
    let out = slowlab()
        .args(["record", "--backend", "bpf", "-o"])
        .arg(fs.path().join("x.data"))
        .args(["--", "sh", "-c", BUSY, "busy", "4"])
        .output()
        .expect("run slowlab");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("busy: "),
        "the command ran to its end: {err}"
    );
    assert!(
        err.contains("the recording failed (why: below, once sh exits); sh runs on, unrecorded"),
        "{err}"
    );
    ended_by_the_full_disk(&out, fs.path());
}
