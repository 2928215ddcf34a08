//! `slowlab record`: turns arguments into a `slowlab_record::Config`, runs
//! perf through that crate, and reports where the trace went; `--save`
//! asks a running ring recorder for a snapshot. The perf command line,
//! every check, the triggers and the control socket live in
//! `slowlab-record`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use slowlab_bpf::sched::StackMode;
use slowlab_cli::record::{BackendArg, BpfStacksArg, CallGraphArg, RecordArgs};

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
        sample_freq: args.freq,
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
    if let Some(bytes) = args.bpf_ring_bytes {
        options.ring_bytes = bytes;
    }
    let always = always_on(&args);
    let output = args.output.unwrap_or_else(default_output);
    if args.command.is_empty() {
        eprintln!(
            "slowlab: recording all CPUs into {} (eBPF){}; press Ctrl-C to stop",
            output.display(),
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
    let s = &out.stats;
    let beside: String = out
        .companions
        .iter()
        .map(|c| format!(" and {}", c.display()))
        .collect();
    eprintln!(
        "slowlab: wrote {} ({:.1} MB, {} events, {} lost, {} stacks){beside}; analyze it with: slowlab analyze {}",
        s.output.display(),
        s.bytes as f64 / 1e6,
        s.records,
        s.dropped,
        s.stacks,
        s.output.display()
    );
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
    if snapshots.is_empty() {
        return;
    }
    eprintln!(
        "slowlab: {} snapshot(s) saved and kept: {}",
        snapshots.len(),
        snapshots
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
}

fn default_output() -> PathBuf {
    PathBuf::from("slowlab.data")
}

pub fn run(args: RecordArgs) -> Result<i32> {
    if args.save {
        return save(args.output);
    }
    if args.backend == BackendArg::Bpf {
        return run_bpf(args);
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let always = always_on(&args);
    let cfg = slowlab_record::Config {
        output: args.output.unwrap_or_else(default_output),
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
    let out = match slowlab_record::run_with(&cfg, &always) {
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
    print_snapshots(&out.snapshots);
    Ok(out.exit_code)
}
