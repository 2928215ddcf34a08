//! A whole profiled sweep: check that perf can sample, run the sweep engine
//! with every run under perf, and fit each function's growth into the
//! result (`SweepResult::functions`, `profile_period_s`). What `slowlab
//! sweep --profile` and `slowlab lab --profile` call.
//!
//! What it does not do: print (progress goes to the caller's `Progress`).

use std::path::Path;

use slowlab_model::results::SweepResult;
use slowlab_sweep::{run_sweep, Cancel, CommandExecutor, Progress, SweepConfig, SweepError};

use crate::executor::{PerfTraceReader, ProfilingExecutor};
use crate::fit::fit_functions;
use crate::perf::{PerfWrapper, ProfileError};

#[derive(Debug, thiserror::Error)]
pub enum ProfiledSweepError {
    #[error(transparent)]
    Profile(#[from] ProfileError),
    #[error(transparent)]
    Sweep(#[from] SweepError),
}

/// Sweeps `command` (`{n}` where the size goes) as `cfg` says, sampling
/// `frequency_hz` times per CPU second; temporary traces go under
/// `work_dir` (the system's temporary directory when `None`) and are removed.
pub fn profiled_sweep(
    command: &[String],
    cfg: &SweepConfig,
    frequency_hz: u32,
    work_dir: Option<&Path>,
    progress: &mut dyn Progress,
    cancel: &Cancel,
) -> Result<SweepResult, ProfiledSweepError> {
    let wrapper = PerfWrapper::new(frequency_hz, work_dir)?;
    let perf_wall_s = wrapper.check()?;
    let inner = CommandExecutor::new(wrapper.wrap(command), cancel.clone());
    let reader = PerfTraceReader {
        path: wrapper.trace_path(),
    };
    let mut exec = ProfilingExecutor::new(inner, reader, wrapper.period_s(), perf_wall_s);
    let mut result = run_sweep(&mut exec, command.to_vec(), cfg, progress, cancel)?;
    result.functions = fit_functions(&exec.runs, cfg.warmup, wrapper.period_s(), cfg.seed);
    result.profile_period_s = Some(wrapper.period_s());
    result.warnings.push(format!(
        "profiled: every run was sampled by perf ({frequency_hz} samples per CPU second); \
         CPU times are the samples of the command's processes × {}",
        slowlab_model::units::seconds(wrapper.period_s())
    ));
    Ok(result)
}
