//! How much memory each step of reading a scheduler recording takes: the process's
//! resident memory now and at its peak (`/proc/self/status`) after the file is parsed,
//! after the trace is built, and once the parsed file is dropped. For
//! `bench/analyze/README.md`'s figures; it measures, it does not check.
//!
//!     cargo run --profile test-release -p slowlab-schedrec --example read_memory -- TRACE

use std::path::PathBuf;

/// "now N MB, peak M MB" from `/proc/self/status`.
fn resident() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let mb = |field: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .map_or(0, |kib| kib / 1024)
    };
    format!("now {} MB, peak {} MB", mb("VmRSS:"), mb("VmHWM:"))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path: PathBuf = std::env::args_os()
        .nth(1)
        .ok_or("usage: read_memory TRACE (a `slowlab record --backend bpf` file)")?
        .into();
    eprintln!("start: {}", resident());
    let log = slowlab_bpf::sched::read_sched(&path)?;
    eprintln!(
        "parsed ({} records, {} stacks): {}",
        log.records.len(),
        log.stacks.len(),
        resident()
    );
    let trace = slowlab_schedrec::build_trace(&log, &slowlab_schedrec::ReadOptions::default());
    eprintln!(
        "trace built ({} events, {} samples): {}",
        trace.events.len(),
        trace.samples.len(),
        resident()
    );
    drop(log);
    eprintln!("parsed file dropped: {}", resident());
    Ok(())
}
