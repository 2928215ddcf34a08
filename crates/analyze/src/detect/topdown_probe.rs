//! `topdown-probe`: a process making many failing fixed-address mmap
//! attempts (`MAP_FIXED_NOREPLACE` answered with `EEXIST`) per mapping it
//! gets, with that count growing over the trace — a top-down placement that
//! searches from a fixed top address for every block, O(n²) in all.
//!
//! Signature and thresholds:
//! - at least `MIN_FAILED` failing `MAP_FIXED_NOREPLACE` mmaps in the process;
//! - at least `MIN_FAILURES_PER_MAPPING` failures per successful mapping,
//!   and at least `MIN_MAPPINGS` mappings obtained;
//! - growth: the failures before each success, averaged over the last
//!   quarter of the successes, at least `GROWTH` times (+1) those of the
//!   first quarter.
//!
//! Cost: the process's CPU samples inside the mmap syscall (or, without
//! samples, the summed duration of its failing calls). Needs the
//! `syscalls:sys_enter_mmap`/`sys_exit_mmap` tracepoints (`slowlab record`).

use std::collections::HashMap;

use slowlab_model::findings::Finding;
use slowlab_model::trace::{ProcIdx, StackIdx};

use super::{heaviest, Context};
use crate::evidence;
use crate::select::BuildFx;

pub const MIN_FAILED: u64 = 500;
pub const MIN_FAILURES_PER_MAPPING: f64 = 10.0;
pub const GROWTH: f64 = 1.5;
/// Mappings obtained, at least: the quarters compared need a few each.
pub const MIN_MAPPINGS: u64 = 8;
const MAP_FIXED_NOREPLACE: u64 = 0x10_0000;
const EEXIST: i64 = 17;

#[derive(Default)]
struct PerProcess {
    failed: u64,
    failed_ns: u64,
    pending: u64,
    /// Failures before each success, in order.
    per_success: Vec<u64>,
    sites: HashMap<Option<StackIdx>, u64, BuildFx>,
}

