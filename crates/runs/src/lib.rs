//! Many `slowlab diagnose` runs of one command, and what they say
//! together:
//!
//! - `repeat`: `diagnose --repeat N`: the run directories' names, the
//!   check of N, and the summary across runs (each run's wall time, the
//!   median, the median run's answer);
//! - `executor`: `PathExecutor`, an `Executor` for the sweep engine whose
//!   every run is a diagnose run (through a `Diagnoser` the binary gives:
//!   the recording and analysis `diagnose` makes) and which keeps each
//!   run's critical path as seconds by cause;
//! - `growth`: pure; those seconds by cause across the sizes → how each
//!   cause's time grows (`sweep --critical-path`), fitted with
//!   `slowlab_sweep::fit_series`, the causes keyed as `slowlab diff` keys
//!   them (`slowlab_analyze::path_diff::CauseKey`).
//!
//! - `dir`: one run's directory read back (its critical path), for
//!   `slowlab diff` on directories.
//!
//! What it does not do: record or analyze a trace itself (the `Diagnoser`
//! does), schedule a sweep's runs (the `sweep` engine does), or render a
//! sweep (the `report` crate does).

pub mod dir;
pub mod executor;
pub mod growth;
pub mod repeat;

pub use dir::{read_run, read_runs};
pub use executor::{Diagnosed, Diagnoser, PathExecutor};
pub use growth::{fit_causes, CauseFits, MIN_SECONDS_AT_MAX, MIN_SHARE_AT_MAX};
pub use repeat::{
    parse_repeat, run_dir, stale_runs, summarize, RepeatRun, RepeatSummary, MAX_REPEAT,
};
