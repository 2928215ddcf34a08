//! The `slowlab` binary: command-line parsing, progress display, signal
//! handling and exit codes. Glue only: every measurement, analysis and
//! rendering lives in a library crate.

mod cmd;
mod one_line;
mod progress;
mod signals;

use clap::{Parser, Subcommand};
use one_line::one_line;

/// Find out why a machine or a program is slow.
///
/// slowlab reproduces operating-system performance pathologies as measured
/// experiments (`lab`), decides whether a command's cost grows super-linearly
/// (`sweep`), records system-wide traces (`record`), analyzes them
/// (`analyze`) and names the culprit (`diagnose`).
#[derive(Parser)]
#[command(name = "slowlab", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Lab(cmd::lab::LabArgs),
    Sweep(cmd::sweep::SweepArgs),
    Record(cmd::record::RecordArgs),
    Analyze(cmd::analyze::AnalyzeArgs),
    Diagnose(cmd::diagnose::DiagnoseArgs),
    Diff(cmd::diff::DiffArgs),
    Doctor(cmd::doctor::DoctorArgs),
    Import(cmd::import::ImportArgs),
    Export(cmd::export::ExportArgs),
    Fleet(cmd::fleet::FleetArgs),
    /// Internal: the child programs the lab scenarios launch.
    #[command(name = "__child", hide = true)]
    Child(cmd::child::ChildArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Lab(args) => cmd::lab::run(args),
        Command::Sweep(args) => cmd::sweep::run(args),
        Command::Record(args) => cmd::record::run(args),
        Command::Analyze(args) => cmd::analyze::run(args),
        Command::Diagnose(args) => cmd::diagnose::run(args),
        Command::Diff(args) => cmd::diff::run(args),
        Command::Doctor(args) => cmd::doctor::run(args),
        Command::Import(args) => cmd::import::run(args),
        Command::Export(args) => cmd::export::run(args),
        Command::Fleet(args) => cmd::fleet::run(args),
        Command::Child(args) => cmd::child::run(args),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(err) => {
            eprintln!("slowlab: error: {}", one_line(&err));
            std::process::exit(2);
        }
    }
}
