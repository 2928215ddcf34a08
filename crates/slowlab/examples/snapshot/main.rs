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
//! The reading is that of `slowlab analyze` (`slowlab_open::open`).

mod window;

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Parser;
use flate2::write::GzEncoder;
use slowlab_model::bundle::TraceBundle;

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
    let analysis = slowlab_analyze::analysis::Analysis::new(
        &bundle,
        slowlab_analyze::analysis::Root::Command(vec![label]),
    );
    let findings = analysis.findings();
    eprintln!("findings: {}", findings.len());
    for f in findings {
        eprintln!("  {}: {}", f.id, f.title);
    }
    Ok(())
}

/// The trace, symbolized, with its path capture and cgroup notes, as
/// `slowlab analyze` opens them (`slowlab_open`), with the symbol cache
/// off. A side file that is there but unreadable is an error here, not a
/// warning: a snapshot should not silently lose it.
fn read_bundle(file: &Path) -> Result<TraceBundle> {
    let opts = slowlab_open::OpenOptions::default();
    let bundle = slowlab_open::open(file, &opts, &|_, _, _| {})?;
    if let Some(w) = bundle
        .warnings
        .iter()
        .find(|w| w.contains("could not be read"))
    {
        anyhow::bail!("{w}");
    }
    Ok(bundle)
}
