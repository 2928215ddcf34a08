//! The scenarios, one module each, and the order they run in.

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
