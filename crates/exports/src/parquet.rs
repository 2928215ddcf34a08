//! The fleet's Parquet tables of one run: the analyses of one or more
//! traces (their trace, the one replay of their scheduler events and their
//! findings, all borrowed from each [`Analysis`]) added one at a time, then
//! written under a directory at once (`slowlab_fleet::RunExport`). The
//! host partition defaults to the host recorded in the first trace, else
//! this machine's name; the run to the export's time.

use std::path::Path;
use std::time::Instant;

use slowlab_analyze::analysis::Analysis;
use slowlab_fleet::{default_run_id, host_partition_name, now_us, Partition, RunExport, Table};
use slowlab_model::findings::Finding;

use crate::{ExportError, ParquetOptions};

/// A run being exported: traces added one by one, written at the end.
pub struct ParquetRun {
    export: RunExport,
    opts: ParquetOptions,
    run: String,
    recorded_host: Option<String>,
    started: Instant,
}

impl ParquetRun {
    /// A new run; bad partition names fail here, before any trace is read.
    pub fn new(opts: &ParquetOptions) -> Result<ParquetRun, ExportError> {
        let exported_at = now_us();
        let run = opts
            .run
            .clone()
            .unwrap_or_else(|| default_run_id(exported_at));
        if let Some(host) = &opts.host {
            Partition::new(host, &run)?;
        }
        Ok(ParquetRun {
            export: RunExport::new(exported_at),
            opts: opts.clone(),
            run,
            recorded_host: None,
            started: Instant::now(),
        })
    }

    /// Adds the analysis of a trace named `name`, with its findings.
    pub fn add(&mut self, name: &str, analysis: &Analysis) -> Result<(), ExportError> {
        self.add_with_findings(name, analysis, analysis.findings())
    }

    /// Adds the analysis of a trace named `name` with other findings than
    /// its detectors' (`slowlab doctor` judges them with the machine's
    /// standing conditions).
    pub fn add_with_findings(
        &mut self,
        name: &str,
        analysis: &Analysis,
        findings: &[Finding],
    ) -> Result<(), ExportError> {
        let trace = analysis.trace();
        self.recorded_host = self
            .recorded_host
            .take()
            .or_else(|| trace.meta.hostname.clone());
        self.export
            .add_trace(name, trace, analysis.states(), findings)?;
        Ok(())
    }

    /// Writes the run under `dir` (created if missing), all at once or not
    /// at all; says in one line what it wrote.
    pub fn write(self, dir: &Path) -> Result<String, ExportError> {
        let host = match &self.opts.host {
            Some(h) => h.clone(),
            None => host_partition_name(&self.recorded_host.unwrap_or_else(this_host)),
        };
        let part = Partition::new(&host, &self.run)?;
        let written = self.export.write(dir, &part)?;
        Ok(format!(
                "wrote run {} of host {host} to {}: {} trace(s), {} sample rows, {} stacks, {} findings, {:.1} kB in {:.2} s",
                self.run,
                dir.display(),
                written.rows(Table::Runs),
                written.rows(Table::Samples),
                written.rows(Table::Stacks),
                written.rows(Table::Findings),
                written.bytes() as f64 / 1000.0,
            self.started.elapsed().as_secs_f64()
        ))
    }
}

/// Exports `analyses` (each with its trace's name) as one run under `dir`.
pub fn export_parquet(
    analyses: &[(&str, &Analysis)],
    dir: &Path,
    opts: &ParquetOptions,
) -> Result<String, ExportError> {
    let mut run = ParquetRun::new(opts)?;
    for (name, analysis) in analyses {
        run.add(name, analysis)?;
    }
    run.write(dir)
}

/// This machine's host name (`localhost` when it has none).
fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}
