//! The walker on hand-built traces: a wait that jumps to its waker, a chain
//! of three, a cycle, a wait on a child, runnable time and who ran instead,
//! a trace that ends mid-wait, and a timer that ends a sleep; which process is
//! the root. (Poll loops and time-outs that raced with another thread's wake:
//! `time_out_tests`; waits a signal ended, and who killed the root:
//! `signal_tests`.)

use super::*;
use crate::testutil::TraceBuilder;

pub(super) fn ms(v: u64) -> u64 {
    v * 1_000_000
}

pub(super) fn path(t: &Trace, pid: i32) -> CriticalPath {
    let states = ThreadStates::build(t);
    let root = process_by_pid(t, pid).unwrap();
    critical_path(t, &states, root).unwrap()
}

/// (tid, state, kind, from ms, to ms) of each segment.
pub(super) fn shape(p: &CriticalPath) -> Vec<(i32, SegmentState, Option<WaitKind>, u64, u64)> {
    p.segments
        .iter()
        .map(|s| {
            (
                s.tid,
                s.state,
                s.kind,
                (s.from_s * 1e3).round() as u64,
                (s.to_s * 1e3).round() as u64,
            )
        })
        .collect()
}

pub(super) fn assert_adds_up(p: &CriticalPath) {
    let sum: f64 = p.segments.iter().map(Segment::duration_s).sum();
    assert!((sum - p.wall_s).abs() < 1e-9, "{sum} vs {}", p.wall_s);
    let b = &p.breakdown;
    assert!((b.cpu + b.runnable + b.blocked.total() - p.wall_s).abs() < 1e-9);
    for w in p.segments.windows(2) {
        assert!((w[0].to_s - w[1].from_s).abs() < 1e-12, "{w:?}");
    }
}

use SegmentState::{Blocked, Cpu, Runnable};

#[test]
fn a_blocked_stretch_continues_in_its_waker() {
    let mut b = TraceBuilder::default();
    let a = b.process(10, "consumer");
    let p = b.process(20, "producer");
    b.lifetime(a, None, 0, Some(ms(100)));
    let pipe = b.stack(&["vfs_read", "pipe_read", "schedule"]);
    let write = b.stack(&["pipe_write", "__wake_up_common"]);
    let digest = b.stack(&["main", "slow_digest"]);
    b.switch(ms(0), 0, 0, 0, 10, None);
    b.switch(ms(10), 0, 10, 1, 20, pipe);
    for t in 11..60 {
        b.sample(ms(t), p, 0, digest);
    }
    b.waking(ms(60), 0, p, 10, write);
    b.switch(ms(62), 0, 20, 0, 10, None);
    b.end(ms(100));
    let t = b.build();
    let cp = path(&t, 10);
    assert_eq!(
        shape(&cp),
        vec![
            (10, Cpu, None, 0, 10),
            (20, Cpu, None, 10, 60),
            (10, Runnable, None, 60, 62),
            (10, Cpu, None, 62, 100),
        ]
    );
    let hop = &cp.segments[1];
    assert_eq!(hop.depth, 1);
    assert_eq!(hop.via, Some(WaitKind::Ipc));
    assert_eq!(hop.waiter.as_ref().unwrap().tid, 10);
    assert_eq!(hop.top_function.as_deref(), Some("slow_digest"));
    assert_eq!(cp.segments[2].ran_instead.as_ref().unwrap().tid, 20);
    assert!((cp.breakdown.cpu - 0.098).abs() < 1e-9);
    assert!((cp.breakdown.runnable - 0.002).abs() < 1e-9);
    assert_adds_up(&cp);
    assert!(
        cp.summary
            .starts_with("`consumer` ran 0.10 s: 50% on a CPU in producer (slow_digest)"),
        "{}",
        cp.summary
    );
}

#[test]
fn a_chain_of_three_is_followed_to_its_end() {
    let mut b = TraceBuilder::default();
    let a = b.process(10, "a");
    let bb = b.process(20, "b");
    let c = b.process(30, "c");
    b.lifetime(a, None, 0, Some(ms(100)));
    let futex = b.stack(&["do_futex", "futex_wait_queue", "schedule"]);
    let pipe = b.stack(&["pipe_read", "schedule"]);
    let wake = b.stack(&["futex_wake"]);
    b.switch(ms(0), 0, 0, 0, 10, None); // a runs on cpu 0
    b.switch(ms(0), 1, 0, 0, 20, None); // b runs on cpu 1
    b.switch(ms(10), 0, 10, 1, 30, futex); // a blocks on a lock, c runs
    b.switch(ms(20), 1, 20, 1, 0, pipe); // b blocks on a pipe
    b.waking(ms(70), 0, c, 20, wake); // c wakes b
    b.switch(ms(70), 1, 0, 0, 20, None);
    b.waking(ms(80), 1, bb, 10, wake); // b wakes a
    b.switch(ms(80), 0, 30, 1, 10, pipe);
    b.end(ms(100));
    let t = b.build();
    let cp = path(&t, 10);
    assert_eq!(
        shape(&cp),
        vec![
            (10, Cpu, None, 0, 10),
            (20, Cpu, None, 10, 20),
            (30, Cpu, None, 20, 70),
            (20, Cpu, None, 70, 80),
            (10, Cpu, None, 80, 100),
        ]
    );
    assert_eq!(cp.segments[2].depth, 2);
    assert_eq!(cp.segments[2].via, Some(WaitKind::Ipc));
    assert_eq!(cp.segments[1].via, Some(WaitKind::Lock));
    assert_adds_up(&cp);
}

