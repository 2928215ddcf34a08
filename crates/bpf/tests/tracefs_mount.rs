//! The scheduler recorder on a machine with no tracefs mounted (one booted without
//! systemd: a container, a minimal VM): libbpf finds a syscall tracepoint's event id in
//! tracefs, so every syscall program failed to attach, one warning each, and the
//! recording had no syscalls. The recorder now mounts tracefs as perf does.
//!
//! The test unmounts `/sys/kernel/tracing` for the time of one recording start and puts
//! it back if the recorder did not. Skips, with the reason, when not root, when debugfs
//! shows tracefs too (`/sys/kernel/debug/tracing`: unmounting the one would not hide it),
//! or when the kernel refuses the unmount (a tracefs file is open).

use std::ffi::CString;
use std::path::Path;

use slowlab_bpf::sched::{read_sched, SchedOptions, SchedRecorder};

#[path = "support/sched.rs"]
mod sched_support;

const TRACEFS: &str = "/sys/kernel/tracing";

fn tracefs_mounted() -> bool {
    Path::new(TRACEFS).join("events").is_dir()
}

/// Mounts tracefs back when it is missing at the end of the test, whatever happened (with
/// mount(8), not the code under test).
struct Remount;

impl Drop for Remount {
    fn drop(&mut self) {
        if !tracefs_mounted() {
            let _ = std::process::Command::new("mount")
                .args(["-t", "tracefs", "nodev", TRACEFS])
                .status();
        }
    }
}

#[test]
fn the_recorder_mounts_a_missing_tracefs_and_records_syscalls() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        slowlab_testkit::skip(format_args!("unmounting tracefs needs root"));
        return;
    }
    if Path::new("/sys/kernel/debug/tracing/events").is_dir() {
        slowlab_testkit::skip(format_args!(
            "debugfs shows tracefs at /sys/kernel/debug/tracing: it cannot be made missing"
        ));
        return;
    }
    let _remount = Remount;
    if tracefs_mounted() {
        let target = CString::new(TRACEFS).expect("no NUL");
        // SAFETY: a valid NUL-terminated path.
        if unsafe { libc::umount2(target.as_ptr(), 0) } != 0 {
            let e = std::io::Error::last_os_error();
            slowlab_testkit::skip(format_args!("tracefs could not be unmounted: {e}"));
            return;
        }
    }
    assert!(
        !tracefs_mounted(),
        "tracefs is still there after its unmount"
    );

    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("tracefs.slr");
    let missing = dir.path().join("not-there");
    let options = SchedOptions {
        record_own_process: true,
        ..SchedOptions::default()
    };
    let recorder = SchedRecorder::start(&out, &options).expect("the recorder starts");
    assert!(tracefs_mounted(), "the recorder did not mount tracefs");
    for _ in 0..5 {
        let _ = std::fs::metadata(&missing);
    }
    let stats = recorder.stop().expect("the stop");
    assert!(
        stats.unattached.is_empty(),
        "tracepoints not attached: {:?}",
        stats.unattached
    );
    let log = read_sched(&out).expect("the recording reads back");
    let lookups = sched_support::path_records(&log, &missing.to_string_lossy());
    assert_eq!(lookups, 5, "the five lookups' paths are not all recorded");
}
