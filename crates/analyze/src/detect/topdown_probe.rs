//! `topdown-probe`: a process making many failing fixed-address mmap
//! attempts (`MAP_FIXED_NOREPLACE` answered with `EEXIST`) per mapping it
//! gets, with that count growing over the trace — a top-down placement that
//! searches from a fixed top address for every block, O(n²) in all.
//!
//! Signature and thresholds:
//! - at least `MIN_FAILED` failing `MAP_FIXED_NOREPLACE` mmaps in the process;
//! - at least `MIN_FAILURES_PER_MAPPING` failures per successful mapping;
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

use super::Context;
use crate::evidence;
use crate::select::BuildFx;

pub const MIN_FAILED: u64 = 500;
pub const MIN_FAILURES_PER_MAPPING: f64 = 10.0;
pub const GROWTH: f64 = 1.5;
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
    for call in &cx.calls {
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
        if p.failed < MIN_FAILED || ratio < MIN_FAILURES_PER_MAPPING || successes < 8 {
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
        let site = p
            .sites
            .iter()
            .max_by_key(|(_, n)| **n)
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
