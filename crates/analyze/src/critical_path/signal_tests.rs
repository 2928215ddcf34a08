//! The walker on hand-built traces where a signal ends a wait: a child's wait that the
//! root's signal ends, a pipe read that `kill(2)` ends, a wait still open at the trace's
//! end, and a poll loop whose last wait a kill from outside ends; who killed the root.

use super::tests::{assert_adds_up, ms, path, shape};
use super::*;
use crate::testutil::TraceBuilder;
use SegmentState::Cpu;

/// The stack of a wake-up sent by `kill(2)`.
fn kill_stack(b: &mut TraceBuilder) -> Option<StackIdx> {
    b.stack(&[
        "entry_SYSCALL_64_after_hwframe",
        "do_syscall_64",
        "__x64_sys_kill",
        "kill_something_info",
        "kill_pid_info_type",
        "do_send_sig_info",
        "__send_signal_locked",
        "complete_signal",
        "try_to_wake_up",
    ])
}

#[test]
fn a_wait_for_a_child_that_the_roots_signal_ends_follows_the_child() {
    // `timeout` waits in sigsuspend for its child `sh`, which waits in
    // wait4 for `worker`; a timer (SIGALRM) ends timeout's wait, timeout
    // kills sh (SIGTERM, a wake-up from its kill) and the group. Before,
    // sh's wait was credited to timeout, the root, and stopped as a cycle.
    let mut b = TraceBuilder::default();
    let timeout = b.process(10, "timeout");
    let sh = b.process(11, "sh");
    let worker = b.process(12, "worker");
    b.lifetime(timeout, None, 0, Some(ms(102)));
    b.lifetime(sh, Some(10), ms(1), Some(ms(101)));
    b.lifetime(worker, Some(11), ms(2), Some(ms(101)));
    let sigsuspend = b.stack(&["__x64_sys_rt_sigsuspend", "sigsuspend", "schedule"]);
    let wait4 = b.stack(&["__do_sys_wait4", "kernel_wait4", "do_wait", "schedule"]);
    let alarm = b.stack(&[
        "asm_sysvec_apic_timer_interrupt",
        "hrtimer_interrupt",
        "__hrtimer_run_queues",
        "posix_timer_fn",
        "posixtimer_send_sigqueue",
        "complete_signal",
    ]);
    let kill = kill_stack(&mut b);
    let digest = b.mixed_stack(&["main", "digest"], &[]);
    let exit = b.stack(&["get_signal", "do_group_exit", "do_exit", "do_task_dead"]);
    b.switch(ms(0), 0, 0, 0, 10, None);
    b.switch(ms(1), 0, 10, 1, 11, sigsuspend); // timeout waits
    b.switch(ms(2), 0, 11, 1, 12, wait4); // sh waits for worker
    for t in 3..100 {
        b.sample(ms(t), worker, 0, digest);
    }
    b.waking(ms(100), 0, worker, 10, alarm); // SIGALRM
    b.switch(ms(100), 0, 12, 0, 10, None);
    b.waking(ms(100) + 100_000, 0, timeout, 11, kill); // SIGTERM to sh
    b.switch(ms(100) + 200_000, 0, 10, 0, 11, None);
    b.switch(ms(101), 0, 11, 0x20, 12, exit); // sh dies
    b.switch(ms(101) + 500_000, 0, 12, 0x20, 10, exit); // worker dies
    b.end(ms(102));
    let t = b.build();
    let cp = path(&t, 10);
    assert_adds_up(&cp);
    let in_worker: f64 = cp
        .segments
        .iter()
        .filter(|s| s.comm == "worker" && s.state == Cpu)
        .map(Segment::duration_s)
        .sum();
    assert!(in_worker > 0.095, "{:?}", shape(&cp));
    assert_eq!(cp.parts[0].function.as_deref(), Some("digest"));
    let k = cp.killed.as_ref().expect("killed");
    assert_eq!(
        (k.process.comm.as_str(), k.by.comm.as_str()),
        ("sh", "timeout")
    );
    assert!((k.at_s - 0.1001).abs() < 1e-6, "{k:?}");
    assert_eq!(k.signal, None);
    assert!(
        cp.summary.starts_with(
            "`timeout` ran 0.10 s: sh was killed by timeout after 0.10 s; until then 98% on a CPU in worker (digest)"
        ),
        "{}",
        cp.summary
    );
}

