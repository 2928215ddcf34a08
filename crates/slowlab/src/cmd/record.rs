//! `slowlab record`: turns arguments into a `slowlab_record::Config`, runs
//! perf through that crate, and reports where the trace went; `--save`
//! asks a running ring recorder for a snapshot. The perf command line,
//! every check, the triggers and the control socket live in
//! `slowlab-record`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use slowlab_bpf::sched::{SampleClock, StackMode};
use slowlab_cli::record::{BackendArg, BpfStacksArg, CallGraphArg, RecordArgs};
use slowlab_record::Backend;

/// How long `--save` waits for the snapshot (a busy machine's dump takes
/// seconds; a dump already under way is waited for first).
const SAVE_TIMEOUT: Duration = Duration::from_secs(300);

/// `--save`: the path of the snapshot on stdout.
fn save(output: Option<PathBuf>) -> Result<i32> {
    let path = slowlab_record::save(output.as_deref(), SAVE_TIMEOUT)?;
    println!("{}", path.display());
    Ok(0)
}

/// `--backend bpf`.
fn run_bpf(args: RecordArgs) -> Result<i32> {
    let mut options = slowlab_bpf::sched::SchedOptions {
        sample_freq: args.sample_freq(),
        sample_clock: if args.samples_on_tick() {
            SampleClock::Tick
        } else {
            SampleClock::Timer
        },
        stacks: match args.bpf_stacks {
            BpfStacksArg::None => StackMode::None,
            BpfStacksArg::Kernel => StackMode::Kernel,
            BpfStacksArg::Blocking => StackMode::Blocking,
            BpfStacksArg::All => StackMode::All,
        },
        reuse_sites: !args.bpf_no_reuse,
        paths: !args.no_paths,
        ..Default::default()
    };
    options.ring_bytes = args.bpf_ring_bytes.unwrap_or(options.ring_bytes);
    options.stack_entries = args.bpf_stack_entries.unwrap_or(options.stack_entries);
    let always = always_on(&args);
    let output = args.output.unwrap_or_else(default_output);
    if args.command.is_empty() {
        eprintln!(
            "slowlab: recording all CPUs into {} (eBPF{}){}; press Ctrl-C to stop",
            output.display(),
            if options.sample_clock == SampleClock::Tick {
                ", CPU samples on the scheduler's tick"
            } else {
                ""
            },
            match args.ring {
                Some(secs) => format!(", keeping the last {secs} s"),
                None => String::new(),
            }
        );
    }
    let out = match args.ring {
        Some(secs) => slowlab_record::run_bpf_ring(output, &options, secs, &always, &args.command)?,
        None => slowlab_record::run_bpf(output, &options, &args.command)?,
    };
    for w in out.warnings() {
        eprintln!("slowlab: warning: {w}");
    }
    eprintln!("slowlab: {}", out.wrote_line());
    print_snapshots(&out.snapshots);
    Ok(out.exit_code)
}

/// What a ring recording does besides keeping its ring.
fn always_on(args: &RecordArgs) -> slowlab_record::AlwaysOn {
    slowlab_record::AlwaysOn {
        triggers: args.trigger.clone(),
        after: args.after,
        keep_snapshots: args.keep_snapshots as usize,
        control: true,
    }
}

/// The snapshots a ring recording saved and kept, if any.
fn print_snapshots(snapshots: &[PathBuf]) {
    if let Some(line) = slowlab_record::snapshots_line(snapshots) {
        eprintln!("slowlab: {line}");
    }
}

/// The recorder `--backend` asks for (`auto` decided here, saying why it is not bpf).
pub fn backend(arg: BackendArg, call_graph: slowlab_record::CallGraph) -> Backend {
    match arg {
        BackendArg::Perf => Backend::Perf,
        BackendArg::Bpf => Backend::Bpf,
        BackendArg::Auto => {
            let (chosen, why) = slowlab_record::auto_backend(call_graph);
            if let Some(why) = why {
                eprintln!("slowlab: {why}");
            }
            chosen
        }
    }
}

/// Whether `diagnose`'s recordings (one, `--repeat`'s or `sweep --critical-path`'s) are the
/// eBPF recorder's: `arg` as [`backend`] resolves it for frame-pointer stacks.
pub fn diagnose_with_bpf(arg: BackendArg) -> bool {
    backend(arg, slowlab_record::CallGraph::Fp) == Backend::Bpf
}

fn default_output() -> PathBuf {
    PathBuf::from("slowlab.data")
}

pub fn run(args: RecordArgs) -> Result<i32> {
    if args.save {
        return save(args.output);
    }
    let call_graph = match args.call_graph {
        CallGraphArg::Fp => slowlab_record::CallGraph::Fp,
        CallGraphArg::Dwarf => slowlab_record::CallGraph::Dwarf,
    };
    let bpf = backend(args.backend, call_graph) == Backend::Bpf;
    if let Some(why) = args.backend_refusal(bpf) {
        anyhow::bail!(why);
    }
    if bpf {
        return run_bpf(args);
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let always = always_on(&args);
    let freq = args.sample_freq();
    let cfg = slowlab_record::Config {
        output: args.output.unwrap_or_else(default_output),
        freq,
        ring_seconds: args.ring,
        call_graph,
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
    let out = match slowlab_record::run_with(&cfg, &always) {
        Ok(out) => out,
        // Stopped by a signal without a trace: say so, and exit as the
        // signal says (128 + its number), as a shell expects.
        Err(e) => match e.stop_signal() {
            Some(signal) => {
                eprintln!("slowlab: {e}");
                return Ok(128 + signal);
            }
            None => return Err(e.into()),
        },
    };
    for w in &out.warnings {
        eprintln!("slowlab: warning: {w}");
    }
    eprintln!("slowlab: {}", out.wrote_line());
    print_snapshots(&out.snapshots);
    Ok(out.exit_code)
}
