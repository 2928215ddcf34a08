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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{trend_edge, TraceBuilder};
    use slowlab_model::trace::Trace;

    const MS: u64 = 1_000_000;

    /// `sh` (pid 100) launches `step` (pids 1000, 1001, …) one after the
    /// other, 0.1 ms apart, launch i taking `durations[i]` ns and started
    /// by `parent(i)`.
    fn launches_by(durations: &[u64], parent: impl Fn(usize) -> i32) -> Trace {
        let mut b = TraceBuilder::default();
        b.process(100, "sh");
        let mut t = MS;
        for (i, &d) in durations.iter().enumerate() {
            let step = b.process(1000 + i as i32, "step");
            b.lifetime(step, Some(parent(i)), t, Some(t + d));
            t += d + 100_000;
        }
        b.end(t);
        b.build()
    }

    fn findings_of(trace: &Trace) -> Vec<Finding> {
        detect(&Context::new(trace, None, None))
    }

    fn findings(durations: &[u64]) -> Vec<Finding> {
        findings_of(&launches_by(durations, |_| 100))
    }

    /// Launch i takes i + 1 ms.
    fn rising(n: usize) -> Vec<u64> {
        (1..=n as u64).map(|i| i * MS).collect()
    }

    #[test]
    fn launches_each_slower_than_the_last_are_found() {
        let f = findings(&rising(20));
        assert_eq!(f.len(), 1, "{f:?}");
        let f = &f[0];
        assert_eq!(f.id, "superlinear-growth");
        assert_eq!(f.culprit.pid, Some(1019), "the last launch");
        assert_eq!(f.culprit.comm.as_deref(), Some("step"));
        assert_eq!(f.evidence["launches"], 20);
        assert_eq!(f.evidence["parent_pid"], 100);
        assert_eq!(f.evidence["first_duration_s"], 0.0015);
        assert_eq!(f.evidence["last_duration_s"], 0.0195);
        assert_eq!(f.evidence["trend"], 1.0);
        let growth = f.evidence["growth"].as_f64().unwrap();
        assert!((growth - 13.0).abs() < 1e-9, "{growth}");
        let total = f.evidence["total_s"].as_f64().unwrap();
        assert!((total - 0.210).abs() < 1e-9, "{total}");
        // Above 1.5 ms each: 0.5 + 1.5 + … + 18.5 ms.
        assert!((f.cost_s - 0.1805).abs() < 1e-9, "{}", f.cost_s);
    }

    #[test]
    fn launches_seen_only_from_their_exec_count() {
        // Forked before the trace: no fork time, only the exec.
        let mut trace = launches_by(&rising(20), |_| 100);
        for p in trace.processes.iter_mut().filter(|p| p.ppid.is_some()) {
            p.exec_ns = p.start_ns.take();
        }
        let f = findings_of(&trace);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].evidence["launches"], 20);
    }

    #[test]
    fn launches_taking_about_the_same_time_are_not_growth() {
        let durations: Vec<u64> = (0..30).map(|i| 5 * MS + (i * 7 % 5) * 100_000).collect();
        assert!(findings(&durations).is_empty());
    }

    #[test]
    fn launches_by_different_parents_are_different_series() {
        let trace = launches_by(&rising(20), |i| 100 + (i % 2) as i32);
        assert!(findings_of(&trace).is_empty());
    }

    #[test]
    fn launches_running_past_the_end_of_the_trace_do_not_count() {
        let mut trace = launches_by(&rising(MIN_LAUNCHES), |_| 100);
        assert_eq!(findings_of(&trace).len(), 1);
        trace.processes.last_mut().unwrap().end_ns = None;
        assert!(findings_of(&trace).is_empty());
    }

    #[test]
    fn min_launches_is_the_edge() {
        assert_eq!(findings(&rising(MIN_LAUNCHES)).len(), 1);
        assert!(findings(&rising(MIN_LAUNCHES - 1)).is_empty());
    }

    #[test]
    fn min_growth_is_the_edge() {
        // Launches taking base + i ms, base chosen so that the median of
        // the last tenth is MIN_GROWTH times that of the first; then the
        // last tenth a little longer or shorter.
        let n = MIN_LAUNCHES;
        let tenth = (n / 10).max(2);
        let first_mid = (tenth - 1) as f64 / 2.0;
        let last_mid = (n - 1) as f64 - first_mid;
        let base = (last_mid - MIN_GROWTH * first_mid) / (MIN_GROWTH - 1.0);
        let durations: Vec<u64> = (0..n)
            .map(|i| ((base + i as f64) * MS as f64).round() as u64)
            .collect();
        for (delta, fires) in [(10_000i64, true), (-10_000, false)] {
            let mut d = durations.clone();
            for x in &mut d[n - tenth..] {
                *x = x.saturating_add_signed(delta);
            }
            let f = findings(&d);
            assert_eq!(f.len(), fires as usize, "{delta}: {f:?}");
            if fires {
                let growth = f[0].evidence["growth"].as_f64().unwrap();
                assert!(
                    (MIN_GROWTH..MIN_GROWTH + 0.01).contains(&growth),
                    "{growth}"
                );
            }
        }
    }

    #[test]
    fn min_trend_is_the_edge() {
        // The middle launches out of order; the first and last tenths kept.
        let n = MIN_LAUNCHES;
        let tenth = (n / 10).max(2);
        let rising: Vec<f64> = rising(n).iter().map(|&d| d as f64).collect();
        let (above, below) = trend_edge(&rising, tenth, MIN_TREND);
        let as_ns = |v: &[f64]| v.iter().map(|&d| d as u64).collect::<Vec<_>>();
        let f = findings(&as_ns(&above));
        assert_eq!(f.len(), 1, "{above:?}");
        let rho = f[0].evidence["trend"].as_f64().unwrap();
        assert!((MIN_TREND..MIN_TREND + 0.05).contains(&rho), "{rho}");
        assert!(findings(&as_ns(&below)).is_empty(), "{below:?}");
    }
}
