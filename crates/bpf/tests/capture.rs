//! Real captures (root or CAP_BPF+CAP_PERFMON needed; otherwise each test prints `SKIP:`):
//! a shell that stats 500 missing numbered names, a 200,000-stat stress loop with the
//! default and with a tiny ring buffer, a rename's two paths, a name in a page not yet in
//! memory, stopping by drop, the capture ending when stopped (not when its probes are
//! detached, which goes on in the background); and the errors for a bad option and for a
//! user without privileges (run in a child process that drops root).
//!
//! These tests do not involve perf; `tests/perf_clock.rs` does.

#[path = "support/stop.rs"]
mod stop;
mod support;

use std::ffi::CString;
use std::fs;
use std::process::Command;
use std::time::Instant;

use slowlab_bpf::{read_paths, BpfError, CaptureOptions, PathCapture, PathEvent, Syscall};
use support::{serial, start_or_skip};

#[test]
fn stat_loop_of_500_missing_names_is_captured_exactly() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("temp dir");
    for f in ["a.txt", "b.txt", "c.txt"] {
        fs::write(dir.path().join(f), "x").expect("write fixture");
    }
    let out = dir.path().join("paths.slp");
    let Some(capture) = start_or_skip("stat loop", &out, &CaptureOptions::default()) else {
        return;
    };

    let mut child = Command::new("sh")
        .arg("-c")
        .arg(
            "for i in $(seq 0 499); do [ -e name.$i.dat ]; done; \
             for f in a.txt b.txt c.txt; do : < $f; done",
        )
        .current_dir(dir.path())
        .spawn()
        .expect("spawn sh");
    let pid = child.id();
    let status = child.wait().expect("wait for sh");
    assert!(status.success(), "sh failed: {status}");
    let stats = capture.stop().expect("stop");

    let log = read_paths(&out).expect("read capture");
    let mine: Vec<&PathEvent> = log.events.iter().filter(|e| e.pid == pid).collect();
    let numbered: Vec<&PathEvent> = mine
        .iter()
        .copied()
        .filter(|e| e.path.starts_with("name."))
        .collect();
    let expected: Vec<String> = (0..500).map(|i| format!("name.{i}.dat")).collect();
    let got: Vec<&str> = numbered.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(got, expected, "the numbered names, in order, once each");
    assert!(
        numbered
            .iter()
            .all(|e| e.syscall.is_stat_family() && e.tid == pid && !e.truncated),
        "all by the stat family from sh's one thread: {:?}",
        numbered
            .iter()
            .map(|e| e.syscall)
            .collect::<std::collections::BTreeSet<_>>()
    );
    assert!(numbered.windows(2).all(|w| w[0].time_ns < w[1].time_ns));

    let opens: Vec<&str> = mine
        .iter()
        .filter(|e| matches!(e.syscall, Syscall::Openat | Syscall::Open))
        .map(|e| e.path.as_str())
        .filter(|p| p.ends_with(".txt"))
        .collect();
    assert_eq!(opens, ["a.txt", "b.txt", "c.txt"]);

    assert_eq!(stats.drops, 0, "nothing lost");
    assert!(log.is_complete(), "warnings: {:?}", log.warnings);
    assert_eq!(log.end.map(|e| e.events), Some(stats.events));
    assert!(log.was_attached(Syscall::Openat));
    eprintln!(
        "stat loop: {} records system-wide, {} from sh (pid {pid}), {} unreadable, attached {} \
         syscalls, missing {:?}",
        stats.events,
        mine.len(),
        stats.unreadable,
        stats.attached.len(),
        stats.missing
    );
}

/// Calls `stat` on a missing name `n` times from one thread; returns that thread's id and
/// the calls per second.
fn stat_loop(name: &str, n: u32) -> (u32, f64) {
    let c = CString::new(name).expect("no NUL");
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() } as u32;
    let t0 = Instant::now();
    for _ in 0..n {
        // SAFETY: `c` is a valid C string and `st` a writable stat buffer.
        unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            libc::stat(c.as_ptr(), &mut st);
        }
    }
    (tid, f64::from(n) / t0.elapsed().as_secs_f64())
}

fn count_for(log: &slowlab_bpf::PathLog, tid: u32, name: &str) -> u64 {
    log.events
        .iter()
        .filter(|e| e.tid == tid && e.path == name)
        .count() as u64
}

