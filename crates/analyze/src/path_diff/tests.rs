//! `diff_paths` on paths made in memory: the matching rules, the sums,
//! the interval and the words.

use super::*;
use slowlab_model::critical_path::{Breakdown, PathRoot, PathThread, Segment};

/// A stretch of `secs` seconds: (pid, tid, thread comm, state, kind,
/// function or blocked_in).
type Stretch<'a> = (
    i32,
    i32,
    &'a str,
    SegmentState,
    Option<WaitKind>,
    Option<&'a str>,
    f64,
);

fn cpu<'a>(pid: i32, tid: i32, comm: &'a str, f: &'a str, secs: f64) -> Stretch<'a> {
    (pid, tid, comm, SegmentState::Cpu, None, Some(f), secs)
}

fn wait<'a>(pid: i32, tid: i32, comm: &'a str, k: WaitKind, at: &'a str, secs: f64) -> Stretch<'a> {
    (
        pid,
        tid,
        comm,
        SegmentState::Blocked,
        Some(k),
        Some(at),
        secs,
    )
}

/// A path rooted at the first stretch's process, its segments back to
/// back.
fn path(stretches: &[Stretch]) -> CriticalPath {
    let mut t = 0.0;
    let segments: Vec<Segment> = stretches
        .iter()
        .map(|&(pid, tid, comm, state, kind, f, secs)| {
            let s = Segment {
                from_s: t,
                to_s: t + secs,
                pid,
                tid,
                comm: comm.to_string(),
                state,
                kind,
                top_function: (state == SegmentState::Cpu).then(|| f.unwrap().to_string()),
                woken_by: None,
                ended_by: None,
                ran_instead: None,
                blocked_in: (state == SegmentState::Blocked).then(|| f.unwrap().to_string()),
                depth: 0,
                via: None,
                waiter: None,
                resource: None,
                via_resource: None,
                holding: None,
                unknown: false,
            };
            t += secs;
            s
        })
        .collect();
    let (pid, tid, comm) = (stretches[0].0, stretches[0].1, stretches[0].2);
    CriticalPath {
        wall_s: t,
        root: PathRoot {
            pid,
            tid,
            comm: comm.to_string(),
            start_s: 0.0,
        },
        breakdown: Breakdown::default(),
        segments,
        parts: Vec::new(),
        summary: String::new(),
        unknown_s: 0.0,
        killed: None,
    }
}

fn one(a: CriticalPath, b: CriticalPath) -> PathDiff {
    diff_paths(&[Run::new(a)], &[Run::new(b)]).unwrap()
}

fn find<'a>(d: &'a PathDiff, thread: &str, what: &str) -> &'a Cause {
    d.causes
        .iter()
        .find(|c| {
            c.key.thread == thread
                && (c.key.function.as_deref() == Some(what)
                    || c.key.resource.as_deref() == Some(what))
        })
        .unwrap_or_else(|| panic!("no cause {thread}/{what}: {d:#?}"))
}

fn assert_sums(d: &PathDiff) {
    let sum: f64 = d.causes.iter().map(|c| c.change.delta_s).sum();
    assert!(
        (sum - (d.b.wall_s - d.a.wall_s)).abs() < 1e-9,
        "{sum} vs {d:#?}"
    );
    assert!((d.delta_s - (d.b.wall_s - d.a.wall_s)).abs() < 1e-9);
}

#[test]
fn a_process_with_another_pid_but_the_same_name_is_matched() {
    let a = path(&[
        cpu(100, 100, "app", "work", 1.0),
        wait(100, 100, "app", WaitKind::Io, "fsync", 0.2),
    ]);
    let b = path(&[
        cpu(200, 200, "app", "work", 1.0),
        wait(200, 200, "app", WaitKind::Io, "fsync", 0.9),
    ]);
    let d = one(a, b);
    assert_sums(&d);
    assert_eq!(d.causes.len(), 2, "{d:#?}");
    let first = &d.causes[0].key;
    assert_eq!(
        (first.state, first.kind),
        (SegmentState::Blocked, Some(WaitKind::Io))
    );
    assert_eq!(first.resource.as_deref(), Some("fsync"));
    assert!((d.causes[0].change.delta_s - 0.7).abs() < 1e-12);
    assert_eq!(find(&d, "app", "work").change.delta_s, 0.0);
    assert!(
        d.summary.starts_with(
            "B took 0.70 s longer (1.20 → 1.90 s): +0.70 s waiting for the disk in fsync (app)"
        ),
        "{}",
        d.summary
    );
    assert!(d.significant);
    assert_eq!(d.warnings.len(), 1, "one run per side: noise unknown");
}

