//! `slowlab lab`'s arguments. Definitions and help only: the binary runs them.

use std::path::PathBuf;

use clap::Args;

use crate::PROFILE_FREQ_HZ;

/// Reproduce the five operating-system pathologies as measured experiments.
///
/// Each scenario runs a pathological and a control variant side by side on
/// this machine and says whether the machine is affected, and by how much:
///
///   topdown-alloc    top-down placement searching from the top: O(n²)
///   notify-buffer    file-change watchers: buffer size, permission events
///   log-probe        log names found by probing name.0, name.1, …: O(N²)
///   teardown-lock    network-namespace teardown holding the global rtnl lock
///   working-set-cap  scanning 64 MiB inside a 32 MiB memory cgroup
///
/// Scenarios that need root (namespaces, cgroups, mounts, fanotify) are
/// skipped with the reason when run without it. Everything a scenario
/// creates is removed when it ends, fails or is interrupted (Ctrl-C).
///
/// Examples:
///
///   slowlab lab                          all five at quick sizes (< 3 min)
///   slowlab lab log-probe --full         the original experiment's sizes
///   slowlab lab --json lab.jsonl --html lab.html
///   slowlab lab --trace traces           record each variant once and check
///                                        that its detector names the culprit
///   slowlab lab --profile                sweep each growing pathological
///                                        variant under perf and name the
///                                        function where the growth lives
///
/// --profile samples the call stacks of topdown-alloc's and log-probe's
/// pathological children at every size (perf, cpu-clock, frame pointers),
/// fits each function's cost as `slowlab sweep --profile` does, and ends
/// with one line per scenario, e.g.
///
///   topdown-alloc    topdown-probe (superlinear, whole run N^1.98 [1.95–2.02]):
///                    `FUNCTION` (MODULE) grows as N^2.0 … and is 40% of the
///                    cost at n=4000
///
/// Kernel functions are named when kallsyms is readable (root); without root
/// perf samples only the children's user space (perf_event_paranoid ≤ 2).
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct LabArgs {
    /// Scenarios to run (all when none is given); see --list
    #[arg(value_name = "SCENARIO")]
    pub scenarios: Vec<String>,

    /// Small sizes: all five in under 3 minutes (the default)
    #[arg(long, conflicts_with_all = ["full", "tiny"])]
    pub quick: bool,

    /// The sizes of the original experiments, within time budgets
    #[arg(long, conflicts_with = "tiny")]
    pub full: bool,

    /// Tiny sizes for tests: seconds per scenario, effects not always visible
    #[arg(long, hide = true)]
    pub tiny: bool,

    /// List the scenarios and exit
    #[arg(long)]
    pub list: bool,

    /// Write one JSON object per scenario per line (JSON Lines; `-` for stdout)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Write a self-contained HTML report
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    /// Instead of measuring: record one run of each variant system-wide into
    /// DIR/SCENARIO-VARIANT/ and check that the scenario's detector fires on
    /// the pathological trace and stays silent on the control's (needs root;
    /// perf too where the eBPF recorder cannot run, see --backend). One
    /// recording is cut into a trace per run. Exit code 1 when a check fails.
    #[arg(long, value_name = "DIR")]
    pub trace: Option<PathBuf>,

    /// Samples per second per CPU of --trace recordings
    #[arg(long, default_value_t = 1000, requires = "trace", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub trace_freq: u32,

    /// Which recorder records --trace runs: perf, the eBPF scheduler
    /// recorder (the same events the detectors read, at a fraction of
    /// perf's cost), or auto: bpf where it can run, else perf
    #[arg(long, value_enum, default_value = "auto", requires = "trace")]
    pub backend: crate::record::BackendArg,

    /// Instead of the verdicts: sweep each growing scenario's pathological
    /// variant under perf and name the function where its cost grows (needs
    /// perf; kernel functions need root)
    #[arg(long, conflicts_with = "trace")]
    pub profile: bool,

    /// Samples per second of CPU time with --profile
    #[arg(long, default_value_t = PROFILE_FREQ_HZ, requires = "profile", value_name = "HZ")]
    pub profile_freq: u32,

    /// Directory for temporary files (default: $TMPDIR or /tmp)
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
}
