//! `slowlab analyze`'s arguments: definitions, help, and the rule that a whole-trace view
//! takes no range or filter. The binary runs them.

use std::path::PathBuf;

use clap::Args;

use crate::shared::{SelectionArgs, SymbolArgs};

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
/// filters apply to all of them but `--findings` and `--critical-path`, which
/// read the whole trace (and refuse `--filter`, `--from` and `--to`); a wait
/// that crosses an end of the range counts with its part inside.
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
  {\"samples\",\"lost\",\"duration_s\",\"sample_event\",\"sample_freq\",\"warnings\",
   \"processes\":[{\"pid\",\"comm\",\"samples\",\"threads\":[{\"tid\",\"comm\",\"samples\"}]}],
   \"functions\":[{\"name\",\"module\",\"self\",\"inclusive\"}]}
Counts are samples of the sampling event (cpu-clock: one per 1/FREQ s of CPU;
sched-tick, the eBPF recorder's on the scheduler's tick: one per tick of a busy CPU).

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
    #[command(flatten)]
    pub selection: SelectionArgs,
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

/// At least a millisecond.
pub fn positive_seconds(s: &str) -> Result<f64, String> {
    slowlab_model::units::parse_seconds(s, 0.001, f64::INFINITY)
}

impl AnalyzeArgs {
    /// Why the arguments cannot go together, if they cannot: `--findings` and
    /// `--critical-path` read the whole trace, so `--filter`, `--from` and `--to` would
    /// be silently ignored by them.
    pub fn whole_trace_refusal(&self) -> Option<&'static str> {
        let sel = &self.selection;
        if sel.filter.is_empty() && sel.from.is_none() && sel.to.is_none() {
            None
        } else if self.findings {
            Some(
                "--findings runs the detectors on the whole trace: --filter, --from and --to \
                 do not apply to it (drop them)",
            )
        } else if self.critical_path {
            Some(
                "--critical-path follows one process through the whole trace: choose it with \
                 --root PID, not --filter, --from or --to",
            )
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        analyze: AnalyzeArgs,
    }

    fn refusal(argv: &[&str]) -> Option<&'static str> {
        Cli::try_parse_from([&["analyze", "t.data"], argv].concat())
            .unwrap_or_else(|e| panic!("{argv:?}: {e}"))
            .analyze
            .whole_trace_refusal()
    }

    #[test]
    fn the_whole_trace_views_refuse_a_range_or_a_filter_and_the_others_take_them() {
        for range in [
            &["--from", "1"][..],
            &["--to", "500ms"],
            &["--filter", "pid=1"],
        ] {
            let findings = refusal(&[&["--findings"], range].concat());
            assert!(
                findings.is_some_and(|w| w.contains("drop them")),
                "{range:?}"
            );
            let path = refusal(&[&["--critical-path"], range].concat());
            assert!(path.is_some_and(|w| w.contains("--root PID")), "{range:?}");
            assert_eq!(refusal(&[&["--waits"], range].concat()), None);
            assert_eq!(refusal(range), None);
        }
        assert_eq!(refusal(&["--findings"]), None);
        assert_eq!(refusal(&["--critical-path", "--root", "7"]), None);
    }
}
