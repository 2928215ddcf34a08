//! `slowlab record`: turns arguments into a `slowlab_record::Config`, runs
//! perf through that crate, and reports where the trace went. The perf
//! command line and every check live in `slowlab-record`.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, ValueEnum};
use slowlab_bpf::sched::StackMode;

/// Which recorder writes the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    /// `perf record`: every event slowlab uses, in perf.data.
    Perf,
    /// The eBPF scheduler recorder: CPU samples, switches and wake-ups with stacks,
    /// lifetimes, at a fraction of perf's cost (no faults, disk requests or syscalls yet).
    Bpf,
}

/// `--bpf-stacks`: which stacks the eBPF recorder takes (to measure what they cost).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BpfStacksArg {
    /// No stacks.
    None,
    /// Kernel stacks only.
    Kernel,
    /// Kernel and user stacks on blocking switches, wake-ups by a task and samples.
    Blocking,
    /// Kernel and user stacks on every event.
    All,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum CallGraphArg {
    /// Frame pointers: cheap, needs code built with frame pointers.
    Fp,
    /// Copies of the user stack: works without frame pointers, large files.
    Dwarf,
}

/// Record a system-wide trace with perf.
///
/// Records every CPU: sampled call stacks (kernel and user), context
/// switches and wake-ups with their stacks, process fork/exec/exit, page
/// faults, disk requests, and the syscalls slowlab's detectors use (openat,
/// the stat family, mmap/munmap, unlink, unshare, clone). With a command,
/// records until it exits and returns its exit code; without, until Ctrl-C,
/// SIGTERM or SIGHUP (also in the background: `slowlab record & … kill -INT
/// $!`), then exits with 128 + the signal once the trace is written. A
/// second signal stops at once, without the trace.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  slowlab record -- make -j2            record while make runs, into slowlab.data
  slowlab record -o idle.data           record until Ctrl-C (or kill -INT/-TERM)
  slowlab record --freq 4000 -- ./app   sample 4,000 times a second per CPU
  slowlab record --ring 30              keep only the last ~30 s (buffers sized
                                        from the event rate measured first);
                                        `kill -USR2 <slowlab pid>` saves a
                                        snapshot slowlab.data.<time>, Ctrl-C
                                        stops and saves slowlab.data
Then:
  slowlab analyze slowlab.data

perf writes slowlab.data.partial until the trace is finished. Needs root or
kernel.perf_event_paranoid = -1, and perf (Debian: linux-perf).")]
pub struct RecordArgs {
    /// Where to write the trace (perf.data format).
    #[arg(short, long, default_value = "slowlab.data")]
    pub output: PathBuf,
    /// Samples per second per CPU.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub freq: u32,
    /// Ring-buffer mode: keep only about the last SECONDS seconds (the
    /// paths and cgroup notes beside the trace too); SIGUSR2 saves a
    /// snapshot.
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u32).range(1..=86_400))]
    pub ring: Option<u32>,
    /// How user-space stacks are collected.
    #[arg(long, value_enum, default_value = "fp")]
    pub call_graph: CallGraphArg,
    /// Do not capture the path strings of syscalls (the eBPF probe that
    /// writes OUTPUT.paths; needs root and a kernel with BTF).
    #[arg(long)]
    pub no_paths: bool,
    /// Which recorder writes the trace.
    #[arg(long, value_enum, default_value = "perf")]
    pub backend: BackendArg,
    /// `--backend bpf`: bytes of the kernel ring buffer (a power of two).
    #[arg(long, value_name = "BYTES", hide = true)]
    pub bpf_ring_bytes: Option<u32>,
    /// `--backend bpf`: which stacks are taken (blocking: what the critical path reads).
    #[arg(
        long,
        value_enum,
        value_name = "WHICH",
        hide = true,
        default_value = "blocking"
    )]
    pub bpf_stacks: BpfStacksArg,
    /// `--backend bpf`: walk every stack, never reusing a thread's stacks from its last
    /// event at the same site (to measure what the reuse saves).
    #[arg(long, hide = true)]
    pub bpf_no_reuse: bool,
    /// The command to run while recording.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// `--backend bpf`.