pub fn detect(cx: &Context) -> Vec<Finding> {
    let trace = cx.trace;
    let mut per: HashMap<ProcIdx, PerProcess, BuildFx> = HashMap::default();
    for call in cx.calls() {
        if trace.str(call.name) != "mmap" || call.args[3] & MAP_FIXED_NOREPLACE == 0 {
            continue;
        }
        let p = per.entry(cx.process_of(call.thread)).or_default();
        match call.ret {
            Some(r) if r == -EEXIST => {
                p.failed += 1;
                p.pending += 1;
                p.failed_ns += call.duration_ns().unwrap_or(0);
                *p.sites.entry(call.stack).or_default() += 1;
            }
            Some(r) if r >= 0 => {
                let pending = std::mem::take(&mut p.pending);
                p.per_success.push(pending);
            }
            _ => {}
        }
    }
    let in_mmap = |name: &str| {
        matches!(
            name,
            "__x64_sys_mmap" | "__arm64_sys_mmap" | "ksys_mmap_pgoff" | "vm_mmap_pgoff"
        )
    };
    let samples = cx.samples_by_process(&in_mmap);
    let mut findings = Vec::new();
    for (proc, p) in per {
        let successes = p.per_success.len() as u64;
        let ratio = p.failed as f64 / successes.max(1) as f64;
        if p.failed < MIN_FAILED || ratio < MIN_FAILURES_PER_MAPPING || successes < MIN_MAPPINGS {
            continue;
        }
        let quarter = (p.per_success.len() / 4).max(1);
        let mean = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len().max(1) as f64;
        let first = mean(&p.per_success[..quarter]);
        let last = mean(&p.per_success[p.per_success.len() - quarter..]);
        if last < GROWTH * first + 1.0 {
            continue;
        }
        let sampled_s = samples
            .get(&proc)
            .map_or(0.0, |s| s.1 as f64 * cx.sample_s());
        let cost_s = if sampled_s > 0.0 {
            sampled_s
        } else {
            p.failed_ns as f64 / 1e9
        };
        let site = heaviest(p.sites.iter())
            .map(|(s, _)| cx.user_names(*s))
            .unwrap_or_default();
        let culprit = cx.culprit(proc);
        let comm = culprit.comm.clone().unwrap_or_default();
        findings.push(cx.finding(
            "topdown-probe",
            format!(
                "{comm} searches top-down for free address space: {} failed fixed-address mmaps \
                 for {successes} mappings, {first:.0} → {last:.0} attempts per mapping",
                p.failed
            ),
            cost_s,
            culprit,
            evidence! {
                "failed_attempts" => p.failed,
                "mappings" => successes,
                "attempts_per_mapping_first_quarter" => first,
                "attempts_per_mapping_last_quarter" => last,
                "failed_calls_s" => p.failed_ns as f64 / 1e9,
                "cpu_in_mmap_s" => sampled_s,
            },
            site,
            "remember where the last search ended (a cursor or a free list) instead of probing \
             down from a fixed top address for every block, or let the kernel pick the address",
        ));
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TraceBuilder;
    use slowlab_model::trace::Trace;

    const MAP_PRIVATE_ANONYMOUS: u64 = 0x22;
    const CALL_NS: u64 = 2_000;
    const TOP: u64 = 0x7f00_0000_0000;

    /// `alloc` (pid 10) maps blocks top-down: before block k it tries
    /// `failures[k]` addresses already taken (EEXIST), then maps it; every
    /// mmap has `flags` and takes 2 µs. `in_mmap` 1 ms samples of it are
    /// inside mmap, and as many in its own code.
    fn allocator(failures: &[u64], flags: u64, in_mmap: u64) -> Trace {
        allocator_from(failures, flags, in_mmap, &[GROW_SITE])
    }

    /// The user frames of the mapping call site.
    const GROW_SITE: &[&str] = &["main", "arena_grow", "mmap"];

    /// [`allocator`] whose mmaps take turns among call sites `sites` (user
    /// frames, stacks made in this order), the first mmap from the second.
    fn allocator_from(failures: &[u64], flags: u64, in_mmap: u64, sites: &[&[&str]]) -> Trace {
        let mut b = TraceBuilder::default();
        let alloc = b.process(10, "alloc");
        b.process(20, "other");
        let kernel = ["entry_SYSCALL_64", "do_syscall_64", "__x64_sys_mmap"];
        let sites: Vec<_> = sites
            .iter()
            .map(|user| b.mixed_stack(user, &kernel))
            .collect();
        let mut t = 1_000_000;
        for &n in failures {
            for j in 0..=n {
                let site = sites[(j as usize + 1) % sites.len()];
                let addr = TOP - (j + 1) * 0x10_0000;
                let ret = if j < n { -EEXIST } else { addr as i64 };
                let args = [addr, 0x10_0000, 3, flags, u64::MAX, 0];
                b.syscall(t, alloc, site, "mmap", args, ret, CALL_NS);
                t += 3_000;
            }
        }
        let in_kernel = b.mixed_stack(
            &["main", "arena_grow", "mmap"],
            &[
                &kernel[..],
                &["ksys_mmap_pgoff", "vm_mmap_pgoff", "get_unmapped_area"],
            ]
            .concat(),
        );
        let own = b.mixed_stack(&["main", "fill"], &[]);
        let mut s = 0;
        for _ in 0..in_mmap {
            s += 1_000_000;
            b.sample(s, alloc, 0, in_kernel);
            s += 1_000_000;
            b.sample(s, alloc, 0, own);
        }
        b.build()
    }

    fn findings(failures: &[u64], flags: u64, in_mmap: u64) -> Vec<Finding> {
        let trace = allocator(failures, flags, in_mmap);
        detect(&Context::new(&trace, None, None))
    }

    fn noreplace(failures: &[u64]) -> Vec<Finding> {
        findings(failures, MAP_PRIVATE_ANONYMOUS | MAP_FIXED_NOREPLACE, 0)
    }

    /// `mappings` blocks, the failures before block k rising with k to
    /// `total` in all.
    fn ramp(mappings: usize, total: u64) -> Vec<u64> {
        let sum = (mappings * (mappings - 1) / 2) as u64;
        let mut v: Vec<u64> = (0..mappings as u64).map(|k| total * k / sum).collect();
        *v.last_mut().unwrap() += total - v.iter().sum::<u64>();
        v
    }

    #[test]
    fn a_top_down_search_for_every_block_is_found() {
        let failures = ramp(20, 1000);
        let f = findings(&failures, MAP_PRIVATE_ANONYMOUS | MAP_FIXED_NOREPLACE, 300);
        assert_eq!(f.len(), 1, "{f:?}");
        let f = &f[0];
        assert_eq!(f.id, "topdown-probe");
        assert_eq!(f.culprit.pid, Some(10));
        assert_eq!(f.culprit.comm.as_deref(), Some("alloc"));
        assert_eq!(f.evidence["failed_attempts"], 1000);
        assert_eq!(f.evidence["mappings"], 20);
        let mean = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len() as f64;
        assert_eq!(
            f.evidence["attempts_per_mapping_first_quarter"],
            mean(&failures[..5])
        );
        assert_eq!(
            f.evidence["attempts_per_mapping_last_quarter"],
            mean(&failures[15..])
        );
        assert_eq!(f.evidence["failed_calls_s"], 1000.0 * CALL_NS as f64 / 1e9);
        // The cost is the CPU sampled inside mmap.
        let cpu = f.evidence["cpu_in_mmap_s"].as_f64().unwrap();
        assert!((cpu - 0.3).abs() < 1e-9, "{cpu}");
        assert!((f.cost_s - 0.3).abs() < 1e-9, "{}", f.cost_s);
        assert_eq!(f.stack, ["mmap", "arena_grow", "main"]);
    }

    #[test]
    fn the_site_of_tied_failures_is_the_same_on_every_run() {
        // Two call sites fail exactly as often; the stack made first wins
        // the tie, though the other one fails first.
        let failures: Vec<u64> = (1..=20).map(|k| 4 * k).collect();
        let other: &[&str] = &["main", "slab_refill", "mmap"];
        for (sites, expected) in [([GROW_SITE, other], GROW_SITE), ([other, GROW_SITE], other)] {
            let flags = MAP_PRIVATE_ANONYMOUS | MAP_FIXED_NOREPLACE;
            let trace = allocator_from(&failures, flags, 0, &sites);
            let f = detect(&Context::new(&trace, None, None));
            assert_eq!(f.len(), 1, "{f:?}");
            let innermost_first: Vec<&str> = expected.iter().rev().copied().collect();
            assert_eq!(f[0].stack, innermost_first);
        }
    }

    #[test]
    fn without_samples_the_failed_calls_are_the_cost() {
        let f = noreplace(&ramp(20, 1000));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].evidence["cpu_in_mmap_s"], 0.0);
        assert!((f[0].cost_s - 1000.0 * CALL_NS as f64 / 1e9).abs() < 1e-12);
    }

    #[test]
    fn only_map_fixed_noreplace_attempts_count() {
        let failures = ramp(20, 1000);
        assert_eq!(noreplace(&failures).len(), 1);
        let f = findings(&failures, MAP_PRIVATE_ANONYMOUS, 300);
        assert!(f.is_empty(), "{f:?}");
    }

    #[test]
    fn an_allocator_remembering_where_it_stopped_is_not_probing() {
        // One taken address before each of 1000 blocks.
        assert!(noreplace(&[1; 1000]).is_empty());
    }

    #[test]
    fn as_many_failures_before_every_block_is_not_growth() {
        // A fixed search window: costly, but linear.
        assert!(noreplace(&[50; 20]).is_empty());
    }

    #[test]
    fn min_failed_is_the_edge() {
        let f = noreplace(&ramp(20, MIN_FAILED));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].evidence["failed_attempts"], MIN_FAILED);
        assert!(noreplace(&ramp(20, MIN_FAILED - 1)).is_empty());
    }

    #[test]
    fn min_failures_per_mapping_is_the_edge() {
        // Enough mappings that MIN_FAILED is no bar.
        let mappings = 2 * (MIN_FAILED as f64 / MIN_FAILURES_PER_MAPPING).ceil() as usize;
        let edge = (MIN_FAILURES_PER_MAPPING * mappings as f64).ceil() as u64;
        assert_eq!(noreplace(&ramp(mappings, edge)).len(), 1);
        assert!(noreplace(&ramp(mappings, edge - 1)).is_empty());
    }

    #[test]
    fn min_mappings_is_the_edge() {
        let n = MIN_MAPPINGS as usize;
        assert_eq!(noreplace(&ramp(n, 1000)).len(), 1);
        assert!(noreplace(&ramp(n - 1, 1000)).is_empty());
    }

    #[test]
    fn growth_is_the_edge() {
        // 5 blocks at 40 failures each, 10 in between, 5 at the last.
        let first = 40;
        let edge = (GROWTH * first as f64 + 1.0).ceil() as u64;
        for (last, fires) in [(edge, true), (edge - 1, false)] {
            let mut failures = vec![first; 5];
            failures.extend([(first + last) / 2; 10]);
            failures.extend([last; 5]);
            let f = noreplace(&failures);
            assert_eq!(f.len(), fires as usize, "{last}: {f:?}");
        }
    }
}
