//! slowlab's command line: every command's arguments with their help, as
//! clap reads them (one module per command), and nothing else. The binary
//! (`crates/slowlab`) runs the commands; `slowlab completions` and
//! `slowlab man` are made from these definitions. Kept apart from the
//! binary so that the binary is only what runs (the arguments and their
//! long help are half of what a command's code would otherwise be), in the
//! way uv keeps its arguments in `uv-cli`.
//!
//! What it does not do: read files, the environment or anything a command
//! does; a value parser here only checks a value's form (into a library's
//! value type at most: `record --trigger`).

pub mod analyze;
pub mod completions;
pub mod diagnose;
pub mod diff;
pub mod doctor;
pub mod export;
pub mod fleet;
pub mod hang;
pub mod import;
pub mod lab;
pub mod man;
pub mod record;
pub mod shared;
pub mod sweep;

/// Samples per second of CPU time of `sweep --profile` and `lab
/// --profile` when none is asked for.
pub const PROFILE_FREQ_HZ: u32 = 2000;
