//! The `slowlab` binary: command-line parsing, progress display, signal
//! handling and exit codes. Glue only: every measurement, analysis and
//! rendering lives in a library crate.

mod cmd;
mod progress;
mod signals;

use clap::{Parser, Subcommand};

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
    Import(cmd::import::ImportArgs),
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
        Command::Import(args) => cmd::import::run(args),
        Command::Child(args) => cmd::child::run(args),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(err) => {
            // One line: the error and its causes, joined.
            eprintln!("slowlab: error: {err:#}");
            std::process::exit(2);
        }
    }
}
