//! `slowlab export TRACE… --parquet DIR`: opens each trace with its side
//! files, makes its analysis (every detector), and writes one run of the
//! fleet tables under DIR, atomically (`slowlab_exports::ParquetRun`). Glue
//! only.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use slowlab_analyze::analysis::{Analysis, Root};
use slowlab_exports::{ParquetOptions, ParquetRun};

use super::input::open_all;

/// Export traces and their findings as Parquet for fleet-wide queries.
///
/// Writes one run (the traces of this export, from one host) of the
/// tables `runs`, `samples`, `stacks`, `frames`, `findings`, `processes`
/// and `waits` under DIR/<table>/host=HOST/run=RUN/part-0.parquet (Hive
/// partitions), all at once or not at all. Samples are aggregated by
/// thread, stack and kind (cpu samples, off-CPU ns, faults); stack and
/// frame ids are content hashes, equal on every host running the same
/// build, so stacks join across the fleet. The findings are those of
/// every detector (`slowlab analyze --findings`). Query the directory with
/// `slowlab fleet`, DuckDB, Spark, Trino, BigQuery or DataFusion; the
/// schemas are in docs/fleet.md.
///
/// Examples:
///
///   slowlab export trace.data --parquet /srv/fleet
///   slowlab export a.data b.data --parquet fleet --host web-01 --run release-42
///   slowlab fleet top-findings /srv/fleet
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct ExportArgs {
    /// The traces (perf.data, or Windows ETW traces: .etl or .etl.zip)
    #[arg(required = true, value_name = "TRACE")]
    traces: Vec<PathBuf>,

    /// The export root (created if missing)
    #[arg(long, value_name = "DIR")]
    parquet: PathBuf,

    /// The host partition [default: the host name recorded in the first
    /// trace, else this machine's]
    #[arg(long, value_name = "NAME")]
    host: Option<String>,

    /// The run partition [default: the export's time in UTC,
    /// e.g. 20261123T202541.123Z]
    #[arg(long, value_name = "ID")]
    run: Option<String>,

    /// Do not name functions (faster; every frame is [unknown])
    #[arg(long)]
    no_symbols: bool,
}

pub fn run(args: ExportArgs) -> anyhow::Result<i32> {
    let opts = ParquetOptions {
        host: args.host.clone(),
        run: args.run.clone(),
    };
    // Bad partition names fail before any trace is read.
    let mut run = ParquetRun::new(&opts)?;
    for path in &args.traces {
        let bundle = open_all(path, !args.no_symbols)?;
        for w in &bundle.warnings {
            eprintln!("slowlab: warning: {}: {w}", path.display());
        }
        let analysis = Analysis::new(&bundle, Root::Default);
        run.add(&path.display().to_string(), &analysis)
            .with_context(|| format!("cannot export {}", path.display()))?;
    }
    let line = run
        .write(&args.parquet)
        .with_context(|| format!("cannot export to {}", args.parquet.display()))?;
    eprintln!("slowlab: {line}");
    Ok(0)
}
