//! `slowlab analyze FILE`: reads the trace (`slowlab-perf`, with the path
//! capture and cgroup notes beside it), computes the chosen view
//! (`slowlab-analyze`) and prints it as a table (`slowlab-report`'s text
//! for the trace views) or JSON, and writes the requested exports. Glue and
//! terminal formatting only.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use slowlab_analyze::butterfly::{butterfly, Butterfly};
use slowlab_analyze::cpu;
use slowlab_analyze::critical_path::{process_by_pid, PathError};
use slowlab_analyze::detect::RootPath;
use slowlab_analyze::select::{Filter, Selection};
use slowlab_report::{cpu_views, export, trace_views, write_atomically};

use super::trace_input::{load_cgroups, load_paths, read_trace};

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
  slowlab analyze t.data --syscalls                       failing opens and their paths
  slowlab analyze t.data --procs --bucket 0.5             lifetimes, launches per 0.5 s
  slowlab analyze t.data --findings --json                what the detectors found
  slowlab analyze t.data --critical-path --root 4100      why pid 4100 took so long

JSON of the default view:
  {\"samples\",\"lost\",\"duration_s\",\"sample_event\",\"warnings\",
   \"processes\":[{\"pid\",\"comm\",\"samples\",\"threads\":[{\"tid\",\"comm\",\"samples\"}]}],
   \"functions\":[{\"name\",\"module\",\"self\",\"inclusive\"}]}
Counts are samples of the sampling event (cpu-clock: one per 1/FREQ s of CPU).")]
pub struct AnalyzeArgs {
    /// The trace (perf.data format).
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
    /// Print the view as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Do not name functions (faster; every frame is [unknown]).
    #[arg(long)]
    pub no_symbols: bool,
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

fn positive_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.001 => Ok(v),
        _ => Err(format!(
            "`{s}` is not a duration in seconds of at least 0.001"
        )),
    }
}

pub fn run(args: AnalyzeArgs) -> Result<i32> {
    let mut sel = Selection {
        filters: Vec::new(),
        from_s: args.from,
        to_s: args.to,
    };
    for f in &args.filter {
        sel.filters.push(f.parse::<Filter>()?);
    }
    let view = args.view()?;
    let trace = read_trace(&args.file, !args.no_symbols)?;
    let mut warnings = trace.stats.warnings.clone();
    let wants_paths = matches!(view, View::Syscalls | View::Findings);
    let paths = if wants_paths {
        load_paths(&args.file, &mut warnings)
    } else {
        None
    };
    let cgroups = if view == View::Findings {
        load_cgroups(&args.file, &mut warnings)
    } else {
        None
    };
    for w in &warnings {
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

    // Each export is written whole or not at all (a temporary file renamed).
    let write_file = |path: &PathBuf, what: &str, bytes: &[u8]| -> Result<()> {
        write_atomically(path, bytes)?;
        eprintln!("slowlab: wrote {what} {}", path.display());
        Ok(())
    };
    if let Some(p) = &args.flamegraph {
        let title = format!("CPU: {}", args.file.display());
        write_file(
            p,
            "flame graph",
            &export::cpu_flamegraph_svg(&trace, &sel, &title)?,
        )?;
    }
    if let Some(p) = &args.collapsed {
        write_file(
            p,
            "folded stacks",
            export::collapsed_text(&trace, &sel).as_bytes(),
        )?;
    }
    if let Some(p) = &args.offcpu_flamegraph {
        let title = format!("Off-CPU (time blocked): {}", args.file.display());
        let lines = slowlab_analyze::waits::offcpu_collapsed_lines(&trace, &sel);
        if lines.is_empty() {
            eprintln!("slowlab: warning: no blocked time in the selection (the trace needs sched:sched_switch; record it with slowlab record)");
        }
        write_file(
            p,
            "off-CPU flame graph",
            &export::flamegraph_svg(&lines, &title, "µs")?,
        )?;
    }
    if let Some(p) = &args.pprof {
        write_file(p, "pprof profile", &export::pprof_gz(&trace, &sel)?)?;
    }

    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let top_terminal = args.top.or(Some(25));
    let top_json = if args.json { args.top } else { top_terminal };
    let top = top_terminal.unwrap_or(25);
    let json = args.json;
    match view {
        View::Waits => {
            let v = slowlab_analyze::waits::waits_view(&trace, &sel, top_json);
            show(&mut out, json, &v, || trace_views::waits_text(&v, top, 5))?;
        }
        View::Faults => {
            let v = slowlab_analyze::faults::faults_view(
                &trace,
                &sel,
                args.bucket,
                top_json.map(|t| t.min(10)),
            );
            show(&mut out, json, &v, || trace_views::faults_text(&v, top, 3))?;
        }
        View::Procs => {
            let v = slowlab_analyze::procs::procs_view(&trace, &sel, args.bucket, top);
            show(&mut out, json, &v, || trace_views::procs_text(&v, top))?;
        }
        View::Syscalls => {
            let v = slowlab_analyze::syscalls::syscalls_view(&trace, &sel, paths.as_deref(), 5);
            show(&mut out, json, &v, || {
                trace_views::syscalls_text(&v, top, 10)
            })?;
        }
        View::Timeline => {
            let v = slowlab_analyze::timeline::timeline_view(&trace, &sel, args.bucket, 3);
            show(&mut out, json, &v, || trace_views::timeline_text(&v))?;
        }
        View::Findings => {
            let root = root_path(&trace, args.root)?;
            if let Err(e) = &root {
                eprintln!(
                    "slowlab: warning: the lock, io and CPU-starvation detectors did not run: {e}"
                );
            }
            let v = slowlab_analyze::detect::run_all(
                &trace,
                paths.as_deref(),
                cgroups.as_ref(),
                root.as_ref().ok(),
            );
            show(&mut out, json, &v, || trace_views::findings_text(&v))?;
        }
        View::CriticalPath => {
            let rp = root_path(&trace, args.root)?.map_err(anyhow::Error::from)?;
            let v = &rp.path;
            show(&mut out, json, v, || {
                slowlab_report::critical_path::critical_path_text(v, top.min(15))
            })?;
        }
        View::Butterfly => {
            let mut views = Vec::new();
            for (func, callers) in [(&args.callers, true), (&args.callees, false)] {
                if let Some(func) = func {
                    views.push((butterfly(&trace, func, &sel, args.depth)?, callers));
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
                &trace,
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
            let summary = cpu::summary(
                &trace,
                &sel,
                if args.json { args.top } else { top_terminal },
            );
            if args.json {
                serde_json::to_writer(&mut out, &summary)?;
                writeln!(out)?;
            } else {
                write!(out, "{}", cpu_views::summary_text(&summary, top))?;
            }
        }
    }
    out.flush()?;
    // The process ends right after this: freeing the trace's tables (tens
    // of megabytes in many allocations) would only cost time.
    std::mem::forget(trace);
    Ok(0)
}

/// The critical path of `--root PID` (or the default root). A pid that is
/// not in the trace is an error; a trace without a root or scheduler events
/// is returned as the inner error, for the caller to report.
fn root_path(
    trace: &slowlab_model::trace::Trace,
    pid: Option<i32>,
) -> Result<Result<RootPath, PathError>> {
    let root = match pid {
        Some(pid) => Some(process_by_pid(trace, pid)?),
        None => None,
    };
    Ok(RootPath::new(trace, root))
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
