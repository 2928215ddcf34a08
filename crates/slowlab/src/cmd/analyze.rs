//! `slowlab analyze FILE`: opens the input once (`slowlab-open`, with the
//! side files the view needs), makes its one analysis (`slowlab-analyze`),
//! prints the chosen view as a table (`slowlab-report`) or JSON, and writes
//! the requested exports (`slowlab-exports`). Glue only.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use slowlab_analyze::analysis::{Analysis, Root};
use slowlab_analyze::butterfly::{butterfly, Butterfly};
use slowlab_analyze::cpu;
use slowlab_analyze::critical_path::process_by_pid;
use slowlab_analyze::select::Selection;
use slowlab_exports::{Export, Request};
use slowlab_open::OpenOptions;
use slowlab_report::{cpu_views, trace_views};

use super::input::{open, SymbolArgs};

/// Analyze a trace: where the time went, and why.
///
/// Reads a perf.data file (from `slowlab record` or `perf record`) and
/// shows sampled CPU usage. The default view lists the busiest processes
/// and the hottest functions (self = the CPU was in that function,
/// inclusive = it was on the stack). `--by` groups the samples into a tree
/// by any order of process, thread, module and function; `--callers` and
/// `--callees` show who calls one function and what it calls.
///
/// The other views need the scheduler, fault, process and syscall events
/// that `slowlab record` records: `--waits` (time blocked, where, and who
/// woke the thread), `--faults`, `--procs` (lifetimes and the process
/// tree), `--syscalls` (counts, durations, errors and the paths of failing
/// calls from the eBPF capture), `--timeline` (per-second activity) and
/// `--findings` (every detector of `slowlab diagnose`). The time range and
/// filters apply to all of them.
///
/// `--html OUT.html` writes the interactive report of `slowlab diagnose`
/// (critical path, findings, timeline, flame graphs, tables; one offline
/// page) for the selected threads and time.
///
/// `--critical-path` answers "why was this process slow": its wall time cut
/// into time on a CPU, runnable (waiting for a CPU) and blocked (lock, io,
/// sleep, ipc, fault, other), each wait followed into the thread that ended
/// it, for the process given with `--root PID` or, by default, the
/// longest-running process that started in the trace.
#[derive(Args, Debug)]
#[command(group = clap::ArgGroup::new("view").multiple(false).args(["by", "callers", "waits", "faults", "procs", "syscalls", "timeline", "findings", "critical_path"]))]
#[command(after_long_help = "\
Examples:
  slowlab analyze slowlab.data                       busiest processes, hottest functions
  slowlab analyze t.data --by process,thread,function --top 5
  slowlab analyze t.data --by module,function --filter process=cc1
  slowlab analyze t.data --from 2.5 --to 4 --filter pid=1234
  slowlab analyze t.data --callers memset            who calls memset (merged stacks)
  slowlab analyze t.data --callees main --depth 4
  slowlab analyze t.data --flamegraph cpu.svg --collapsed cpu.folded --pprof cpu.pb.gz
  slowlab analyze t.data --json | jq '.functions[:5]'
  slowlab analyze t.data --waits --filter process=make   why make was not running
  slowlab analyze t.data --offcpu-flamegraph blocked.svg  blocked time as a flame graph
  slowlab analyze t.data --fxprof t.json.gz              open in profiler.firefox.com
  slowlab analyze t.data --html report.html --from 2 --to 6   explore it in a browser
  slowlab analyze t.data --syscalls                       failing opens and their paths
  slowlab analyze t.data --procs --bucket 0.5             lifetimes, launches per 0.5 s
  slowlab analyze t.data --findings --json                what the detectors found
  slowlab analyze t.data --critical-path --root 4100      why pid 4100 took so long
  slowlab analyze trace.etl --symbols ~/pdbs              a Windows trace, named from local PDBs

