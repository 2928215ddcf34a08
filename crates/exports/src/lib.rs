//! Every file slowlab writes from an analysis, behind one interface: a
//! command picks [`Export`]s and writes each with [`Export::write`] from the
//! one [`Analysis`] of its input. The data comes from `slowlab-analyze`
//! (folded stacks, pprof, blocked stretches, the page's data, all borrowed
//! from the analysis: nothing is replayed or detected again), the bytes from
//! `slowlab-report` (SVG, gzip, the Firefox Profiler's format, HTML) and
//! `slowlab-fleet` (Parquet, with the `parquet` feature: without it a
//! Parquet export fails with a line that says how to build it); every file
//! is written whole or not at all.
//!
//! What it does not do: read traces, print, or choose which files a command
//! writes.

use std::path::Path;

use slowlab_analyze::analysis::{Analysis, Page};
use slowlab_analyze::select::Selection;
use slowlab_report::fxprof::{
    fxprof_bytes, wants_gzip, FxprofInput, MAX_BLOCKED_MARKERS, MIN_BLOCKED_MARKER_NS,
};
use slowlab_report::{export, write_atomically};

#[cfg(feature = "parquet")]
pub mod parquet;
#[cfg(not(feature = "parquet"))]
#[path = "no_parquet.rs"]
pub mod parquet;

pub use parquet::{export_parquet, ParquetRun};

/// The partition a Parquet export is written to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParquetOptions {
    /// The host partition (default: the first trace's host, else this
    /// machine's name).
    pub host: Option<String>,
    /// The run partition (default: the export's time in UTC).
    pub run: Option<String>,
}

/// Why an export could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Report(#[from] slowlab_report::ReportError),
    #[error(transparent)]
    Page(#[from] slowlab_report::interactive::PageError),
    #[cfg(feature = "parquet")]
    #[error(transparent)]
    Fleet(#[from] slowlab_fleet::FleetError),
    /// A Parquet export from a build without the `fleet` feature.
    #[error("this slowlab was built without Parquet support: build it with `cargo build --release --features fleet` (or `cargo install --path crates/slowlab --features fleet`)")]
    NoParquet,
}

/// Whether this build writes Parquet: `Err(NoParquet)`, which says how to
/// build it, when it does not (for a command to fail before it records).
pub fn parquet_available() -> Result<(), ExportError> {
    if cfg!(feature = "parquet") {
        Ok(())
    } else {
        Err(ExportError::NoParquet)
    }
}

/// One kind of file.
#[derive(Debug, Clone, PartialEq)]
pub enum Export {
    /// Folded stacks of the selected samples (`proc;outer;…;inner COUNT`).
    Folded,
    /// A flame graph SVG of the selected samples.
    FlameGraph,
    /// A flame graph SVG of the selected threads' blocked time, in µs.
    OffCpuFlameGraph,
    /// A gzipped pprof profile of the selected samples.
    Pprof,
    /// A Firefox Profiler processed profile (gzipped when the name ends in
    /// `.gz`): samples, blocked stretches and findings as markers.
    Fxprof,
    /// The interactive page: the critical path, the findings, the
    /// selection's events.
    Html,
    /// The fleet's Parquet tables of this one trace, as one run under a
    /// directory.
    Parquet(ParquetOptions),
}

/// What an export is made from besides the analysis.
pub struct Request<'r, 'a> {
    pub analysis: &'r Analysis<'a>,
    /// The input's name (a path), for titles and the fleet's `trace` column.
    pub name: &'r str,
    /// The diagnosed command (`slowlab diagnose`), or empty.
    pub command: &'r [String],
    pub selection: &'r Selection,
    /// The filters as the user gave them, for the page's header.
    pub filter_text: &'r [String],
    /// Warnings the page shows.
    pub warnings: &'r [String],
}

/// What writing an export has to say.
#[derive(Debug, Default)]
pub struct Written {
    /// About what the file holds (an empty selection…).
    pub warnings: Vec<String>,
    /// What was written, in one line, where more than the path is worth
    /// saying (the Parquet run's rows).
    pub summary: Option<String>,
}

impl Export {
    /// What the file is, in the words of "wrote … FILE".
    pub fn what(&self) -> &'static str {
        match self {
            Export::Folded => "folded stacks",
            Export::FlameGraph => "flame graph",
            Export::OffCpuFlameGraph => "off-CPU flame graph",
            Export::Pprof => "pprof profile",
            Export::Fxprof => "Firefox Profiler profile",
            Export::Html => "interactive report",
            Export::Parquet(_) => "Parquet fleet tables",
        }
    }

    /// Writes the file (a directory for Parquet) at `path`, whole or not at
    /// all.
    pub fn write(&self, req: &Request, path: &Path) -> Result<Written, ExportError> {
        let trace = req.analysis.trace();
        let sel = req.selection;
        let mut warnings = Vec::new();
        let mut summary = None;
        match self {
            Export::Folded => {
                let lines = slowlab_analyze::export::collapsed_lines(trace, sel);
                write_atomically(path, export::collapsed_text(&lines).as_bytes())?;
            }
            Export::FlameGraph => {
                let lines = slowlab_analyze::export::collapsed_lines(trace, sel);
                let title = format!("CPU: {}", req.name);
                write_atomically(path, &export::cpu_flamegraph_svg(&lines, &title)?)?;
            }
            Export::OffCpuFlameGraph => {
                let lines = slowlab_analyze::waits::offcpu_collapsed_lines(
                    trace,
                    &req.analysis.schedule_in(sel),
                    sel,
                );
                if lines.is_empty() {
                    warnings.push("no blocked time in the selection (the trace needs sched:sched_switch; record it with slowlab record)".to_string());
                }
                let title = format!("Off-CPU (time blocked): {}", req.name);
                write_atomically(path, &export::flamegraph_svg(&lines, &title, "µs")?)?;
            }
            Export::Pprof => {
                let profile = slowlab_analyze::export::pprof_bytes(trace, sel);
                write_atomically(path, &export::pprof_gz(&profile)?)?;
            }
            Export::Fxprof => {
                let threads = sel.thread_mask(trace);
                let range_ns = sel.time_range_ns(trace);
                let blocked = slowlab_analyze::export::blocked_stretches(
                    trace,
                    req.analysis.states(),
                    &threads,
                    range_ns,
                    MIN_BLOCKED_MARKER_NS,
                    MAX_BLOCKED_MARKERS,
                );
                let input = FxprofInput {
                    trace,
                    threads: &threads,
                    range_ns,
                    blocked: &blocked,
                    findings: req.analysis.findings(),
                };
                write_atomically(path, &fxprof_bytes(&input, wants_gzip(path))?)?;
            }
            Export::Html => {
                let title = if req.command.is_empty() {
                    format!("slowlab report: {}", req.name)
                } else {
                    format!("slowlab diagnose: {}", req.command.join(" "))
                };
                let data = req.analysis.report_data(&Page {
                    title: &title,
                    command: req.command,
                    selection: sel,
                    filter_text: req.filter_text,
                    warnings: req.warnings,
                });
                let page = slowlab_report::interactive::interactive_page(&data)?;
                write_atomically(path, page.as_bytes())?;
            }
            Export::Parquet(opts) => {
                summary = Some(export_parquet(&[(req.name, req.analysis)], path, opts)?);
            }
        }
        Ok(Written { warnings, summary })
    }
}
