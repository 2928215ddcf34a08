//! The report's data on a hand-built trace: every event family converted,
//! the selection honoured, the path and the findings placed on the clock.

use slowlab_model::critical_path::ResourceKind;
use slowlab_model::findings::{Culprit, Finding, Severity};
use slowlab_model::trace::{Event, EventKind, ProcIdx, Trace};

use super::*;
use crate::select::{Filter, Selection};
use crate::testutil::TraceBuilder;

fn ms(v: u64) -> u64 {
    v * 1_000_000
}

/// `a` (pid 10) runs, blocks in a futex until `w` (pid 20) wakes it, runs
/// again; both are sampled; `a` faults twice and fails an openat.
fn trace() -> Trace {
    let mut b = TraceBuilder::default();
    let a = b.process(10, "a");
    let w = b.process(20, "<b>w</b>");
    let work = b.mixed_stack(&["main", "work"], &[]);
    let blk = b.stack(&["schedule", "futex_wait"]);
    let wk = b.stack(&["futex_wake"]);
    b.switch(ms(1), 0, 20, 0, 10, None);
    b.sample(ms(2), a, 0, work);
    b.sample(ms(3), a, 0, work);
    b.syscall(ms(4), a, work, "openat", [0; 6], -2, 10_000);
    b.switch(ms(5), 0, 10, 1, 20, blk);
    b.sample(ms(6), w, 0, wk);
    b.waking(ms(9), 0, w, 10, wk);
    b.switch(ms(12), 0, 20, 0, 10, None);
    b.sample(ms(15), a, 0, work);
    b.end(ms(20));
    let mut t = b.build();
    for at in [ms(2) + 5, ms(3) + 5] {
        t.events.push(Event {
            time_ns: at,
            cpu: 0,
            thread: a,
            stack: work,
            kind: EventKind::PageFault {
                address: 0,
                ip: 0,
                error_code: 6,
                user: true,
                windows_kind: None,
            },
        });
    }
    t.events.sort_by_key(|e| e.time_ns);
    t
}

fn finding(pid: i32) -> Finding {
    Finding {
        id: "x".into(),
        title: "t".into(),
        severity: Severity::High,
        cost_s: 1.0,
        cost_share: 0.5,
        culprit: Culprit {
            pid: Some(pid),
            comm: None,
            cgroup: None,
        },
        evidence: serde_json::Map::new(),
        stack: vec![],
        fix: "f".into(),
    }
}

fn data(t: &Trace, sel: &Selection, findings: &[Finding]) -> ReportData {
    report_data(
        &crate::detect::Context::new(t, None, None),
        &Inputs {
            title: "t",
            command: &[],
            critical_path: None,
            findings,
            command_processes: &[ProcIdx(0)],
            selection: sel,
            filter_text: &[],
            warnings: &[],
        },
    )
}

fn thread_named(d: &ReportData, comm: &str) -> usize {
    (0..d.threads.tid.len())
        .find(|&i| d.strings[d.threads.comm[i] as usize] == comm)
        .unwrap()
}

#[test]
fn every_event_family_is_converted() {
    let t = trace();
    let d = data(&t, &Selection::default(), &[finding(20)]);
    assert_eq!(d.version, FORMAT_VERSION);
    assert_eq!(d.samples.t.len(), 4);
    // Delta-encoded times add up to the last sample's time.
    assert_eq!(d.samples.t.iter().sum::<i64>(), 15_000);
    let a = thread_named(&d, "a");
    let w = thread_named(&d, "<b>w</b>");
    assert_eq!(d.processes.tree[d.threads.process[a] as usize], 1);
    assert_eq!(d.processes.tree[d.threads.process[w] as usize], 0);
    // a: running, blocked (lock, woken by w), runnable, running.
    let (s, e) = (d.spans.offset[a] as usize, d.spans.offset[a + 1] as usize);
    let states: Vec<u8> = d.spans.state[s..e].to_vec();
    assert_eq!(states, vec![0, 2, 1, 0], "{:?}", d.spans);
    assert_eq!(d.spans.waker[s + 1], w as i32);
    assert_eq!(d.spans.dur[s + 1], 4_000);
    let blocked = d.spans.stack[s + 1] as usize;
    let named = d
        .wait_names
        .stack
        .iter()
        .position(|&n| n as usize == blocked);
    assert_eq!(
        named.map(|i| d.strings[d.wait_names.name[i] as usize].as_str()),
        Some("futex_wait")
    );
    // Two faults in two 1 ms buckets.
    assert_eq!(d.faults.count.iter().sum::<u32>(), 2);
    assert_eq!(d.faults.bucket_us, FAULT_BUCKET_US[0]);
    assert_eq!(d.syscalls.name.len(), 1);
    assert_eq!(d.strings[d.syscalls.error[0] as usize], "ENOENT");
    assert_eq!(d.syscalls.dur[0], 10);
    // The finding selects its culprit's thread over its lifetime.
    assert_eq!(d.findings[0].threads, vec![w as u32]);
    assert_eq!((d.findings[0].from_us, d.findings[0].to_us), (0, 20_000));
    // Every stack's parent comes before it.
    for (i, &p) in d.stacks.parent.iter().enumerate() {
        assert!(p < i as i32);
    }
}