#[test]
fn stress_200k_stats_lose_nothing_with_the_default_ring() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("stress.slp");
    let Some(capture) = start_or_skip("stress", &out, &CaptureOptions::default()) else {
        return;
    };
    let name = dir.path().join("missing-stress.dat");
    let name = name.to_str().expect("utf-8 temp path");
    const N: u32 = 200_000;
    let (tid, rate) = stat_loop(name, N);
    let stats = capture.stop().expect("stop");
    let log = read_paths(&out).expect("read capture");
    let got = count_for(&log, tid, name);
    eprintln!(
        "stress (ring {} MiB): {N} stats at {rate:.0}/s; captured {got} of them; {} records \
         in all, {} dropped",
        slowlab_bpf::DEFAULT_RING_BYTES >> 20,
        stats.events,
        stats.drops
    );
    assert_eq!(stats.drops, 0);
    assert_eq!(got, u64::from(N));
}

#[test]
fn drops_are_counted_when_the_ring_is_too_small() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("small.slp");
    let options = CaptureOptions {
        ring_bytes: 16384,
        ..CaptureOptions::default()
    };
    let Some(capture) = start_or_skip("small ring", &out, &options) else {
        return;
    };
    let name = dir.path().join("missing-small.dat");
    let name = name.to_str().expect("utf-8 temp path");
    const N: u32 = 200_000;
    let (tid, rate) = stat_loop(name, N);
    let stats = capture.stop().expect("stop");
    let log = read_paths(&out).expect("read capture");
    let got = count_for(&log, tid, name);
    eprintln!(
        "stress (ring 16 KiB): {N} stats at {rate:.0}/s; captured {got}; {} dropped",
        stats.drops
    );
    // Every call is either in the file or counted as dropped (drops may also include
    // other processes' paths, hence ≥).
    assert!(got <= u64::from(N));
    assert!(
        got + stats.drops >= u64::from(N),
        "{got} captured + {} dropped < {N}",
        stats.drops
    );
    assert_eq!(log.end.map(|e| e.drops), Some(stats.drops));
    if stats.drops > 0 {
        assert!(!log.is_complete());
        assert!(log.warnings.iter().any(|w| w.contains("lost")));
    }
}

#[test]
fn dropping_the_capture_stops_it_and_finishes_the_file() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("dropped.slp");
    let Some(capture) = start_or_skip("drop", &out, &CaptureOptions::default()) else {
        return;
    };
    let probe = dir.path().join("probe-by-drop.dat");
    assert!(!probe.exists());
    drop(capture);
    let log = read_paths(&out).expect("read capture");
    assert!(log.end.is_some(), "end record written on drop");
    assert!(log
        .events
        .iter()
        .any(|e| e.path.ends_with("probe-by-drop.dat")));
}

