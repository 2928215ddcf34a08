//! Synthetic traces for the fleet tests: one program (`app`, with a build
//! id) with one thread per process, CPU samples on chosen stacks, a wait
//! ended by a wake-up, and a finding to plant.
#![allow(dead_code)]

use slowlab_model::findings::{Culprit, Finding, Severity};
use slowlab_model::trace::*;

/// Builds a trace: `stacks` are (outermost-first function names, samples).
pub fn trace(host: &str, stacks: &[(&[&str], usize)]) -> Trace {
    let mut t = Trace::default();
    let s = |t: &mut Trace, text: &str| {
        t.strings.push(text.to_owned());
        StrIdx(t.strings.len() as u32 - 1)
    };
    t.meta.hostname = Some(host.to_owned());
    t.meta.os_release = Some("6.1.0-test".into());
    t.meta.cmdline = vec!["perf".into(), "record".into()];
    t.meta.sample_event = Some("cpu-clock".into());
    t.meta.start_ns = 1_000_000;
    t.meta.wall_clock = Some(WallClock {
        clock_ns: 1_000_000,
        unix_ns: 1_795_465_541_000_000_000,
    });
    let app = s(&mut t, "app");
    t.modules.push(Module {
        name: app,
        path: app,
        kind: ModuleKind::User,
        build_id: Some("00ff00ff".into()),
        symbol_error: None,
    });
    let comm = s(&mut t, "app");
    let waker_comm = s(&mut t, "waker");
    for (pid, comm) in [(100, comm), (200, waker_comm)] {
        let th = ThreadIdx(t.threads.len() as u32);
        t.processes.push(Process {
            pid,
            ppid: Some(1),
            comm,
            start_ns: Some(1_000_000),
            exec_ns: None,
            end_ns: None,
            threads: vec![th],
        });
        t.threads.push(Thread {
            tid: pid,
            process: ProcIdx(t.processes.len() as u32 - 1),
            comm,
            start_ns: None,
            end_ns: None,
        });
    }
    // Functions and frames, one per name; stacks as prefix-tree nodes.
    let mut time = 2_000_000u64;
    let mut leaves = Vec::new();
    for (names, count) in stacks {
        let mut parent = None;
        for name in names.iter() {
            let idx = s(&mut t, name);
            t.functions.push(Function {
                name: idx,
                module: ModuleIdx(0),
                kernel: false,
            });
            t.frames.push(Frame {
                module: ModuleIdx(0),
                // Addresses differ per trace (as under ASLR); ids must not.
                address: 0x4000 + 0x10 * t.frames.len() as u64 + time,
                function: FuncIdx(t.functions.len() as u32 - 1),
                kernel: false,
            });
            t.stacks
                .push(StackNode::new(parent, FrameIdx(t.frames.len() as u32 - 1)));
            parent = Some(StackIdx(t.stacks.len() as u32 - 1));
        }
        leaves.push((parent, *count));
    }
    for (stack, count) in leaves {
        for _ in 0..count {
            t.samples.time_ns.push(time);
            t.samples.thread.push(ThreadIdx(0));
            t.samples.cpu.push(0);
            t.samples.stack.push(stack);
            t.samples.period.push(1_000_000);
            time += 1_000_000;
        }
    }
    // app blocks for 5 ms and is woken by the waker.
    let block_stack = t.samples.stack.first().copied().flatten();
    let ev = |time_ns, thread, stack, kind| Event {
        time_ns,
        cpu: 0,
        thread: ThreadIdx(thread),
        stack,
        kind,
    };
    t.events.push(ev(
        time,
        0,
        None,
        EventKind::Switch {
            prev_tid: 200,
            prev_state: 0,
            next_tid: 100,
            next_prio: 120,
            windows: None,
        },
    ));
    t.events.push(ev(
        time + 1_000_000,
        0,
        block_stack,
        EventKind::Switch {
            prev_tid: 100,
            prev_state: 1,
            next_tid: 200,
            next_prio: 120,
            windows: None,
        },
    ));
    t.events.push(ev(
        time + 6_000_000,
        1,
        None,
        EventKind::Waking {
            tid: 100,
            target_cpu: 0,
        },
    ));
    t.events.push(ev(
        time + 7_000_000,
        1,
        None,
        EventKind::Switch {
            prev_tid: 200,
            prev_state: 0,
            next_tid: 100,
            next_prio: 120,
            windows: None,
        },
    ));
    t.events.push(ev(
        time + 7_500_000,
        0,
        block_stack,
        EventKind::PageFault {
            address: 0x10,
            ip: 0x20,
            error_code: 6,
            user: true,
            windows_kind: None,
        },
    ));
    t.meta.end_ns = time + 8_000_000;
    t
}

/// A finding of detector `id` blaming `comm`.
pub fn finding(id: &str, comm: &str, cost_s: f64) -> Finding {
    let mut evidence = serde_json::Map::new();
    evidence.insert("planted".into(), serde_json::json!(true));
    Finding {
        id: id.into(),
        title: format!("{id} in {comm}"),
        severity: Severity::High,
        cost_s,
        cost_share: 0.5,
        culprit: Culprit {
            pid: Some(100),
            comm: Some(comm.into()),
            cgroup: None,
        },
        evidence,
        stack: vec!["inner".into(), "outer".into()],
        fix: "do less".into(),
    }
}
