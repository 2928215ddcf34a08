//! `slowlab man`'s arguments. Definitions and help only: the binary runs them.

use std::path::PathBuf;

use clap::Args;

/// Write the manual pages into a directory.
///
/// Writes slowlab.1 and one slowlab-COMMAND.1 per command (man section 1),
/// and prints their paths. Install (see the README):
///
///   slowlab man ~/.local/share/man/man1     then: man slowlab-analyze
#[derive(Args)]
pub struct ManArgs {
    /// The directory (created when missing).
    pub dir: PathBuf,
}
