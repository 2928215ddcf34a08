//! `slowlab diagnose`: record the whole system while a command runs, make
//! the recording's one analysis (the command's critical path, every
//! detector), print the answer first and the findings ranked by what they
//! cost, and write the trace, `critical_path.json`, `findings.json` and a
//! self-contained `report.html` (and the exports asked for) into one
//! directory; with `--repeat N`, N such directories and a summary across
//! them (`slowlab_runs::repeat`). The recording and the analysis are
//! `slowlab-diagnose`'s; this is glue.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use slowlab_diagnose::{analyze_into, record_and_analyze, recording, Target};
use slowlab_exports::{Export, ParquetOptions};

use super::input::Opener;

/// Record while a command runs, then say why it was slow.
///
/// Records the whole system with `slowlab record` (sampled stacks, context
/// switches and wake-ups, page faults, process lifetimes, block I/O, the
/// syscalls the detectors use, and the path strings of those syscalls with
/// eBPF) until CMD exits. Then it follows CMD's critical path: its wall time
/// cut into time on a CPU, runnable (waiting for a CPU) and blocked (lock,
/// io, sleep, ipc, fault, other), each wait followed into the thread that
/// ended it. It prints that answer first, then the findings of every
/// detector ranked by the time they cost, each with its evidence and a fix.
///
/// Writes DIR/trace.data (and its .paths and .cgroups.json companions),
/// DIR/critical_path.json, DIR/findings.json and DIR/report.html (and, with
/// --fxprof, a profile for the Firefox Profiler). Returns CMD's exit code.
///
/// report.html is interactive and self-contained (open it in any browser,
/// offline): the critical path and the findings first, then a timeline of
/// every thread's states, flame graphs of CPU and blocked time, and tables
/// (threads, functions, waits, faults, syscalls, lifetimes) that follow the
/// time range and threads selected in the page.
///
/// With --repeat N, runs and records CMD N times, one complete directory
/// per run (DIR/run-1 … DIR/run-N, each as one diagnose writes it), and
/// prints each run's wall time (its critical path's), the median, and the
/// answer of the median run: what `slowlab diff A/run-* -- B/run-*`
/// compares, with the runs' own spread as its noise. Ctrl-C stops between
/// runs (or stops the run being recorded, whose directory is removed) and
/// keeps the finished runs. Returns 130 then, else the first non-zero
/// exit code of CMD.
///
/// With --pid PID instead of CMD, attaches to a process that is already
/// running: records the whole system for --seconds (Ctrl-C ends early,
/// with the answer so far) and answers for that process over the window.
/// A process that did not run at all in the window looks hung: its wait
/// chains are walked as `slowlab hang` does. Returns 0 (130 on Ctrl-C).
///
/// Examples:
///
///   sudo slowlab diagnose -o why -- ./build.sh
///   sudo slowlab diagnose --repeat 5 -o before -- ./build.sh
///   sudo slowlab diagnose --pid 4242 --seconds 20    a service, running
///   slowlab analyze why/trace.data --waits      look further
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct DiagnoseArgs {
    /// Directory for the trace and the reports (created if missing)
    #[arg(short, long, default_value = "slowlab-diagnose", value_name = "DIR")]
    output: PathBuf,

    /// Samples per second per CPU
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    freq: u32,

    /// Print the findings as JSON on stdout (the human report goes to
    /// stderr); with --repeat, the summary: {"command","asked","runs":[{"run",
    /// "dir","wall_s","exit_code","answer"}],"median_s","min_s","max_s",
    /// "median_run","interrupted"}
    #[arg(long)]
    json: bool,

    /// Also write a Firefox Profiler profile of the whole trace (gzipped
    /// when the name ends in .gz), with blocked time and findings as
    /// markers; open it at profiler.firefox.com or in Perfetto's UI
    #[arg(long, value_name = "FILE.json[.gz]")]
    fxprof: Option<PathBuf>,

    /// Also export the trace and its findings as Parquet fleet tables
    /// under DIR (as `slowlab export` does)
    #[arg(long, value_name = "DIR")]
    parquet: Option<PathBuf>,

    /// Run and record CMD this many times (1 to 100), into DIR/run-1 …
    /// DIR/run-N, and summarize the runs
    #[arg(long, value_name = "N", conflicts_with_all = ["pid", "fxprof", "parquet"])]
    repeat: Option<String>,

    /// Attach to this running process instead of running CMD
    #[arg(long, value_name = "PID", conflicts_with = "command")]
    pid: Option<i32>,

    /// With --pid: how long to record (90, 20s, 500ms, 2m)
    #[arg(long, default_value = "10", value_name = "DURATION", value_parser = window_seconds, requires = "pid")]
    seconds: f64,

    /// The command to run while recording
    #[arg(last = true, required_unless_present = "pid", value_name = "CMD")]
    command: Vec<String>,
}

/// From half a second to an hour.
fn window_seconds(s: &str) -> Result<f64, String> {
    slowlab_model::units::parse_seconds(s, 0.5, 3600.0)
}

