//! `topdown-alloc` (Windows): `VirtualAlloc` with `MEM_TOP_DOWN` searches
//! the process's reservations for the highest free range, so each
//! reservation costs more the more of them are live: n of them cost O(n²).
//!
//! Signature and thresholds, per process (from the ETL trace's
//! `VirtualAlloc`/`VirtualFree` events, as `slowlab-etl` reads them: calls
//! with `args = [base, size, flags, pid, …]`, and its CPU samples):
//! - at least `MIN_TOPDOWN` top-down reservations (`MEM_RESERVE |
//!   MEM_TOP_DOWN`), with at least `MIN_LIVE` of them live at once (a
//!   `VirtualFree` with `MEM_RELEASE` of a base ends one);
//! - at least `MIN_PATH_SAMPLES` samples on the VirtualAlloc path
//!   (`NtAllocateVirtualMemory`, `MiAllocateVirtualMemory`,
//!   `MiFindEmptyAddressRange*`, `MiReserveVirtualAddress`: needs kernel
//!   symbols);
//! - the sampled time per reservation in the last quarter of them at least
//!   `GROWTH` times that of the first quarter (a sample counts for the
//!   reservation whose event follows it: the event marks the call's end).
//!
//! Cost: the samples on the VirtualAlloc path.

use std::collections::{BTreeSet, HashMap};

use slowlab_model::findings::Finding;
use slowlab_model::trace::ProcIdx;

use super::bare;
use crate::detect::Context;
use crate::evidence;
use crate::select::BuildFx;

pub const MIN_TOPDOWN: usize = 200;
pub const MIN_LIVE: usize = 100;
pub const MIN_PATH_SAMPLES: u64 = 50;
pub const GROWTH: f64 = 2.0;
const MEM_RESERVE: u64 = 0x2000;
const MEM_RELEASE: u64 = 0x8000;
const MEM_TOP_DOWN: u64 = 0x10_0000;

fn on_alloc_path(name: &str) -> bool {
    let f = bare(name);
    matches!(
        f,
        "NtAllocateVirtualMemory" | "MiAllocateVirtualMemory" | "MiReserveVirtualAddress"
    ) || f.starts_with("MiFindEmptyAddressRange")
}

#[derive(Default)]
struct PerProcess {
    live: BTreeSet<u64>,
    peak_live: usize,
    /// (time of the reservation's event, live reservations then).
    topdown: Vec<(u64, usize)>,
}

