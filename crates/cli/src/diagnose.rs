//! `slowlab diagnose`'s arguments. Definitions and help only: the binary
//! runs them.

use std::path::PathBuf;

use clap::Args;

/// Record while a command runs, then say why it was slow.
///
/// Records the whole system with `slowlab record` (sampled stacks, context
/// switches and wake-ups, page faults, process lifetimes, block I/O, the
/// syscalls the detectors use with their paths, and those that name what
/// a thread waits on) until CMD exits. Then it follows CMD's critical
/// path: its wall time cut into time on a CPU, runnable (waiting for a
/// CPU) and blocked (lock, io, sleep, ipc, fault, other), each wait
/// followed into the thread that ended it. It prints that answer first,
/// then the findings of every detector ranked by the time they cost, each
/// with its evidence and a fix.
///
/// Writes DIR/trace.data (and its .cgroups.json companion; with --backend
/// perf, its .paths too), DIR/critical_path.json, DIR/findings.json and
/// DIR/report.html (and, with --fxprof, a profile for the Firefox
/// Profiler). Returns CMD's exit code.
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
/// exit code of CMD. One recording serves every run, cut into a trace per
/// run: the recorder starts and stops once, not once a run.
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
    pub output: PathBuf,

    /// Samples per second per CPU
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub freq: u32,

    /// Print the findings as JSON on stdout (the human report goes to
    /// stderr); with --repeat, the summary: {"command","asked","runs":[{"run",
    /// "dir","wall_s","exit_code","answer"}],"median_s","min_s","max_s",
    /// "median_run","interrupted"}
    #[arg(long)]
    pub json: bool,

    /// Also write a Firefox Profiler profile of the whole trace (gzipped
    /// when the name ends in .gz), with blocked time and findings as
    /// markers; open it at profiler.firefox.com or in Perfetto's UI
    #[arg(long, value_name = "FILE.json[.gz]")]
    pub fxprof: Option<PathBuf>,

    /// Also export the trace and its findings as Parquet fleet tables
    /// under DIR (as `slowlab export` does)
    #[arg(long, value_name = "DIR")]
    pub parquet: Option<PathBuf>,

    /// Run and record CMD this many times (1 to 100), into DIR/run-1 …
    /// DIR/run-N, and summarize the runs
    #[arg(long, value_name = "N", conflicts_with_all = ["pid", "fxprof", "parquet"])]
    pub repeat: Option<String>,

    /// Which recorder records: perf, the eBPF scheduler recorder (CPU
    /// samples, switches and wake-ups with stacks, lifetimes, the detectors'
    /// syscalls with their paths, page faults and disk requests, at a
    /// fraction of perf's cost), or auto: bpf where it can run, else perf.
    /// With --repeat, every run is recorded by the same one
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: crate::record::BackendArg,

    /// Attach to this running process instead of running CMD
    #[arg(long, value_name = "PID", conflicts_with = "command")]
    pub pid: Option<i32>,

    /// With --pid: how long to record (90, 20s, 500ms, 2m; 10 s by default)
    #[arg(long, value_name = "DURATION", value_parser = window_seconds, requires = "pid")]
    pub seconds: Option<f64>,

    /// The command to run while recording. It reads slowlab's standard input when that
    /// is a pipe or a file (`-- ./app < input`); from a terminal, none.
    #[arg(last = true, required_unless_present = "pid", value_name = "CMD")]
    pub command: Vec<String>,
}

/// From half a second to an hour.
pub fn window_seconds(s: &str) -> Result<f64, String> {
    slowlab_model::units::parse_seconds(s, 0.5, 3600.0)
}

impl DiagnoseArgs {
    /// Why the arguments cannot go together, if they cannot: `--seconds` is the window
    /// recorded for `--pid`. (clap's `requires = "pid"` does not hold against a CMD, which
    /// `--pid` conflicts with, so `--seconds 3 -- CMD` gets past clap.)
    pub fn argument_refusal(&self) -> Option<&'static str> {
        (self.seconds.is_some() && self.pid.is_none()).then_some(
            "--seconds is the window recorded for --pid; a command is recorded until it exits \
             (drop --seconds)",
        )
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        diagnose: DiagnoseArgs,
    }

    fn refusal(argv: &[&str]) -> Option<&'static str> {
        Cli::try_parse_from([&["diagnose"], argv].concat())
            .unwrap_or_else(|e| panic!("{argv:?}: {e}"))
            .diagnose
            .argument_refusal()
    }

    #[test]
    fn seconds_go_with_a_pid_and_not_with_a_command() {
        let with_cmd = refusal(&["--seconds", "3", "--", "true"]);
        assert!(with_cmd.is_some_and(|w| w.contains("drop --seconds")));
        assert_eq!(refusal(&["--pid", "1", "--seconds", "3"]), None);
        assert_eq!(refusal(&["--pid", "1"]), None);
        assert_eq!(refusal(&["--", "true"]), None);
    }
}
