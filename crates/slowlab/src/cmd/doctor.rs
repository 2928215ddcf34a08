//! `slowlab doctor`: reads the standing conditions (`slowlab-doctor`),
//! records the whole system for a few seconds (`slowlab-record`), runs
//! every detector over the recording (`slowlab-analyze`), reads the
//! conditions again, and prints the verdicts and findings
//! (`slowlab_report::doctor`). Wiring, progress and the exit code only.
//!
//! The trace goes to a temporary directory removed at the end (kept with
//! `--keep DIR`); nothing on the machine is changed.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use slowlab_analyze::analysis::{Analysis, Root};
use slowlab_doctor::{judge, Recording, Snapshot};
use slowlab_exports::{ParquetOptions, ParquetRun};
use slowlab_report::doctor::{doctor_html, doctor_json, doctor_text};
use slowlab_report::write_atomically;

use super::input::open_all;

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
    seconds: f64,

    /// Print the report as JSON on stdout (progress stays on stderr)
    #[arg(long)]
    json: bool,

    /// Also write the report as a self-contained HTML page
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,

    /// Keep the trace in DIR (created if missing) instead of removing it
    #[arg(long, value_name = "DIR")]
    keep: Option<PathBuf>,

    /// Samples per second per CPU while recording
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    freq: u32,

    /// Also export the recording and the findings as Parquet fleet tables
    /// under DIR (as `slowlab export` does)
    #[arg(long, value_name = "DIR")]
    parquet: Option<PathBuf>,
}

/// From half a second to ten minutes.
fn seconds(s: &str) -> Result<f64, String> {
    slowlab_model::units::parse_seconds(s, 0.5, 600.0)
}

pub fn run(args: DoctorArgs) -> anyhow::Result<i32> {
    if args.parquet.is_some() {
        slowlab_exports::parquet_available()?;
    }
    let root = Path::new("/");
    eprintln!("slowlab doctor: reading the standing conditions…");
    let before = Snapshot::take(root);
    let started = Instant::now();
    let trace_dir = TraceDir::new(args.keep.as_deref())?;
    eprintln!(
        "slowlab doctor: recording the whole system for {} s…",
        args.seconds
    );
    let trace = record(&args, &trace_dir.path);
    let after = Snapshot::take(root);
    let elapsed = started.elapsed().as_secs_f64();
    let bundle = trace.clone().and_then(|path| {
        eprintln!("slowlab doctor: running the detectors over the recording…");
        open_all(&path, true).map_err(|e| format!("{e:#}"))
    });
    let analysis = bundle
        .as_ref()
        .map(|b| Analysis::new(b, Root::Default))
        .map_err(String::as_str);
    let report = judge(
        &before,
        &after,
        elapsed,
        analysis
            .as_ref()
            .map(|a| Recording {
                findings: a.findings(),
                seconds: a.trace().meta.duration_s(),
            })
            .map_err(|why| *why),
    );
    if let Some(dir) = &args.parquet {
        match (&trace, &analysis) {
            (Ok(path), Ok(analysis)) => {
                let mut run = ParquetRun::new(&ParquetOptions::default())?;
                run.add_with_findings(&path.display().to_string(), analysis, &report.findings)?;
                eprintln!("slowlab: {}", run.write(dir)?);
            }
            (_, Err(why)) => eprintln!("slowlab doctor: warning: nothing exported: {why}"),
            (Err(why), Ok(_)) => eprintln!("slowlab doctor: warning: nothing exported: {why}"),
        }
    }
    if let Some(p) = &args.html {
        write_atomically(p, doctor_html(&report).as_bytes())?;
        eprintln!("slowlab doctor: wrote {}", p.display());
    }
    if args.keep.is_some() {
        eprintln!(
            "slowlab doctor: kept the trace in {}",
            trace_dir.path.display()
        );
    }
    if args.json {
        println!("{}", doctor_json(&report)?);
    } else {
        print!("{}", doctor_text(&report));
    }
    Ok(report.exit_code)
}

/// Records `sleep S` system-wide into DIR/trace.data; the reason when it
/// cannot.
fn record(args: &DoctorArgs, dir: &Path) -> Result<PathBuf, String> {
    let trace_path = dir.join("trace.data");
    let cfg = slowlab_diagnose::recording(
        trace_path.clone(),
        args.freq,
        vec!["sleep".into(), format!("{}", args.seconds)],
    );
    let outcome = slowlab_record::run(&cfg).map_err(|e| e.to_string())?;
    for w in &outcome.warnings {
        eprintln!("slowlab doctor: warning: {w}");
    }
    if outcome.stopped_by.is_some() {
        return Err("the recording was interrupted".into());
    }
    Ok(trace_path)
}

/// Where the trace goes: `--keep DIR`, or a fresh temporary directory
/// removed when this is dropped.
struct TraceDir {
    path: PathBuf,
    remove: bool,
}

impl TraceDir {
    fn new(keep: Option<&Path>) -> anyhow::Result<TraceDir> {
        if let Some(dir) = keep {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            return Ok(TraceDir {
                path: dir.to_path_buf(),
                remove: false,
            });
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path =
            std::env::temp_dir().join(format!("slowlab-doctor-{}-{nanos}", std::process::id()));
        std::fs::create_dir(&path).with_context(|| {
            format!(
                "cannot create {}: set TMPDIR to a writable directory",
                path.display()
            )
        })?;
        Ok(TraceDir { path, remove: true })
    }
}

impl Drop for TraceDir {
    fn drop(&mut self) {
        if self.remove {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}
