//! `notify-buffer` (Windows): a process whose file operations are slowed
//! by a file-change watcher with a large notification buffer: for every
//! create or delete, the kernel zeroes the watcher's buffer in the context
//! of the process *doing* the operation.
//!
//! Signature and thresholds, per process: CPU samples whose stack goes
//! through `FsRtlNotifyFilterReportChange*` (or `FsRtlNotifyFullReportChange`)
//! down to `memset`/`RtlZeroMemory` — at least `MIN_ZEROING_SAMPLES` and
//! `MIN_PROCESS_SHARE` of the process's samples. Evidence also counts the
//! process's demand-zero faults and those under the notification path
//! (the fresh buffer pages, when the trace recorded all faults).
//!
//! Cost: the zeroing samples.

use std::collections::HashMap;

use slowlab_model::findings::Finding;
use slowlab_model::trace::{ProcIdx, WindowsFaultKind};

use super::{bare, fault_kind};
use crate::detect::Context;
use crate::evidence;
use crate::select::BuildFx;

pub const MIN_ZEROING_SAMPLES: u64 = 20;
pub const MIN_PROCESS_SHARE: f64 = 0.10;

fn is_notify_report(name: &str) -> bool {
    let f = bare(name);
    f.starts_with("FsRtlNotifyFilterReportChange") || f == "FsRtlNotifyFullReportChange"
}

fn is_zeroing(name: &str) -> bool {
    let f = bare(name);
    f.starts_with("memset") || f == "RtlZeroMemory" || f == "RtlFillMemory"
}

pub fn detect(cx: &Context) -> Vec<Finding> {
    let zeroing = cx.samples_where(&|stack| {
        // Innermost first: the zeroing must be below (inside) the report.
        let names = cx.names(stack);
        let z = names.iter().position(|n| is_zeroing(n));
        let r = names.iter().position(|n| is_notify_report(n));
        matches!((z, r), (Some(z), Some(r)) if z < r)
    });
    let mut faults: HashMap<ProcIdx, (u64, u64), BuildFx> = HashMap::default();
    let mut reporting = cx.stack_test(&is_notify_report);
    for ev in &cx.trace.events {
        if fault_kind(&ev.kind) == Some(WindowsFaultKind::DemandZero) {
            let f = faults.entry(cx.process_of(ev.thread)).or_default();
            f.0 += 1;
            if reporting(ev.stack) {
                f.1 += 1;
            }
        }
    }
    let mut findings = Vec::new();
    for (proc, (samples, zeroing_samples)) in zeroing {
        let share = zeroing_samples as f64 / samples.max(1) as f64;
        if zeroing_samples < MIN_ZEROING_SAMPLES || share < MIN_PROCESS_SHARE {
            continue;
        }
        let (demand_zero, demand_zero_notify) = faults.get(&proc).copied().unwrap_or_default();
        let culprit = cx.culprit(proc);
        findings.push(cx.finding(
            "notify-buffer",
            format!(
                "{}: {:.0}% of its CPU zeroes file-change notification buffers \
                 (FsRtlNotifyFilterReportChange → memset): a watcher with a large buffer makes \
                 every file operation slower",
                culprit.comm.as_deref().unwrap_or("?"),
                share * 100.0
            ),
            zeroing_samples as f64 * cx.sample_s(),
            culprit,
            evidence! {
                "samples" => samples,
                "zeroing_samples" => zeroing_samples,
                "share" => share,
                "demand_zero_faults" => demand_zero,
                "demand_zero_faults_in_notify" => demand_zero_notify,
            },
            Vec::new(),
            "find the process watching these directories (ReadDirectoryChangesW) and give it a \
             buffer of 64 KiB or less",
        ));
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TraceBuilder;

    const ZEROING: &[&str] = &[
        "NtCreateFile",
        "Ntfs.sys!NtfsCommonCreate",
        "ntoskrnl.exe!FsRtlNotifyFilterReportChangeLiteEx",
        "ntoskrnl.exe!memset",
    ];

    /// python.exe: `zeroing` of 100 samples zeroing buffers, the rest in
    /// its own code; `faults` demand-zero faults under the report.
    fn trace(zeroing: usize, faults: usize) -> slowlab_model::trace::Trace {
        trace_of(100, zeroing, faults)
    }

    /// The same with `samples` samples in all.
    fn trace_of(samples: u64, zeroing: usize, faults: usize) -> slowlab_model::trace::Trace {
        let mut b = TraceBuilder::default();
        let py = b.process(40, "python.exe");
        let zero = b.mixed_stack(&["main"], ZEROING);
        let own = b.mixed_stack(&["main", "loop"], &[]);
        let fault = b.mixed_stack(
            &["main"],
            &[
                "NtCreateFile",
                "FsRtlNotifyFilterReportChange",
                "KiPageFault",
            ],
        );
        for i in 0..samples {
            let s = if (i as usize) < zeroing { zero } else { own };
            b.sample(i * 1_000_000, py, 0, s);
        }
        for i in 0..faults as u64 {
            b.windows_fault(i * 1000, py, WindowsFaultKind::DemandZero, fault);
        }
        b.build()
    }

    #[test]
    fn zeroing_under_the_notification_report_is_found() {
        let t = trace(40, 30);
        let f = detect(&Context::new(&t, None, None));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].id, "notify-buffer");
        assert_eq!(f[0].culprit.comm.as_deref(), Some("python.exe"));
        assert_eq!(f[0].evidence["zeroing_samples"], 40);
        assert_eq!(f[0].evidence["demand_zero_faults_in_notify"], 30);
    }

    #[test]
    fn too_few_zeroing_samples_is_silent() {
        let t = trace(MIN_ZEROING_SAMPLES as usize - 1, 30);
        assert!(detect(&Context::new(&t, None, None)).is_empty());
        let t = trace(MIN_ZEROING_SAMPLES as usize, 0);
        assert_eq!(detect(&Context::new(&t, None, None)).len(), 1);
    }

    #[test]
    fn memset_outside_the_report_is_not_the_signature() {
        let mut b = TraceBuilder::default();
        let p = b.process(41, "app.exe");
        let s = b.mixed_stack(&["main"], &["NtWriteFile", "memset"]);
        for i in 0..100 {
            b.sample(i * 1_000_000, p, 0, s);
        }
        let t = b.build();
        assert!(detect(&Context::new(&t, None, None)).is_empty());
    }

    #[test]
    fn min_process_share_is_the_edge() {
        // 1,000 samples: enough zeroing samples either way; the share of
        // the process's CPU decides.
        let at_edge = (1000.0 * MIN_PROCESS_SHARE) as usize;
        assert!(at_edge as u64 > MIN_ZEROING_SAMPLES);
        let t = trace_of(1000, at_edge - 1, 30);
        assert!(detect(&Context::new(&t, None, None)).is_empty());
        let t = trace_of(1000, at_edge + 1, 30);
        assert_eq!(detect(&Context::new(&t, None, None)).len(), 1);
    }
}
