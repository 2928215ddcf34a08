//! `working-set-cap` (Windows): a process whose CPU goes to page faults on
//! its own pages because its working set is capped below what it touches
//! (background mode caps it at 32 MiB): every pass faults its pages back
//! from the standby list — transition (soft) faults, not hard ones.
//!
//! Signature and thresholds, per process:
//! - at least `MIN_SAMPLES` CPU samples, `MIN_FAULT_SHARE` of them under
//!   `KiPageFault` or `MmAccessFault`;
//! - at least `MIN_TRANSITION_FAULTS` transition faults, at least
//!   `MIN_TRANSITION_SHARE` of its recorded faults (soft and hard), and
//!   hard faults fewer than `MAX_HARD_PER_TRANSITION` per transition fault
//!   (pages read from disk are a different story: memory pressure, a cold
//!   file).
//!
//! Cost: the samples under the fault handler.

use std::collections::HashMap;

use slowlab_model::findings::Finding;
use slowlab_model::trace::{EventKind, ProcIdx, WindowsFaultKind};

use super::bare;
use crate::detect::Context;
use crate::evidence;
use crate::select::BuildFx;

pub const MIN_SAMPLES: u64 = 100;
pub const MIN_FAULT_SHARE: f64 = 0.5;
pub const MIN_TRANSITION_FAULTS: u64 = 1000;
pub const MIN_TRANSITION_SHARE: f64 = 0.5;
pub const MAX_HARD_PER_TRANSITION: f64 = 0.1;

fn in_fault_handler(name: &str) -> bool {
    matches!(bare(name), "KiPageFault" | "MmAccessFault")
}

/// Per process: (transition, other soft, hard) faults.
fn fault_counts(cx: &Context) -> HashMap<ProcIdx, (u64, u64, u64), BuildFx> {
    let mut out: HashMap<ProcIdx, (u64, u64, u64), BuildFx> = HashMap::default();
    for ev in &cx.trace.events {
        let e = match ev.kind {
            EventKind::PageFault { .. } | EventKind::MajorFault { .. } => {
                out.entry(cx.process_of(ev.thread)).or_default()
            }
            _ => continue,
        };
        match ev.kind {
            EventKind::PageFault {
                windows_kind: Some(WindowsFaultKind::Transition),
                ..
            } => e.0 += 1,
            // Another Windows kind, or a Linux trace's fault (no kind).
            EventKind::PageFault { .. } => e.1 += 1,
            _ => e.2 += 1,
        }
    }
    out
}

pub fn detect(cx: &Context) -> Vec<Finding> {
    let faults = fault_counts(cx);
    let mut findings = Vec::new();
    for (proc, (samples, fault_samples)) in cx.samples_by_process(&in_fault_handler) {
        let share = fault_samples as f64 / samples.max(1) as f64;
        if samples < MIN_SAMPLES || share < MIN_FAULT_SHARE {
            continue;
        }
        let (transition, soft, hard) = faults.get(&proc).copied().unwrap_or_default();
        let all = transition + soft + hard;
        let transition_share = transition as f64 / all.max(1) as f64;
        if transition < MIN_TRANSITION_FAULTS
            || transition_share < MIN_TRANSITION_SHARE
            || hard as f64 >= MAX_HARD_PER_TRANSITION * transition as f64
        {
            continue;
        }
        let culprit = cx.culprit(proc);
        findings.push(cx.finding(
            "working-set-cap",
            format!(
                "{} spends {:.0}% of its CPU in page faults (KiPageFault/MmAccessFault): {transition} \
                 transition faults and {hard} hard: its working set is capped below what it touches",
                culprit.comm.as_deref().unwrap_or("?"),
                share * 100.0
            ),
            fault_samples as f64 * cx.sample_s(),
            culprit,
            evidence! {
                "samples" => samples,
                "fault_samples" => fault_samples,
                "fault_share" => share,
                "transition_faults" => transition,
                "other_soft_faults" => soft,
                "hard_faults" => hard,
            },
            Vec::new(),
            "raise the process's working-set limit (background mode, \
             PROCESS_MODE_BACKGROUND_BEGIN, caps it at 32 MiB; SetProcessWorkingSetSizeEx), or \
             touch less memory per pass",
        ));
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TraceBuilder;

    /// scan.exe: 200 samples, `in_faults` of them in the fault handler;
    /// `transition` transition faults and `hard` hard faults.
    fn trace(in_faults: u64, transition: u64, hard: u64) -> slowlab_model::trace::Trace {
        trace_of(200, in_faults, transition, 0, hard)
    }

    /// scan.exe with `samples` samples, and `soft` other soft faults
    /// (demand-zero) besides the transition and hard ones.
    fn trace_of(
        samples: u64,
        in_faults: u64,
        transition: u64,
        soft: u64,
        hard: u64,
    ) -> slowlab_model::trace::Trace {
        let mut b = TraceBuilder::default();
        let p = b.process(50, "scan.exe");
        let fault = b.mixed_stack(
            &["main", "scan"],
            &["ntoskrnl.exe!KiPageFault", "ntoskrnl.exe!MmAccessFault"],
        );
        let own = b.mixed_stack(&["main", "scan"], &[]);
        for i in 0..samples {
            b.sample(i * 1_000_000, p, 0, if i < in_faults { fault } else { own });
        }
        for i in 0..transition {
            b.windows_fault(i * 100, p, WindowsFaultKind::Transition, None);
        }
        for i in 0..soft {
            b.windows_fault(i * 100 + 25, p, WindowsFaultKind::DemandZero, None);
        }
        for i in 0..hard {
            b.major_fault(i * 100 + 50, p);
        }
        b.build()
    }

    #[test]
    fn faulting_on_transition_pages_is_found() {
        let t = trace(150, 5000, 3);
        let f = detect(&Context::new(&t, None, None));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].id, "working-set-cap");
        assert_eq!(f[0].evidence["transition_faults"], 5000);
        assert!((f[0].cost_s - 0.150).abs() < 1e-9);
    }

    #[test]
    fn at_the_edges_of_each_threshold() {
        let fires =
            |t: &slowlab_model::trace::Trace| !detect(&Context::new(t, None, None)).is_empty();
        assert!(fires(&trace(100, MIN_TRANSITION_FAULTS, 0)));
        assert!(!fires(&trace(99, 5000, 0)), "under half the CPU in faults");
        assert!(!fires(&trace(150, MIN_TRANSITION_FAULTS - 1, 0)));
        // Hard faults mean pages come from disk: not a capped working set.
        assert!(!fires(&trace(150, 5000, 500)));
        assert!(fires(&trace(150, 5000, 499)));
    }

    #[test]
    fn min_samples_is_the_edge() {
        // Every sample in the fault handler: only the count can fail.
        let fires =
            |n: u64| !detect(&Context::new(&trace_of(n, n, 5000, 0, 0), None, None)).is_empty();
        assert!(!fires(MIN_SAMPLES - 1));
        assert!(fires(MIN_SAMPLES));
    }

    #[test]
    fn min_transition_share_is_the_edge() {
        // 5,000 transition faults among 10,000 and a few more or fewer
        // other soft faults.
        let transition = 5000;
        let other_at_edge = (transition as f64 / MIN_TRANSITION_SHARE) as u64 - transition;
        let fires = |soft: u64| {
            !detect(&Context::new(
                &trace_of(200, 150, transition, soft, 0),
                None,
                None,
            ))
            .is_empty()
        };
        assert!(!fires(other_at_edge + 10));
        assert!(fires(other_at_edge - 10));
    }
}
