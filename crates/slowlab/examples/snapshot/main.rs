//! Makes a *model snapshot* of a recording for the golden tests
//! (`crates/slowlab/tests/golden.rs`): reads a perf.data trace (or a
//! Windows ETL trace, which has no side files) with what
//! `slowlab record` wrote beside it (the path capture `FILE.paths`, the
//! cgroup notes `FILE.cgroups.json`), symbolizes it while the binaries are
//! still on disk, optionally keeps only a time window of it, and writes the
//! resulting `TraceBundle` as gzip-compressed JSON to `OUT_DIR/bundle.json.gz`.
//! The snapshot then loads without perf, root or any binary.
//!
//! It does not write the golden files: `SLOWLAB_BLESS=1 cargo test --release
//! --test golden` does (see `tests/snapshots/README.md`).
//!
//! ```text
//! cargo run --release --example snapshot -- TRACE OUT_DIR [--from S] [--to S | --last S]
//! ```
//!
//! The reading is that of `slowlab analyze` (`cmd/trace_input.rs`'s
//! `read_bundle`), made here from the same library calls because the binary
//! has no library to import it from.

mod window;

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Parser;
use flate2::write::GzEncoder;
use slowlab_model::bundle::{CapturedPath, CgroupInfo, TraceBundle};

/// Write a trace and its side files as a model snapshot (bundle.json.gz).
#[derive(Parser, Debug)]
struct Args {
    /// The trace (perf.data, with FILE.paths and FILE.cgroups.json beside
    /// it; or a Windows .etl / .etl.zip).
    trace: PathBuf,
    /// The snapshot's directory (created if missing).
    out_dir: PathBuf,
    /// Keep only what happened from this many seconds after the trace start.
    #[arg(long, value_name = "SECONDS")]
    from: Option<f64>,
    /// Keep only what happened before this many seconds after the trace start.
    #[arg(long, value_name = "SECONDS")]
    to: Option<f64>,
    /// Keep only the last this many seconds of the trace (instead of
    /// --from/--to).
    #[arg(long, value_name = "SECONDS", conflicts_with_all = ["from", "to"])]
    last: Option<f64>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let mut bundle = read_bundle(&args.trace)?;
    let from = match args.last {
        Some(last) => Some(bundle.trace.meta.duration_s() - last).filter(|&f| f > 0.0),
        None => args.from,
    };
    if from.is_some() || args.to.is_some() {
        let from = from.unwrap_or(0.0);
        let to = args.to.unwrap_or(f64::INFINITY);
        if !(from >= 0.0 && to > from) {
            bail!("--from {from} --to {to} is not a window: give 0 <= FROM < TO");
        }
        window::keep_window(&mut bundle, from, to);
    }
    std::fs::create_dir_all(&args.out_dir)
        .with_context(|| format!("cannot create {}", args.out_dir.display()))?;
    let out = args.out_dir.join("bundle.json.gz");
    let json = serde_json::to_vec(&bundle)?;
    let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&json)?;
    let bytes = gz.finish()?;
    std::fs::write(&out, &bytes).with_context(|| format!("cannot write {}", out.display()))?;
    eprintln!(
        "wrote {} ({} KiB, {} KiB of JSON): {} samples, {} events, {} stacks, {} captured paths",
        out.display(),
        bytes.len() / 1024,
        json.len() / 1024,
        bundle.trace.samples.len(),
        bundle.trace.events.len(),
        bundle.trace.stacks.len(),
        bundle.paths.as_ref().map_or(0, Vec::len)
    );
    for w in &bundle.warnings {
        eprintln!("warning: {w}");
    }
    // What the golden findings will say, to judge a window at once: the
    // run's label is the command, as `lab --trace` passes it.
    let label = args
        .out_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let findings = slowlab_analyze::diagnose::diagnose(&bundle, &[label]).findings;
    eprintln!("findings: {}", findings.len());
    for f in &findings {
        eprintln!("  {}: {}", f.id, f.title);
    }
    Ok(())
}

/// The trace, symbolized, with its path capture and cgroup notes, as
/// `slowlab analyze` reads them. A Windows ETW trace (`.etl`, `.etl.zip`)
/// has no side files: the paths of its file operations come from the
/// trace, and its frames stay `module+0xoffset` (no PDB is given).
fn read_bundle(file: &Path) -> Result<TraceBundle> {
    if slowlab_etl::is_etl_file(file) {
        let (trace, paths) = slowlab_etl::read_trace_and_paths(file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        let warnings = trace.stats.warnings.clone();
        return Ok(TraceBundle {
            trace,
            paths: (!paths.is_empty()).then_some(paths),
            cgroups: None,
            warnings,
        });
    }
    let opts = slowlab_perf::ReadOptions::default();
    let trace = slowlab_perf::read_file(file, &opts, &|_, _, _| {})
        .with_context(|| format!("cannot read {}", file.display()))?;
    let mut warnings = trace.stats.warnings.clone();
    let paths = read_paths(file, &mut warnings)?;
    let cgroups = read_cgroups(file)?;
    Ok(TraceBundle {
        trace,
        paths,
        cgroups,
        warnings,
    })
}

/// The path capture beside the trace, as `trace_input::load_paths` keeps it
/// (readable, non-empty paths). A capture that is there but unreadable is an
/// error here: a snapshot should not silently lose it.
fn read_paths(trace: &Path, warnings: &mut Vec<String>) -> Result<Option<Vec<CapturedPath>>> {
    let file = slowlab_record::side_file(trace, "paths");
    if !file.exists() {
        return Ok(None);
    }
    let log = slowlab_bpf::read_paths(&file)
        .with_context(|| format!("cannot read the path capture {}", file.display()))?;
    warnings.extend(log.warnings.iter().cloned());
    Ok(Some(log.captured_paths()))
}

/// The cgroup notes beside the trace, if any.
fn read_cgroups(trace: &Path) -> Result<Option<CgroupInfo>> {
    let file = slowlab_record::side_file(trace, "cgroups.json");
    if !file.exists() {
        return Ok(None);
    }
    let bytes = std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
    let info = CgroupInfo::from_json(&bytes)
        .with_context(|| format!("cannot read the cgroup notes {}", file.display()))?;
    Ok(Some(info))
}
