//! Sweeps: run a command at growing sizes, measure each run's CPU and wall
//! time, and decide with statistics that hold on a noisy machine whether its
//! cost grows linearly or super-linearly.
//!
//! Stages, each its own module:
//! - `sizes`: parsing the `--sizes` specification;
//! - `executor`: running one command at one size (`Executor`, the real
//!   `CommandExecutor`), and `fake`: an exact stand-in for tests;
//! - `stats`: medians, least squares, the seeded bootstrap;
//! - `growth`: local exponents, the top-three exponent, model selection;
//! - `verdict`: the decision rule;
//! - `series`: the same statistics and verdict for any measured series
//!   (a function's sampled cost in `sweep --profile`);
//! - `engine`: the schedule (warm-up, shuffling, early stop, budget,
//!   adaptivity) that ties them together into a `SweepResult`.
//!
//! Nothing here prints or renders; see the `report` crate.

pub mod cancel;
pub mod engine;
pub mod executor;
pub mod fake;
pub mod growth;
pub mod series;
pub mod sizes;
pub mod stats;
pub mod verdict;

pub use cancel::Cancel;
pub use engine::{run_sweep, NoProgress, Progress, SweepConfig, SweepError};
pub use executor::{CommandExecutor, Executor, Measurement, RunError};
pub use series::{fit_series, SeriesFit};
pub use sizes::parse_sizes;
