//! `ProfilingExecutor`: an `Executor` for the sweep engine that runs each
//! measurement under perf (the inner executor runs the command line
//! `PerfWrapper::wrap` made) and, after each run, reads that run's trace
//! into samples per function, kept with the run's size.
//!
//! The CPU time of a profiled run is measured by its samples (all samples
//! of the command's process tree × the sampling period), not by `wait4`:
//! perf is the child that is waited for, and its own CPU (a few hundred
//! milliseconds of start-up, much of it noise) would bury small sizes. So
//! the command's cost and its functions' costs are the same kind of number
//! and their exponents compare directly. Wall time is the wrapped run's
//! minus perf's own start-up, measured once (`PerfWrapper::check`).
//!
//! What it does not do: fit (see `fit`) or know how perf is invoked (the
//! inner executor's command line does).

use std::path::PathBuf;

use slowlab_sweep::{Executor, Measurement, RunError};

use crate::counts::{count_file, RunProfile};

/// Reads one run's profile; a fake in tests.
pub trait TraceReader {
    /// The samples per function of the run just made at size `n`.
    fn read(&mut self, n: u64) -> Result<RunProfile, String>;
}

/// Reads the perf.data file a `PerfWrapper` writes, and removes it.
pub struct PerfTraceReader {
    pub path: PathBuf,
}

impl TraceReader for PerfTraceReader {
    fn read(&mut self, _n: u64) -> Result<RunProfile, String> {
        let profile = count_file(&self.path).map_err(|e| e.to_string());
        let _ = std::fs::remove_file(&self.path);
        profile
    }
}

pub struct ProfilingExecutor<E, R> {
    inner: E,
    reader: R,
    /// CPU seconds per sample.
    period_s: f64,
    /// Wall seconds of perf's own start and stop, subtracted from each run.
    wall_overhead_s: f64,
    /// Every run's profile with its size, in the order they ran (warm-up
    /// runs included: `fit_functions` is told how many to skip).
    pub runs: Vec<(u64, RunProfile)>,
}

impl<E: Executor, R: TraceReader> ProfilingExecutor<E, R> {
    pub fn new(inner: E, reader: R, period_s: f64, wall_overhead_s: f64) -> Self {
        ProfilingExecutor {
            inner,
            reader,
            period_s,
            wall_overhead_s,
            runs: Vec::new(),
        }
    }
}

impl<E: Executor, R: TraceReader> Executor for ProfilingExecutor<E, R> {
    fn run(&mut self, n: u64) -> Result<Measurement, RunError> {
        let wrapped = self.inner.run(n)?;
        let profile = self.reader.read(n).map_err(|message| RunError::Failed {
            n,
            status: "its profile could not be read".into(),
            stderr_tail: message,
        })?;
        let cpu_s = profile.total as f64 * self.period_s;
        self.runs.push((n, profile));
        Ok(Measurement {
            cpu_s,
            wall_s: (wrapped.wall_s - self.wall_overhead_s).max(cpu_s),
            stdout: wrapped.stdout,
        })
    }

    fn take_warnings(&mut self) -> Vec<String> {
        let mut warnings = self.inner.take_warnings();
        // What the trace reader said, once per distinct text.
        for (_, run) in &mut self.runs {
            for w in run.warnings.drain(..) {
                let w = format!("profile: {w}");
                if !warnings.contains(&w) {
                    warnings.push(w);
                }
            }
        }
        warnings
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counts::{FunctionCount, FunctionKey};
    use crate::fit::fit_functions;
    use slowlab_model::results::FunctionVerdict;
    use slowlab_sweep::fake::FakeExecutor;
    use slowlab_sweep::{run_sweep, Cancel, NoProgress, SweepConfig};

    /// Samples of a program spending 1e-7·n² s in `quad` and 1e-4·n s in
    /// `lin`, at 1 ms per sample.
    struct FakeReader;
    impl TraceReader for FakeReader {
        fn read(&mut self, n: u64) -> Result<RunProfile, String> {
            let n = n as f64;
            let count = |name: &str, seconds: f64| FunctionCount {
                key: FunctionKey {
                    name: name.into(),
                    module: "prog".into(),
                    kernel: false,
                },
                self_samples: (seconds / 1e-3).round() as u64,
                samples: (seconds / 1e-3).round() as u64,
            };
            let functions = vec![count("quad", 1e-7 * n * n), count("lin", 1e-4 * n)];
            Ok(RunProfile {
                total: functions.iter().map(|f| f.samples).sum(),
                functions,
                warnings: Vec::new(),
            })
        }
    }

    #[test]
    fn a_sweep_through_the_profiling_executor_fits_each_function() {
        let fake = FakeExecutor::new(1, |n| 1e-7 * n * n + 1e-4 * n + 0.01);
        let mut exec = ProfilingExecutor::new(fake, FakeReader, 1e-3, 0.0);
        let cfg = SweepConfig {
            sizes: vec![1000, 2000, 4000, 8000],
            early_stop: false,
            ..SweepConfig::default()
        };
        let result = run_sweep(
            &mut exec,
            vec!["prog".into(), "{n}".into()],
            &cfg,
            &mut NoProgress,
            &Cancel::new(),
        )
        .unwrap();
        let measured: usize = result.points.iter().map(|p| p.reps()).sum::<usize>()
            + result.baseline.as_ref().map_or(0, |b| b.reps());
        assert_eq!(exec.runs.len(), measured + cfg.warmup);
        // The command's CPU is its samples: 64 + 0.8 s at n=8000.
        let top = result.rows.last().unwrap();
        assert!((top.median_cpu_s - 7.2).abs() < 1e-9, "{top:?}");
        // Least squares over 2000, 4000, 8000 (0.6, 2.0, 7.2 s; equal steps
        // in ln n): ln(7.2 / 0.6) / ln 4 = 1.79.
        assert_eq!(format!("{:.2}", result.exponent.unwrap()), "1.79");
        let fs = fit_functions(&exec.runs, cfg.warmup, 1e-3, cfg.seed);
        assert_eq!(fs[0].name, "quad");
        assert_eq!(format!("{:.2}", fs[0].exponent.unwrap()), "2.00");
        assert_eq!(fs[0].verdict, FunctionVerdict::Superlinear);
        assert_eq!(fs[1].name, "lin");
        assert_eq!(format!("{:.2}", fs[1].exponent.unwrap()), "1.00");
        assert_eq!(fs[1].verdict, FunctionVerdict::Linear);
    }

    #[test]
    fn a_trace_that_cannot_be_read_fails_the_run_with_the_size() {
        struct Broken;
        impl TraceReader for Broken {
            fn read(&mut self, _n: u64) -> Result<RunProfile, String> {
                Err("not a perf.data file".into())
            }
        }
        let mut exec = ProfilingExecutor::new(FakeExecutor::new(1, |n| n), Broken, 1e-3, 0.0);
        let err = exec.run(5).unwrap_err().to_string();
        assert!(
            err.contains("n=5") && err.contains("not a perf.data file"),
            "{err}"
        );
    }
}