pub fn run(args: DiagnoseArgs) -> anyhow::Result<i32> {
    if let Some(n) = &args.repeat {
        let n = slowlab_runs::parse_repeat(n).map_err(anyhow::Error::msg)?;
        return repeat(&args, n);
    }
    if let Some(pid) = args.pid {
        anyhow::ensure!(
            Path::new(&format!("/proc/{pid}")).is_dir(),
            "no process with pid {pid} is running: give the pid of a running process (`pgrep NAME`)"
        );
    }
    if args.parquet.is_some() {
        slowlab_exports::parquet_available()?;
    }
    std::fs::create_dir_all(&args.output)
        .with_context(|| format!("cannot create {}", args.output.display()))?;
    let trace_path = args.output.join("trace.data");
    // Attached to a running process: the whole system for the window.
    let recorded = match args.pid {
        Some(_) => vec!["sleep".to_string(), format!("{}", args.seconds)],
        None => args.command.clone(),
    };
    let cfg = recording(trace_path.clone(), args.freq, recorded);
    if let Some(pid) = args.pid {
        eprintln!(
            "slowlab: recording the whole system for {} s for pid {pid} (Ctrl-C ends early)",
            args.seconds
        );
    }
    let outcome = slowlab_record::run(&cfg)?;
    let mut warnings = outcome.warnings.clone();
    let mut extra = Vec::new();
    if let Some(p) = &args.fxprof {
        extra.push((Export::Fxprof, p.clone()));
    }
    if let Some(dir) = &args.parquet {
        extra.push((Export::Parquet(ParquetOptions::default()), dir.clone()));
    }
    let (root, title) = match args.pid {
        Some(pid) => (Target::Pid(pid), vec![format!("pid {pid}")]),
        None => (Target::Command, args.command.clone()),
    };
    let opener = Opener::new(true)?;
    let report = analyze_into(
        &opener,
        &trace_path,
        &args.output,
        &title,
        root,
        &extra,
        &mut warnings,
    )?;
    let say = |text: &str| {
        if args.json {
            eprint!("{text}");
        } else {
            print!("{text}");
        }
    };
    for w in &warnings {
        say(&format!("warning: {w}\n"));
    }
    say(&report.text);
    say(&format!(
        "\nwrote {}, {}{} and {}\n",
        trace_path.display(),
        if report.path.is_some() {
            format!("{}, ", args.output.join("critical_path.json").display())
        } else {
            String::new()
        },
        args.output.join("findings.json").display(),
        args.output.join("report.html").display()
    ));
    for line in &report.written {
        say(&format!("{line}\n"));
    }
    if let (Some(pid), true) = (args.pid, report.did_not_run) {
        say(&format!(
            "\npid {pid} did not run at all in the {} s window: it looks hung. Its wait chains now:\n",
            args.seconds
        ));
        let every_thread = slowlab_hang::Options { all_threads: true };
        match slowlab_hang::walk(Path::new("/"), pid, &every_thread) {
            Ok(chains) => say(&slowlab_hang::render::text(&chains)),
            Err(e) => say(&format!("cannot walk its wait chains: {e}\n")),
        }
    }
    if args.json {
        println!("{}", report.findings_json);
    }
    crate::report_replays();
    Ok(match (args.pid, outcome.stopped_by) {
        (Some(_), Some(_)) => 130,
        (Some(_), None) => 0,
        (None, _) => outcome.exit_code,
    })
}

/// `--repeat N`: N diagnose runs, then the summary.
fn repeat(args: &DiagnoseArgs, n: usize) -> anyhow::Result<i32> {
    std::fs::create_dir_all(&args.output)
        .with_context(|| format!("cannot create {}", args.output.display()))?;
    let stale = slowlab_runs::stale_runs(&args.output, n);
    if !stale.is_empty() {
        eprintln!(
            "slowlab: warning: {} run directories of an earlier --repeat are left in {} ({} …): \
             remove them, or a run-* pattern takes them as runs of this one",
            stale.len(),
            args.output.display(),
            stale[0].display()
        );
    }
    // Ctrl-C between runs: the finished runs are kept and summarized (the
    // recording of a run handles its own Ctrl-C, in slowlab-record).
    let cancel = slowlab_sweep::Cancel::new();
    crate::signals::cancel_on_interrupt(cancel.clone())?;
    let mut runs = Vec::new();
    let mut interrupted = false;
    let opener = Opener::new(true)?;
    for i in 1..=n {
        if cancel.is_cancelled() {
            interrupted = true;
            break;
        }
        let dir = slowlab_runs::run_dir(&args.output, i);
        eprintln!("slowlab: run {i} of {n} → {}", dir.display());
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let (outcome, diagnosis, warnings) =
            record_and_analyze(&opener, &args.command, &dir, args.freq)?;
        if outcome.stopped_by.is_some() {
            let _ = std::fs::remove_dir_all(&dir);
            eprintln!(
                "slowlab: run {i} was interrupted: removed {}; the finished runs are kept",
                dir.display()
            );
            interrupted = true;
            break;
        }
        for w in warnings {
            eprintln!("slowlab: warning: run {i}: {w}");
        }
        runs.push(slowlab_runs::RepeatRun {
            run: i,
            dir,
            wall_s: diagnosis.path.as_ref().map(|p| p.wall_s),
            exit_code: outcome.exit_code,
            answer: diagnosis.path.map(|p| p.summary),
        });
    }
    let first_failure = runs.iter().map(|r| r.exit_code).find(|&c| c != 0);
    let summary = slowlab_runs::summarize(&args.command, n, runs, interrupted);
    if args.json {
        eprint!("{}", summary.text());
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", summary.text());
    }
    Ok(if interrupted {
        130
    } else {
        first_failure.unwrap_or(0)
    })
}