#[test]
fn the_selection_keeps_only_its_threads_and_time() {
    let t = trace();
    let sel = Selection {
        filters: vec![Filter::Pid(10)],
        from_s: Some(0.004),
        to_s: Some(0.013),
    };
    let d = data(&t, &sel, &[]);
    assert_eq!(d.threads.tid, vec![10]);
    assert_eq!(
        d.samples.t.len(),
        0,
        "samples at 2, 3 and 15 ms are outside"
    );
    assert_eq!((d.meta.from_us, d.meta.to_us), (4_000, 13_000));
    // The spans are clipped to the range: 4–5 running … 12–13 running.
    let total: i64 = d.spans.dur.iter().sum::<i64>() + d.spans.gap[1..].iter().sum::<i64>();
    assert_eq!(total, 9_000);
    assert_eq!(d.spans.gap[0], 4_000);
    assert_eq!(d.faults.count.len(), 0);
    assert_eq!(d.syscalls.name.len(), 1);
}

#[test]
fn the_json_has_no_raw_markup_free_text_outside_strings() {
    let t = trace();
    let d = data(&t, &Selection::default(), &[]);
    let json = serde_json::to_string(&d).unwrap();
    // The hostile name is only in the string table.
    assert_eq!(json.matches("<b>w</b>").count(), 1);
}

fn us(v: u64) -> u64 {
    v * 1_000
}

