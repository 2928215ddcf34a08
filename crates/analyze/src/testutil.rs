//! A tiny hand-built trace for the views' tests: process `app` (pid 10)
//! with stacks main→work (2 samples) and main→work→memset (3, memset in
//! the kernel), and process `other` (pid 20) with one sample in `idle`.

use slowlab_model::trace::*;

pub fn small_trace() -> Trace {
    let mut t = Trace::default();
    for s in [
        "app",
        "other",
        "main",
        "work",
        "memset",
        "idle",
        "app.bin",
        "[kernel.kallsyms]",
    ] {
        t.strings.push(s.to_owned());
    }
    t.modules.push(Module {
        name: StrIdx(6),
        path: StrIdx(6),
        kind: ModuleKind::User,
        build_id: None,
        symbol_error: None,
    });
    t.modules.push(Module {
        name: StrIdx(7),
        path: StrIdx(7),
        kind: ModuleKind::Kernel,
        build_id: None,
        symbol_error: None,
    });
    for (name, module, kernel) in [(2, 0, false), (3, 0, false), (4, 1, true), (5, 0, false)] {
        t.functions.push(Function {
            name: StrIdx(name),
            module: ModuleIdx(module),
            kernel,
        });
        t.frames.push(Frame {
            module: ModuleIdx(module),
            address: 0x100 * (name as u64),
            function: FuncIdx(t.functions.len() as u32 - 1),
            kernel,
        });
    }
    // stacks: 0 main, 1 main>work, 2 main>work>memset, 3 idle
    for (parent, frame, depth) in [(None, 0, 0), (Some(0), 1, 1), (Some(1), 2, 2), (None, 3, 0)] {
        t.stacks.push(StackNode {
            parent: parent.map(StackIdx),
            frame: FrameIdx(frame),
            depth,
        });
    }
    t.processes.push(Process {
        pid: 10,
        ppid: None,
        comm: StrIdx(0),
        start_ns: None,
        exec_ns: None,
        end_ns: None,
        threads: vec![ThreadIdx(0)],
    });
    t.processes.push(Process {
        pid: 20,
        ppid: None,
        comm: StrIdx(1),
        start_ns: None,
        exec_ns: None,
        end_ns: None,
        threads: vec![ThreadIdx(1)],
    });
    t.threads.push(Thread {
        tid: 10,
        process: ProcIdx(0),
        comm: StrIdx(0),
        start_ns: None,
        end_ns: None,
    });
    t.threads.push(Thread {
        tid: 20,
        process: ProcIdx(1),
        comm: StrIdx(1),
        start_ns: None,
        end_ns: None,
    });
    let samples = [(0, 1), (0, 2), (0, 2), (1, 3), (0, 2), (0, 1)];
    for (i, (th, stack)) in samples.iter().enumerate() {
        t.samples.time_ns.push(1_000_000 * (i as u64 + 1));
        t.samples.thread.push(ThreadIdx(*th));
        t.samples.cpu.push(0);
        t.samples.stack.push(Some(StackIdx(*stack)));
        t.samples.period.push(1_000_000);
    }
    t.meta.start_ns = 1_000_000;
    t.meta.end_ns = 6_000_000;
    t
}
