//! The `runs` table (one row per exported trace: where and when it was
//! recorded, on what kernel, with what command) and the `findings` table
//! (the finding schema of `findings.json` flattened: culprit columns,
//! evidence and stack as JSON text). Does not compute findings: the caller
//! passes what `slowlab_analyze::detect` or `diagnose` found.

use arrow_array::RecordBatch;
use slowlab_model::findings::{Finding, Severity};
use slowlab_model::trace::Trace;

use crate::columns::{
    count, floats, int32s, int64s, opt_int32s, opt_int64s, opt_strings, strings, timestamps,
};
use crate::schema::Table;
use crate::FleetError;

/// `findings.severity_rank`: 1 low, 2 medium, 3 high (to order by).
pub fn severity_rank(s: Severity) -> i32 {
    match s {
        Severity::Low => 1,
        Severity::Medium => 2,
        Severity::High => 3,
    }
}

/// Rows of `runs` and `findings` of the traces added so far.
#[derive(Default)]
pub struct RunTables {
    runs: RunRows,
    findings: FindingRows,
}

#[derive(Default)]
struct RunRows {
    trace: Vec<String>,
    trace_host: Vec<Option<String>>,
    start_time: Vec<Option<i64>>,
    duration_s: Vec<f64>,
    kernel: Vec<Option<String>>,
    arch: Vec<Option<String>>,
    command: Vec<String>,
    sample_event: Vec<Option<String>>,
    sample_freq: Vec<Option<i64>>,
    nr_cpus: Vec<Option<i32>>,
    cpu_samples: Vec<i64>,
    lost_events: Vec<i64>,
    findings: Vec<i32>,
    exported_at: Vec<Option<i64>>,
    slowlab_version: Vec<String>,
}

#[derive(Default)]
struct FindingRows {
    trace: Vec<String>,
    id: Vec<String>,
    title: Vec<String>,
    severity: Vec<String>,
    severity_rank: Vec<i32>,
    cost_s: Vec<f64>,
    cost_share: Vec<f64>,
    culprit_pid: Vec<Option<i32>>,
    culprit_comm: Vec<Option<String>>,
    culprit_cgroup: Vec<Option<String>>,
    evidence: Vec<String>,
    stack: Vec<String>,
    fix: Vec<String>,
}

impl RunTables {
    /// Adds the `runs` row of a trace and its findings. `exported_at_us`:
    /// microseconds since the Unix epoch when the export ran.
    pub fn add_trace(
        &mut self,
        name: &str,
        trace: &Trace,
        findings: &[Finding],
        exported_at_us: i64,
    ) -> Result<(), FleetError> {
        let meta = &trace.meta;
        let r = &mut self.runs;
        r.trace.push(name.to_owned());
        r.trace_host.push(meta.hostname.clone());
        r.start_time
            .push(meta.unix_ns(meta.start_ns).map(|ns| count(ns / 1000)));
        r.duration_s.push(meta.duration_s());
        r.kernel.push(meta.os_release.clone());
        r.arch.push(meta.arch.clone());
        r.command.push(meta.cmdline.join(" "));
        r.sample_event.push(meta.sample_event.clone());
        r.sample_freq.push(meta.sample_freq.map(count));
        r.nr_cpus
            .push(meta.nr_cpus.map(|n| i32::try_from(n).unwrap_or(i32::MAX)));
        r.cpu_samples.push(count(trace.samples.len() as u64));
        r.lost_events.push(count(trace.stats.lost_events));
        r.findings
            .push(i32::try_from(findings.len()).unwrap_or(i32::MAX));
        r.exported_at.push(Some(exported_at_us));
        r.slowlab_version.push(env!("CARGO_PKG_VERSION").to_owned());

        let f = &mut self.findings;
        for finding in findings {
            f.trace.push(name.to_owned());
            f.id.push(finding.id.clone());
            f.title.push(finding.title.clone());
            f.severity.push(finding.severity.as_str().to_owned());
            f.severity_rank.push(severity_rank(finding.severity));
            f.cost_s.push(finding.cost_s);
            f.cost_share.push(finding.cost_share);
            f.culprit_pid.push(finding.culprit.pid);
            f.culprit_comm.push(finding.culprit.comm.clone());
            f.culprit_cgroup.push(finding.culprit.cgroup.clone());
            f.evidence.push(serde_json::to_string(&finding.evidence)?);
            f.stack.push(serde_json::to_string(&finding.stack)?);
            f.fix.push(finding.fix.clone());
        }
        Ok(())
    }

    /// The `runs` and `findings` tables.
    pub fn into_batches(self) -> Result<[RecordBatch; 2], FleetError> {
        let r = self.runs;
        let runs = RecordBatch::try_new(
            Table::Runs.schema(),
            vec![
                strings(r.trace),
                opt_strings(r.trace_host),
                timestamps(r.start_time),
                floats(r.duration_s),
                opt_strings(r.kernel),
                opt_strings(r.arch),
                strings(r.command),
                opt_strings(r.sample_event),
                opt_int64s(r.sample_freq),
                opt_int32s(r.nr_cpus),
                int64s(r.cpu_samples),
                int64s(r.lost_events),
                int32s(r.findings),
                timestamps(r.exported_at),
                strings(r.slowlab_version),
            ],
        )?;
        let f = self.findings;
        let findings = RecordBatch::try_new(
            Table::Findings.schema(),
            vec![
                strings(f.trace),
                strings(f.id),
                strings(f.title),
                strings(f.severity),
                int32s(f.severity_rank),
                floats(f.cost_s),
                floats(f.cost_share),
                opt_int32s(f.culprit_pid),
                opt_strings(f.culprit_comm),
                opt_strings(f.culprit_cgroup),
                strings(f.evidence),
                strings(f.stack),
                strings(f.fix),
            ],
        )?;
        Ok([runs, findings])
    }
}
