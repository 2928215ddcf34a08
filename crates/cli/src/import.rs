//! `slowlab import`'s arguments. Definitions and help only: the binary runs them.

use std::path::PathBuf;

use clap::Args;

/// Render results written by the Windows probes (probes/windows) or by
/// `slowlab lab --json`, as `slowlab lab` would.
///
/// The file holds one JSON scenario result per line (JSON Lines), or one
/// JSON array. Sweeps that carry only their points get their growth
/// exponent, interval and verdict computed here, by the same statistics as
/// `slowlab sweep`.
///
/// Example:
///
///   topdown_alloc.exe --json results.jsonl     (on Windows)
///   slowlab import results.jsonl --html results.html
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct ImportArgs {
    /// The results file (JSON Lines)
    pub file: PathBuf,

    /// Write the completed results as JSON Lines (`-` for stdout)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Write a self-contained HTML report with plots
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}
