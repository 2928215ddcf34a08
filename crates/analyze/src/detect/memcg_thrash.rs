//! `memcg-thrash`: a process whose time goes to getting its pages in — page
//! faults, or buffered reads filling the page cache — with reclaim in its
//! own memory cgroup: its working set does not fit under the cgroup's
//! limit, so every pass evicts and re-reads its own pages (a scan of a file
//! mapping faults them back in; a `cat` of a file reads them again).
//!
//! Signature and thresholds, per process:
//! - its time getting pages in (CPU samples under the fault handler or a
//!   page-cache read, plus time blocked inside them) is at least
//!   `MIN_PAGE_IN_SHARE` of its time (CPU samples plus blocked time);
//! - at least `MIN_RECLAIM_SHARE` of its CPU samples are in memory-cgroup
//!   reclaim (`try_to_free_mem_cgroup_pages`, `mem_cgroup_handle_over_high`,
//!   `reclaim_high`: not the charge functions every allocation passes), or
//!   the recording noted that its cgroup refaulted — read back soon after
//!   evicting them — at least `MIN_REFAULTED_LIMITS` times its limit's worth
//!   of pages (reclaiming clean page cache is cheap: a `cat` that re-reads a
//!   file from disk on every pass spends little CPU in reclaim itself);
//! - at least `MIN_COST_S` of time getting pages in.
//!
//! The cgroup and its limit are named when the recording captured them
//! (`slowlab record` notes the memory cgroups of the processes it sees).

use std::collections::HashMap;

use slowlab_model::findings::Finding;
use slowlab_model::trace::{EventKind, ProcIdx};

use super::{CgroupInfo, Context};
use crate::evidence;
use crate::select::BuildFx;

pub const MIN_PAGE_IN_SHARE: f64 = 0.5;
pub const MIN_RECLAIM_SHARE: f64 = 0.05;
pub const MIN_COST_S: f64 = 0.1;
pub const MIN_REFAULTED_LIMITS: f64 = 1.0;
/// Bytes per page in the refault counts.
const PAGE_BYTES: u64 = 4096;

