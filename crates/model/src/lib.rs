//! The data types slowlab passes between its stages: sweep and lab results
//! (`results`), the recorded-trace model (`trace`) and the detectors'
//! conclusions (`findings`).
//!
//! This crate does no I/O and no computation beyond small accessors; it is the
//! contract between the measuring crates (`sweep`, `lab`, `perf`) and the
//! crates that analyze and render (`analyze`, `report`). Everything here is
//! `serde`-serializable and the JSON field names are part of the documented
//! output format (see README.md).

pub mod findings;
pub mod results;
pub mod trace;