/// This process's threads detaching probes (named `slowlab-detach`, and the threads they
/// start, which inherit the name).
fn detaching_threads() -> usize {
    fs::read_dir("/proc/self/task")
        .map(|dir| {
            dir.flatten()
                .filter(|t| {
                    fs::read_to_string(t.path().join("comm"))
                        .is_ok_and(|c| c.trim_end() == "slowlab-detach")
                })
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn the_capture_ends_when_stopped_not_when_its_probes_are_detached() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("stopped.slp");
    let Some(capture) = start_or_skip("stop", &out, &CaptureOptions::default()) else {
        return;
    };
    // A thread that calls twenty of the captured syscalls on a missing name every
    // millisecond until the stop has returned: recorded until the stop, and not after.
    let busy = std::sync::atomic::AtomicBool::new(true);
    let name = CString::new("/nonexistent/slowlab-capture-stop").expect("no NUL");
    let (asked, stopped) = std::thread::scope(|scope| {
        scope.spawn(|| {
            let p = name.as_ptr();
            let at = libc::AT_FDCWD as libc::c_long;
            while busy.load(std::sync::atomic::Ordering::Relaxed) {
                let mut buf = [0u8; 256];
                let b = buf.as_mut_ptr();
                // SAFETY: each call gets a valid C string, a buffer of 256 bytes where one
                // is written, and fails with ENOENT before touching anything.
                unsafe {
                    libc::syscall(libc::SYS_openat, at, p, libc::O_RDONLY);
                    libc::syscall(libc::SYS_open, p, libc::O_RDONLY);
                    libc::syscall(libc::SYS_stat, p, b);
                    libc::syscall(libc::SYS_lstat, p, b);
                    libc::syscall(libc::SYS_newfstatat, at, p, b, 0);
                    libc::syscall(libc::SYS_statx, at, p, 0, 0, b);
                    libc::syscall(libc::SYS_access, p, 0);
                    libc::syscall(libc::SYS_faccessat, at, p, 0);
                    libc::syscall(libc::SYS_unlink, p);
                    libc::syscall(libc::SYS_unlinkat, at, p, 0);
                    libc::syscall(libc::SYS_mkdir, p, 0o700);
                    libc::syscall(libc::SYS_rmdir, p);
                    libc::syscall(libc::SYS_rename, p, p);
                    libc::syscall(libc::SYS_readlink, p, b, 256);
                    libc::syscall(libc::SYS_truncate, p, 0);
                    libc::syscall(libc::SYS_chdir, p);
                    libc::syscall(libc::SYS_chmod, p, 0o600);
                    libc::syscall(libc::SYS_chown, p, 0, 0);
                    libc::syscall(libc::SYS_utimensat, at, p, 0, 0);
                    libc::syscall(libc::SYS_statfs, p, b);
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        });
        std::thread::sleep(std::time::Duration::from_millis(300));
        let asked = slowlab_bpf::monotonic_ns();
        capture.stop().expect("the stop");
        let stopped = slowlab_bpf::monotonic_ns();
        busy.store(false, std::sync::atomic::Ordering::Relaxed);
        (asked, stopped)
    });
    // The stop returned while the probes are still being let go of (one every ~40 ms, in
    // the kernel), and they are all let go of soon after.
    assert!(
        detaching_threads() > 0,
        "the stop waited for the detach ({:.1} ms)",
        (stopped - asked) as f64 / 1e6
    );
    let deadline = Instant::now() + std::time::Duration::from_secs(30);
    while detaching_threads() > 0 && Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(detaching_threads(), 0, "the detach did not end in 30 s");
    let log = read_paths(&out).expect("read capture");
    let busy_calls: Vec<&PathEvent> = log
        .events
        .iter()
        .filter(|e| e.path == "/nonexistent/slowlab-capture-stop")
        .collect();
    let kinds: std::collections::HashSet<Syscall> = busy_calls.iter().map(|e| e.syscall).collect();
    assert!(kinds.len() >= 15, "the busy thread's syscalls: {kinds:?}");
    let last = busy_calls.iter().map(|e| e.time_ns).max().unwrap_or(0);
    stop::assert_ended_at_the_stop("call", asked, stopped, last);
}

#[test]
fn rename_records_both_paths_with_one_time_stamp() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("rename.slp");
    let from = dir.path().join("from.txt");
    let to = dir.path().join("to.txt");
    fs::write(&from, "x").expect("write fixture");
    let Some(capture) = start_or_skip("rename", &out, &CaptureOptions::default()) else {
        return;
    };
    fs::rename(&from, &to).expect("rename");
    capture.stop().expect("stop");
    let log = read_paths(&out).expect("read capture");
    let renames: Vec<&PathEvent> = log
        .events
        .iter()
        .filter(|e| e.pid == std::process::id() && e.path.ends_with(".txt"))
        .filter(|e| {
            matches!(
                e.syscall,
                Syscall::Rename | Syscall::Renameat | Syscall::Renameat2
            )
        })
        .collect();
    assert_eq!(renames.len(), 2, "{renames:?}");
    assert_eq!((renames[0].arg, renames[1].arg), (0, 1));
    assert!(renames[0].path.ends_with("from.txt") && renames[1].path.ends_with("to.txt"));
    assert_eq!(renames[0].time_ns, renames[1].time_ns);
}

/// Stats a name held in a file mapped but never touched, so that its page is not in this
/// process's page tables when stat's sys_enter fires (the kernel faults it in while
/// copying the name); returns the capture's stat-family events for that name or with an
/// unreadable path from this process, or `None` when skipped.
fn stat_through_untouched_page(
    test: &str,
    options: &CaptureOptions,
) -> Option<(String, Vec<PathEvent>)> {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("parked.slp");
    let target = dir.path().join("parked-name.dat");
    let target = target.to_str().expect("utf-8 temp path").to_string();
    let holder = dir.path().join("holder");
    let mut bytes = target.clone().into_bytes();
    bytes.push(0);
    fs::write(&holder, &bytes).expect("write holder");
    let file = fs::File::open(&holder).expect("open holder");
    let capture = start_or_skip(test, &out, options)?;
    // SAFETY: maps a readable private view of `file`, unmapped below; the kernel reads the
    // NUL-terminated name from it.
    unsafe {
        use std::os::fd::AsRawFd;
        let len = bytes.len();
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            file.as_raw_fd(),
            0,
        );
        assert_ne!(p, libc::MAP_FAILED, "mmap");
        let mut st: libc::stat = std::mem::zeroed();
        libc::stat(p as *const libc::c_char, &mut st);
        libc::munmap(p, len);
    }
    capture.stop().expect("stop");
    let log = read_paths(&out).expect("read capture");
    let mine = log
        .events
        .into_iter()
        .filter(|e| e.pid == std::process::id() && e.syscall.is_stat_family())
        .filter(|e| e.path == target || e.unreadable)
        .collect();
    Some((target, mine))
}

#[test]
fn a_path_in_a_page_not_yet_in_memory_is_read_at_syscall_exit() {
    let _serial = serial();
    let Some((target, mine)) = stat_through_untouched_page("parked", &CaptureOptions::default())
    else {
        return;
    };
    assert_eq!(mine.len(), 1, "{mine:?}");
    assert!(!mine[0].unreadable, "read at sys_exit");
    assert_eq!(mine[0].path, target);
}

#[test]
fn without_retry_at_exit_such_a_path_is_recorded_unreadable() {
    let _serial = serial();
    let options = CaptureOptions {
        retry_at_exit: false,
        ..CaptureOptions::default()
    };
    let Some((_, mine)) = stat_through_untouched_page("no retry", &options) else {
        return;
    };
    assert_eq!(mine.len(), 1, "{mine:?}");
    assert!(mine[0].unreadable && mine[0].path.is_empty(), "{mine:?}");
}

#[test]
fn a_ring_size_that_is_not_a_power_of_two_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let err = PathCapture::start_with(
        &dir.path().join("x.slp"),
        &CaptureOptions {
            ring_bytes: 100_000,
            ..CaptureOptions::default()
        },
    )
    .expect_err("refused");
    assert!(matches!(err, BpfError::Options { .. }), "{err}");
}

/// Set in the child process that `without_privileges_the_error_says_run_as_root` starts.
const UNPRIVILEGED_CHILD: &str = "SLOWLAB_BPF_TEST_UNPRIVILEGED_CHILD";

#[test]
fn without_privileges_the_error_says_run_as_root() {
    let name = "without_privileges_the_error_says_run_as_root";
    if std::env::var_os(UNPRIVILEGED_CHILD).is_none() {
        // Run this test again in a child process that drops root first (setuid affects the
        // whole process, so not in this one).
        let exe = std::env::current_exe().expect("test binary");
        let child = Command::new(exe)
            .args(["--exact", name, "--nocapture", "--test-threads=1"])
            .env(UNPRIVILEGED_CHILD, "1")
            // The child cannot append to root's skip log; its skip is passed on below.
            .env_remove(slowlab_testkit::SKIP_LOG_VAR)
            .output()
            .expect("run the child");
        let stderr = String::from_utf8_lossy(&child.stderr);
        assert!(
            child.status.success(),
            "the unprivileged child failed ({}):\n{}\n{stderr}",
            child.status,
            String::from_utf8_lossy(&child.stdout)
        );
        // Pass the child's SKIP on, if it printed one.
        for line in stderr.lines().filter_map(|l| l.strip_prefix("SKIP: ")) {
            slowlab_testkit::skip(format_args!("in the unprivileged child: {line}"));
        }
        return;
    }
    // SAFETY: plain libc calls on this (single-test) child process.
    unsafe {
        if libc::geteuid() == 0 {
            const NOBODY: u32 = 65534;
            assert_eq!(libc::setgroups(0, std::ptr::null()), 0, "setgroups");
            assert_eq!(libc::setgid(NOBODY), 0, "setgid");
            assert_eq!(libc::setuid(NOBODY), 0, "setuid");
        }
    }
    let dir = tempfile::tempdir().expect("temp dir");
    match PathCapture::start(&dir.path().join("x.slp")) {
        Err(e @ BpfError::NotPermitted { .. }) => {
            let message = e.to_string();
            assert!(message.contains("run as root"), "{message}");
            assert!(message.contains("CAP_BPF"), "{message}");
        }
        Ok(capture) => {
            let _ = capture.stop();
            slowlab_testkit::skip(format_args!(
                "{name}: this user may load BPF programs without root"
            ));
        }
        Err(e) => panic!("expected NotPermitted, got: {e}"),
    }
}
