//! `superlinear-growth`: the same operation getting slower and slower over
//! the trace — launches of one program by one parent, each taking longer
//! than the one before, so that N launches cost more than N times one.
//!
//! Signature and thresholds, per (program name, parent pid):
//! - at least `MIN_LAUNCHES` launches that started and ended in the trace;
//! - their durations rise with the launch order: Spearman correlation at
//!   least `MIN_TREND`;
//! - the median of the last tenth at least `MIN_GROWTH` times the median of
//!   the first tenth.
//!
//! Cost: the time above what the launches would have taken at the first
//! tenth's median duration.

use std::collections::BTreeMap;

use slowlab_model::findings::Finding;
use slowlab_model::trace::ProcIdx;

use super::{median, trend, Context};
use crate::evidence;

pub const MIN_LAUNCHES: usize = 20;
pub const MIN_TREND: f64 = 0.8;
pub const MIN_GROWTH: f64 = 3.0;

/// One launch: (start ns, duration s, process index).
type Launch = (u64, f64, usize);

pub fn detect(cx: &Context) -> Vec<Finding> {
    let trace = cx.trace;
    let mut series: BTreeMap<(String, i32), Vec<Launch>> = BTreeMap::new();
    for (i, p) in trace.processes.iter().enumerate() {
        let (Some(start), Some(end)) = (p.start_ns.or(p.exec_ns), p.end_ns) else {
            continue;
        };
        let Some(ppid) = p.ppid else { continue };
        series
            .entry((trace.str(p.comm).to_string(), ppid))
            .or_default()
            .push((start, end.saturating_sub(start) as f64 / 1e9, i));
    }
    let mut findings = Vec::new();
    for ((comm, ppid), mut runs) in series {
        if runs.len() < MIN_LAUNCHES {
            continue;
        }
        runs.sort_by_key(|r| r.0);
        let durations: Vec<f64> = runs.iter().map(|r| r.1).collect();
        let tenth = (runs.len() / 10).max(2);
        let first = median(&durations[..tenth]);
        let last = median(&durations[durations.len() - tenth..]);
        let rho = trend(&durations);
        if rho < MIN_TREND || last < MIN_GROWTH * first || first <= 0.0 {
            continue;
        }
        let excess: f64 = durations.iter().map(|d| (d - first).max(0.0)).sum();
        let last_proc = ProcIdx(runs.last().map_or(0, |r| r.2) as u32);
        findings.push(cx.finding(
            "superlinear-growth",
            format!(
                "each launch of {comm} (by pid {ppid}) takes longer than the last: {} launches, \
                 {:.1} ms → {:.1} ms each",
                runs.len(),
                first * 1e3,
                last * 1e3
            ),
            excess,
            cx.culprit(last_proc),
            evidence! {
                "launches" => runs.len(),
                "parent_pid" => ppid,
                "first_duration_s" => first,
                "last_duration_s" => last,
                "growth" => last / first,
                "trend" => rho,
                "total_s" => durations.iter().sum::<f64>(),
            },
            Vec::new(),
            "find what each launch does more of than the previous one (slowlab analyze \
             --syscalls shows the calls per process)",
        ));
    }
    findings
}