#[test]
fn a_kill_syscall_names_the_signal_and_a_pipe_read_it_ends_follows_the_writer() {
    // `sh` reads a pipe that `producer` writes; the last read is ended by
    // a SIGINT that `slowlab` sends, which the trace records as a kill
    // syscall: the read follows the producer, not the sender.
    let mut b = TraceBuilder::default();
    let sh = b.process(10, "sh");
    let producer = b.process(11, "producer");
    let boss = b.process(5, "slowlab");
    b.lifetime(sh, None, 0, Some(ms(100)));
    b.lifetime(producer, Some(10), 0, None);
    let pipe = b.stack(&["ksys_read", "vfs_read", "anon_pipe_read", "schedule"]);
    let write = b.stack(&["ksys_write", "anon_pipe_write", "__wake_up_sync_key"]);
    let kill = kill_stack(&mut b);
    let digest = b.mixed_stack(&["main", "digest"], &[]);
    b.switch(ms(0), 0, 0, 0, 10, None);
    b.switch(ms(0), 1, 0, 0, 11, None);
    b.switch(ms(1), 0, 10, 1, 5, pipe);
    b.waking(ms(10), 1, producer, 10, write);
    b.switch(ms(10), 0, 5, 1, 10, None);
    b.switch(ms(11), 0, 10, 1, 5, pipe); // the read the signal ends
    for t in 12..99 {
        b.sample(ms(t), producer, 1, digest);
    }
    b.syscall_enter(ms(99), boss, None, "kill", [10, 2, 0, 0, 0, 0]);
    b.waking(ms(99) + 1, 0, boss, 10, kill);
    b.switch(ms(99) + 2, 0, 5, 1, 10, None);
    b.end(ms(100));
    let t = b.build();
    let cp = path(&t, 10);
    assert_adds_up(&cp);
    let producer_cpu: f64 = cp
        .segments
        .iter()
        .filter(|s| s.comm == "producer" && s.state == Cpu)
        .map(Segment::duration_s)
        .sum();
    assert!(producer_cpu > 0.095, "{:?}", shape(&cp));
    let k = cp.killed.as_ref().expect("killed");
    assert_eq!(k.process.pid, 10);
    assert_eq!(k.by.comm, "slowlab");
    assert_eq!(k.signal.as_deref(), Some("SIGINT"));
    assert!(
        cp.summary
            .starts_with("`sh` ran 0.10 s, killed by slowlab (SIGINT) after 0.10 s; until then"),
        "{}",
        cp.summary
    );
}

#[test]
fn a_wait_still_open_at_the_traces_end_follows_the_child() {
    // A recording stopped (Ctrl-C, --ring, diagnose --pid's window) while
    // the root waits for its computing child: the open wait is the child's.
    let mut b = TraceBuilder::default();
    let sh = b.process(10, "sh");
    let child = b.process(11, "worker");
    b.lifetime(sh, None, 0, None);
    b.lifetime(child, Some(10), ms(5), None);
    let wait = b.stack(&["kernel_wait4", "do_wait", "schedule"]);
    let digest = b.mixed_stack(&["main", "digest"], &[]);
    b.switch(ms(0), 0, 0, 0, 10, None);
    b.switch(ms(10), 0, 10, 1, 11, wait);
    for t in 11..100 {
        b.sample(ms(t), child, 0, digest);
    }
    b.end(ms(100));
    let t = b.build();
    let cp = path(&t, 10);
    assert_adds_up(&cp);
    assert_eq!(
        shape(&cp),
        vec![(10, Cpu, None, 0, 10), (11, Cpu, None, 10, 100)]
    );
    assert_eq!(cp.segments[1].via, Some(WaitKind::Ipc));
    assert_eq!(cp.killed, None);
}

#[test]
fn a_merged_poll_loop_keeps_the_waker_of_each_iteration() {
    // cargo's loop: time-outs, then `job1` ends a wait; time-outs again,
    // then `job2` ends one; then time-outs until a kill from outside ends
    // the last wait. Each stretch is its own waker's; the last (ended by
    // the signal) the thread that ended the wait before on that stack.
    let mut b = TraceBuilder::default();
    let boss = b.process(10, "cargo");
    let job1 = b.process(20, "job1");
    let job2 = b.process(21, "job2");
    let killer = b.process(30, "kill");
    b.lifetime(boss, None, 0, Some(ms(100)));
    let futex = b.stack(&["do_futex", "futex_wait_queue", "schedule"]);
    let timer = b.stack(&["asm_sysvec_apic_timer_interrupt", "hrtimer_wakeup"]);
    let wake = b.stack(&["futex_wake"]);
    let kill = kill_stack(&mut b);
    b.switch(ms(0), 0, 0, 0, 10, None);
    b.switch(ms(0), 1, 0, 0, 20, None);
    b.switch(ms(10), 0, 10, 1, 0, futex);
    b.waking(ms(20), 1, job1, 10, timer);
    b.switch(ms(20), 0, 0, 0, 10, None);
    b.switch(ms(21), 0, 10, 1, 0, futex);
    b.waking(ms(30), 1, job1, 10, wake); // job1 ends this loop
    b.switch(ms(30), 1, 20, 0, 21, None); // job2 runs on cpu 1
    b.switch(ms(30), 0, 0, 0, 10, None);
    b.switch(ms(31), 0, 10, 1, 0, futex);
    b.waking(ms(45), 1, job2, 10, timer);
    b.switch(ms(45), 0, 0, 0, 10, None);
    b.switch(ms(46), 0, 10, 1, 0, futex);
    b.waking(ms(60), 1, job2, 10, wake); // job2 ends this one
    b.switch(ms(60), 0, 0, 0, 10, None);
    b.switch(ms(61), 0, 10, 1, 0, futex);
    b.waking(ms(75), 1, job2, 10, timer);
    b.switch(ms(75), 0, 0, 0, 10, None);
    b.switch(ms(76), 0, 10, 1, 0, futex);
    b.waking(ms(95), 1, killer, 10, kill); // the kill ends the last
    b.switch(ms(95), 0, 0, 0, 10, None);
    b.end(ms(100));
    let t = b.build();
    let cp = path(&t, 10);
    assert_adds_up(&cp);
    assert_eq!(
        shape(&cp),
        vec![
            (10, Cpu, None, 0, 10),
            (20, Cpu, None, 10, 30),
            (10, Cpu, None, 30, 31),
            (21, Cpu, None, 31, 60),
            (10, Cpu, None, 60, 61),
            (21, Cpu, None, 61, 95),
            (10, Cpu, None, 95, 100),
        ]
    );
    assert!(cp.segments.iter().all(|s| s.comm != "kill"));
}
