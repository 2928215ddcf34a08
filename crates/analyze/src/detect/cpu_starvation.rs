//! `cpu-starvation`: the root's critical path spends much of its time
//! runnable — ready to run, while other threads hold the CPUs.
//!
//! Signature and thresholds, on the critical path of the root process:
//! - runnable path time of at least [`MIN_PATH_SHARE`] of the root's wall
//!   time and 20 ms.
//!
//! Culprit: the process that ran on the CPUs most while the path was
//! runnable. Evidence: `victim` (`pid`, `comm`, `nice`), `runnable_s`,
//! `share_of_wall`, `instead` (up to three processes: `pid`, `comm`,
//! `cpu_s` they ran during those stretches, `share` of the CPU time then,
//! `nice`). Cost: `runnable_s`.

use std::collections::HashMap;

use slowlab_model::critical_path::SegmentState;
use slowlab_model::findings::Finding;
use slowlab_model::trace::{EventKind, ProcIdx, Trace};

use super::{enough_of_path, heaviest, Context, RootPath};
use crate::evidence;

pub const MIN_PATH_SHARE: f64 = 0.20;

/// The nice value a thread was last switched in with (`next_prio` − 120).
pub fn nice_of(trace: &Trace, tid: i32) -> Option<i32> {
    trace.events.iter().rev().find_map(|e| match e.kind {
        EventKind::Switch {
            next_tid,
            next_prio,
            ..
        } if next_tid == tid && (100..140).contains(&next_prio) => Some(next_prio - 120),
        _ => None,
    })
}