#[test]
fn a_cycle_stops_at_the_thread_already_on_the_chain() {
    // The replay cannot produce a cycle (a waker runs when it wakes), but a
    // waker misread from interrupt context could: states made by hand, in
    // which b's wait "ended by a" lies inside a's own wait for b.
    use crate::states::{BlockedSpan, Span};
    let mut b = TraceBuilder::default();
    let a = b.process(10, "a");
    let bb = b.process(20, "b");
    b.lifetime(a, None, 0, Some(ms(60)));
    let futex = b.stack(&["futex_wait_queue", "schedule"]);
    b.end(ms(60));
    let t = b.build();
    let blocked = |waker| {
        SpanState::Blocked(BlockedSpan {
            stack: futex,
            task_state: 1,
            woken: true,
            waker: Some(waker),
            waker_stack: None,
            call: None,
            waker_call: None,
        })
    };
    let span = |from, to, state| Span {
        start_ns: ms(from),
        end_ns: ms(to),
        state,
    };
    let states = ThreadStates {
        spans: vec![
            vec![
                span(0, 10, SpanState::Running { cpu: 0 }),
                span(10, 50, blocked(bb)),
                span(50, 60, SpanState::Running { cpu: 0 }),
            ],
            vec![
                span(5, 30, blocked(a)),
                span(30, 50, SpanState::Running { cpu: 1 }),
            ],
        ],
        cpu_runs: vec![vec![(0, Some(a))], vec![(0, Some(bb))]],
        end_ns: ms(60),
        calls: Vec::new(),
    };
    let cp = critical_path(&t, &states, ProcIdx(0)).unwrap();
    assert_eq!(
        shape(&cp),
        vec![
            (10, Cpu, None, 0, 10),
            (20, Blocked, Some(WaitKind::Lock), 10, 30),
            (20, Cpu, None, 30, 50),
            (10, Cpu, None, 50, 60),
        ]
    );
    assert_eq!(cp.segments[1].woken_by.as_ref().unwrap().tid, 10);
    assert_adds_up(&cp);
}

#[test]
fn a_thread_seen_on_a_cpu_without_its_switch_in_was_running() {
    // perf drops switches and wake-ups raised on an idle CPU: a sleeper
    // that then makes a syscall was switched in, by an unknown waker.
    let mut b = TraceBuilder::default();
    let a = b.process(10, "retry");
    b.lifetime(a, None, 0, Some(ms(100)));
    let sleep = b.stack(&["hrtimer_nanosleep", "do_nanosleep", "schedule"]);
    b.switch(ms(0), 0, 0, 0, 10, None);
    b.switch(ms(10), 0, 10, 1, 0, sleep);
    b.sample(ms(31), a, 0, None); // no switch-in before this sample
    b.switch(ms(40), 0, 10, 1, 0, sleep);
    b.end(ms(100));
    let t = b.build();
    let cp = path(&t, 10);
    assert_eq!(
        shape(&cp),
        vec![
            (10, Cpu, None, 0, 10),
            (10, Blocked, Some(WaitKind::Sleep), 10, 31),
            (10, Cpu, None, 31, 40),
            (10, Blocked, Some(WaitKind::Sleep), 40, 100),
        ]
    );
    assert_eq!(cp.segments[1].ended_by.as_deref(), Some("interrupt"));
    assert_eq!(cp.segments[3].ended_by, None);
    assert_adds_up(&cp);
}

