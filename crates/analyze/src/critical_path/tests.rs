//! The walker on hand-built traces: a wait that jumps to its waker, a chain
//! of three, a cycle, a wait on a child, runnable time and who ran instead,
//! a trace that ends mid-wait, and a timer that ends a sleep; waits that a
//! time-out or the trace's end ended, and time-outs that raced with another
//! thread's wake. (Waits a signal ended, and who killed the root:
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

/// Like cargo: a 20 ms timed futex wait of a boss (10) times out at 30
/// and 51 ms, waited again at `rewait` and 52 ms, then its worker (20)
/// ends the third wait at 60. With `calls`, the futex calls are in the
/// trace, the first time-out's returning `calls` ns after the switch in.
fn cargo_poll_loop(rewait: u64, calls: Option<u64>) -> CriticalPath {
    let mut b = TraceBuilder::default();
    let boss = b.process(10, "cargo");
    let worker = b.process(20, "rustc");
    b.lifetime(boss, None, 0, Some(ms(100)));
    let futex = b.stack(&["do_futex", "futex_wait_queue", "schedule"]);
    let timer = b.stack(&["asm_sysvec_apic_timer_interrupt", "hrtimer_wakeup"]);
    let wake = b.stack(&["futex_wake"]);
    let wait = |b: &mut TraceBuilder, at: u64| {
        if calls.is_some() {
            b.syscall_enter(at, boss, None, "futex", [0xa0, 0x80, 0, 0, 0, 0]);
        }
        b.switch(at, 0, 10, 1, 0, futex);
    };
    let returned = |b: &mut TraceBuilder, at: u64, ret: i64| {
        if calls.is_some() {
            b.syscall_exit(at, boss, "futex", ret);
        }
    };
    b.switch(ms(0), 0, 0, 0, 10, None);
    b.switch(ms(0), 1, 0, 0, 20, None);
    wait(&mut b, ms(10));
    b.waking(ms(30), 1, worker, 10, timer);
    b.switch(ms(30), 0, 0, 0, 10, None);
    returned(&mut b, ms(30) + calls.unwrap_or(0), -110);
    wait(&mut b, rewait);
    b.waking(ms(51), 1, worker, 10, timer);
    b.switch(ms(51), 0, 0, 0, 10, None);
    returned(&mut b, ms(51) + 10_000, -110);
    wait(&mut b, ms(52));
    b.waking(ms(60), 1, worker, 10, wake);
    b.switch(ms(60), 0, 0, 0, 10, None);
    returned(&mut b, ms(60) + 10_000, 0);
    b.end(ms(100));
    path(&b.build(), 10)
}

/// [`cargo_poll_loop`] as one wait (ms): the worker's CPU from the first wait to its
/// wake.
const LOOP_FOLLOWED: [(i32, SegmentState, Option<WaitKind>, u64, u64); 3] = [
    (10, Cpu, None, 0, 10),
    (20, Cpu, None, 10, 60),
    (10, Cpu, None, 60, 100),
];

#[test]
fn a_poll_loop_of_timeouts_is_one_wait_for_the_thread_that_ends_it() {
    let cp = cargo_poll_loop(ms(31), None);
    assert_eq!(shape(&cp), LOOP_FOLLOWED);
    assert_eq!(cp.segments[1].via, Some(WaitKind::Lock));
    assert_adds_up(&cp);
}

#[test]
fn a_poll_loop_is_one_wait_though_a_time_out_returned_late() {
    // The first time-out's call returns 8 ms after the timer switched the
    // boss in (cancelling the timer waited for its callback on a stalled
    // CPU): running in the call is not the poll gap, so the loop goes on.
    let cp = cargo_poll_loop(ms(39), Some(ms(8)));
    assert_eq!(shape(&cp), LOOP_FOLLOWED);
    assert_adds_up(&cp);
    // Returned at once, it ran 9 ms before it waited again: the loop ends
    // there, and its first time-out is the boss's wait.
    let cp = cargo_poll_loop(ms(39), Some(10_000));
    assert_eq!(cp.segments[1].tid, 10, "{cp:?}");
    assert_eq!(cp.segments[1].state, Blocked);
}

