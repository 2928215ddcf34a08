//! `slowlab sweep`'s arguments. Definitions and help only: the binary runs them.

use std::path::PathBuf;

use clap::Args;

use crate::PROFILE_FREQ_HZ;

/// Run a command at growing sizes and decide whether its cost grows
/// linearly or super-linearly.
///
/// Every `{N}` in the command is replaced by the size. Each run's CPU time
/// (user+sys of the command and all its descendants) and wall time are
/// measured; repetitions run in shuffled order; the cost at the baseline size
/// (n=0 unless told otherwise) is subtracted as fixed start-up cost. The
/// growth exponent over the top three sizes comes with a 95% bootstrap
/// interval, and the verdict is one of:
///
///   linear        the interval's upper bound is at most 1.3
///   superlinear   the lower bound is at least 1.25 and the last two
///                 doublings both stay above 1.25
///   step          a one-off jump in cost (a cache step), not growth
///   inconclusive  neither; slowlab adds repetitions or a size by itself
///                 while the budget allows
///
/// Sizes run smallest first; once growth is certainly super-linear the
/// largest sizes are skipped (--all-sizes runs them anyway).
///
/// With --profile, every run is sampled by perf (cpu-clock, frame-pointer
/// call stacks, the command's process tree only) and each function's cost
/// (its samples × the sampling period, in CPU seconds) is fitted across the
/// sizes with the same statistics and verdict rules, for its inclusive and
/// its self cost. The report names the function whose own cost grows, e.g.
///
///   `quad_part` (growth) grows as N^2.01 [1.96–2.05] and is 78% of the
///   cost at n=8000; `lin_part` N^1.00
///
/// followed by a table of the fastest-growing functions; functions with
/// fewer than 50 samples per run at the largest size are listed as too
/// few to fit, not guessed. The JSON gets "functions" and the plot one line
/// per top function. Needs perf; without root, perf_event_paranoid ≤ 2
/// (user-space samples of your own command only).
///
/// With --critical-path, every run is recorded and analyzed as `slowlab
/// diagnose` does (system-wide, then the command's critical path; one
/// recording for all the runs, cut into a trace per run), and
/// the time of each cause of the path — as `slowlab diff` keys them: on a
/// CPU (by function), waiting for a CPU, or blocked on a lock, the disk, a
/// sleep, another thread or process, a page fault (by resource or where it
/// blocked), in which process and thread — is fitted across the sizes with
/// the same statistics, e.g.
///
///   sleeping in hrtimer_nanosleep grows as N^2.01 [1.95–2.06] (prog),
///   on a CPU in compute_page as N^1.00 [0.97–1.04] (prog)
///
/// followed by a table of the causes grouped by state, kind, process and
/// thread; a cause with under 10 ms or 2% of the path at the largest size
/// is "too small to fit". A run's cost (the CPU columns of the table) is
/// then its wall time along the critical path. The JSON gets
/// "cause_groups" and "causes", each with its exponent and its seconds in
/// every run ("points"). Needs what diagnose needs (root, or perf allowed
/// system-wide); each run costs a recording and an analysis (seconds).
///
/// Examples:
///
///   slowlab sweep --sizes 1000..64000 -- ./my-program --items {N}
///
///   slowlab sweep --sizes 10k,20k,40k,80k --reps 5 --json out.json --plot out.svg -- sh -c 'seq {N} | sort -n > /dev/null'
///
///   slowlab sweep --profile --sizes 1000..8000 -- ./my-program {N}
///
///   sudo slowlab sweep --critical-path --sizes 4,8,16 --reps 2 -- ./my-program {N}
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct SweepArgs {
    /// Sizes: a list (1000,2000,4000), doubling ranges (1000..64000) or both; k and M suffixes allowed (1k..64k)
    #[arg(long, value_name = "SIZES")]
    pub sizes: String,

    /// Repetitions per size
    #[arg(long, default_value_t = 3, value_name = "R")]
    pub reps: usize,

    /// Discarded runs at the smallest size before measuring
    #[arg(long, default_value_t = 1, value_name = "W")]
    pub warmup: usize,

    /// Time the sweep may spend running the command, e.g. 90s, 5m, 1h
    #[arg(long, default_value = "5m", value_name = "DURATION")]
    pub budget: String,

    /// Size whose cost is subtracted from every point as fixed start-up cost
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub baseline_size: u64,

    /// Subtract no baseline
    #[arg(long, conflicts_with = "baseline_size")]
    pub no_baseline: bool,

    /// Run every size even when growth is already certainly super-linear
    #[arg(long)]
    pub all_sizes: bool,

    /// Never add repetitions or sizes when the verdict is inconclusive
    #[arg(long)]
    pub no_adapt: bool,

    /// Seed of the shuffled order and of the bootstrap
    #[arg(long, default_value_t = 0x510_1ab, value_name = "SEED")]
    pub seed: u64,

    /// Write the full result as JSON (`-` for stdout; the table then goes to stderr)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Write the per-size table as CSV
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,

    /// Write the per-size table and verdict as Markdown
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,

    /// Write a log-log plot as SVG
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,

    /// Sample each run's call stacks with perf and fit how each function's cost grows
    #[arg(long)]
    pub profile: bool,

    /// Samples per second of CPU time with --profile
    #[arg(long, default_value_t = PROFILE_FREQ_HZ, requires = "profile", value_name = "HZ")]
    pub profile_freq: u32,

    /// Record each run as `slowlab diagnose` does and fit how each cause
    /// of its critical path grows
    #[arg(long, conflicts_with = "profile")]
    pub critical_path: bool,

    /// Samples per second per CPU with --critical-path
    #[arg(long, default_value_t = 1000, requires = "critical_path", value_name = "HZ",
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub freq: u32,

    /// With --critical-path: which recorder records each run (as `slowlab
    /// diagnose --backend`: auto is bpf where it can run, else perf)
    #[arg(long, value_enum, default_value = "auto", requires = "critical_path")]
    pub backend: crate::record::BackendArg,

    /// With --critical-path: keep each run's diagnose directory under DIR
    /// (DIR/run-K-nN) instead of removing it
    #[arg(long, requires = "critical_path", value_name = "DIR")]
    pub keep_runs: Option<PathBuf>,

    /// The command to run; `{N}` is replaced by the size
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}
