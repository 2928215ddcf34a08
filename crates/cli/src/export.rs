//! `slowlab export`'s arguments. Definitions and help only: the binary runs them.

use std::path::PathBuf;

use clap::Args;

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
    pub traces: Vec<PathBuf>,

    /// The export root (created if missing)
    #[arg(long, value_name = "DIR")]
    pub parquet: PathBuf,

    /// The host partition [default: the host name recorded in the first
    /// trace, else this machine's]
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,

    /// The run partition [default: the export's time in UTC,
    /// e.g. 20261123T202541.123Z]
    #[arg(long, value_name = "ID")]
    pub run: Option<String>,

    /// Do not name functions (faster; every frame is [unknown])
    #[arg(long)]
    pub no_symbols: bool,
}
