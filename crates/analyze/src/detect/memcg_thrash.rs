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
//!   `reclaim_high`: not the charge functions every allocation passes);
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

/// Reclaim inside a memory cgroup: the cgroup is at its limit and the
/// allocation must free some of the cgroup's own pages first. (The charge
/// functions that lead here, `try_charge_memcg` and `__mem_cgroup_charge`,
/// run on every page a process allocates, so they alone are no sign.)
fn in_memcg_reclaim(name: &str) -> bool {
    matches!(
        name,
        "try_to_free_mem_cgroup_pages"
            | "mem_cgroup_handle_over_high"
            | "reclaim_high"
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::stacks_trace;

    const FAULT: &[&str] = &["asm_exc_page_fault", "exc_page_fault", "handle_mm_fault"];

    fn findings(stacks: &[(&[&str], usize)]) -> Vec<Finding> {
        let trace = stacks_trace(stacks);
        detect(&Context::new(&trace, None, None))
    }

    #[test]
    fn faults_that_reclaim_in_the_cgroup_are_found() {
        let reclaim: Vec<&str> =
            [FAULT, &["try_charge_memcg", "try_to_free_mem_cgroup_pages"]].concat();
        let f = findings(&[(FAULT, 200), (&reclaim, 200), (&["user_work"], 100)]);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!((f[0].cost_s - 0.4).abs() < 1e-9, "{}", f[0].cost_s);
        assert_eq!(f[0].evidence["fault_share"], 0.8);
    }

    #[test]
    fn charging_pages_to_a_cgroup_without_reclaim_is_not_thrashing() {
        // Every new page (a tar extraction writing files, a program
        // starting) passes the charge functions; that is no reclaim.
        let charge: Vec<&str> = [
            FAULT,
            &["__mem_cgroup_charge", "charge_memcg", "try_charge_memcg"],
        ]
        .concat();
        let f = findings(&[(FAULT, 200), (&charge, 200), (&["user_work"], 100)]);
        assert!(f.is_empty(), "{f:?}");
    }

    #[test]
    fn reclaim_outside_page_faults_is_not_thrashing() {
        let reclaim: &[&str] = &["do_syscall_64", "try_to_free_mem_cgroup_pages"];
        let f = findings(&[(reclaim, 300), (&["user_work"], 300)]);
        assert!(f.is_empty(), "{f:?}");
    }
}
