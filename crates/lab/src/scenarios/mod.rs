//! The scenarios, one module each, and the order they run in. The larger
//! ones are folders (`mod.rs` with the scenario, then files by job: setup,
//! child programs, verdict, tests).
//!
//! What it does not do: run them (the runner does), or hold what they
//! share (child output and sweeps in `measure`, guards in `cleanup`, memory
//! cgroups in `cgroup`, machine facts in `system`).

pub mod log_probe;
pub mod notify_buffer;
pub mod teardown_lock;
pub mod topdown_alloc;
pub mod working_set_cap;

use crate::runner::Scenario;

/// Every scenario, in the order `slowlab lab` runs them.
pub static ALL: &[&dyn Scenario] = &[
    &topdown_alloc::TopdownAlloc,
    &notify_buffer::NotifyBuffer,
    &log_probe::LogProbe,
    &teardown_lock::TeardownLock,
    &working_set_cap::WorkingSetCap,
];
