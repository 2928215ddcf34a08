//! `slowlab diagnose`: record the whole system while a command runs, make
//! the recording's one analysis (the command's critical path, every
//! detector), print the answer first and the findings ranked by what they
//! cost, and write the trace, `critical_path.json`, `findings.json` and a
//! self-contained `report.html` (and the exports asked for) into one
//! directory. Glue only.

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
/// With --pid PID instead of CMD, attaches to a process that is already
/// running: records the whole system for --seconds (Ctrl-C ends early,
/// with the answer so far) and answers for that process over the window.
/// A process that did not run at all in the window looks hung: its wait
/// chains are walked as `slowlab hang` does. Returns 0 (130 on Ctrl-C).
///
/// Examples:
///
///   sudo slowlab diagnose -o why -- ./build.sh
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

    /// Print the findings as JSON on stdout (the human report goes to stderr)
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
    if let Some(pid) = args.pid {
        anyhow::ensure!(
            Path::new(&format!("/proc/{pid}")).is_dir(),
            "no process with pid {pid} is running: give the pid of a running process (`pgrep NAME`)"
        );
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
    })
}