#[test]
fn a_wait_for_a_child_continues_in_the_child() {
    let mut b = TraceBuilder::default();
    let sh = b.process(10, "sh");
    let child = b.process(11, "worker");
    b.lifetime(sh, None, 0, Some(ms(100)));
    b.lifetime(child, Some(10), ms(10), Some(ms(90)));
    let wait = b.stack(&["kernel_wait4", "do_wait", "schedule"]);
    let exit = b.stack(&["do_exit", "exit_notify", "__wake_up_parent"]);
    b.switch(ms(0), 0, 0, 0, 10, None);
    b.switch(ms(10), 0, 10, 1, 0, wait);
    b.switch(ms(12), 1, 0, 0, 11, None);
    b.waking(ms(90), 1, child, 10, exit);
    b.switch(ms(90), 1, 11, 16, 0, None);
    b.switch(ms(91), 0, 0, 0, 10, None);
    b.end(ms(100));
    let t = b.build();
    let cp = path(&t, 10);
    assert_eq!(
        shape(&cp),
        vec![
            (10, Cpu, None, 0, 10),
            (11, Runnable, None, 10, 12),
            (11, Cpu, None, 12, 90),
            (10, Runnable, None, 90, 91),
            (10, Cpu, None, 91, 100),
        ]
    );
    assert_eq!(cp.segments[2].via, Some(WaitKind::Ipc));
    assert_adds_up(&cp);
}

#[test]
fn runnable_time_names_who_ran_instead() {
    let mut b = TraceBuilder::default();
    let a = b.process(10, "victim");
    b.process(20, "hog");
    b.lifetime(a, None, 0, Some(ms(50)));
    b.switch(ms(0), 0, 0, 0, 10, None);
    b.switch(ms(0), 1, 0, 0, 20, None);
    b.switch(ms(10), 0, 10, 0x100, 20, None); // preempted by the hog
    b.switch(ms(40), 0, 20, 0, 10, None);
    b.end(ms(50));
    let t = b.build();
    let cp = path(&t, 10);
    assert_eq!(
        shape(&cp),
        vec![
            (10, Cpu, None, 0, 10),
            (10, Runnable, None, 10, 40),
            (10, Cpu, None, 40, 50),
        ]
    );
    assert_eq!(cp.segments[1].ran_instead.as_ref().unwrap().comm, "hog");
    assert!((cp.breakdown.runnable - 0.030).abs() < 1e-9);
    assert_adds_up(&cp);
}

#[test]
fn a_trace_that_ends_mid_wait_keeps_the_open_wait() {
    let mut b = TraceBuilder::default();
    let r = b.process(10, "reader");
    b.lifetime(r, None, 0, None);
    let pipe = b.stack(&["pipe_read", "schedule"]);
    b.switch(ms(0), 0, 0, 0, 10, None);
    b.switch(ms(50), 0, 10, 1, 0, pipe);
    b.end(ms(100));
    let t = b.build();
    let cp = path(&t, 10);
    assert_eq!(
        shape(&cp),
        vec![
            (10, Cpu, None, 0, 50),
            (10, Blocked, Some(WaitKind::Ipc), 50, 100)
        ]
    );
    assert_eq!(cp.segments[1].woken_by, None);
    assert_eq!(cp.segments[1].blocked_in.as_deref(), Some("pipe_read"));
    assert_adds_up(&cp);
}

#[test]
fn a_sleep_ended_by_a_timer_is_not_followed_into_the_interrupted_thread() {
    let mut b = TraceBuilder::default();
    let a = b.process(10, "retry");
    let other = b.process(20, "bystander");
    b.lifetime(a, None, 0, Some(ms(100)));
    let sleep = b.stack(&["hrtimer_nanosleep", "do_nanosleep", "schedule"]);
    let timer = b.stack(&[
        "asm_sysvec_apic_timer_interrupt",
        "hrtimer_interrupt",
        "__hrtimer_run_queues",
        "hrtimer_wakeup",
    ]);
    b.switch(ms(0), 0, 0, 0, 10, None);
    b.switch(ms(0), 1, 0, 0, 20, None);
    b.switch(ms(20), 0, 10, 1, 0, sleep);
    b.waking(ms(70), 1, other, 10, timer);
    b.switch(ms(70), 0, 0, 0, 10, None);
    b.end(ms(100));
    let t = b.build();
    let cp = path(&t, 10);
    assert_eq!(
        shape(&cp),
        vec![
            (10, Cpu, None, 0, 20),
            (10, Blocked, Some(WaitKind::Sleep), 20, 70),
            (10, Cpu, None, 70, 100),
        ]
    );
    assert_eq!(cp.segments[1].ended_by.as_deref(), Some("timer"));
    assert_eq!(cp.segments[1].woken_by, None);
    assert!((cp.breakdown.blocked.sleep - 0.05).abs() < 1e-9);
    assert!(cp.summary.contains("50% sleeping"), "{}", cp.summary);
    assert_adds_up(&cp);
}