#[test]
fn a_disk_wait_split_across_kernel_functions_is_one_group() {
    let a = path(&[
        cpu(1, 1, "app", "work", 1.0),
        wait(1, 1, "app", WaitKind::Io, "bit_wait_io", 0.01),
    ]);
    let b = path(&[
        cpu(1, 1, "app", "work", 1.07),
        wait(1, 1, "app", WaitKind::Io, "bit_wait_io", 0.04),
        wait(1, 1, "app", WaitKind::Io, "jbd2_log_wait_commit", 0.06),
        wait(1, 1, "app", WaitKind::Io, "wait_for_completion_io", 0.05),
    ]);
    let d = one(a, b);
    assert_sums(&d);
    // No one kernel function grew as much as the CPU did...
    assert_eq!(d.causes[0].key.function.as_deref(), Some("work"));
    // ...but the disk wait did, and the answer says so first.
    let g = &d.groups[0];
    assert_eq!(
        (g.state, g.kind),
        (SegmentState::Blocked, Some(WaitKind::Io))
    );
    assert!((g.change.delta_s - 0.14).abs() < 1e-12, "{g:?}");
    assert_eq!(g.mostly.as_deref(), Some("jbd2_log_wait_commit"));
    let sum: f64 = d.groups.iter().map(|g| g.change.delta_s).sum();
    assert!((sum - d.delta_s).abs() < 1e-9);
    assert!(
        d.summary.starts_with(
            "B took 0.21 s longer (1.01 → 1.22 s): +0.14 s waiting for the disk in \
             jbd2_log_wait_commit (app); +0.07 s on a CPU in work (app)"
        ),
        "{}",
        d.summary
    );
}

#[test]
fn a_renamed_process_is_two_causes() {
    let a = path(&[cpu(100, 100, "app", "work", 1.0)]);
    let b = path(&[cpu(100, 100, "app2", "work", 1.1)]);
    let d = one(a, b);
    assert_sums(&d);
    assert_eq!(d.causes.len(), 2, "{d:#?}");
    assert!((find(&d, "app", "work").change.delta_s + 1.0).abs() < 1e-12);
    assert!((find(&d, "app2", "work").change.delta_s - 1.1).abs() < 1e-12);
    assert!(
        d.warnings.iter().any(|w| w.contains("roots differ")),
        "{:?}",
        d.warnings
    );
}

#[test]
fn a_thread_only_in_b_is_a_cause_of_its_own_named_by_its_process() {
    // B's path runs through a new thread `flusher` of the root's
    // process: a cause of its own, its process named by the root.
    let a = path(&[cpu(10, 10, "srv", "serve", 0.5)]);
    let b = path(&[
        cpu(20, 20, "srv", "serve", 0.5),
        cpu(20, 23, "flusher", "flush_all", 0.3),
    ]);
    let d = one(a, b);
    assert_sums(&d);
    let c = &d.causes[0];
    assert_eq!(c.key.process, "srv");
    assert_eq!(c.key.thread, "flusher");
    assert_eq!(c.key.function.as_deref(), Some("flush_all"));
    assert_eq!(c.change.a_s, 0.0);
    assert!((c.change.b_s - 0.3).abs() < 1e-12);
    assert!(
        d.summary
            .contains("+0.30 s on a CPU in flush_all (srv, thread flusher)"),
        "{}",
        d.summary
    );
}

#[test]
fn a_process_not_shown_by_its_main_thread_is_named_by_its_lowest_thread() {
    let mut b = path(&[
        cpu(20, 20, "srv", "serve", 0.5),
        cpu(30, 32, "w-a", "crunch", 0.2),
        cpu(30, 31, "w-b", "crunch", 0.1),
    ]);
    let d = one(path(&[cpu(20, 20, "srv", "serve", 0.5)]), b.clone());
    assert!(
        d.causes
            .iter()
            .filter(|c| c.key.thread.starts_with("w-"))
            .all(|c| c.key.process == "w-b"),
        "{d:#?}"
    );
    // Where the path names the main thread (here as a waker), that name wins.
    b.segments[0].woken_by = Some(PathThread {
        pid: 30,
        tid: 30,
        comm: "pool".into(),
    });
    let d = one(path(&[cpu(20, 20, "srv", "serve", 0.5)]), b);
    assert!(
        d.causes
            .iter()
            .filter(|c| c.key.thread.starts_with("w-"))
            .all(|c| c.key.process == "pool"),
        "{d:#?}"
    );
}

#[test]
fn a_cause_that_moved_to_another_thread_is_a_loss_and_a_gain() {
    let a = path(&[
        wait(1, 1, "app", WaitKind::Ipc, "futex_wait", 0.4),
        cpu(1, 2, "worker-1", "render_page", 0.4),
    ]);
    let b = path(&[
        wait(1, 1, "app", WaitKind::Ipc, "futex_wait", 0.45),
        cpu(1, 3, "worker-2", "render_page", 0.45),
    ]);
    let d = one(a, b);
    assert_sums(&d);
    assert!((find(&d, "worker-1", "render_page").change.delta_s + 0.4).abs() < 1e-12);
    assert!((find(&d, "worker-2", "render_page").change.delta_s - 0.45).abs() < 1e-12);
    assert!((find(&d, "app", "futex_wait").change.delta_s - 0.05).abs() < 1e-12);
    // Largest change first, whatever its sign.
    assert_eq!(d.causes[0].key.thread, "worker-2");
    assert_eq!(d.causes[1].key.thread, "worker-1");
}

