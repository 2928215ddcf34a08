//! The walker on hand-built traces where a timer ends waits: poll loops of time-outs
//! (cargo's job queue), a lone timed-out wait, and time-outs that raced with another
//! thread's wake of their futex word, also when the timed-out call returned late.

use super::tests::{assert_adds_up, ms, path, shape};
use super::*;
use crate::testutil::TraceBuilder;
use SegmentState::{Blocked, Cpu, Runnable};

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
