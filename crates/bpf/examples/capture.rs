//! Runs a path capture around a command and prints what it saw: a manual check and the
//! command behind the figures in the crate's docs. Usage (as root):
//! `cargo run -p slowlab-bpf --example capture -- OUT.slp CMD [ARGS…]`.
//! It does not correlate with perf; see the tests for that.

use std::path::Path;
use std::process::{Command, ExitCode};

use slowlab_bpf::{read_paths, PathCapture};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [out, cmd, rest @ ..] = args.as_slice() else {
        eprintln!("usage: capture OUT.slp CMD [ARGS…]");
        return ExitCode::from(2);
    };
    let t_start = std::time::Instant::now();
    let capture = match PathCapture::start(Path::new(out)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!(
        "attached {} syscalls in {:.3} s; missing here: {:?}",
        capture.attached().len(),
        t_start.elapsed().as_secs_f64(),
        capture.missing()
    );
    let t0 = std::time::Instant::now();
    let status = Command::new(cmd).args(rest).status();
    let elapsed = t0.elapsed();
    let t_stop = std::time::Instant::now();
    let stats = match capture.stop() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!("stopped in {:.3} s", t_stop.elapsed().as_secs_f64());
    eprintln!(
        "command {:?} in {:.3} s; {} paths written, {} dropped, {} unreadable, {} truncated",
        status.map(|s| s.code()),
        elapsed.as_secs_f64(),
        stats.events,
        stats.drops,
        stats.unreadable,
        stats.truncated
    );
    match read_paths(Path::new(out)) {
        Ok(log) => {
            for w in &log.warnings {
                eprintln!("warning: {w}");
            }
            let mut by_syscall = std::collections::BTreeMap::new();
            for e in &log.events {
                *by_syscall.entry(e.syscall.name()).or_insert(0u64) += 1;
            }
            for (name, n) in by_syscall {
                println!("{n:>9}  {name}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