/// Process `app` (pid 10) on one CPU: waiters 12 and 13 queue on the
/// mutex word 0x5000 (FUTEX_WAIT_PRIVATE, value 2) at 2.1 and 3.1 ms; the
/// holder 11 releases it at 10 ms (its wake wakes 12 at 10.01 ms); 12
/// takes it (its wait returns at 10.6 ms) and releases it at 11 ms, waking
/// 13 at 11.01 ms.
fn lock_trace() -> Trace {
    let mut b = TraceBuilder::default();
    let main = b.process(10, "app");
    let holder = b.thread(main, 11, "holder");
    let w12 = b.thread(main, 12, "waiter");
    let w13 = b.thread(main, 13, "waiter");
    let wait = b.mixed_stack(
        &["waiter_loop", "pthread_mutex_lock", "__lll_lock_wait"],
        &["do_futex", "futex_wait_queue", "schedule"],
    );
    let wake = b.mixed_stack(
        &["holder_loop", "pthread_mutex_unlock", "__lll_lock_wake"],
        &["do_futex", "futex_wake", "try_to_wake_up"],
    );
    let (word, wait_op, wake_op) = (0x5000, 0x80, 0x81);
    b.switch(us(1_000), 0, 0, 0, 12, None);
    b.syscall_enter(us(2_000), w12, wait, "futex", [word, wait_op, 2, 0, 0, 0]);
    b.switch(us(2_100), 0, 12, 1, 13, wait);
    b.syscall_enter(us(3_000), w13, wait, "futex", [word, wait_op, 2, 0, 0, 0]);
    b.switch(us(3_100), 0, 13, 1, 11, wait);
    b.syscall_enter(
        us(10_000),
        holder,
        wake,
        "futex",
        [word, wake_op, 1, 0, 0, 0],
    );
    b.waking(us(10_010), 0, holder, 12, wake);
    b.syscall_exit(us(10_020), holder, "futex", 1);
    b.switch(us(10_500), 0, 11, 0, 12, None);
    b.syscall_exit(us(10_600), w12, "futex", 0);
    b.syscall_enter(us(11_000), w12, wake, "futex", [word, wake_op, 1, 0, 0, 0]);
    b.waking(us(11_010), 0, w12, 13, wake);
    b.syscall_exit(us(11_020), w12, "futex", 1);
    b.switch(us(11_500), 0, 12, 0, 13, None);
    b.syscall_exit(us(11_600), w13, "futex", 0);
    b.switch(us(12_000), 0, 13, 0, 11, None);
    b.end(ms(20));
    b.build()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn the_locks_list_their_waiters_holders_and_waits() {
    let t = lock_trace();
    let d = data(&t, &Selection::default(), &[]);
    assert_eq!(d.locks.len(), 1, "{:?}", d.locks);
    let l = &d.locks[0];
    assert_eq!(
        (l.address.as_str(), l.kind, l.pid, l.process.as_str()),
        ("0x5000", ResourceKind::Mutex, 10, "app")
    );
    assert_eq!(l.name.as_deref(), Some("waiter_loop"));
    // Each waited 7.91 ms (switched out to woken).
    let waiters: Vec<(i32, &str, usize)> = l
        .waiters
        .iter()
        .map(|w| (w.tid, w.comm.as_str(), w.waits))
        .collect();
    assert_eq!(waiters, [(12, "waiter", 1), (13, "waiter", 1)]);
    assert!(close(l.waiters[0].blocked_s, 0.00791), "{:?}", l.waiters);
    assert!(close(l.total_wait_s, 2.0 * 0.00791));
    // 11 held it at least since 12 began waiting (2.1 ms) up to its
    // release; 12 from its contended acquisition (10.6 ms) to 11.01 ms.
    let holders: Vec<(i32, &str, usize)> = l
        .holders
        .iter()
        .map(|h| (h.tid, h.comm.as_str(), h.holds))
        .collect();
    assert_eq!(holders, [(11, "holder", 1), (12, "waiter", 1)]);
    assert!(close(l.holders[0].held_s, 0.00791), "{:?}", l.holders);
    assert!(close(l.holders[1].held_s, 0.00041), "{:?}", l.holders);
    assert!(close(l.longest_hold_s, 0.00791));
    // The waits, in time order, with the report's thread indices.
    let waits: Vec<(i32, Option<i32>)> = l
        .waits
        .iter()
        .map(|w| (w.waiter_tid, w.holder_tid))
        .collect();
    assert_eq!(waits, [(12, Some(11)), (13, Some(12))]);
    assert_eq!(l.waits_total, 2);
    assert!(close(l.waits[0].from_s, 0.0021) && close(l.waits[0].to_s, 0.01001));
    assert_eq!(l.waits[0].waiter as usize, thread_named_tid(&d, 12));
    assert_eq!(l.waits[0].holder as usize, thread_named_tid(&d, 11));
}

fn thread_named_tid(d: &ReportData, tid: i32) -> usize {
    d.threads.tid.iter().position(|&t| t == tid).unwrap()
}

#[test]
fn the_locks_follow_the_selection() {
    let t = lock_trace();
    // From 10.5 ms: only 13's wait (to 11.01 ms) and 12's hold are in it.
    let sel = Selection {
        filters: vec![],
        from_s: Some(0.0105),
        to_s: None,
    };
    let d = data(&t, &sel, &[]);
    let l = &d.locks[0];
    let waiters: Vec<i32> = l.waiters.iter().map(|w| w.tid).collect();
    assert_eq!(waiters, [13]);
    assert!(close(l.total_wait_s, 0.00051), "{}", l.total_wait_s);
    let holders: Vec<i32> = l.holders.iter().map(|h| h.tid).collect();
    assert_eq!(holders, [12]);
    // A wait's own times are not clipped: the arrow is at its end.
    assert!(close(l.waits[0].from_s, 0.0031));
    // Only the holder's thread: it waited on nothing.
    let sel = Selection {
        filters: vec![Filter::Tid(11)],
        from_s: None,
        to_s: None,
    };
    assert!(data(&t, &sel, &[]).locks.is_empty());
    // A trace without futex calls has no locks.
    assert!(data(&trace(), &Selection::default(), &[]).locks.is_empty());
}
