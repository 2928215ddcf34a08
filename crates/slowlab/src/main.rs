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
#[command(
    name = "slowlab",
    version = env!("SLOWLAB_LONG_VERSION"),
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Ask no debuginfod server (DEBUGINFOD_URLS) for the symbols of
    /// stripped binaries; debug files fetched before are still used.
    #[arg(long, global = true)]
    offline: bool,
}

#[derive(Subcommand)]
enum Command {
    Lab(slowlab_cli::lab::LabArgs),
    Sweep(slowlab_cli::sweep::SweepArgs),
    Record(slowlab_cli::record::RecordArgs),
    Analyze(slowlab_cli::analyze::AnalyzeArgs),
    Diagnose(slowlab_cli::diagnose::DiagnoseArgs),
    Diff(slowlab_cli::diff::DiffArgs),
    Doctor(slowlab_cli::doctor::DoctorArgs),
    Import(slowlab_cli::import::ImportArgs),
    Export(slowlab_cli::export::ExportArgs),
    Fleet(slowlab_cli::fleet::FleetArgs),
    Hang(slowlab_cli::hang::HangArgs),
    Completions(slowlab_cli::completions::CompletionsArgs),
    Man(slowlab_cli::man::ManArgs),
    /// Internal: the child programs the lab scenarios launch.
    #[command(name = "__child", hide = true)]
    Child(cmd::child::ChildArgs),
}

/// Free memory glibc's malloc keeps at the top of each heap instead of
/// giving it back to the kernel (its default: 128 KB).
#[cfg(target_env = "gnu")]
const MALLOC_TOP_PAD: libc::c_int = 16 << 20;

/// Lets glibc's malloc keep [`MALLOC_TOP_PAD`] free at the top of each
/// heap. By default it gives memory back as soon as 128 KB lie free there
/// and takes it again 128 KB at a time, and memory the kernel gives is
/// zeroed page by page, which costs most on a virtual machine. With 16 MB
/// kept, `slowlab analyze` took 11% less time on a 10 MB build trace (40
/// alternating runs), the same on a 95 MB one, and a few MB more peak RSS
/// (bench/analyze/README.md). (Setting it also stops glibc from raising
/// its mmap threshold as big blocks are freed: big blocks stay mapped on
/// their own and grow in place.)
fn tune_malloc() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only changes malloc's parameters; any value is
    // accepted or refused (a refusal changes nothing but speed).
    unsafe {
        libc::mallopt(libc::M_TOP_PAD, MALLOC_TOP_PAD);
    }
}

/// With `SLOWLAB_COUNT_REPLAYS` set, says on stderr how many times this
/// command replayed a trace's scheduler events (the benchmark of one
/// analysis per trace checks that it is once).
fn report_replays() {
    if std::env::var_os("SLOWLAB_COUNT_REPLAYS").is_some() {
        eprintln!(
            "slowlab: scheduler replays: {}",
            slowlab_analyze::states::replays()
        );
    }
}

fn main() {
    tune_malloc();
    let cli = Cli::parse();
    if cli.offline {
        // Read with the rest of the environment by
        // `slowlab_open::OpenOptions::from_env` (no thread runs yet).
        std::env::set_var("SLOWLAB_OFFLINE", "1");
    }
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
        Command::Hang(args) => cmd::hang::run(args),
        Command::Completions(args) => cmd::completions::run(args),
        Command::Man(args) => cmd::man::run(args),
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
