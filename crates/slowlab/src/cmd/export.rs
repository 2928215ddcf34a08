//! `slowlab export TRACE… --parquet DIR`: reads each trace with its side
//! files (`trace_input`), runs every detector on it, and writes one run of
//! the fleet tables (`slowlab-fleet`) under DIR, atomically. Also the
//! `--parquet DIR` of `diagnose` and `doctor` ([`export_traces`]). Glue
//! only: the tables and the writer are in `slowlab-fleet`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use slowlab_analyze::detect::{run_all, RootPath};
use slowlab_fleet::{default_run_id, host_partition_name, now_us, Partition, RunExport, Table};
use slowlab_model::findings::Finding;

use super::trace_input::read_bundle;

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
    let traces: Vec<(PathBuf, Option<Vec<Finding>>)> =
        args.traces.iter().map(|t| (t.clone(), None)).collect();
    let opts = ExportOptions {
        dir: &args.parquet,
        host: args.host.as_deref(),
        run: args.run.as_deref(),
        symbolize: !args.no_symbols,
    };
    export_traces(&traces, &opts)?;
    Ok(0)
}

/// Where and how to export.
pub struct ExportOptions<'a> {
    pub dir: &'a Path,
    pub host: Option<&'a str>,
    pub run: Option<&'a str>,
    pub symbolize: bool,
}

/// Exports `traces` as one run: each with the findings given, or (`None`)
/// those of every detector over it. Prints one line of what it wrote.
pub fn export_traces(
    traces: &[(PathBuf, Option<Vec<Finding>>)],
    opts: &ExportOptions,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let exported_at = now_us();
    let run = opts
        .run
        .map_or_else(|| default_run_id(exported_at), str::to_owned);
    // Bad names fail before any trace is read.
    if let Some(host) = opts.host {
        Partition::new(host, &run)?;
    }
    let mut export = RunExport::new(exported_at);
    let mut recorded_host = None;
    for (path, given) in traces {
        let bundle = read_bundle(path, opts.symbolize)?;
        for w in &bundle.warnings {
            eprintln!("slowlab: warning: {}: {w}", path.display());
        }
        let findings = match given {
            Some(f) => f.clone(),
            None => {
                let root = RootPath::new(&bundle.trace, None).ok();
                run_all(
                    &bundle.trace,
                    bundle.paths.as_deref(),
                    bundle.cgroups.as_ref(),
                    root.as_ref(),
                )
            }
        };
        recorded_host = recorded_host.or_else(|| bundle.trace.meta.hostname.clone());
        export
            .add_trace(&path.display().to_string(), &bundle.trace, &findings)
            .with_context(|| format!("cannot export {}", path.display()))?;
    }
    let host = match opts.host {
        Some(h) => h.to_owned(),
        None => host_partition_name(&recorded_host.unwrap_or_else(this_host)),
    };
    let part = Partition::new(&host, &run)?;
    let written = export
        .write(opts.dir, &part)
        .with_context(|| format!("cannot export to {}", opts.dir.display()))?;
    eprintln!(
        "slowlab: wrote run {run} of host {host} to {}: {} trace(s), {} sample rows, {} stacks, {} findings, {:.1} kB in {:.2} s",
        opts.dir.display(),
        written.rows(Table::Runs),
        written.rows(Table::Samples),
        written.rows(Table::Stacks),
        written.rows(Table::Findings),
        written.bytes() as f64 / 1000.0,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// This machine's host name (`localhost` when it has none).
fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}
