//! `slowlab diagnose`: record the whole system while a command runs, follow
//! the command's critical path, run every detector on the trace, print the
//! answer first and the findings ranked by what they cost, and write the
//! trace, `critical_path.json`, `findings.json` and a self-contained
//! `report.html` into one directory.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use slowlab_analyze::diagnose::diagnose;
use slowlab_analyze::select::Selection;
use slowlab_report::critical_path::critical_path_text;
use slowlab_report::trace_views::findings_text;
use slowlab_report::write_atomically;

use super::trace_input::read_bundle;

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
/// Example:
///
///   sudo slowlab diagnose -o why -- ./build.sh
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

    /// The command to run while recording
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

pub fn run(args: DiagnoseArgs) -> anyhow::Result<i32> {
    std::fs::create_dir_all(&args.output)
        .with_context(|| format!("cannot create {}", args.output.display()))?;
    let trace_path = args.output.join("trace.data");
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let cfg = slowlab_record::Config {
        output: trace_path.clone(),
        freq: args.freq,
        ring_seconds: None,
        call_graph: slowlab_record::CallGraph::Fp,
        command: args.command.clone(),
        cpus,
        capture_paths: true,
    };
    let outcome = slowlab_record::run(&cfg)?;
    let mut warnings = outcome.warnings.clone();
    let report = analyze_into(
        &trace_path,
        &args.output,
        &args.command,
        args.fxprof.as_deref(),
        &mut warnings,
    )?;
    if let Some(dir) = &args.parquet {
        let traces = [(trace_path.clone(), Some(report.analysis.findings.clone()))];
        let opts = super::export::ExportOptions {
            dir,
            host: None,
            run: None,
            symbolize: true,
        };
        super::export::export_traces(&traces, &opts)?;
    }
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
        if report.analysis.critical_path.is_some() {
            format!("{}, ", args.output.join("critical_path.json").display())
        } else {
            String::new()
        },
        args.output.join("findings.json").display(),
        args.output.join("report.html").display()
    ));
    if let Some(p) = &args.fxprof {
        say(&format!(
            "wrote {} (open it at profiler.firefox.com)\n",
            p.display()
        ));
    }
    if args.json {
        println!("{}", report.findings_json);
    }
    Ok(outcome.exit_code)
}

/// What `analyze_into` produced.
pub struct Diagnosis {
    /// The critical path and the findings ranked, as text for the terminal.
    pub text: String,
    /// The findings as pretty JSON (also written to findings.json).
    pub findings_json: String,
    pub analysis: slowlab_analyze::diagnose::Diagnosis,
}

/// Reads a trace (with its side files), analyzes it for `command`
/// (`slowlab_analyze::diagnose`), and writes `critical_path.json`,
/// `findings.json` and `report.html` into `dir`.
pub fn analyze_into(
    trace_path: &Path,
    dir: &Path,
    command: &[String],
    fxprof: Option<&Path>,
    warnings: &mut Vec<String>,
) -> anyhow::Result<Diagnosis> {
    let bundle = read_bundle(trace_path, true)?;
    warnings.extend(bundle.warnings.iter().cloned());
    let analysis = diagnose(&bundle, command);
    if let Some(path) = fxprof {
        let bytes = super::fxprof::profile_bytes(
            &bundle.trace,
            &Selection::default(),
            &analysis.findings,
            path,
        )?;
        write_atomically(path, &bytes)?;
    }
    if let Some(why) = &analysis.no_path {
        warnings.push(format!("no critical path: {why}"));
    }
    let findings_json = serde_json::to_string_pretty(&analysis.findings)?;
    write_atomically(&dir.join("findings.json"), findings_json.as_bytes())?;
    let cp_file = dir.join("critical_path.json");
    match &analysis.critical_path {
        Some(cp) => write_atomically(&cp_file, serde_json::to_string_pretty(cp)?.as_bytes())?,
        // A stale file from an earlier run would read as this run's answer.
        None => {
            let _ = std::fs::remove_file(&cp_file);
        }
    }
    let tree = slowlab_analyze::report_data::command_processes(&bundle.trace, command);
    let title = format!("slowlab diagnose: {}", command.join(" "));
    let data = slowlab_analyze::report_data::report_data(
        &bundle.trace,
        &slowlab_analyze::report_data::Inputs {
            title: &title,
            command,
            paths: bundle.paths.as_deref(),
            critical_path: analysis.critical_path.as_ref(),
            findings: &analysis.findings,
            command_processes: &tree,
            selection: &Selection::default(),
            filter_text: &[],
            warnings,
        },
    );
    let page = slowlab_report::interactive::interactive_page(&data)?;
    write_atomically(&dir.join("report.html"), page.as_bytes())?;
    let mut text = String::new();
    if let Some(cp) = &analysis.critical_path {
        text.push_str(&critical_path_text(cp, 8));
        text.push('\n');
    }
    text.push_str(&findings_text(&analysis.findings));
    Ok(Diagnosis {
        text,
        findings_json,
        analysis,
    })
}
