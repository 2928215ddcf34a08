//! The lab: the five operating-system pathologies of the README (`slowlab lab`) as
//! reproducible experiments, each with a pathological and a control variant
//! measured side by side, ending in a verdict per scenario.
//!
//! - `scenarios::*`: one module per scenario (what to run, how to judge it)
//!   and the child programs it launches;
//! - `runner`: runs a selection of scenarios with skip rules and cleanup;
//! - `context`: what a scenario gets to work with (sizes, the slowlab binary
//!   for child processes, cancellation, output);
//! - `children`: the `slowlab __child …` command line of those programs;
//! - `measure`: running a child that reports its own measurement, and
//!   sweeping it with the `sweep` engine;
//! - `cleanup`: undoing processes, mounts, cgroups and files on every exit
//!   path; `system`: facts about the machine for guard rails;
//! - `verdicts`: judging sweep scenarios, also for imported results.
//!
//! Nothing here renders a table; see the `report` crate.

pub mod children;
pub mod cleanup;
pub mod context;
pub mod measure;
pub mod runner;
pub mod scenarios;
pub mod system;
pub mod verdicts;

#[cfg(test)]
mod testutil;

pub use context::{LabContext, LabOutput, Profile};
pub use runner::{run_lab, scenario_ids, Scenario};

/// Why a scenario could not finish.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error("interrupted")]
    Interrupted,
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Sweep(#[from] slowlab_sweep::SweepError),
    #[error("{0}")]
    Failed(String),
}

impl LabError {
    /// An I/O error with what was being done.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        LabError::Io {
            what: what.into(),
            source,
        }
    }
}
