//! `slowlab sweep`: parse the arguments, run the sweep engine with a real
//! executor (with `--critical-path`, `slowlab_runs::PathExecutor` over
//! `diagnose`'s recording and analysis), a progress bar and Ctrl-C
//! handling, print the report and write the requested exports.

use std::path::PathBuf;

use anyhow::bail;
use slowlab_cli::sweep::SweepArgs;
use slowlab_diagnose::{CommandDiagnoser, CommandRuns};
use slowlab_model::results::SweepResult;
use slowlab_report::sweep::{
    render_text, CsvExporter, Exporter, JsonExporter, MarkdownExporter, SvgExporter,
};
use slowlab_report::{check_writable, write_atomically};
use slowlab_runs::{fit_causes, PathExecutor};
use slowlab_sweep::{parse_sizes, run_sweep, Cancel, CommandExecutor, SweepConfig};

use super::input::Opener;

use crate::progress::SweepBar;
use crate::signals::cancel_on_interrupt;

pub fn run(args: SweepArgs) -> anyhow::Result<i32> {
    let sizes = parse_sizes(&args.sizes).map_err(anyhow::Error::msg)?;
    let budget_s = slowlab_model::units::parse_seconds(&args.budget, 1e-3, f64::INFINITY)
        .map_err(anyhow::Error::msg)?;
    if args.reps == 0 {
        bail!("--reps must be at least 1");
    }
    for path in [&args.json, &args.csv, &args.markdown, &args.plot]
        .into_iter()
        .flatten()
    {
        check_writable(path)?;
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
    Ok(if result.interrupted {
        crate::signals::exit_code()
    } else {
        0
    })
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
    // One recording for every run, kept in the work directory, stopped after the last.
    let bpf = super::record::diagnose_with_bpf(args.backend);
    let diagnoser = CommandDiagnoser::new(CommandRuns::new(&opener, work_dir, args.freq, bpf));
    let mut exec = PathExecutor::new(
        args.command.clone(),
        diagnoser,
        work_dir,
        args.keep_runs.is_some(),
        cancel.clone(),
    );
    let swept = run_sweep(&mut exec, args.command.clone(), config, bar, cancel);
    exec.diagnoser_mut().finish();
    let mut result = swept?;
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
