//! `slowlab analyze FILE`: opens the input once (`slowlab-open`, with the
//! side files the view needs), makes its one analysis (`slowlab-analyze`),
//! prints the chosen view as a table (`slowlab-report`) or JSON, and writes
//! the requested exports (`slowlab-exports`). Glue only.

use std::io::Write;

use anyhow::Result;
use slowlab_analyze::analysis::{Analysis, Root};
use slowlab_analyze::butterfly::butterfly;
use slowlab_analyze::cpu;
use slowlab_analyze::critical_path::process_by_pid;
use slowlab_analyze::select::Selection;
use slowlab_cli::analyze::AnalyzeArgs;
use slowlab_exports::{Export, Request};
use slowlab_open::OpenOptions;
use slowlab_report::{cpu_views, trace_views};

use super::input::{open, open_options};

/// The one view an `analyze` run shows (clap keeps the flags exclusive).
#[derive(Debug, Clone, PartialEq)]
enum View {
    Summary,
    Tree(Vec<cpu::Key>),
    Butterfly,
    Waits,
    Faults,
    Procs,
    Syscalls,
    Timeline,
    Findings,
    CriticalPath,
}

/// The view the flags ask for.
fn view_of(args: &AnalyzeArgs) -> Result<View> {
    let flags = [
        (args.waits, View::Waits),
        (args.faults, View::Faults),
        (args.procs, View::Procs),
        (args.syscalls, View::Syscalls),
        (args.timeline, View::Timeline),
        (args.findings, View::Findings),
        (args.critical_path, View::CriticalPath),
        (
            args.callers.is_some() || args.callees.is_some(),
            View::Butterfly,
        ),
    ];
    if let Some((_, v)) = flags.into_iter().find(|(on, _)| *on) {
        return Ok(v);
    }
    Ok(match &args.by {
        Some(keys) => View::Tree(cpu::parse_keys(keys)?),
        None => View::Summary,
    })
}

