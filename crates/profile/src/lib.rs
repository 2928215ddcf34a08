//! `sweep --profile`: sample a command's call stacks with perf in every run
//! of a sweep and fit how each function's cost grows across the sizes.
//!
//! - `perf`: the `perf record` command line that wraps each run, and the
//!   check that perf can sample here (one-line errors that say what to do);
//! - `counts`: one recorded run → samples per function (self and
//!   inclusive), read with `slowlab-perf` and counted with
//!   `slowlab_analyze::cpu::function_counts`;
//! - `executor`: `ProfilingExecutor`, an `Executor` for the sweep engine
//!   that runs the wrapped command and keeps each run's counts;
//! - `run`: a whole profiled sweep, what the binary calls;
//! - `fit`: pure; the counts of all runs → `FunctionGrowth` per function,
//!   fitted with `slowlab_sweep::fit_series`;
//! - `lab`: `lab --profile`, a profiled sweep of each lab scenario's
//!   pathological child program (the scenarios give the arguments and sizes).
//!
//! What it does not do: schedule runs (the `sweep` engine does), or render
//! (the caller passes how a result is said; the `report` crate says it).

pub mod counts;
pub mod executor;
pub mod fit;
pub mod lab;
pub mod perf;
pub mod run;

pub use counts::{FunctionCount, FunctionKey, RunProfile};
pub use executor::{PerfTraceReader, ProfilingExecutor, TraceReader};
pub use fit::{fit_functions, MIN_SAMPLES_AT_MAX};
pub use perf::{check_perf, PerfWrapper, ProfileError};
pub use run::{profiled_sweep, ProfiledSweepError};
