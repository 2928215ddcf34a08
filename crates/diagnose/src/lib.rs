//! What every command that records and then answers shares: the recording
//! of the whole system around a command ([`recording`]), and the one
//! analysis of that recording written into a directory ([`analyze_into`]:
//! `critical_path.json`, `findings.json`, `report.html` and the exports
//! asked for), for the command or for a process that was already running
//! ([`Target`]). [`CommandRuns`] is both for every run of a command, in one
//! recording, and [`repeat`] the runs of `diagnose --repeat`; [`CommandDiagnoser`] is that for `sweep
//! --critical-path`, and [`LabTracer`] for `lab --trace`.
//!
//! What it does not do: read the environment, draw progress (a
//! [`TraceOpener`] given by the binary opens traces, with its own progress
//! and options), or print: the text it makes is returned.

use std::path::{Path, PathBuf};

use slowlab_analyze::analysis::{Analysis, Root};
use slowlab_analyze::critical_path::{process_by_pid, PathError};
use slowlab_analyze::select::Selection;
use slowlab_exports::{Export, ExportError, Request};
use slowlab_model::bundle::TraceBundle;
use slowlab_model::critical_path::CriticalPath;
use slowlab_open::OpenError;
use slowlab_record::RecordError;
use slowlab_report::critical_path::critical_path_text;
use slowlab_report::trace_views::findings_text;
use slowlab_report::{write_atomically, ReportError};

mod bpf_recording;
mod command_runs;
mod lab_tracer;
mod repeat;

pub use bpf_recording::{record_with, Recorded};
pub use command_runs::{CommandDiagnoser, CommandRunDiagnosed, CommandRuns};
pub use lab_tracer::LabTracer;
pub use repeat::{repeat, Repeated};

