//! Records the scheduler with eBPF while a command runs and prints what the recording
//! holds: `cargo run --example sched_record -- OUT CMD [ARGS…]` (root). With
//! `SCHED_RING=BYTES` the ring buffer is that small (to see lost records counted); with
//! `SCHED_STACKS=none|kernel|blocking|all` those stacks are taken. With
//! `sysctl kernel.bpf_stats_enabled=1` it prints what each program cost per run.
//! `SCHED_KERNEL_FRAMES=N`, `SCHED_REUSE=0|1`, `SCHED_SYSCALLS=0|1` and
//! `SCHED_RAW_SYSCALLS=0|1` (and `SCHED_DETECTOR_SYSCALLS=0|1`, `SCHED_PATHS=0|1`) set
//! `SchedOptions::{kernel_frames, reuse_sites, syscalls, raw_syscalls, detector_syscalls,
//! paths}`; `SCHED_FREQ=HZ` the CPU samples' rate (0: none) and `SCHED_FAULTS=0|1`
//! `SchedOptions::faults_and_block`; `SCHED_TICK=1` takes the samples on the scheduler's
//! tick (`SampleClock::Tick`).

use std::path::Path;
use std::process::Command;

use slowlab_bpf::sched::{read_sched, SchedOptions, SchedRecorder, StackMode};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (out, cmd) = args
        .split_first()
        .ok_or("usage: sched_record OUT CMD [ARGS…]")?;
    let mut options = SchedOptions::default();
    if let Ok(ring) = std::env::var("SCHED_RING") {
        options.ring_bytes = ring.parse()?;
    }
    if let Ok(which) = std::env::var("SCHED_STACKS") {
        options.stacks = match which.as_str() {
            "none" => StackMode::None,
            "kernel" => StackMode::Kernel,
            "blocking" => StackMode::Blocking,
            "all" => StackMode::All,
            _ => return Err(format!("SCHED_STACKS={which}: none, kernel, blocking or all").into()),
        };
    }
    if let Ok(n) = std::env::var("SCHED_KERNEL_FRAMES") {
        options.kernel_frames = n.parse()?;
    }
    if let Ok(v) = std::env::var("SCHED_REUSE") {
        options.reuse_sites = v == "1";
    }
    if let Ok(v) = std::env::var("SCHED_SYSCALLS") {
        options.syscalls = v == "1";
    }
    if let Ok(v) = std::env::var("SCHED_DETECTOR_SYSCALLS") {
        options.detector_syscalls = v == "1";
    }
    if let Ok(v) = std::env::var("SCHED_RAW_SYSCALLS") {
        options.raw_syscalls = v == "1";
    }
    if let Ok(v) = std::env::var("SCHED_PATHS") {
        options.paths = v == "1";
    }
    if let Ok(hz) = std::env::var("SCHED_FREQ") {
        options.sample_freq = hz.parse()?;
    }
    if std::env::var("SCHED_TICK").is_ok_and(|v| v == "1") {
        options.sample_clock = slowlab_bpf::sched::SampleClock::Tick;
    }
    if let Ok(v) = std::env::var("SCHED_FAULTS") {
        options.faults_and_block = v == "1";
    }
    let rec = SchedRecorder::start(Path::new(out), &options)?;
    let status = Command::new(&cmd[0]).args(&cmd[1..]).status()?;
    let stats = rec.stop()?;
    eprintln!(
        "{status}; {} records, {} dropped, {} stacks ({} lost, {} reused), {} bytes",
        stats.records,
        stats.dropped,
        stats.stacks,
        stats.stacks_lost,
        stats.stacks_reused,
        stats.bytes
    );
    // With `sysctl kernel.bpf_stats_enabled=1`: what each program cost.
    for p in &stats.programs {
        eprintln!(
            "{:<20} {:>9} runs {:>6} ns/run {:>8.1} ms {:>6} missed",
            p.name,
            p.runs,
            p.mean_ns(),
            p.run_ns as f64 / 1e6,
            p.recursion_misses
        );
    }
    let log = read_sched(Path::new(out))?;
    let mut kinds = std::collections::BTreeMap::new();
    for r in log.records.iter() {
        *kinds.entry(format!("{:?}", r.kind)).or_insert(0u64) += 1;
    }
    eprintln!(
        "{kinds:?}; {} threads, {} maps, {} stacks; end {:?}; warnings {:?}",
        log.threads.len(),
        log.maps.len(),
        log.stacks.len(),
        log.end,
        log.warnings
    );
    Ok(())
}