#[test]
fn roots_default_to_the_recorded_command_else_the_longest_process_started() {
    let mut b = TraceBuilder::default();
    let short = b.process(10, "short");
    let long = b.process(11, "long");
    b.process(1, "init");
    b.lifetime(short, None, ms(10), Some(ms(20)));
    b.lifetime(long, None, ms(5), Some(ms(80)));
    b.switch(ms(0), 0, 0, 0, 1, None);
    b.end(ms(100));
    let mut t = b.build();
    assert_eq!(default_root(&t), Some(ProcIdx(1)));
    assert_eq!(process_by_pid(&t, 99), Err(PathError::NoSuchPid(99)));
    // A trace that names the command it ran is rooted there, however short.
    t.meta.command_pid = Some(10);
    assert_eq!(default_root(&t), Some(ProcIdx(0)));
    // A pid the trace does not have: the longest again.
    t.meta.command_pid = Some(99);
    assert_eq!(default_root(&t), Some(ProcIdx(1)));
}

#[test]
fn a_perf_trace_is_rooted_at_the_command_after_the_double_dash_of_its_command_line() {
    let mut b = TraceBuilder::default();
    let perf = b.process(5, "perf");
    let long = b.process(11, "cc1");
    let command = b.process(12, "make");
    b.lifetime(perf, None, ms(1), Some(ms(90)));
    b.lifetime(long, None, ms(5), Some(ms(80)));
    b.lifetime(command, Some(5), ms(10), Some(ms(30)));
    b.switch(ms(0), 0, 0, 0, 5, None);
    b.end(ms(100));
    let mut t = b.build();
    t.processes[2].exec_ns = Some(ms(11));
    // Without a command line, the longest process that started: perf itself.
    assert_eq!(default_root(&t), Some(ProcIdx(0)));
    // `perf record -a -- make -j2`: perf's child that exec'd, though shorter.
    t.meta.cmdline = ["perf", "record", "-a", "--", "/usr/bin/make", "-j2"]
        .map(String::from)
        .to_vec();
    assert_eq!(default_root(&t), Some(ProcIdx(2)));
    assert_eq!(command_root(&t, &["make".into()]), Some(ProcIdx(2)));
    // A command line with nothing after `--` names no command.
    t.meta.cmdline.truncate(4);
    assert_eq!(default_root(&t), Some(ProcIdx(0)));
}

#[test]
fn a_wake_up_without_a_tid_comes_from_the_thread_on_that_cpu() {
    // An exiting child's wake-up of its parent is recorded with tid -1.
    let mut b = TraceBuilder::default();
    let sh = b.process(10, "sh");
    let child = b.process(11, "child");
    let ghost = b.process(-1, ":-1");
    b.lifetime(sh, None, 0, Some(ms(100)));
    b.lifetime(child, Some(10), ms(5), Some(ms(80)));
    let wait = b.stack(&["kernel_wait4", "do_wait", "schedule"]);
    b.switch(ms(0), 0, 0, 0, 10, None);
    b.switch(ms(10), 0, 10, 1, 11, wait);
    b.waking(ms(80), 0, ghost, 10, None);
    b.switch(ms(80), 0, 11, 16, 10, None);
    b.end(ms(100));
    let t = b.build();
    let cp = path(&t, 10);
    assert_eq!(
        shape(&cp),
        vec![
            (10, Cpu, None, 0, 10),
            (11, Cpu, None, 10, 80),
            (10, Cpu, None, 80, 100),
        ]
    );
}

#[test]
fn the_roots_time_before_its_first_scheduler_event_is_marked_unknown() {
    let mut b = TraceBuilder::default();
    let a = b.process(10, "late");
    b.lifetime(a, None, 0, Some(ms(100)));
    let pipe = b.stack(&["vfs_read", "pipe_read", "schedule"]);
    // Its first event is its switch away at 40 ms, into a wait on a pipe
    // nobody in the trace writes, on a CPU that last switched at 5 ms: it ran
    // from 5 ms, and before that its state is not known. It runs again from
    // 60 ms.
    b.switch(ms(5), 0, 20, 0, 30, None);
    b.switch(ms(40), 0, 10, 1, 0, pipe);
    b.switch(ms(60), 0, 0, 0, 10, None);
    b.end(ms(100));
    let t = b.build();
    let cp = path(&t, 10);
    assert_eq!(
        shape(&cp),
        vec![
            (10, Blocked, Some(WaitKind::Other), 0, 5),
            (10, Cpu, None, 5, 40),
            (10, Blocked, Some(WaitKind::Ipc), 40, 60),
            (10, Cpu, None, 60, 100),
        ]
    );
    let unknown: Vec<bool> = cp.segments.iter().map(|s| s.unknown).collect();
    assert_eq!(
        unknown,
        [true, false, false, false],
        "only the first is not known"
    );
    assert!((cp.unknown_s - 0.005).abs() < 1e-9);
    assert_adds_up(&cp);
    // It is said so in JSON, and a known segment says nothing of it.
    let json = serde_json::to_value(&cp.segments).unwrap();
    assert_eq!(json[0]["unknown"], true);
    assert!(json[2].get("unknown").is_none(), "{}", json[2]);
}
