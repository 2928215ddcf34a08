//! The drop measurement behind the default ring-buffer size: `stat`s a missing name N times
//! from T threads, first without and then with a capture of the given ring size, and
//! prints the call rates, the records captured and the records dropped. Usage (as root):
//! `cargo run --release -p slowlab-bpf --example stress -- RING_BYTES N [THREADS]`.
//! It checks nothing; `tests/capture.rs` holds the assertions.

use std::ffi::CString;
use std::process::ExitCode;
use std::time::Instant;

use slowlab_bpf::{read_paths, CaptureOptions, PathCapture};

/// Runs `n` stats in each of `threads` threads; returns (calls per second, thread ids).
fn hammer(name: &str, n: u32, threads: u32) -> (f64, Vec<u32>) {
    let t0 = Instant::now();
    let tids = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let c = CString::new(name).unwrap_or_default();
                    for _ in 0..n {
                        // SAFETY: `c` is a valid C string and `st` a writable stat buffer.
                        unsafe {
                            let mut st: libc::stat = std::mem::zeroed();
                            libc::stat(c.as_ptr(), &mut st);
                        }
                    }
                    // SAFETY: gettid has no preconditions.
                    unsafe { libc::gettid() as u32 }
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    (f64::from(n * threads) / t0.elapsed().as_secs_f64(), tids)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parse =
        |i: usize, default: u32| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let (ring, n, threads) = (parse(0, 32 << 20), parse(1, 200_000), parse(2, 1));
    let dir = std::env::temp_dir().join(format!("slowlab-stress-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("error: {}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    let name = dir
        .join("missing-stress.dat")
        .to_string_lossy()
        .into_owned();
    let out = dir.join("stress.slp");

    let (bare, _) = hammer(&name, n, threads);
    let capture = match PathCapture::start_with(
        &out,
        &CaptureOptions {
            ring_bytes: ring,
            ..CaptureOptions::default()
        },
    ) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (traced, tids) = hammer(&name, n, threads);
    let stats = match capture.stop() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let captured = match read_paths(&out) {
        Ok(log) => log
            .events
            .iter()
            .filter(|e| tids.contains(&e.tid) && e.path == name)
            .count(),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "ring {} KiB, {threads} thread(s) × {n} stats: {bare:.0}/s bare, {traced:.0}/s traced \
         ({:.2} µs added per call); captured {captured} of {}; dropped {} ({:.2}%)",
        ring >> 10,
        1e6 / traced - 1e6 / bare,
        n * threads,
        stats.drops,
        100.0 * stats.drops as f64 / f64::from(n * threads)
    );
    ExitCode::SUCCESS
}