#[test]
fn a_poll_loop_whose_stacks_differ_below_the_wait_is_one_wait() {
    // Frame-pointer stacks through code without frame pointers (Rust's
    // std in cargo) pick up stale frames below the wait that change from
    // one iteration to the next: the loop is the same wait all along. Seen
    // as "74% waiting on futex" for a cargo build on a loaded machine.
    let mut b = TraceBuilder::default();
    let boss = b.process(10, "cargo");
    let worker = b.process(20, "rustc");
    b.lifetime(boss, None, 0, Some(ms(100)));
    let kernel = ["do_futex", "futex_wait_queue", "schedule"];
    let waits = [
        b.mixed_stack(&["main", "stale_a", "syscall"], &kernel),
        b.mixed_stack(&["main", "stale_b", "syscall"], &kernel),
        b.mixed_stack(&["stale_c", "syscall"], &kernel),
    ];
    let timer = b.stack(&["asm_sysvec_apic_timer_interrupt", "hrtimer_wakeup"]);
    let wake = b.stack(&["futex_wake"]);
    b.switch(ms(0), 0, 0, 0, 10, None);
    b.switch(ms(0), 1, 0, 0, 20, None);
    b.switch(ms(10), 0, 10, 1, 0, waits[0]);
    b.waking(ms(30), 1, worker, 10, timer);
    b.switch(ms(30), 0, 0, 0, 10, None);
    b.switch(ms(31), 0, 10, 1, 0, waits[1]);
    b.waking(ms(51), 1, worker, 10, timer);
    b.switch(ms(51), 0, 0, 0, 10, None);
    b.switch(ms(52), 0, 10, 1, 0, waits[2]);
    b.waking(ms(60), 1, worker, 10, wake);
    b.switch(ms(60), 0, 0, 0, 10, None);
    b.end(ms(100));
    let t = b.build();
    let cp = path(&t, 10);
    assert_eq!(
        shape(&cp),
        vec![
            (10, Cpu, None, 0, 10),
            (20, Cpu, None, 10, 60),
            (10, Cpu, None, 60, 100),
        ]
    );
    assert_adds_up(&cp);
}

#[test]
fn a_poll_loop_whose_timeouts_left_no_wake_up_is_one_wait_too() {
    // perf records nothing an idle CPU's interrupts do on this VM's CPU 1:
    // cargo's 500 ms timeouts left no `sched_waking` and no switch to it,
    // only its samples when it ran again. A quiet build came out "78%
    // waiting on a lock" for the length of one timeout.
    let mut b = TraceBuilder::default();
    let boss = b.process(10, "cargo");
    let worker = b.process(20, "rustc");
    b.lifetime(boss, None, 0, Some(ms(100)));
    let futex = b.stack(&["do_futex", "futex_wait_queue", "schedule"]);
    let wake = b.stack(&["futex_wake"]);
    b.switch(ms(0), 0, 0, 0, 10, None);
    b.switch(ms(0), 1, 0, 0, 20, None);
    b.switch(ms(10), 0, 10, 1, 0, futex);
    b.sample(ms(30), boss, 0, None);
    b.switch(ms(31), 0, 10, 1, 0, futex);
    b.sample(ms(51), boss, 0, None);
    b.switch(ms(52), 0, 10, 1, 0, futex);
    b.waking(ms(60), 1, worker, 10, wake);
    b.switch(ms(60), 0, 0, 0, 10, None);
    b.end(ms(100));
    let t = b.build();
    let cp = path(&t, 10);
    assert_eq!(
        shape(&cp),
        vec![
            (10, Cpu, None, 0, 10),
            (20, Cpu, None, 10, 60),
            (10, Cpu, None, 60, 100),
        ]
    );
    assert_eq!(cp.segments[1].via, Some(WaitKind::Lock));
    assert_adds_up(&cp);
}