pub fn detect(cx: &Context) -> Vec<Finding> {
    let trace = cx.trace;
    let mut per: HashMap<ProcIdx, PerProcess, BuildFx> = HashMap::default();
    for call in cx.calls() {
        let name = trace.str(call.name);
        let (base, flags) = (call.args[0], call.args[2]);
        let Some(at) = call.enter_ns else { continue };
        if name == "VirtualAlloc"
            && flags & (MEM_RESERVE | MEM_TOP_DOWN) == MEM_RESERVE | MEM_TOP_DOWN
        {
            let p = per.entry(cx.process_of(call.thread)).or_default();
            p.live.insert(base);
            p.peak_live = p.peak_live.max(p.live.len());
            p.topdown.push((at, p.live.len()));
        } else if name == "VirtualFree" && flags & MEM_RELEASE != 0 {
            if let Some(p) = per.get_mut(&cx.process_of(call.thread)) {
                p.live.remove(&base);
            }
        }
    }
    per.retain(|_, p| p.topdown.len() >= MIN_TOPDOWN && p.peak_live >= MIN_LIVE);
    if per.is_empty() {
        return Vec::new();
    }
    // Samples on the path, per process and quarter of its reservations.
    let mut quarters: HashMap<ProcIdx, [u64; 4], BuildFx> = HashMap::default();
    let mut on_path: HashMap<Option<slowlab_model::trace::StackIdx>, bool, BuildFx> =
        HashMap::default();
    let s = &trace.samples;
    for i in 0..s.len() {
        let proc = cx.process_of(s.thread[i]);
        let Some(p) = per.get(&proc) else { continue };
        let stack = s.stack[i];
        if !*on_path
            .entry(stack)
            .or_insert_with(|| cx.stack_has(stack, &on_alloc_path))
        {
            continue;
        }
        let k = p.topdown.partition_point(|&(t, _)| t < s.time_ns[i]);
        if k >= p.topdown.len() {
            continue; // after the last reservation
        }
        quarters.entry(proc).or_default()[k * 4 / p.topdown.len()] += 1;
    }
    let mut findings = Vec::new();
    for (proc, p) in per {
        let q = quarters.get(&proc).copied().unwrap_or_default();
        let path_samples: u64 = q.iter().sum();
        let n = p.topdown.len();
        // Reservations per quarter, as the samples were split.
        let count = |k: usize| (0..n).filter(|i| i * 4 / n == k).count().max(1) as f64;
        let per_alloc = |k: usize| (q[k] as f64 + 0.5) * cx.sample_s() / count(k);
        let (first, last) = (per_alloc(0), per_alloc(3));
        if path_samples < MIN_PATH_SAMPLES || last < GROWTH * first {
            continue;
        }
        let culprit = cx.culprit(proc);
        findings.push(cx.finding(
            "topdown-alloc",
            format!(
                "{} reserves memory top-down (VirtualAlloc MEM_TOP_DOWN): {n} reservations, up to \
                 {} live; each costs more as they pile up ({:.1} → {:.1} µs per reservation)",
                culprit.comm.as_deref().unwrap_or("?"),
                p.peak_live,
                first * 1e6,
                last * 1e6
            ),
            path_samples as f64 * cx.sample_s(),
            culprit,
            evidence! {
                "topdown_reservations" => n,
                "peak_live_reservations" => p.peak_live,
                "path_samples" => path_samples,
                "per_reservation_first_quarter_s" => first,
                "per_reservation_last_quarter_s" => last,
            },
            Vec::new(),
            "drop MEM_TOP_DOWN (let the system place the reservations), or reserve one large \
             range and commit from it",
        ));
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TraceBuilder;
    use slowlab_model::trace::Trace;

    /// server.exe makes `n` top-down 64 KiB reservations, never freed
    /// (`free` true: each released right away); the sampled time on the
    /// path before reservation i is `cost(i)` samples.
    fn trace(n: u64, free: bool, cost: impl Fn(u64) -> u64) -> Trace {
        let mut b = TraceBuilder::default();
        let p = b.process(70, "server.exe");
        let path = b.mixed_stack(
            &["main", "KernelBase.dll!VirtualAlloc"],
            &[
                "ntoskrnl.exe!NtAllocateVirtualMemory",
                "ntoskrnl.exe!MiFindEmptyAddressRangeDownTree",
            ],
        );
        let mut t = 0;
        for i in 0..n {
            for _ in 0..cost(i) {
                t += 1_000_000;
                b.sample(t, p, 0, path);
            }
            t += 1000;
            let base = 0x7fff_0000_0000 - i * 0x10000;
            b.syscall(
                t,
                p,
                None,
                "VirtualAlloc",
                [base, 0x10000, 0x10_2000, 70, 0, 0],
                0,
                0,
            );
            if free {
                b.syscall(
                    t + 10,
                    p,
                    None,
                    "VirtualFree",
                    [base, 0, 0x8000, 70, 0, 0],
                    0,
                    0,
                );
                t += 10;
            }
        }
        b.build()
    }

    #[test]
    fn growing_cost_with_live_reservations_is_found() {
        let t = trace(400, false, |i| i / 100);
        let f = detect(&Context::new(&t, None, None));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].id, "topdown-alloc");
        assert_eq!(f[0].evidence["peak_live_reservations"], 400);
        assert_eq!(f[0].evidence["path_samples"], 600);
    }

    #[test]
    fn flat_cost_or_freed_reservations_are_silent() {
        let none = |t: &Trace| detect(&Context::new(t, None, None)).is_empty();
        assert!(none(&trace(400, false, |i| u64::from(i % 4 == 0))));
        assert!(
            none(&trace(400, true, |i| i / 100)),
            "never more than one live"
        );
        assert!(none(&trace(MIN_TOPDOWN as u64 - 1, false, |i| i / 50)));
    }
}
