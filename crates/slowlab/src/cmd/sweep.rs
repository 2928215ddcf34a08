//! `slowlab sweep`: parse the arguments, run the sweep engine with a real
//! executor (with `--critical-path`, `slowlab_runs::PathExecutor` over
//! `diagnose`'s recording and analysis), a progress bar and Ctrl-C
//! handling, print the report and write the requested exports.

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;
use slowlab_diagnose::CommandDiagnoser;
use slowlab_model::results::SweepResult;
use slowlab_report::sweep::{
    render_text, CsvExporter, Exporter, JsonExporter, MarkdownExporter, SvgExporter,
};
use slowlab_report::write_atomically;
use slowlab_runs::{fit_causes, PathExecutor};
use slowlab_sweep::{parse_sizes, run_sweep, Cancel, CommandExecutor, SweepConfig};

use super::input::Opener;

use crate::progress::SweepBar;
use crate::signals::cancel_on_interrupt;

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
/// diagnose` does (system-wide, then the command's critical path), and
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
    sizes: String,

    /// Repetitions per size
    #[arg(long, default_value_t = 3, value_name = "R")]
    reps: usize,

    /// Discarded runs at the smallest size before measuring
    #[arg(long, default_value_t = 1, value_name = "W")]
    warmup: usize,

    /// Time the sweep may spend running the command, e.g. 90s, 5m, 1h
    #[arg(long, default_value = "5m", value_name = "DURATION")]
    budget: String,

    /// Size whose cost is subtracted from every point as fixed start-up cost
    #[arg(long, default_value_t = 0, value_name = "N")]
    baseline_size: u64,

    /// Subtract no baseline
    #[arg(long, conflicts_with = "baseline_size")]
    no_baseline: bool,

    /// Run every size even when growth is already certainly super-linear
    #[arg(long)]
    all_sizes: bool,

    /// Never add repetitions or sizes when the verdict is inconclusive
    #[arg(long)]
    no_adapt: bool,

    /// Seed of the shuffled order and of the bootstrap
    #[arg(long, default_value_t = 0x510_1ab, value_name = "SEED")]
    seed: u64,

    /// Write the full result as JSON (`-` for stdout; the table then goes to stderr)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,

    /// Write the per-size table as CSV
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,

    /// Write the per-size table and verdict as Markdown
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,

    /// Write a log-log plot as SVG
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,

    /// Sample each run's call stacks with perf and fit how each function's cost grows
    #[arg(long)]
    profile: bool,

    /// Samples per second of CPU time with --profile
    #[arg(long, default_value_t = slowlab_profile::DEFAULT_FREQUENCY_HZ, requires = "profile", value_name = "HZ")]
    profile_freq: u32,

    /// Record each run as `slowlab diagnose` does and fit how each cause
    /// of its critical path grows
    #[arg(long, conflicts_with = "profile")]
    critical_path: bool,

    /// Samples per second per CPU with --critical-path
    #[arg(long, default_value_t = 1000, requires = "critical_path", value_name = "HZ",
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    freq: u32,

    /// With --critical-path: keep each run's diagnose directory under DIR
    /// (DIR/run-K-nN) instead of removing it
    #[arg(long, requires = "critical_path", value_name = "DIR")]
    keep_runs: Option<PathBuf>,

    /// The command to run; `{N}` is replaced by the size
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

pub fn run(args: SweepArgs) -> anyhow::Result<i32> {
    let sizes = parse_sizes(&args.sizes).map_err(anyhow::Error::msg)?;
    let budget_s = slowlab_model::units::parse_seconds(&args.budget, 1e-3, f64::INFINITY)
        .map_err(anyhow::Error::msg)?;
    if args.reps == 0 {
        bail!("--reps must be at least 1");
    }
    let baseline_size = (!args.no_baseline).then_some(args.baseline_size);
    if let Some(b) = baseline_size {
        if b >= sizes[0] {
            bail!(
                "--baseline-size {b} must be smaller than the smallest size {}",
                sizes[0]
            );
        }
    }
    let config = SweepConfig {
        sizes,
        reps: args.reps,
        warmup: args.warmup,
        baseline_size,
        budget_s,
        seed: args.seed,
        early_stop: !args.all_sizes,
        adaptive: !args.no_adapt,
        ..SweepConfig::default()
    };

    let cancel = Cancel::new();
    cancel_on_interrupt(cancel.clone())?;
    let mut bar = SweepBar::new();
    let outcome = if args.critical_path {
        critical_path_sweep(&args, &config, &mut bar, &cancel)
    } else if args.profile {
        slowlab_profile::profiled_sweep(
            &args.command,
            &config,
            args.profile_freq,
            None,
            &mut bar,
            &cancel,
        )
        .map_err(anyhow::Error::from)
    } else {
        let mut executor = CommandExecutor::new(args.command.clone(), cancel.clone());
        run_sweep(
            &mut executor,
            args.command.clone(),
            &config,
            &mut bar,
            &cancel,
        )
        .map_err(anyhow::Error::from)
    };
    bar.finish();
    let result = outcome?;

    let text = render_text(&result);
    if args.json.as_deref() == Some(std::path::Path::new("-")) {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
    let exports: [(&Option<PathBuf>, &dyn Exporter); 4] = [
        (&args.json, &JsonExporter),
        (&args.csv, &CsvExporter),
        (&args.markdown, &MarkdownExporter),
        (&args.plot, &SvgExporter),
    ];
    for (path, exporter) in exports {
        if let Some(path) = path {
            let bytes = exporter.export(&result)?;
            write_atomically(path, &bytes)?;
        }
    }
    Ok(if result.interrupted { 130 } else { 0 })
}

/// `--critical-path`: every run a diagnose run; each cause's growth fitted
/// into the result.
fn critical_path_sweep(
    args: &SweepArgs,
    config: &SweepConfig,
    bar: &mut SweepBar,
    cancel: &Cancel,
) -> anyhow::Result<SweepResult> {
    let temp;
    let work_dir = match &args.keep_runs {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
            dir.as_path()
        }
        None => {
            temp = tempfile::Builder::new()
                .prefix("slowlab-sweep-")
                .tempdir()
                .map_err(|e| anyhow::anyhow!("cannot make a temporary directory: {e}"))?;
            temp.path()
        }
    };
    let opener = Opener::new(true)?;
    let diagnoser = CommandDiagnoser {
        opener: &opener,
        freq: args.freq,
        warnings: Vec::new(),
    };
    let mut exec = PathExecutor::new(
        args.command.clone(),
        diagnoser,
        work_dir,
        args.keep_runs.is_some(),
        cancel.clone(),
    );
    let mut result = run_sweep(&mut exec, args.command.clone(), config, bar, cancel)?;
    let fits = fit_causes(&exec.runs, config.warmup, config.seed);
    result.cause_groups = fits.groups;
    result.causes = fits.causes;
    result.warnings.extend(
        exec.diagnoser()
            .warnings
            .iter()
            .map(|w| format!("recording: {w}")),
    );
    result.warnings.push(
        "critical path: every run was recorded system-wide and analyzed as `slowlab diagnose` \
         does; the costs (the CPU columns) are the command's wall time along its critical path"
            .to_string(),
    );
    Ok(result)
}