pub fn run(args: AnalyzeArgs) -> Result<i32> {
    let sel = Selection::parse(
        &args.selection.filter,
        args.selection.from,
        args.selection.to,
    )?;
    let view = view_of(&args)?;
    let exports = [
        &args.flamegraph,
        &args.collapsed,
        &args.offcpu_flamegraph,
        &args.pprof,
        &args.html,
        &args.fxprof,
    ];
    for path in exports.into_iter().flatten() {
        slowlab_report::check_writable(path)?;
    }
    if let Some(refusal) = args.whole_trace_refusal() {
        anyhow::bail!(refusal);
    }
    let mut opts = open_options(&args.symbols)?;
    if args.events {
        return print_event_counts(&args.file, &opts, args.json);
    }
    // The Firefox Profiler export and the page carry the findings.
    let wants_findings = view == View::Findings || args.fxprof.is_some() || args.html.is_some();
    opts.paths = view == View::Syscalls || wants_findings;
    opts.cgroups = wants_findings;
    let bundle = open(&args.file, &opts)?;
    let trace = &bundle.trace;
    let hottest = slowlab_analyze::unnamed::hottest_code_warning_in(trace, &sel);
    for w in hottest.iter().chain(&bundle.warnings) {
        eprintln!("slowlab: warning: {w}");
    }
    if trace.samples.is_empty() {
        eprintln!(
            "slowlab: warning: the trace has no CPU samples{}",
            if trace.stats.unfinished_file {
                " (perf was killed before writing any)"
            } else {
                ""
            }
        );
    }
    let root = match args.root {
        Some(pid) => Root::Process(process_by_pid(trace, pid)?),
        None => Root::Default,
    };
    let analysis = Analysis::new(&bundle, root);

    // Each export is written whole or not at all (a temporary file renamed).
    let name = args.file.display().to_string();
    let request = Request {
        analysis: &analysis,
        name: &name,
        command: &[],
        selection: &sel,
        filter_text: &args.selection.filter,
        warnings: &bundle.warnings,
    };
    let exports = [
        (&args.flamegraph, Export::FlameGraph),
        (&args.collapsed, Export::Folded),
        (&args.offcpu_flamegraph, Export::OffCpuFlameGraph),
        (&args.pprof, Export::Pprof),
        (&args.html, Export::Html),
        (&args.fxprof, Export::Fxprof),
    ];
    for (path, export) in exports {
        let Some(path) = path else { continue };
        let written = export.write(&request, path)?;
        if export == Export::Html {
            if let Err(why) = analysis.root_path() {
                eprintln!("slowlab: warning: the report has no critical path: {why}");
            }
        }
        for w in &written.warnings {
            eprintln!("slowlab: warning: {w}");
        }
        eprintln!("slowlab: wrote {} {}", export.what(), path.display());
    }

    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let top_terminal = args.top.or(Some(25));
    let top_json = if args.json { args.top } else { top_terminal };
    let top = top_terminal.unwrap_or(25);
    let json = args.json;
    match view {
        View::Waits => {
            let in_range = analysis.schedule_in(&sel);
            let v = slowlab_analyze::waits::waits_view(trace, &in_range, &sel, top_json);
            show(&mut out, json, &v, || trace_views::waits_text(&v, top, 5))?;
        }
        View::Faults => {
            let v = slowlab_analyze::faults::faults_view(
                trace,
                &sel,
                args.bucket,
                top_json.map(|t| t.min(10)),
            );
            say_wider_buckets(args.bucket, v.bucket_s);
            show(&mut out, json, &v, || trace_views::faults_text(&v, top, 3))?;
        }
        View::Procs => {
            let v = slowlab_analyze::procs::procs_view(trace, &sel, args.bucket, top);
            say_wider_buckets(args.bucket, v.bucket_s);
            show(&mut out, json, &v, || trace_views::procs_text(&v, top))?;
        }
        View::Syscalls => {
            let v = slowlab_analyze::syscalls::syscalls_view(
                trace,
                analysis.context().calls(),
                &sel,
                bundle.paths.as_deref(),
                5,
            );
            show(&mut out, json, &v, || {
                trace_views::syscalls_text(&v, top, 10)
            })?;
        }
        View::Timeline => {
            let v = slowlab_analyze::timeline::timeline_view(
                trace,
                analysis.schedule(),
                &sel,
                args.bucket,
                3,
            );
            say_wider_buckets(args.bucket, v.bucket_s);
            show(&mut out, json, &v, || trace_views::timeline_text(&v))?;
        }
        View::Findings => {
            if let Err(e) = analysis.root_path() {
                eprintln!(
                    "slowlab: warning: the lock, io and CPU-starvation detectors did not run: {e}"
                );
            }
            let v = analysis.findings();
            show(&mut out, json, &v, || trace_views::findings_text(v))?;
        }
        View::CriticalPath => {
            let rp = analysis.root_path().map_err(|e| anyhow::anyhow!("{e}"))?;
            let v = &rp.path;
            show(&mut out, json, v, || {
                slowlab_report::critical_path::critical_path_text(v, top.min(15))
            })?;
        }
        View::Butterfly => {
            let mut views = Vec::new();
            for (func, callers) in [(&args.callers, true), (&args.callees, false)] {
                if let Some(func) = func {
                    views.push((butterfly(trace, func, &sel, args.depth)?, callers));
                }
            }
            let text = || {
                views
                    .iter()
                    .map(|(b, callers)| cpu_views::butterfly_text(b, *callers, top_terminal))
                    .collect::<String>()
            };
            match &views[..] {
                [(one, _)] => show(&mut out, json, one, text)?,
                many => show(
                    &mut out,
                    json,
                    &many.iter().map(|v| &v.0).collect::<Vec<_>>(),
                    text,
                )?,
            }
        }
        View::Tree(keys) => {
            let tree = cpu::cpu_tree(
                trace,
                &keys,
                &sel,
                if args.json { args.top } else { top_terminal },
            );
            show(&mut out, json, &tree, || cpu_views::tree_text(&tree))?;
        }
        View::Summary => {
            let summary =
                cpu::summary(trace, &sel, if args.json { args.top } else { top_terminal });
            if args.json {
                serde_json::to_writer(&mut out, &summary)?;
                writeln!(out)?;
            } else {
                write!(out, "{}", cpu_views::summary_text(&summary, top))?;
            }
        }
    }
    out.flush()?;
    crate::report_replays();
    // The process ends right after this: freeing the trace's tables (tens
    // of megabytes in many allocations) would only cost time.
    std::mem::forget(analysis);
    std::mem::forget(bundle);
    Ok(0)
}

/// Prints a trace view as pretty JSON or as its text.
fn show<T: serde::Serialize>(
    out: &mut dyn Write,
    json: bool,
    view: &T,
    text: impl FnOnce() -> String,
) -> Result<()> {
    if json {
        serde_json::to_writer_pretty(&mut *out, view)?;
        writeln!(out)?;
    } else {
        write!(out, "{}", text())?;
    }
    Ok(())
}

/// `--events`: how many events of each name the trace holds (see
/// `slowlab_open::event_counts`).
fn print_event_counts(file: &std::path::Path, opts: &OpenOptions, json: bool) -> Result<i32> {
    let (counts, warnings) = crate::progress::while_reading(|progress| {
        slowlab_open::event_counts(file, opts, progress)
    })?;
    for w in warnings {
        eprintln!("slowlab: warning: {w}");
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if json {
        serde_json::to_writer_pretty(&mut out, &serde_json::json!({ "events": counts }))?;
        writeln!(out)?;
    } else {
        let width = counts.values().max().map_or(1, |n| n.to_string().len());
        for (name, n) in &counts {
            writeln!(out, "{n:>width$}  {name}")?;
        }
    }
    out.flush()?;
    Ok(0)
}

/// Says so when a view's buckets are wider than `--bucket` asked.
fn say_wider_buckets(asked_s: f64, used_s: f64) {
    if let Some(note) = slowlab_analyze::buckets::wider_than_asked(asked_s, used_s) {
        eprintln!("slowlab: note: {note}");
    }
}
