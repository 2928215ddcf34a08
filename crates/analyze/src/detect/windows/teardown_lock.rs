//! `teardown-lock` (Windows): threads blocked on win32k's global user lock
//! (`EnterCrit`) and readied by processes that are exiting: process
//! teardown of GUI processes takes the lock one process at a time, and
//! anything else that needs it (a monitor, the mouse) stalls.
//!
//! Signature and thresholds: waits (from CSwitch and ReadyThread) whose
//! blocking stack is in `EnterCrit` or `EnterSharedCrit`, readied by a
//! thread of an exiting process (its process ends within `EXIT_WINDOW_NS`
//! of the wake-up, or the readying stack is in thread or process exit).
//! Per blocked process: at least `MIN_TOTAL_S` blocked in all, a longest
//! wait of at least `MIN_MAX_S`, readied by at least `MIN_EXITING`
//! different exiting processes.
//!
//! Cost: the blocked time. Culprit: the program whose exiting processes
//! readied the most of it; evidence: "blocked for X s total, maximum was
//! Y s", as the original test program printed.

use std::collections::{BTreeSet, HashMap};

use slowlab_model::findings::Finding;
use slowlab_model::trace::{ProcIdx, StackIdx};

use super::bare;
use crate::detect::{heaviest, Context};
use crate::evidence;
use crate::select::BuildFx;

pub const MIN_TOTAL_S: f64 = 0.020;
pub const MIN_MAX_S: f64 = 0.010;
pub const MIN_EXITING: usize = 2;
/// A readying process that ends this soon after the wake-up was exiting.
pub const EXIT_WINDOW_NS: u64 = 1_000_000_000;

fn in_user_lock(name: &str) -> bool {
    matches!(bare(name), "EnterCrit" | "EnterSharedCrit")
}

fn in_exit(name: &str) -> bool {
    matches!(
        bare(name),
        "PspExitThread"
            | "PspExitProcess"
            | "PspTerminateProcess"
            | "NtTerminateProcess"
            | "xxxDestroyThreadInfo"
            | "DestroyProcessInfo"
            | "W32pProcessCallout"
            | "W32pThreadCallout"
            | "UserThreadCallout"
    )
}

#[derive(Default)]
struct Blocked {
    total_ns: u64,
    max_ns: u64,
    waits: u64,
    exiting: BTreeSet<ProcIdx>,
    /// Blocked ns readied by each exiting program (comm).
    by_program: HashMap<ProcIdx, u64, BuildFx>,
    stack: Option<StackIdx>,
}

