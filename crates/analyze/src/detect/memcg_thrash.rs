//! `memcg-thrash`: a process whose time goes to page faults with reclaim in
//! its own memory cgroup — its working set does not fit under the cgroup's
//! limit, so every pass evicts and re-reads its own pages.
//!
//! Signature and thresholds, per process:
//! - its time in page faults (CPU samples under the fault handler plus time
//!   blocked inside it) is at least `MIN_FAULT_SHARE` of its time (CPU
//!   samples plus blocked time);
//! - at least `MIN_RECLAIM_SHARE` of its CPU samples are in memory-cgroup
//!   reclaim (`try_to_free_mem_cgroup_pages`, `mem_cgroup_handle_over_high`,
//!   `try_charge_memcg`, …);
//! - at least `MIN_COST_S` of fault time.
//!
//! The cgroup and its limit are named when the recording captured them
//! (`slowlab record` notes the memory cgroups of the processes it sees).

use std::collections::HashMap;

use slowlab_model::findings::Finding;
use slowlab_model::trace::{EventKind, ProcIdx};

use super::Context;
use crate::evidence;
use crate::select::BuildFx;

pub const MIN_FAULT_SHARE: f64 = 0.5;
pub const MIN_RECLAIM_SHARE: f64 = 0.05;
pub const MIN_COST_S: f64 = 0.1;

fn in_fault(name: &str) -> bool {
    matches!(
        name,
        "exc_page_fault"
            | "asm_exc_page_fault"
            | "handle_mm_fault"
            | "do_user_addr_fault"
            | "do_page_fault"
            | "do_mem_abort"
            | "el0_da"
    )
}

fn in_memcg_reclaim(name: &str) -> bool {
    matches!(
        name,
        "try_to_free_mem_cgroup_pages"
            | "mem_cgroup_handle_over_high"
            | "reclaim_high"
            | "try_charge_memcg"
            | "mem_cgroup_charge"
            | "__mem_cgroup_charge"
            | "charge_memcg"
            | "memory_high_write"
            | "mem_cgroup_out_of_memory"
    )
}

pub fn detect(cx: &Context) -> Vec<Finding> {
    let faults = cx.samples_by_process(&in_fault);
    let reclaim = cx.samples_by_process(&in_memcg_reclaim);
    let mut blocked: HashMap<ProcIdx, (f64, f64), BuildFx> = HashMap::default();
    for w in &cx.schedule.waits {
        let e = blocked.entry(cx.process_of(w.thread)).or_default();
        let len = (w.end_ns - w.start_ns) as f64 / 1e9;
        e.0 += len;
        if cx.stack_has(w.stack, &in_fault) {
            e.1 += len;
        }
    }
    let mut major: HashMap<ProcIdx, u64, BuildFx> = HashMap::default();
    let mut all_faults: HashMap<ProcIdx, u64, BuildFx> = HashMap::default();
    for ev in &cx.trace.events {
        match ev.kind {
            EventKind::MajorFault { .. } => {
                *major.entry(cx.process_of(ev.thread)).or_default() += 1
            }
            EventKind::PageFault { .. } => {
                *all_faults.entry(cx.process_of(ev.thread)).or_default() += 1
            }
            _ => {}
        }
    }
    let mut findings = Vec::new();
    for (proc, &(samples, fault_samples)) in &faults {
        let sample_s = cx.sample_s();
        let (blocked_s, fault_blocked_s) = blocked.get(proc).copied().unwrap_or_default();
        let total_s = samples as f64 * sample_s + blocked_s;
        let fault_s = fault_samples as f64 * sample_s + fault_blocked_s;
        let reclaim_samples = reclaim.get(proc).map_or(0, |r| r.1);
        let reclaim_share = reclaim_samples as f64 / samples.max(1) as f64;
        let fault_share = fault_s / total_s.max(1e-9);
        if fault_s < MIN_COST_S
            || fault_share < MIN_FAULT_SHARE
            || reclaim_share < MIN_RECLAIM_SHARE
        {
            continue;
        }
        let culprit = cx.culprit(*proc);
        let limit = culprit
            .cgroup
            .as_ref()
            .and_then(|cg| cx.cgroups.and_then(|c| c.limits.get(cg)).copied());
        let where_ = match (&culprit.cgroup, limit) {
            (Some(cg), Some(l)) => format!("memory cgroup {cg} (limit {} MiB)", l >> 20),
            (Some(cg), None) => format!("memory cgroup {cg}"),
            _ => "its memory cgroup".to_string(),
        };
        findings.push(cx.finding(
            "memcg-thrash",
            format!(
                "{} spends {:.0}% of its time in page faults, reclaiming its own pages in {where_}",
                culprit.comm.as_deref().unwrap_or("?"),
                fault_share * 100.0
            ),
            fault_s,
            culprit.clone(),
            evidence! {
                "fault_s" => fault_s,
                "fault_share" => fault_share,
                "reclaim_share_of_cpu" => reclaim_share,
                "page_faults" => all_faults.get(proc).copied().unwrap_or(0),
                "major_faults" => major.get(proc).copied().unwrap_or(0),
                "cgroup" => culprit.cgroup,
                "limit_bytes" => limit,
            },
            Vec::new(),
            "raise the cgroup's memory limit above the working set (memory.max, or \
             memory.limit_in_bytes on cgroup v1), or make the working set smaller",
        ));
    }
    findings
}
