//! The scenarios, one module each, and the order they run in.

pub mod log_probe;
pub mod topdown_alloc;

use crate::runner::Scenario;

/// Every scenario, in the order `slowlab lab` runs them.
pub static ALL: &[&dyn Scenario] = &[
    &topdown_alloc::TopdownAlloc,
    &log_probe::LogProbe,
];
