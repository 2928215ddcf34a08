//! One module per subcommand: turn parsed arguments into calls to the library
//! crates and their results into output and an exit code.

pub mod analyze;
pub mod child;
pub mod import;
pub mod lab;
pub mod record;
pub mod sweep;
