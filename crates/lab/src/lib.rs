//! The lab: the five operating-system pathologies of the README (`slowlab lab`) as
//! reproducible experiments, each with a pathological and a control variant
//! measured side by side, ending in a verdict per scenario.
//!
//! - `scenarios::*`: one module (or folder) per scenario (what to run, how
//!   to judge it) and the child programs it launches;
//! - `runner`: runs a selection of scenarios with skip rules and cleanup;
//! - `context`: what a scenario gets to work with (sizes, the slowlab binary
//!   for child processes, cancellation, output);
//! - `children`: the `slowlab __child …` command line of those programs;
//! - `measure`: running a child that reports its own measurement, and
//!   sweeping it with the `sweep` engine;
//! - `cleanup`: undoing processes, mounts, cgroups and files on every exit
//!   path; `system`: facts about the machine for guard rails;
//! - `cgroup`: the memory cgroups scenarios make (finding the hierarchy,
//!   limits, counters, removal), shared by all of them;
//! - `LabError` (`error`): the one error type, whose texts users read;
//! - `verdicts`: judging sweep scenarios, also for imported results.
//!
//! Nothing here renders a table; see the `report` crate.

pub mod burn;
pub mod cgroup;
pub mod children;
pub mod cleanup;
pub mod context;
mod error;
pub mod measure;
pub mod runner;
pub mod scenarios;
pub mod system;
pub mod verdicts;

#[cfg(test)]
mod testutil;

pub use context::{LabContext, LabOutput, Profile};
pub use error::LabError;
pub use runner::{run_lab, scenario_ids, Scenario};
