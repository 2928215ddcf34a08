//! Ring mode on a real capture (root or CAP_BPF+CAP_PERFMON needed; otherwise `SKIP:`): a
//! snapshot holds the paths of the last window only, each snapshot is a complete file of
//! its own, nothing is written between snapshots, and a busy stat loop stays within the
//! byte bound.

mod support;

use std::ffi::CString;
use std::path::Path;
use std::time::{Duration, Instant};

use slowlab_bpf::{read_paths, CaptureOptions, PathCapture, RingOptions};
use support::{serial, start_or_skip};

fn stat(path: &Path) {
    let c = CString::new(path.to_str().expect("utf-8 temp path")).expect("no NUL");
    // SAFETY: a valid C string and a stat buffer written by the call.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        libc::stat(c.as_ptr(), &mut st);
    }
}

#[test]
fn a_ring_snapshot_keeps_the_last_window_only() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("final.slp");
    let options = CaptureOptions {
        ring: Some(RingOptions::new(Duration::from_millis(1500))),
        ..CaptureOptions::default()
    };
    let Some(capture) = start_or_skip("ring window", &out, &options) else {
        return;
    };
    assert!(!out.exists(), "a ring capture writes nothing until asked");
    let old = dir.path().join("old-name.dat");
    let new = dir.path().join("new-name.dat");
    stat(&old);
    std::thread::sleep(Duration::from_millis(2500));
    stat(&new);
    std::thread::sleep(Duration::from_millis(200));
    let snap = dir.path().join("snap.slp");
    let written = capture.snapshot(&snap).expect("snapshot");
    assert!(!out.exists(), "a snapshot does not write the final file");
    let log = read_paths(&snap).expect("a snapshot is a capture file");
    assert!(log.is_complete(), "{:?}", log.warnings);
    assert_eq!(log.events.len() as u64, written);
    let has =
        |log: &slowlab_bpf::PathLog, p: &Path| log.events.iter().any(|e| Path::new(&e.path) == p);
    assert!(has(&log, &new), "the recent path is in the window");
    assert!(!has(&log, &old), "the path of 2.7 s ago is not");
    let first = log.events.first().map_or(u64::MAX, |e| e.time_ns);
    assert!(first >= log.start_monotonic_ns);
    let span = log.end.expect("end record").stop_ns - log.start_monotonic_ns;
    assert!(
        (1_400_000_000..=1_600_000_000).contains(&span),
        "the window is 1.5 s: {span} ns"
    );
    capture.stop().expect("stop");
    let last = read_paths(&out).expect("the stop writes the final window");
    assert!(last.is_complete());
    assert!(!dir.path().join("final.slp.partial").exists());
}

#[test]
fn a_busy_ring_stays_within_its_byte_bound() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("busy.slp");
    let bound = 256 * 1024;
    let options = CaptureOptions {
        ring: Some(RingOptions {
            keep: Duration::from_secs(60),
            max_bytes: bound,
        }),
        ..CaptureOptions::default()
    };
    let Some(capture) = start_or_skip("ring bound", &out, &options) else {
        return;
    };
    let name = dir.path().join("missing-busy-name.dat");
    let t0 = Instant::now();
    for _ in 0..100_000 {
        stat(&name);
    }
    let took = t0.elapsed();
    let stats = capture.stop().expect("stop");
    let size = std::fs::metadata(&out).expect("final file").len();
    let log = read_paths(&out).expect("readable");
    eprintln!(
        "busy ring: 100,000 stats in {took:?}; {} records kept in {size} bytes (bound {bound})",
        stats.events
    );
    assert!(size <= bound + 64, "{size} bytes");
    assert!(stats.events > 1000);
    assert!(
        stats.events < 100_000,
        "older records were let go for space"
    );
    assert!(
        log.start_monotonic_ns <= log.events.first().map_or(0, |e| e.time_ns),
        "the header starts the window where records were let go"
    );
    let not_ring = PathCapture::start(&dir.path().join("plain.slp")).expect("plain capture");
    assert!(not_ring.snapshot(&dir.path().join("x.slp")).is_err());
}