#[test]
fn deltas_add_up_to_the_wall_delta_with_many_causes_and_runs() {
    let mk = |x: f64| {
        path(&[
            cpu(5, 5, "p", "a", 0.11 * x),
            wait(5, 5, "p", WaitKind::Lock, "futex_wait", 0.07 + x / 3.0),
            (5, 5, "p", SegmentState::Runnable, None, None, 0.013 * x),
            wait(5, 6, "q", WaitKind::Sleep, "hrtimer_nanosleep", 0.2 / x),
            cpu(7, 7, "other", "b", 0.031),
            wait(5, 5, "p", WaitKind::Fault, "folio_wait", 0.001 * x),
        ])
    };
    let a: Vec<Run> = [1.0, 1.1, 0.9].map(|x| Run::new(mk(x))).into();
    let b: Vec<Run> = [2.0, 2.3, 1.7, 2.1].map(|x| Run::new(mk(x))).into();
    let d = diff_paths(&a, &b).unwrap();
    assert_sums(&d);
    assert_eq!(d.causes.len(), 6);
    assert!(d.warnings.is_empty(), "{:?}", d.warnings);
}

#[test]
fn a_resource_names_the_wait_and_its_holder_instead_of_blocked_in() {
    let a = path(&[wait(1, 1, "app", WaitKind::Lock, "futex_wait", 0.2)]);
    let mut v = serde_json::to_value(&a).unwrap();
    v["segments"][0]["resource"] = serde_json::json!({
        "kind": "mutex", "address": "0x7f00", "name": "cache_lock",
        "holder": {"pid": 1, "tid": 2, "comm": "w"}
    });
    let run = Run::from_json(&v).unwrap();
    assert_eq!(
        run.resources,
        vec![Some("mutex cache_lock (w)".to_string())]
    );
    let d = diff_paths(&[Run::new(a)], &[run]).unwrap();
    assert!(find(&d, "app", "mutex cache_lock (w)").change.delta_s == 0.2);
    assert!(find(&d, "app", "futex_wait").change.delta_s == -0.2);
}

#[test]
fn a_change_inside_the_runs_noise_is_not_significant() {
    let mk = |x: f64| Run::new(path(&[cpu(1, 1, "app", "work", x)]));
    let a: Vec<Run> = [1.00, 1.06, 0.97].map(mk).into();
    let b: Vec<Run> = [1.04, 0.99, 1.08].map(mk).into();
    let d = diff_paths(&a, &b).unwrap();
    assert!(!d.significant);
    assert!(!d.causes[0].change.significant);
    let [lo, hi] = d.interval.unwrap();
    assert!(lo < 0.0 && hi > 0.0, "{lo} {hi}");
    assert!(
        d.summary.starts_with("No significant change"),
        "{}",
        d.summary
    );
    // Runs apart but by less than their own spread: still noise.
    let b: Vec<Run> = [1.07, 1.12, 1.16].map(mk).into();
    let d = diff_paths(&a, &b).unwrap();
    assert!(!d.significant, "{d:#?}");
    // Clearly apart: significant, and the interval is every pairing's.
    let b: Vec<Run> = [1.50, 1.55, 1.52].map(mk).into();
    let d = diff_paths(&a, &b).unwrap();
    assert!(d.significant);
    let [lo, hi] = d.interval.unwrap();
    assert!((lo - (1.50 - 1.06)).abs() < 1e-12 && (hi - (1.55 - 0.97)).abs() < 1e-12);
}

#[test]
fn one_run_per_side_counts_changes_of_two_percent_and_warns() {
    let d = one(
        path(&[cpu(1, 1, "app", "work", 1.0)]),
        path(&[cpu(1, 1, "app", "work", 1.015)]),
    );
    assert!(!d.significant);
    assert!(d.interval.is_none());
    assert!(
        d.warnings[0].contains("noise is unknown"),
        "{:?}",
        d.warnings
    );
    let d = one(
        path(&[cpu(1, 1, "app", "work", 1.0)]),
        path(&[cpu(1, 1, "app", "work", 0.9)]),
    );
    assert!(d.significant);
    assert!(
        d.summary.starts_with("B took 0.10 s less (1.00 → 0.90 s)"),
        "{}",
        d.summary
    );
}

#[test]
fn no_runs_no_diff() {
    assert!(diff_paths(&[], &[Run::new(path(&[cpu(1, 1, "a", "f", 1.0)]))]).is_none());
}

#[test]
fn the_json_has_the_documented_fields() {
    let d = one(
        path(&[cpu(1, 1, "app", "work", 1.0)]),
        path(&[cpu(1, 1, "app", "work", 1.5)]),
    );
    let v = serde_json::to_value(&d).unwrap();
    for k in ["a", "b", "delta_s", "significant", "causes"] {
        assert!(v.get(k).is_some(), "{k}: {v}");
    }
    assert!(v["a"]["wall_s"].is_f64());
    let c = &v["causes"][0];
    for k in [
        "state", "kind", "process", "thread", "function", "resource", "a_s", "b_s", "delta_s",
        "interval",
    ] {
        assert!(c.get(k).is_some(), "{k}: {c}");
    }
    assert_eq!(c["state"], "cpu");
    assert!(c["kind"].is_null() && c["interval"].is_null());
}
