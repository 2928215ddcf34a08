//! `slowlab diagnose`: record the whole system while a command runs, make
//! the recording's one analysis (the command's critical path, every
//! detector), print the answer first and the findings ranked by what they
//! cost, and write the trace, `critical_path.json`, `findings.json` and a
//! self-contained `report.html` (and the exports asked for) into one
//! directory; with `--repeat N`, N such directories and a summary across
//! them (`slowlab_runs::repeat`). Glue only.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use slowlab_analyze::analysis::{Analysis, Root};
use slowlab_analyze::critical_path::process_by_pid;
use slowlab_analyze::select::Selection;
use slowlab_exports::{Export, ParquetOptions, Request};
use slowlab_report::critical_path::critical_path_text;
use slowlab_report::trace_views::findings_text;
use slowlab_report::write_atomically;

use super::input::open_all;

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
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    // Attached to a running process: the whole system for the window.
    let recorded = match args.pid {
        Some(_) => vec!["sleep".to_string(), format!("{}", args.seconds)],
        None => args.command.clone(),
    };
    let cfg = slowlab_record::Config {
        output: trace_path.clone(),
        freq: args.freq,
        ring_seconds: None,
        call_graph: slowlab_record::CallGraph::Fp,
        command: recorded,
        cpus,
        capture_paths: true,
    };
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
    let report = analyze_into(
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
        if report.has_path {
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
    for i in 1..=n {
        if cancel.is_cancelled() {
            interrupted = true;
            break;
        }
        let dir = slowlab_runs::run_dir(&args.output, i);
        eprintln!("slowlab: run {i} of {n} → {}", dir.display());
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let (outcome, diagnosis, warnings) = record_and_analyze(&args.command, &dir, args.freq)?;
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

/// Records `command` system-wide into `dir/trace.data` as `diagnose` does
/// and makes its analysis into `dir` (`analyze_into`): what `--repeat` and
/// `sweep --critical-path` do for each run. Returns the recording's
/// outcome, the diagnosis and the warnings of both.
pub fn record_and_analyze(
    command: &[String],
    dir: &Path,
    freq: u32,
) -> anyhow::Result<(slowlab_record::Outcome, Diagnosis, Vec<String>)> {
    let trace_path = dir.join("trace.data");
    let cfg = slowlab_record::Config {
        output: trace_path.clone(),
        freq,
        ring_seconds: None,
        call_graph: slowlab_record::CallGraph::Fp,
        command: command.to_vec(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        capture_paths: true,
    };
    let outcome = slowlab_record::run(&cfg)?;
    let mut warnings = outcome.warnings.clone();
    let diagnosis = analyze_into(
        &trace_path,
        dir,
        command,
        Target::Command,
        &[],
        &mut warnings,
    )?;
    Ok((outcome, diagnosis, warnings))
}

/// `sweep --critical-path`'s runs: each one recorded and analyzed as
/// `diagnose` does (`record_and_analyze`).
pub struct CommandDiagnoser {
    pub freq: u32,
    /// The warnings of every run, once per kind.
    pub warnings: Vec<String>,
}

impl slowlab_runs::Diagnoser for CommandDiagnoser {
    fn diagnose(
        &mut self,
        command: &[String],
        dir: &Path,
    ) -> Result<slowlab_runs::Diagnosed, String> {
        let (outcome, diagnosis, warnings) =
            record_and_analyze(command, dir, self.freq).map_err(|e| format!("{e:#}"))?;
        // Once per kind: "3 binaries could not be…" and "4 binaries…" are
        // one warning.
        let shape = |w: &str| w.replace(|c: char| c.is_ascii_digit(), "");
        for w in warnings {
            if !self.warnings.iter().any(|seen| shape(seen) == shape(&w)) {
                self.warnings.push(w);
            }
        }
        Ok(slowlab_runs::Diagnosed {
            path: diagnosis.path,
            exit_code: outcome.exit_code,
            interrupted: outcome.stopped_by.is_some(),
        })
    }
}

/// Whose critical path a recording answers for.
pub enum Target {
    /// The command recorded (`diagnose -- CMD`, `lab --trace`).
    Command,
    /// A process that was running before the recording (`--pid`).
    Pid(i32),
}

/// What `analyze_into` produced.
pub struct Diagnosis {
    /// The critical path and the findings ranked, as text for the terminal.
    pub text: String,
    /// The findings as pretty JSON (also written to findings.json).
    pub findings_json: String,
    /// The ids and titles of the findings, most costly first.
    pub findings: Vec<(String, String)>,
    /// Whether there is a critical path (critical_path.json).
    pub has_path: bool,
    /// A line for each extra export written.
    pub written: Vec<String>,
    /// The root's path has no CPU or runnable time at all.
    pub did_not_run: bool,
    /// The critical path (also in critical_path.json).
    pub path: Option<slowlab_model::critical_path::CriticalPath>,
}

/// Opens a recording (with its side files), makes its one analysis for
/// `target` (its critical path, every detector; `command` names it), and
/// writes `critical_path.json`, `findings.json`, `report.html` and the
/// `extra` exports into `dir`.
pub fn analyze_into(
    trace_path: &Path,
    dir: &Path,
    command: &[String],
    target: Target,
    extra: &[(Export, PathBuf)],
    warnings: &mut Vec<String>,
) -> anyhow::Result<Diagnosis> {
    let bundle = open_all(trace_path, true)?;
    warnings.extend(bundle.warnings.iter().cloned());
    let root = match target {
        Target::Command => Root::Command(command.to_vec()),
        Target::Pid(pid) => Root::Process(process_by_pid(&bundle.trace, pid)?),
    };
    let analysis = Analysis::new(&bundle, root);
    if let Err(why) = analysis.root_path() {
        warnings.push(format!("no critical path: {why}"));
    }
    let findings = analysis.findings();
    let findings_json = serde_json::to_string_pretty(findings)?;
    write_atomically(&dir.join("findings.json"), findings_json.as_bytes())?;
    let cp_file = dir.join("critical_path.json");
    let path = analysis.root_path().ok().map(|rp| &rp.path);
    match path {
        Some(cp) => write_atomically(&cp_file, serde_json::to_string_pretty(cp)?.as_bytes())?,
        // A stale file from an earlier run would read as this run's answer.
        None => {
            let _ = std::fs::remove_file(&cp_file);
        }
    }
    let name = trace_path.display().to_string();
    let request = Request {
        analysis: &analysis,
        name: &name,
        command,
        selection: &Selection::default(),
        filter_text: &[],
        warnings,
    };
    let mut written = Vec::new();
    let html = (Export::Html, dir.join("report.html"));
    for (export, path) in std::iter::once(&html).chain(extra) {
        let w = export.write(&request, path)?;
        written.extend(w.warnings.iter().map(|w| format!("warning: {w}")));
        match (export, w.summary) {
            (Export::Html, _) => {}
            (_, Some(summary)) => written.push(summary),
            (Export::Fxprof, None) => written.push(format!(
                "wrote {} (open it at profiler.firefox.com)",
                path.display()
            )),
            (_, None) => written.push(format!("wrote {} {}", export.what(), path.display())),
        }
    }
    let mut text = String::new();
    if let Some(cp) = path {
        text.push_str(&critical_path_text(cp, 8));
        text.push('\n');
    }
    text.push_str(&findings_text(findings));
    Ok(Diagnosis {
        text,
        findings_json,
        findings: findings
            .iter()
            .map(|f| (f.id.clone(), f.title.clone()))
            .collect(),
        has_path: path.is_some(),
        written,
        did_not_run: path.is_some_and(|p| p.breakdown.cpu + p.breakdown.runnable == 0.0),
        path: path.cloned(),
    })
}
