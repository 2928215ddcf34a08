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
use slowlab_analyze::analysis::{Analysis, Root};
use slowlab_cli::doctor::DoctorArgs;
use slowlab_doctor::{judge, Recording, Snapshot};
use slowlab_exports::{ParquetOptions, ParquetRun};
use slowlab_report::doctor::{doctor_html, doctor_json, doctor_text};
use slowlab_report::{check_writable, write_atomically};

use super::input::open_all;

pub fn run(args: DoctorArgs) -> anyhow::Result<i32> {
    if args.parquet.is_some() {
        slowlab_exports::parquet_available()?;
    }
    if let Some(path) = &args.html {
        check_writable(path)?;
    }
    let root = Path::new("/");
    eprintln!("slowlab doctor: reading the standing conditions…");
    let before = Snapshot::take(root);
    let started = Instant::now();
    let (trace_dir, _removed_at_exit) = trace_dir(args.keep.as_deref())?;
    eprintln!(
        "slowlab doctor: recording the whole system for {} s…",
        args.seconds
    );
    let trace = record(&args, &trace_dir);
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
        eprintln!("slowlab doctor: kept the trace in {}", trace_dir.display());
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

/// Where the trace goes: `--keep DIR` (created when missing), or a fresh
/// temporary directory, removed when the returned guard is dropped.
fn trace_dir(keep: Option<&Path>) -> anyhow::Result<(PathBuf, Option<tempfile::TempDir>)> {
    if let Some(dir) = keep {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        return Ok((dir.to_path_buf(), None));
    }
    let temp = tempfile::Builder::new()
        .prefix("slowlab-doctor-")
        .tempdir()
        .context("cannot make a temporary directory: set TMPDIR to a writable directory")?;
    Ok((temp.path().to_path_buf(), Some(temp)))
}