pub fn detect(cx: &Context, rp: &RootPath) -> Vec<Finding> {
    let trace = cx.trace;
    let path = &rp.path;
    let start = rp.window.0;
    // Saturating: a damaged trace's times of centuries must not overflow.
    let abs = |s: f64| start.saturating_add((s * 1e9).round() as u64);
    let mut runnable_s = 0.0;
    let mut victims: HashMap<i32, f64> = HashMap::new();
    let mut instead: HashMap<ProcIdx, u64> = HashMap::new();
    let mut cpu_ns_total = 0u64;
    for s in path
        .segments
        .iter()
        .filter(|s| s.state == SegmentState::Runnable)
    {
        runnable_s += s.duration_s();
        *victims.entry(s.pid).or_default() += s.duration_s();
        let Some(victim) = rp.thread(trace, s.tid) else {
            continue;
        };
        for (t, ns) in cx.states.ran_during(abs(s.from_s), abs(s.to_s), victim) {
            let on = instead.entry(trace.threads[t.ix()].process).or_default();
            *on = on.saturating_add(ns);
            cpu_ns_total = cpu_ns_total.saturating_add(ns);
        }
    }
    if !enough_of_path(runnable_s, path.wall_s, MIN_PATH_SHARE) {
        return Vec::new();
    }
    let mut ranked: Vec<(ProcIdx, u64)> = instead.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let Some(&(culprit, _)) = ranked.first() else {
        return Vec::new();
    };
    let Some((&victim_pid, _)) = heaviest(victims.iter()) else {
        return Vec::new();
    };
    let proc_nice = |p: ProcIdx| {
        let pid = trace.processes[p.ix()].pid;
        nice_of(trace, pid)
    };
    let victim_comm = trace
        .processes
        .iter()
        .rev()
        .find(|p| p.pid == victim_pid)
        .map(|p| trace.str(p.comm).to_string())
        .unwrap_or_default();
    let victim_nice = nice_of(trace, victim_pid);
    let rows: Vec<serde_json::Value> = ranked
        .iter()
        .take(3)
        .map(|&(p, ns)| {
            serde_json::json!({
                "pid": trace.processes[p.ix()].pid,
                "comm": trace.str(trace.processes[p.ix()].comm),
                "cpu_s": ns as f64 / 1e9,
                "share": ns as f64 / cpu_ns_total.max(1) as f64,
                "nice": proc_nice(p),
            })
        })
        .collect();
    let culprit_comm = trace.str(trace.processes[culprit.ix()].comm).to_string();
    let share = runnable_s / path.wall_s.max(1e-9);
    let nice_text = |n: Option<i32>| n.map(|n| format!(" (nice {n})")).unwrap_or_default();
    let title = format!(
        "{victim_comm}{} waits for a CPU {:.0}% of its {:.2} s while {culprit_comm} [{}]{} runs",
        nice_text(victim_nice),
        share * 100.0,
        path.wall_s,
        trace.processes[culprit.ix()].pid,
        nice_text(proc_nice(culprit)),
    );
    vec![cx.finding(
        "cpu-starvation",
        title,
        runnable_s,
        cx.culprit(culprit),
        evidence! {
            "victim" => serde_json::json!({"pid": victim_pid, "comm": victim_comm, "nice": victim_nice}),
            "runnable_s" => runnable_s,
            "share_of_wall" => share,
            "instead" => rows,
        },
        Vec::new(),
        "give the slow command the CPU: raise its priority (renice -n 0 -p PID) or lower the other's, or give each its own CPUs (taskset, cpusets)",
    )]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TraceBuilder;

    /// `calc` (pid 10, nice 10) and `hog` (pid 20, nice 0) share CPU 0:
    /// calc runs 1 ms, then the hog runs `hog_ms`, 20 times.
    fn shared_cpu(hog_ms: u64) -> slowlab_model::trace::Trace {
        shared_cpu_us(1000, hog_ms * 1000)
    }

    /// The same with calc running `calc_us` and the hog `hog_us` each time.
    fn shared_cpu_us(calc_us: u64, hog_us: u64) -> slowlab_model::trace::Trace {
        let us = |v: u64| v * 1000;
        let mut b = TraceBuilder::default();
        let calc = b.process(10, "calc");
        b.process(20, "hog");
        let end = us(20 * (calc_us + hog_us));
        b.lifetime(calc, None, 0, Some(end));
        let mut t = 0;
        for _ in 0..20 {
            b.switch_prio(t, 0, 20, 0, 10, 130, None);
            t += us(calc_us);
            b.switch_prio(t, 0, 10, 0x100, 20, 120, None);
            t += us(hog_us);
        }
        b.end(end);
        b.build()
    }

    fn findings(t: &slowlab_model::trace::Trace) -> Vec<Finding> {
        let cx = Context::new(t, None, None);
        let rp = RootPath::new(t, &cx.states, Some(ProcIdx(0))).unwrap();
        detect(&cx, &rp)
    }

    #[test]
    fn a_process_kept_off_the_cpu_names_who_ran_instead() {
        let f = findings(&shared_cpu(4));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].culprit.comm.as_deref(), Some("hog"));
        assert_eq!(f[0].evidence["victim"]["nice"], 10);
        assert_eq!(f[0].evidence["instead"][0]["nice"], 0);
        let share = f[0].evidence["share_of_wall"].as_f64().unwrap();
        assert!((share - 0.8).abs() < 0.01, "{share}");
    }

    #[test]
    fn a_little_runnable_time_is_not_starvation() {
        // 20 × 0.1 ms runnable against 20 ms of CPU.
        let mut t = shared_cpu(0);
        let mut k = 0;
        for e in t.events.iter_mut() {
            k += 1;
            e.time_ns += (k / 2) * 100_000;
        }
        t.meta.end_ns += 3_000_000;
        assert!(findings(&t).is_empty());
    }

    #[test]
    fn min_path_share_is_the_edge() {
        // Runnable 2.4 ms after each 10 ms on the CPU: 48 ms (above the
        // 20 ms floor) but 19.4% of the wall time; 2.6 ms: 20.6%.
        assert!(findings(&shared_cpu_us(10_000, 2_400)).is_empty());
        assert_eq!(findings(&shared_cpu_us(10_000, 2_600)).len(), 1);
    }

    #[test]
    fn the_20_ms_floor_is_the_edge() {
        // Half the wall time runnable, but 19 ms in all; then 21 ms.
        assert!(findings(&shared_cpu_us(1_000, 950)).is_empty());
        assert_eq!(findings(&shared_cpu_us(1_000, 1_050)).len(), 1);
    }
}