#[test]
fn a_lone_timed_out_wait_is_a_sleep() {
    let mut b = TraceBuilder::default();
    let boss = b.process(10, "poller");
    let other = b.process(20, "other");
    b.lifetime(boss, None, 0, Some(ms(100)));
    let poll = b.stack(&["do_sys_poll", "schedule"]);
    let timer = b.stack(&["asm_sysvec_apic_timer_interrupt", "hrtimer_wakeup"]);
    b.switch(ms(0), 0, 0, 0, 10, None);
    b.switch(ms(10), 0, 10, 1, 0, poll);
    b.waking(ms(90), 1, other, 10, timer);
    b.switch(ms(90), 0, 0, 0, 10, None);
    b.end(ms(100));
    let t = b.build();
    let cp = path(&t, 10);
    assert_eq!(cp.segments[1].kind, Some(WaitKind::Sleep));
    assert!((cp.breakdown.blocked.sleep - 0.080).abs() < 1e-9);
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

/// A boss (10) whose timed futex wait on word 0xa0, from 10 ms, a timer
/// ends at 60 ms (its call returns 10 µs later), and a worker thread (11)
/// of its process computing on CPU 1 meanwhile; `early_wake`: the worker
/// wakes the word then, before the time-out (it woke another waiter).
/// Events after 60 ms are the test's.
/// Returns the builder, the boss, the worker and the boss's futex stack.
fn timed_out_at_60(
    early_wake: Option<u64>,
) -> (TraceBuilder, ThreadIdx, ThreadIdx, Option<StackIdx>) {
    timed_out_at_60_returning(early_wake, 10_000)
}

/// [`timed_out_at_60`] with the boss's call returning `returns_after` ns after the timer
/// ended its wait, on a CPU in the call meanwhile.
fn timed_out_at_60_returning(
    early_wake: Option<u64>,
    returns_after: u64,
) -> (TraceBuilder, ThreadIdx, ThreadIdx, Option<StackIdx>) {
    let mut b = TraceBuilder::default();
    let boss = b.process(10, "boss");
    let worker = b.thread(boss, 11, "worker");
    let other = b.process(30, "other");
    b.lifetime(boss, None, 0, Some(ms(100)));
    let futex = b.stack(&["do_futex", "futex_wait_queue", "schedule"]);
    let timer = b.stack(&["asm_sysvec_apic_timer_interrupt", "hrtimer_wakeup"]);
    b.switch(ms(0), 0, 0, 0, 10, None);
    b.switch(ms(0), 1, 0, 0, 11, None);
    b.syscall_enter(ms(10), boss, None, "futex", [0xa0, 0x80, 0, 0, 0, 0]);
    b.switch(ms(10), 0, 10, 1, 0, futex);
    if let Some(at) = early_wake {
        wake_word(&mut b, worker, 0xa0, at);
    }
    b.waking(ms(60), 0, other, 10, timer);
    b.switch(ms(60), 0, 0, 0, 10, None);
    b.syscall_exit(ms(60) + returns_after, boss, "futex", -110);
    (b, boss, worker, futex)
}

/// `thread` wakes the futex `word` at `at`, waking nobody.
fn wake_word(b: &mut TraceBuilder, thread: ThreadIdx, word: u64, at: u64) {
    b.syscall_enter(at, thread, None, "futex", [word, 0x81, 1, 0, 0, 0]);
    b.syscall_exit(at + 2_000, thread, "futex", 0);
}

/// [`timed_out_at_60`], then the worker wakes `word` at `at` and exits
/// after `bookkeeping` ms more, while the boss runs to 100 ms.
fn raced_time_out(word: u64, at: u64, bookkeeping: u64) -> CriticalPath {
    let (mut b, _, worker, _) = timed_out_at_60(None);
    wake_word(&mut b, worker, word, at);
    b.switch(ms(60 + bookkeeping), 1, 11, 16, 0, None);
    b.end(ms(100));
    path(&b.build(), 10)
}

#[test]
fn a_time_out_that_raced_with_a_wake_of_its_word_waited_for_the_waker() {
    // Cargo's job ended as its 500 ms time-out fired: the job thread's
    // notify came too late to wake cargo, which found the job done.
    let cp = raced_time_out(0xa0, ms(60) + 300_000, 1);
    assert_eq!(
        shape(&cp),
        vec![
            (10, Cpu, None, 0, 10),
            (11, Cpu, None, 10, 60),
            (10, Cpu, None, 60, 100),
        ]
    );
    assert_eq!(cp.segments[1].via, Some(WaitKind::Lock));
    assert_adds_up(&cp);
}

#[test]
fn a_time_out_whose_call_returned_late_raced_with_a_wake_after_the_return() {
    // The boss, switched in by its timer at 60 ms, spent 10 ms more in its
    // futex call (cancelling the timer waits for the timer's callback on
    // another CPU: 14.6 ms under the eBPF recorder in CI), and found the
    // work done by a wake 0.3 ms after its call returned: more than the
    // poll gap after it ran again, but not after it went on.
    let returned_late = |wake_at: u64| {
        let (mut b, _, worker, _) = timed_out_at_60_returning(None, ms(10));
        wake_word(&mut b, worker, 0xa0, wake_at);
        b.switch(ms(74), 1, 11, 16, 0, None);
        b.end(ms(100));
        path(&b.build(), 10)
    };
    let cp = returned_late(ms(70) + 300_000);
    assert_eq!(cp.segments[1].tid, 11, "{cp:?}");
    assert_eq!(cp.segments[1].state, Cpu);
    assert_adds_up(&cp);
    // The same wake past the poll gap after the return came too late.
    let cp = returned_late(ms(70) + MAX_POLL_GAP_NS + 500_000);
    assert_eq!(cp.segments[1].state, Blocked, "{cp:?}");
    assert_eq!(cp.segments[1].ended_by.as_deref(), Some("timer"));
}

#[test]
fn a_time_out_with_no_wake_of_its_word_as_it_fired_stays_a_wait() {
    // A wake of another word, one of the same word after the thread went
    // on (past the poll gap), and one long before the time-out (it woke
    // another waiter) leave the wait to the timer.
    let late = raced_time_out(0xa0, ms(60) + MAX_POLL_GAP_NS + 500_000, 3);
    let other_word = raced_time_out(0xb0, ms(60) + 300_000, 3);
    let (mut b, ..) = timed_out_at_60(Some(ms(30)));
    b.switch(ms(63), 1, 11, 16, 0, None);
    b.end(ms(100));
    let early = path(&b.build(), 10);
    for (case, cp) in [("late", late), ("other word", other_word), ("early", early)] {
        assert_eq!(cp.segments[1].tid, 10, "{case}: {cp:?}");
        assert_eq!(cp.segments[1].state, Blocked, "{case}");
        assert_eq!(cp.segments[1].ended_by.as_deref(), Some("timer"), "{case}");
    }
}

#[test]
fn a_time_out_whose_waker_held_the_mutex_taken_back_after_it_waited_for_the_waker() {
    // A condition variable's waiter takes its mutex back after a time-out;
    // its notifier held it, and notified (too late) before it let go.
    let (mut b, boss, worker, futex) = timed_out_at_60(None);
    let wake = b.stack(&["do_futex", "futex_wake"]);
    b.syscall_enter(ms(61), boss, None, "futex", [0xc0, 0x80, 2, 0, 0, 0]);
    b.switch(ms(61), 0, 10, 1, 0, futex);
    wake_word(&mut b, worker, 0xa0, ms(65));
    b.syscall_enter(ms(66), worker, None, "futex", [0xc0, 0x81, 1, 0, 0, 0]);
    b.waking(ms(66) + 1_000, 1, worker, 10, wake);
    b.syscall_exit(ms(66) + 2_000, worker, "futex", 1);
    b.switch(ms(67), 0, 0, 0, 10, None);
    b.syscall_exit(ms(67) + 1_000, boss, "futex", 0);
    b.switch(ms(68), 1, 11, 16, 0, None);
    b.end(ms(100));
    let cp = path(&b.build(), 10);
    assert_eq!(
        shape(&cp),
        vec![
            (10, Cpu, None, 0, 10),
            (11, Cpu, None, 10, 60),
            (10, Cpu, None, 60, 61),
            (11, Cpu, None, 61, 66),
            (10, Runnable, None, 66, 67),
            (10, Cpu, None, 67, 100),
        ]
    );
    assert_eq!(cp.segments[1].via, Some(WaitKind::Lock));
    assert_adds_up(&cp);
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