/// Why a recording could not be made or answered.
#[derive(Debug, thiserror::Error)]
pub enum DiagnoseError {
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error(transparent)]
    Path(#[from] PathError),
    #[error(transparent)]
    Export(#[from] ExportError),
    #[error(transparent)]
    Write(#[from] ReportError),
    #[error("cannot write JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("cannot create {}: {source}", dir.display())]
    CreateDir {
        dir: PathBuf,
        source: std::io::Error,
    },
}

/// How traces are opened: the binary's options (read from the environment
/// at its edge) and its progress bar; `slowlab_open::open` in tests.
pub trait TraceOpener {
    fn open(&self, input: &Path) -> Result<TraceBundle, OpenError>;
}

/// The recording of the whole system that every command here makes: frame
/// pointer stacks at `freq` Hz per CPU, the path capture, while `command`
/// runs (until a stop signal when it is empty), into `output`.
pub fn recording(output: PathBuf, freq: u32, command: Vec<String>) -> slowlab_record::Config {
    slowlab_record::Config {
        output,
        freq,
        ring_seconds: None,
        call_graph: slowlab_record::CallGraph::Fp,
        command,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        capture_paths: true,
    }
}

/// Whose critical path a recording answers for.
pub enum Target {
    /// The command recorded (`diagnose -- CMD`, `lab --trace`).
    Command,
    /// A process that was running before the recording (`--pid`).
    Pid(i32),
}

impl Target {
    /// The command recorded: its process by pid when known, else the command as
    /// `Root::Command` finds it.
    pub fn command(pid: Option<u32>) -> Target {
        match pid.and_then(|p| i32::try_from(p).ok()) {
            Some(pid) => Target::Pid(pid),
            None => Target::Command,
        }
    }
}

/// What [`analyze_into`] produced.
pub struct Diagnosis {
    /// The critical path and the findings ranked, as text for the terminal.
    pub text: String,
    /// The findings as pretty JSON (also written to findings.json).
    pub findings_json: String,
    /// The ids and titles of the findings, most costly first.
    pub findings: Vec<(String, String)>,
    /// The files written into the directory: `findings.json`,
    /// `critical_path.json` when there is a path, `report.html`.
    pub files: Vec<PathBuf>,
    /// A line for each extra export written.
    pub written: Vec<String>,
    /// The root's path has no CPU or runnable time at all.
    pub did_not_run: bool,
    /// The critical path (also in critical_path.json).
    pub path: Option<CriticalPath>,
}

/// Opens a recording (with its side files), makes its one analysis for
/// `target` (its critical path, every detector; `command` names it), and
/// writes `critical_path.json` (removing a stale one when there is no
/// path), `findings.json`, `report.html` and the `extra` exports into
/// `dir`. The trace's warnings that `warnings` does not have yet, and why
/// there is no path, are added to `warnings`.
pub fn analyze_into(
    opener: &dyn TraceOpener,
    trace_path: &Path,
    dir: &Path,
    command: &[String],
    target: Target,
    extra: &[(Export, PathBuf)],
    warnings: &mut Vec<String>,
) -> Result<Diagnosis, DiagnoseError> {
    let bundle = opener.open(trace_path)?;
    // When the hottest code has no symbols, that first (the page says it
    // once too: it skips the same words among its warnings).
    warnings.extend(slowlab_analyze::unnamed::hottest_code_warning_in(
        &bundle.trace,
        &Selection::default(),
    ));
    // What the recording said already (its losses, the host's steal), not twice.
    for w in &bundle.warnings {
        if !warnings.contains(w) {
            warnings.push(w.clone());
        }
    }
    let root = match target {
        Target::Command => Root::Command(command.to_vec()),
        Target::Pid(pid) => Root::Process(process_by_pid(&bundle.trace, pid)?),
    };
    let analysis = Analysis::new(&bundle, root);
    // The page first: it replays the scheduler, finds the path and runs the
    // detectors beside its own work (and says why there is no path).
    let name = trace_path.display().to_string();
    let request = Request {
        analysis: &analysis,
        name: &name,
        command,
        selection: &Selection::default(),
        filter_text: &[],
        warnings,
    };
    let mut written = Vec::new();
    let html = (Export::Html, dir.join("report.html"));
    for (export, path) in std::iter::once(&html).chain(extra) {
        let w = export.write(&request, path)?;
        written.extend(w.warnings.iter().map(|w| format!("warning: {w}")));
        match (export, w.summary) {
            (Export::Html, _) => {}
            (_, Some(summary)) => written.push(summary),
            (Export::Fxprof, None) => written.push(format!(
                "wrote {} (open it at profiler.firefox.com)",
                path.display()
            )),
            (_, None) => written.push(format!("wrote {} {}", export.what(), path.display())),
        }
    }
    if let Err(why) = analysis.root_path() {
        warnings.push(format!("no critical path: {why}"));
    }
    let findings = analysis.findings();
    let findings_json = serde_json::to_string_pretty(findings)?;
    let mut files = vec![dir.join("findings.json")];
    write_atomically(&files[0], findings_json.as_bytes())?;
    let cp_file = dir.join("critical_path.json");
    let path = analysis.root_path().ok().map(|rp| &rp.path);
    match path {
        Some(cp) => {
            write_atomically(&cp_file, serde_json::to_string_pretty(cp)?.as_bytes())?;
            files.push(cp_file);
        }
        // A stale file from an earlier run would read as this run's answer.
        None => {
            let _ = std::fs::remove_file(&cp_file);
        }
    }
    files.push(html.1);
    let mut text = String::new();
    if let Some(cp) = path {
        text.push_str(&critical_path_text(cp, 8));
        text.push('\n');
    }
    text.push_str(&findings_text(findings));
    Ok(Diagnosis {
        text,
        findings_json,
        findings: findings
            .iter()
            .map(|f| (f.id.clone(), f.title.clone()))
            .collect(),
        files,
        written,
        did_not_run: path.is_some_and(|p| p.breakdown.cpu + p.breakdown.runnable == 0.0),
        path: path.cloned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recording_is_system_wide_with_paths_and_frame_pointers() {
        let cfg = recording(PathBuf::from("/x/trace.data"), 999, vec!["true".into()]);
        assert_eq!(cfg.output, PathBuf::from("/x/trace.data"));
        assert_eq!(cfg.freq, 999);
        assert_eq!(cfg.ring_seconds, None);
        assert!(cfg.capture_paths);
        assert!(matches!(cfg.call_graph, slowlab_record::CallGraph::Fp));
        assert!(cfg.cpus >= 1);
    }
}