JSON of the default view:
  {\"samples\",\"lost\",\"duration_s\",\"sample_event\",\"warnings\",
   \"processes\":[{\"pid\",\"comm\",\"samples\",\"threads\":[{\"tid\",\"comm\",\"samples\"}]}],
   \"functions\":[{\"name\",\"module\",\"self\",\"inclusive\"}]}
Counts are samples of the sampling event (cpu-clock: one per 1/FREQ s of CPU).

Environment: SLOWLAB_THREADS=N caps the threads reading and symbolizing a
perf.data trace (1: everything on one thread; the results are the same).
SLOWLAB_MEMORY=SIZE (MB, or 512M, 2G; 1024 by default): the memory a
trace's model may take. A perf.data file bigger than this is read in one
pass while the memory that pass is heading for fits (a build trace needs
about a third of its size), else in two passes, with the frames of each
function merged: every view is the same, exports (--pprof, --fxprof) show
one address per function, and it is slower.
SLOWLAB_CACHE_DIR=DIR: where work on symbols is kept between runs (the
sorted index of each big symbol table, the parsed kallsyms, demangled
names), each file named by a hash of what it was made from, so never
stale; and, so that a run with a cold page cache need not read a whole
symbol table to find that hash, the hash of each file as it is on disk
(device, inode, size, modification and change times: trusted two seconds
after the file last changed; only setting the clock back could fool it).
~/.cache/slowlab (or $XDG_CACHE_HOME/slowlab) by default, `off` to keep
nothing. Safe to delete; files unused for 30 days are removed.")]
pub struct AnalyzeArgs {
    /// The trace (perf.data, a Windows ETW trace: .etl or .etl.zip, or the
    /// directory `slowlab diagnose -o DIR` wrote).
    pub file: PathBuf,
    /// Group by these keys, in this order: process, thread, module, function.
    #[arg(long, value_name = "KEYS")]
    pub by: Option<String>,
    /// Keep the N largest rows at each level (default 25 on the terminal,
    /// all in JSON).
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
    /// Only samples of process=NAME, pid=N or tid=N (repeat to widen).
    #[arg(long, value_name = "process=NAME|pid=N|tid=N")]
    pub filter: Vec<String>,
    /// Only samples from this many seconds after the trace start.
    #[arg(long, value_name = "SECONDS")]
    pub from: Option<f64>,
    /// Only samples before this many seconds after the trace start.
    #[arg(long, value_name = "SECONDS")]
    pub to: Option<f64>,
    /// Butterfly: the merged stacks that lead to FUNC.
    #[arg(long, value_name = "FUNC")]
    pub callers: Option<String>,
    /// Butterfly: the merged stacks FUNC leads to.
    #[arg(long, value_name = "FUNC")]
    pub callees: Option<String>,
    /// Blocked time by thread and blocking stack, with the wakers.
    #[arg(long)]
    pub waits: bool,
    /// Page faults by process and stack, and their rate over time.
    #[arg(long)]
    pub faults: bool,
    /// Process lifetimes, the process tree and launches over time.
    #[arg(long)]
    pub procs: bool,
    /// Syscalls: counts, durations, errors and failing paths.
    #[arg(long)]
    pub syscalls: bool,
    /// Per-interval CPU, blocked time, faults, syscalls and launches.
    #[arg(long)]
    pub timeline: bool,
    /// Run every detector of `slowlab diagnose` on the trace.
    #[arg(long)]
    pub findings: bool,
    /// Why a process was slow: its wall time on a CPU, runnable and blocked
    /// by kind, each wait followed into the thread that ended it.
    #[arg(long)]
    pub critical_path: bool,
    /// The process whose critical path to follow (--critical-path, and the
    /// everyday-wait detectors of --findings); default: the longest-running
    /// process that started in the trace.
    #[arg(long, value_name = "PID")]
    pub root: Option<i32>,
    /// Interval of the rates in --faults, --procs and --timeline.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0, value_parser = positive_seconds)]
    pub bucket: f64,
    /// Levels of the butterfly trees.
    #[arg(long, default_value_t = 8)]
    pub depth: usize,
    /// Write a flame graph SVG of the selected samples.
    #[arg(long, value_name = "FILE.svg")]
    pub flamegraph: Option<PathBuf>,
    /// Write folded stacks (`proc;outer;…;inner COUNT`), as inferno reads.
    #[arg(long, value_name = "FILE")]
    pub collapsed: Option<PathBuf>,
    /// Write a flame graph SVG of the time blocked (off-CPU), in µs.
    #[arg(long, value_name = "FILE.svg")]
    pub offcpu_flamegraph: Option<PathBuf>,
    /// Write a gzipped pprof profile.
    #[arg(long, value_name = "FILE.pb.gz")]
    pub pprof: Option<PathBuf>,
    /// Write a Firefox Profiler profile (gzipped when the name ends in .gz)
    /// of the selected samples, with blocked time and findings as markers;
    /// open it at profiler.firefox.com ("Load a profile from file") or in
    /// Perfetto's UI.
    #[arg(long, value_name = "FILE.json[.gz]")]
    pub fxprof: Option<PathBuf>,
    /// Write the interactive report (one self-contained page: the critical
    /// path, the findings, a timeline of every thread, flame graphs and
    /// tables that follow a time range selected in the page) of the
    /// selected threads and time.
    #[arg(long, value_name = "OUT.html")]
    pub html: Option<PathBuf>,
    /// Count the trace's events by name (ETL: TraceEvent's names, such as
    /// "Windows Kernel/Process/DCStart"; perf.data: perf's event names);
    /// JSON: {"events": {NAME: COUNT}}.
    #[arg(long, conflicts_with = "view")]
    pub events: bool,
    /// Print the view as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub symbols: SymbolArgs,
}

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

impl AnalyzeArgs {
    fn view(&self) -> Result<View> {
        let flags = [
            (self.waits, View::Waits),
            (self.faults, View::Faults),
            (self.procs, View::Procs),
            (self.syscalls, View::Syscalls),
            (self.timeline, View::Timeline),
            (self.findings, View::Findings),
            (self.critical_path, View::CriticalPath),
            (
                self.callers.is_some() || self.callees.is_some(),
                View::Butterfly,
            ),
        ];
        if let Some((_, v)) = flags.into_iter().find(|(on, _)| *on) {
            return Ok(v);
        }
        Ok(match &self.by {
            Some(keys) => View::Tree(cpu::parse_keys(keys)?),
            None => View::Summary,
        })
    }
}

/// At least a millisecond.
fn positive_seconds(s: &str) -> Result<f64, String> {
    slowlab_model::units::parse_seconds(s, 0.001, f64::INFINITY)
}

pub fn run(args: AnalyzeArgs) -> Result<i32> {
    let sel = Selection::parse(&args.filter, args.from, args.to)?;
    let view = args.view()?;
    let mut opts = args.symbols.options()?;
    if args.events {
        return print_event_counts(&args.file, &opts, args.json);
    }
    // The Firefox Profiler export and the page carry the findings.
    let wants_findings = view == View::Findings || args.fxprof.is_some() || args.html.is_some();
    opts.paths = view == View::Syscalls || wants_findings;
    opts.cgroups = wants_findings;
    let bundle = open(&args.file, &opts)?;
    let trace = &bundle.trace;
    for w in &bundle.warnings {
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
        filter_text: &args.filter,
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
        if export == Export::Html {
            if let Err(why) = analysis.root_path() {
                eprintln!("slowlab: warning: the report has no critical path: {why}");
            }
        }
        let written = export.write(&request, path)?;
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
            let v = slowlab_analyze::waits::waits_view(trace, analysis.schedule(), &sel, top_json);
            show(&mut out, json, &v, || trace_views::waits_text(&v, top, 5))?;
        }
        View::Faults => {
            let v = slowlab_analyze::faults::faults_view(
                trace,
                &sel,
                args.bucket,
                top_json.map(|t| t.min(10)),
            );
            show(&mut out, json, &v, || trace_views::faults_text(&v, top, 3))?;
        }
        View::Procs => {
            let v = slowlab_analyze::procs::procs_view(trace, &sel, args.bucket, top);
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
            if args.json {
                let v: Vec<&Butterfly> = views.iter().map(|(b, _)| b).collect();
                if v.len() == 1 {
                    serde_json::to_writer_pretty(&mut out, v[0])?;
                } else {
                    serde_json::to_writer_pretty(&mut out, &v)?;
                }
                writeln!(out)?;
            } else {
                for (b, callers) in &views {
                    write!(
                        out,
                        "{}",
                        cpu_views::butterfly_text(b, *callers, top_terminal)
                    )?;
                }
            }
        }
        View::Tree(keys) => {
            let tree = cpu::cpu_tree(
                trace,
                &keys,
                &sel,
                if args.json { args.top } else { top_terminal },
            );
            if args.json {
                serde_json::to_writer_pretty(&mut out, &tree)?;
                writeln!(out)?;
            } else {
                write!(out, "{}", cpu_views::tree_text(&tree))?;
            }
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
    let bar = crate::progress::reading_bar();
    let counted = slowlab_open::event_counts(file, opts, &|stage, done, total| {
        bar.set_length(total.max(1));
        bar.set_position(done);
        bar.set_message(stage.to_string());
    });
    bar.finish_and_clear();
    let (counts, warnings) = counted?;
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
