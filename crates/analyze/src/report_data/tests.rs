//! The report's data on a hand-built trace: every event family converted,
//! the selection honoured, the path and the findings placed on the clock.

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