pub fn detect(cx: &Context) -> Vec<Finding> {
    let trace = cx.trace;
    let mut per: HashMap<ProcIdx, Blocked, BuildFx> = HashMap::default();
    let (mut on_user_lock, mut exiting_stack) =
        (cx.stack_test(&in_user_lock), cx.stack_test(&in_exit));
    for w in &cx.schedule.waits {
        let Some(waker) = w.waker else { continue };
        if !on_user_lock(w.stack) {
            continue;
        }
        let waker_proc = cx.process_of(waker);
        let ends = trace.processes[waker_proc.ix()].end_ns;
        let exiting = ends.is_some_and(|e| e >= w.end_ns && e - w.end_ns <= EXIT_WINDOW_NS)
            || exiting_stack(w.waker_stack);
        if !exiting {
            continue;
        }
        let b = per.entry(cx.process_of(w.thread)).or_default();
        let len = w.end_ns - w.start_ns;
        b.total_ns += len;
        b.max_ns = b.max_ns.max(len);
        b.waits += 1;
        b.exiting.insert(waker_proc);
        *b.by_program.entry(waker_proc).or_default() += len;
        b.stack = b.stack.or(w.stack);
    }
    let mut findings = Vec::new();
    for (proc, b) in per {
        let (total_s, max_s) = (b.total_ns as f64 / 1e9, b.max_ns as f64 / 1e9);
        if total_s < MIN_TOTAL_S || max_s < MIN_MAX_S || b.exiting.len() < MIN_EXITING {
            continue;
        }
        // The program (by name) whose exiting processes readied the most.
        let mut by_comm: HashMap<&str, u64> = HashMap::new();
        for (p, ns) in &b.by_program {
            *by_comm
                .entry(trace.str(trace.processes[p.ix()].comm))
                .or_default() += ns;
        }
        let program = heaviest(by_comm.iter())
            .map_or("?", |(c, _)| *c)
            .to_string();
        let culprit_proc = b
            .by_program
            .iter()
            .filter(|(p, _)| trace.str(trace.processes[p.ix()].comm) == program)
            .max_by_key(|(_, ns)| **ns)
            .map(|(p, _)| *p);
        let victim = cx.culprit(proc);
        let culprit = culprit_proc.map(|p| cx.culprit(p)).unwrap_or_default();
        findings.push(cx.finding(
            "teardown-lock",
            format!(
                "{} blocked on win32k's user lock (EnterCrit) for {:.3} s total, maximum was \
                 {:.3} s, readied by {} exiting processes ({program})",
                victim.comm.as_deref().unwrap_or("?"),
                total_s,
                max_s,
                b.exiting.len()
            ),
            total_s,
            culprit,
            evidence! {
                "waits" => b.waits,
                "blocked_s" => total_s,
                "max_blocked_s" => max_s,
                "exiting_processes" => b.exiting.len(),
                "exiting_program" => program,
                "blocked_pid" => victim.pid,
                "blocked_comm" => victim.comm,
            },
            cx.names(b.stack),
            "end fewer GUI processes at once, keep short-lived processes from loading user32 \
             (they then need no win32k teardown), or move the waiting work off the user lock",
        ));
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TraceBuilder;
    use slowlab_model::trace::Trace;

    /// monitor.exe (tid 60) blocks in EnterCrit `n` times for `ms` each,
    /// readied each time by a different child.exe that exits right after
    /// (or, with `exiting` false, lives on).
    fn trace(n: u64, ms: u64, exiting: bool) -> Trace {
        let mut b = TraceBuilder::default();
        let monitor = b.process(60, "monitor.exe");
        let lock = b.mixed_stack(
            &["main", "GetCursorPos"],
            &[
                "NtUserGetCursorPos",
                "win32kbase.sys!EnterCrit",
                "KeWaitForSingleObject",
            ],
        );
        let exit = b.mixed_stack(&[], &["PspExitThread", "W32pThreadCallout", "LeaveCrit"]);
        let mut t = 0;
        for i in 0..n {
            let child = b.process(1000 + i as i32, "child.exe");
            let start = t + 1_000_000;
            let end = start + ms * 1_000_000;
            b.lifetime(child, Some(1), t, exiting.then_some(end + 100_000));
            b.switch(start, 0, 60, 1, 1000 + i as i32, lock);
            let ready_stack = if exiting { exit } else { None };
            b.waking(end, 0, child, 60, ready_stack);
            b.switch(end + 1000, 0, 1000 + i as i32, 0, 60, None);
            t = end + 2_000_000;
        }
        let _ = monitor;
        b.end(t);
        b.build()
    }

    #[test]
    fn waits_on_enter_crit_readied_by_exiting_processes_are_found() {
        let t = trace(5, 12, true);
        let f = detect(&Context::new(&t, None, None));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].id, "teardown-lock");
        assert_eq!(f[0].evidence["exiting_processes"], 5);
        assert_eq!(f[0].evidence["blocked_comm"], "monitor.exe");
        assert_eq!(f[0].culprit.comm.as_deref(), Some("child.exe"));
        assert!((f[0].cost_s - 0.060).abs() < 0.001, "{}", f[0].cost_s);
    }

    #[test]
    fn readied_by_living_processes_or_short_waits_is_silent() {
        assert!(detect(&Context::new(&trace(5, 12, false), None, None)).is_empty());
        // Long enough in all, but no wait reaches MIN_MAX_S.
        assert!(detect(&Context::new(&trace(10, 9, true), None, None)).is_empty());
        assert_eq!(
            detect(&Context::new(&trace(2, 10, true), None, None)).len(),
            1
        );
    }

    #[test]
    fn min_exiting_is_the_edge() {
        // Waits long enough in all and each: only the number of exiting
        // processes that ended them differs. (`MIN_TOTAL_S` has no edge of
        // its own: it equals MIN_EXITING waits of MIN_MAX_S.)
        let n = MIN_EXITING as u64;
        let ms = (MIN_TOTAL_S * 1000.0) as u64 + 5;
        assert!(detect(&Context::new(&trace(n - 1, ms, true), None, None)).is_empty());
        assert_eq!(
            detect(&Context::new(&trace(n, ms, true), None, None)).len(),
            1
        );
    }
}
