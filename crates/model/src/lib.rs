//! The data types slowlab passes between its stages: sweep and lab results
//! (`results`), the recorded-trace model (`trace`, and `lifetimes`, the
//! bookkeeping of its process and thread tables that the readers share)
//! and the files recorded beside it (`bundle`), the detectors' conclusions
//! (`findings`) and the critical path of a slow command (`critical_path`),
//! the one syscall table (`syscalls`), the host's steal time and when it is
//! worth a warning (`host_steal`), what each view of a trace computes
//! (`views`), how durations are written for people (`units`) and
//! little-endian integers read at an offset (`le`).
//!
//! This crate does no I/O and no computation beyond small accessors and
//! that bookkeeping; it is the contract between the measuring crates
//! (`sweep`, `lab`, `perf`) and the crates that analyze and render
//! (`analyze`, `report`). Every type passed between stages is
//! `serde`-serializable and the JSON field names are part of the documented
//! output format (see README.md).

pub mod bundle;
pub mod critical_path;
pub mod findings;
pub mod host_steal;
pub mod le;
pub mod lifetimes;
pub mod results;
pub mod signals;
pub mod syscalls;
pub mod trace;
pub mod units;
pub mod views;
pub mod windows_fields;
