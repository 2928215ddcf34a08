//! `slowlab doctor`'s arguments. Definitions and help only: the binary runs them.

use std::path::PathBuf;

use clap::Args;

/// Is something on this machine slowing everything down right now?
///
/// Checks the standing conditions that make ordinary operations slower
/// and that top does not show:
///
///   fanotify-permission  processes answering fanotify permission events:
///                        every open under the mounts they mark waits
///                        for their answer (which process, which mounts)
///   inotify-watches      processes holding very many inotify watches
///   memory-cgroups       memory cgroups (v1 and v2) at their limit that
///                        keep re-reading what they evicted (refaults),
///                        and the processes inside
///   cpu-throttling       cgroups stopped by their CPU quota
///   pressure             /proc/pressure: time stalled on cpu, memory, io
///   large-processes      processes with very many mappings or threads
///   namespace-churn      namespaces made and destroyed at a high rate
///   recording            the whole system recorded for --seconds, with
///                        every detector of `slowlab diagnose` run over
///                        it: tells a watcher or cgroup that costs time
///                        from an idle one, and finds the rest
///
/// Prints a verdict per check (ok, found, or skipped with its reason),
/// then the findings, most costly first, each with a one-line fix.
/// Progress goes to stderr. Needs root for the full set (other users'
/// descriptors, perf, eBPF); a check that cannot run is skipped.
/// Changes no setting; the trace goes to a temporary directory that is
/// removed (kept with --keep).
///
/// Exit status: 0 nothing found, 1 findings, 2 nothing found but a check
/// could not run.
///
/// Examples:
///
///   sudo slowlab doctor                     check, recording 3 s
///   sudo slowlab doctor --seconds 10        record longer (rare stalls)
///   sudo slowlab doctor --json | jq '.findings[].title'
///   sudo slowlab doctor --html doctor.html  a page to share
///   sudo slowlab doctor --keep why/         keep the trace, then:
///   slowlab analyze why/trace.data --findings
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct DoctorArgs {
    /// Seconds of the whole system to record
    #[arg(long, default_value_t = 3.0, value_parser = seconds, value_name = "S")]
    pub seconds: f64,

    /// Print the report as JSON on stdout (progress stays on stderr)
    #[arg(long)]
    pub json: bool,

    /// Also write the report as a self-contained HTML page
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    /// Keep the trace in DIR (created if missing) instead of removing it
    #[arg(long, value_name = "DIR")]
    pub keep: Option<PathBuf>,

    /// Samples per second per CPU while recording
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub freq: u32,

    /// Also export the recording and the findings as Parquet fleet tables
    /// under DIR (as `slowlab export` does)
    #[arg(long, value_name = "DIR")]
    pub parquet: Option<PathBuf>,
}

/// From half a second to ten minutes.
pub fn seconds(s: &str) -> Result<f64, String> {
    slowlab_model::units::parse_seconds(s, 0.5, 600.0)
}
