//! One module per subcommand: turn parsed arguments into calls to the library
//! crates and their results into output and an exit code.

pub mod analyze;
pub mod child;
pub mod completions;
pub mod diagnose;
pub mod diff;
pub mod doctor;
pub mod export;
pub mod fleet;
pub mod hang;
pub mod import;
pub mod input;
pub mod lab;
pub mod man;
pub mod record;
pub mod sweep;