fn run_bpf(args: RecordArgs) -> Result<i32> {
    if args.ring.is_some() {
        anyhow::bail!("--ring is not available with --backend bpf yet; use --backend perf");
    }
    let mut options = slowlab_bpf::sched::SchedOptions {
        sample_freq: args.freq,
        stacks: match args.bpf_stacks {
            BpfStacksArg::None => StackMode::None,
            BpfStacksArg::Kernel => StackMode::Kernel,
            BpfStacksArg::Blocking => StackMode::Blocking,
            BpfStacksArg::All => StackMode::All,
        },
        reuse_sites: !args.bpf_no_reuse,
        ..Default::default()
    };
    if let Some(bytes) = args.bpf_ring_bytes {
        options.ring_bytes = bytes;
    }
    if args.command.is_empty() {
        eprintln!(
            "slowlab: recording all CPUs into {} (eBPF); press Ctrl-C to stop",
            args.output.display()
        );
    }
    let out = slowlab_record::run_bpf(args.output.clone(), &options, &args.command)?;
    let s = &out.stats;
    if s.dropped > 0 {
        eprintln!(
            "slowlab: warning: {} events lost: the BPF ring buffer was full",
            s.dropped
        );
    }
    if s.stacks_lost > 0 {
        eprintln!(
            "slowlab: warning: {} events have no stack: the stack map was full",
            s.stacks_lost
        );
    }
    eprintln!(
        "slowlab: wrote {} ({:.1} MB, {} events, {} lost, {} stacks); analyze it with: slowlab analyze {}",
        s.output.display(),
        s.bytes as f64 / 1e6,
        s.records,
        s.dropped,
        s.stacks,
        s.output.display()
    );
    Ok(out.exit_code)
}

pub fn run(args: RecordArgs) -> Result<i32> {
    if args.backend == BackendArg::Bpf {
        return run_bpf(args);
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let cfg = slowlab_record::Config {
        output: args.output,
        freq: args.freq,
        ring_seconds: args.ring,
        call_graph: match args.call_graph {
            CallGraphArg::Fp => slowlab_record::CallGraph::Fp,
            CallGraphArg::Dwarf => slowlab_record::CallGraph::Dwarf,
        },
        command: args.command,
        cpus,
        capture_paths: !args.no_paths,
    };
    if cfg.command.is_empty() {
        eprintln!(
            "slowlab: recording all CPUs into {}; press Ctrl-C to stop",
            cfg.output.display()
        );
    }
    let out = match slowlab_record::run(&cfg) {
        Ok(out) => out,
        // Stopped by a signal without a trace: say so, and exit as the
        // signal says (128 + its number), as a shell expects.
        Err(e @ slowlab_record::RecordError::Interrupted { signal }) => {
            eprintln!("slowlab: {e}");
            return Ok(128 + signal);
        }
        Err(
            e @ slowlab_record::RecordError::PerfKilled {
                stopped_by: Some(signal),
                ..
            },
        ) => {
            eprintln!("slowlab: error: {e}");
            return Ok(128 + signal);
        }
        Err(e) => return Err(e.into()),
    };
    for w in &out.warnings {
        eprintln!("slowlab: warning: {w}");
    }
    let size = std::fs::metadata(&out.output).map(|m| m.len()).unwrap_or(0);
    let beside: Vec<String> = out
        .companions
        .iter()
        .map(|f| f.display().to_string())
        .collect();
    eprintln!(
        "slowlab: wrote {} ({:.1} MB){}; analyze it with: slowlab analyze {}",
        out.output.display(),
        size as f64 / 1e6,
        if beside.is_empty() {
            String::new()
        } else {
            format!(" and {}", beside.join(", "))
        },
        out.output.display()
    );
    if !out.snapshots.is_empty() {
        eprintln!(
            "slowlab: {} snapshot(s) saved on SIGUSR2: {}",
            out.snapshots.len(),
            out.snapshots
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(out.exit_code)
}