/// The page-fault handler, or a buffered read that fills the page cache.
fn in_page_in(name: &str) -> bool {
    matches!(
        name,
        "filemap_read"
            | "filemap_splice_read"
            | "exc_page_fault"
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
    let page_in = cx.samples_by_process(&in_page_in);
    let reclaim = cx.samples_by_process(&in_memcg_reclaim);
    let mut blocked: HashMap<ProcIdx, (f64, f64), BuildFx> = HashMap::default();
    let mut paging_in = cx.stack_test(&in_page_in);
    for w in &cx.schedule.waits {
        let e = blocked.entry(cx.process_of(w.thread)).or_default();
        let len = (w.end_ns - w.start_ns) as f64 / 1e9;
        e.0 += len;
        if paging_in(w.stack) {
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
    for (proc, &(samples, page_in_samples)) in &page_in {
        let sample_s = cx.sample_s();
        let (blocked_s, page_in_blocked_s) = blocked.get(proc).copied().unwrap_or_default();
        let total_s = samples as f64 * sample_s + blocked_s;
        let page_in_s = page_in_samples as f64 * sample_s + page_in_blocked_s;
        let reclaim_samples = reclaim.get(proc).map_or(0, |r| r.1);
        let reclaim_share = reclaim_samples as f64 / samples.max(1) as f64;
        let page_in_share = page_in_s / total_s.max(1e-9);
        if page_in_s < MIN_COST_S || page_in_share < MIN_PAGE_IN_SHARE {
            continue;
        }
        let culprit = cx.culprit(*proc);
        let noted = |map: fn(&CgroupInfo) -> &HashMap<String, u64>| {
            let cg = culprit.cgroup.as_ref()?;
            cx.cgroups.and_then(|c| map(c).get(cg)).copied()
        };
        let limit = noted(|c| &c.limits);
        let refaults = noted(|c| &c.refaults);
        let refaulted_bytes = refaults.map(|r| r * PAGE_BYTES);
        let refaulted_limits = match (refaulted_bytes, limit) {
            (Some(r), Some(l)) if l > 0 => r as f64 / l as f64,
            _ => 0.0,
        };
        if reclaim_share < MIN_RECLAIM_SHARE && refaulted_limits < MIN_REFAULTED_LIMITS {
            continue;
        }
        let reread = match refaulted_bytes {
            Some(r) if r > 0 => format!(" and re-reading {} MiB it had evicted", r >> 20),
            _ => String::new(),
        };
        let where_ = match (&culprit.cgroup, limit) {
            (Some(cg), Some(l)) => format!("memory cgroup {cg} (limit {} MiB)", l >> 20),
            (Some(cg), None) => format!("memory cgroup {cg}"),
            _ => "its memory cgroup".to_string(),
        };
        findings.push(cx.finding(
            "memcg-thrash",
            format!(
                "{} spends {:.0}% of its time getting pages in (faults, page-cache reads), \
                 reclaiming its own pages in {where_}{reread}",
                culprit.comm.as_deref().unwrap_or("?"),
                page_in_share * 100.0
            ),
            page_in_s,
            culprit.clone(),
            evidence! {
                "page_in_s" => page_in_s,
                "page_in_share" => page_in_share,
                "reclaim_share_of_cpu" => reclaim_share,
                "page_faults" => all_faults.get(proc).copied().unwrap_or(0),
                "major_faults" => major.get(proc).copied().unwrap_or(0),
                "cgroup" => culprit.cgroup,
                "limit_bytes" => limit,
                "refaulted_pages" => refaults,
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
        assert_eq!(f[0].evidence["page_in_share"], 0.8);
    }

    #[test]
    fn buffered_reads_that_reclaim_in_the_cgroup_are_found() {
        // `cat` of a file bigger than the cgroup's limit, again and again.
        let read: &[&str] = &["ksys_read", "vfs_read", "filemap_read"];
        let reclaim: Vec<&str> = [
            read,
            &[
                "page_cache_ra_unbounded",
                "filemap_add_folio",
                "try_charge_memcg",
            ],
            &["try_to_free_mem_cgroup_pages"],
        ]
        .concat();
        let f = findings(&[(read, 150), (&reclaim, 100), (&["user_work"], 10)]);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].title.contains("getting pages in"), "{}", f[0].title);
    }

    /// A `cat` re-reading a file in a cgroup: little CPU in reclaim itself.
    const CAT: &[(&[&str], usize)] = &[
        (&["ksys_read", "vfs_read", "filemap_read"], 300),
        (
            &[
                "ksys_read",
                "vfs_read",
                "filemap_read",
                "try_to_free_mem_cgroup_pages",
            ],
            5,
        ),
        (&["user_work"], 10),
    ];

    fn cat_findings(limit: u64, refaults: u64) -> Vec<Finding> {
        let trace = stacks_trace(CAT);
        let cg = "/box".to_string();
        let info = CgroupInfo {
            process_cgroup: [(10, cg.clone())].into(),
            limits: [(cg.clone(), limit)].into(),
            refaults: [(cg, refaults)].into(),
        };
        detect(&Context::new(&trace, None, Some(&info)))
    }

    #[test]
    fn refaulting_more_than_the_limit_is_thrashing_even_with_cheap_reclaim() {
        // 32 MiB limit, 1.9 GiB read back in.
        let f = cat_findings(32 << 20, 499_422);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].evidence["refaulted_pages"], 499_422);
        assert!(f[0].title.contains("re-reading 1950 MiB"), "{}", f[0].title);
        assert_eq!(f[0].culprit.cgroup.as_deref(), Some("/box"));
    }

    #[test]
    fn refaulting_less_than_the_limit_with_cheap_reclaim_is_not() {
        assert!(cat_findings(32 << 20, 4000).is_empty());
    }

    /// Faults that reclaim in the cgroup: every sample is page-in time.
    fn reclaiming_fault() -> Vec<&'static str> {
        [FAULT, &["try_charge_memcg", "try_to_free_mem_cgroup_pages"]].concat()
    }

    /// Samples (1 ms each in `stacks_trace`) just below and just above a
    /// threshold, as the count that sits at `edge` minus and plus one.
    fn below_and_above(edge: f64) -> (usize, usize) {
        let at = edge.round() as usize;
        (at - 1, at + 1)
    }

    #[test]
    fn min_cost_s_is_the_edge() {
        let reclaim = reclaiming_fault();
        let (below, above) = below_and_above(MIN_COST_S * 1000.0);
        let f = findings(&[(&reclaim, below), (&["user_work"], 10)]);
        assert!(f.is_empty(), "{f:?}");
        let f = findings(&[(&reclaim, above), (&["user_work"], 10)]);
        assert_eq!(f.len(), 1, "{f:?}");
    }

    #[test]
    fn min_page_in_share_is_the_edge() {
        // 200 page-in samples out of 200 + user: the share is 200/(200+u).
        let reclaim = reclaiming_fault();
        let user_at_edge = 200.0 * (1.0 / MIN_PAGE_IN_SHARE - 1.0);
        let (fewer, more) = below_and_above(user_at_edge);
        let f = findings(&[(&reclaim, 200), (&["user_work"], more)]);
        assert!(f.is_empty(), "{f:?}");
        let f = findings(&[(&reclaim, 200), (&["user_work"], fewer)]);
        assert_eq!(f.len(), 1, "{f:?}");
    }

    #[test]
    fn min_reclaim_share_is_the_edge() {
        // 1,000 fault samples, some of them in cgroup reclaim.
        let reclaim = reclaiming_fault();
        let (below, above) = below_and_above(MIN_RECLAIM_SHARE * 1000.0);
        let f = findings(&[(FAULT, 1000 - below), (&reclaim, below)]);
        assert!(f.is_empty(), "{f:?}");
        let f = findings(&[(FAULT, 1000 - above), (&reclaim, above)]);
        assert_eq!(f.len(), 1, "{f:?}");
    }

    #[test]
    fn min_refaulted_limits_is_the_edge() {
        // A 32 MiB limit is 8,192 pages; `CAT` spends too little CPU in
        // reclaim to count, so the refaults decide.
        let limit = 32u64 << 20;
        let (below, above) = below_and_above(MIN_REFAULTED_LIMITS * (limit / PAGE_BYTES) as f64);
        assert!(cat_findings(limit, below as u64).is_empty());
        assert_eq!(cat_findings(limit, above as u64).len(), 1);
    }

    #[test]
    fn reading_a_cached_file_without_a_limit_is_not_thrashing() {
        let read: &[&str] = &["ksys_read", "vfs_read", "filemap_read", "copy_page_to_iter"];
        let f = findings(&[(read, 500), (&["user_work"], 10)]);
        assert!(f.is_empty(), "{f:?}");
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
