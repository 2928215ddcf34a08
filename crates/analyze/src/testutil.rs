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
    for (parent, frame) in [(None, 0), (Some(0), 1), (Some(1), 2), (None, 3)] {
        t.stacks
            .push(StackNode::new(parent.map(StackIdx), FrameIdx(frame)));
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

/// Builds small traces of kernel (and user) stacks, scheduler events and
/// syscalls for the views' and detectors' tests; one function (and one
/// frame) per name and side (kernel or user).
#[derive(Default)]
pub struct TraceBuilder {
    t: Trace,
    frame_of: std::collections::HashMap<(String, bool), FrameIdx>,
    string_of: std::collections::HashMap<String, StrIdx>,
    /// The kernel's and the program's module, once made.
    kernel_module: Option<ModuleIdx>,
    user_module: Option<ModuleIdx>,
    end_ns: u64,
}

impl TraceBuilder {
    /// The string's index; each string is stored once.
    fn intern(&mut self, s: &str) -> StrIdx {
        if let Some(&i) = self.string_of.get(s) {
            return i;
        }
        self.t.strings.push(s.to_owned());
        let i = StrIdx(self.t.strings.len() as u32 - 1);
        self.string_of.insert(s.to_owned(), i);
        i
    }

    /// The kernel image's module, or the program's (`app`), made on first use.
    fn module(&mut self, kernel: bool) -> ModuleIdx {
        let slot = if kernel {
            self.kernel_module
        } else {
            self.user_module
        };
        if let Some(m) = slot {
            return m;
        }
        let (name, kind) = if kernel {
            ("[kernel.kallsyms]", ModuleKind::Kernel)
        } else {
            ("app", ModuleKind::User)
        };
        let name = self.intern(name);
        self.t.modules.push(Module {
            name,
            path: name,
            kind,
            build_id: None,
            symbol_error: None,
        });
        let m = ModuleIdx(self.t.modules.len() as u32 - 1);
        if kernel {
            self.kernel_module = Some(m);
        } else {
            self.user_module = Some(m);
        }
        m
    }

    /// A user-space binary other than the program, made on first use.
    fn library(&mut self, name: &str) -> ModuleIdx {
        let name = self.intern(name);
        if let Some(i) = self.t.modules.iter().position(|m| m.name == name) {
            return ModuleIdx(i as u32);
        }
        self.t.modules.push(Module {
            name,
            path: name,
            kind: ModuleKind::User,
            build_id: None,
            symbol_error: None,
        });
        ModuleIdx(self.t.modules.len() as u32 - 1)
    }

    /// Sets why the binary `module` (made by a `[unknown] in MODULE`
    /// frame) has no symbols.
    pub fn symbol_error(&mut self, module: &str, error: &str) {
        let m = self.library(module);
        self.t.modules[m.ix()].symbol_error = Some(error.to_string());
    }

    /// The frame of function `name` in the kernel or the program; a user
    /// frame named `[unknown] in MODULE` is code without a symbol in the
    /// binary `MODULE`.
    fn frame(&mut self, name: &str, kernel: bool) -> FrameIdx {
        if let Some(&f) = self.frame_of.get(&(name.to_owned(), kernel)) {
            return f;
        }
        let key = (name.to_owned(), kernel);
        let (module, name) = match name.strip_prefix("[unknown] in ") {
            Some(library) if !kernel => (self.library(library), "[unknown]"),
            _ => (self.module(kernel), name),
        };
        let idx = self.intern(name);
        self.t.functions.push(Function {
            name: idx,
            module,
            kernel,
        });
        self.t.frames.push(Frame {
            module,
            address: 0x1000 * self.t.frames.len() as u64,
            function: FuncIdx(self.t.functions.len() as u32 - 1),
            kernel,
        });
        let f = FrameIdx(self.t.frames.len() as u32 - 1);
        self.frame_of.insert(key, f);
        f
    }

    /// A new process with one thread (tid = pid).
    pub fn process(&mut self, pid: i32, comm: &str) -> ThreadIdx {
        let comm = self.intern(comm);
        let thread = ThreadIdx(self.t.threads.len() as u32);
        self.t.processes.push(Process {
            pid,
            ppid: None,
            comm,
            start_ns: None,
            exec_ns: None,
            end_ns: None,
            threads: vec![thread],
        });
        self.t.threads.push(Thread {
            tid: pid,
            process: ProcIdx(self.t.processes.len() as u32 - 1),
            comm,
            start_ns: None,
            end_ns: None,
        });
        thread
    }

    /// A stack of kernel functions, outermost first.
    pub fn stack(&mut self, names: &[&str]) -> Option<StackIdx> {
        self.mixed_stack(&[], names)
    }

    /// A stack of the program's functions (`user`, outermost first) that
    /// entered the kernel (`kernel`, outermost first): the innermost frame
    /// is the last kernel one, or the last user one when `kernel` is empty.
    pub fn mixed_stack(&mut self, user: &[&str], kernel: &[&str]) -> Option<StackIdx> {
        let mut frames = Vec::new();
        for (names, kernel) in [(user, false), (kernel, true)] {
            for name in names {
                frames.push(self.frame(name, kernel));
            }
        }
        let mut parent = None;
        for frame in frames {
            self.t.stacks.push(StackNode::new(parent, frame));
            parent = Some(StackIdx(self.t.stacks.len() as u32 - 1));
        }
        parent
    }

    /// A 1 ms cpu-clock sample; samples must come in time order.
    pub fn sample(&mut self, time_ns: u64, thread: ThreadIdx, cpu: u32, stack: Option<StackIdx>) {
        let s = &mut self.t.samples;
        s.time_ns.push(time_ns);
        s.thread.push(thread);
        s.cpu.push(cpu);
        s.stack.push(stack);
        s.period.push(1_000_000);
    }

    /// Another thread of the process of `of`.
    pub fn thread(&mut self, of: ThreadIdx, tid: i32, comm: &str) -> ThreadIdx {
        let comm = self.intern(comm);
        let process = self.t.threads[of.ix()].process;
        let thread = ThreadIdx(self.t.threads.len() as u32);
        self.t.threads.push(Thread {
            tid,
            process,
            comm,
            start_ns: None,
            end_ns: None,
        });
        self.t.processes[process.ix()].threads.push(thread);
        thread
    }

    /// Sets a process's parent and lifetime (fork and exit times).
    pub fn lifetime(&mut self, of: ThreadIdx, ppid: Option<i32>, start: u64, end: Option<u64>) {
        let th = &mut self.t.threads[of.ix()];
        th.start_ns = Some(start);
        th.end_ns = end;
        let p = &mut self.t.processes[th.process.ix()];
        p.ppid = ppid;
        p.start_ns = Some(start);
        p.end_ns = end;
    }

    fn thread_of(&self, tid: i32) -> ThreadIdx {
        let i = self.t.threads.iter().position(|t| t.tid == tid);
        ThreadIdx(i.map_or(u32::MAX, |i| i as u32))
    }

    fn event(
        &mut self,
        time_ns: u64,
        cpu: u32,
        thread: ThreadIdx,
        stack: Option<StackIdx>,
        kind: EventKind,
    ) {
        self.t.events.push(Event {
            time_ns,
            cpu,
            thread,
            stack,
            kind,
        });
    }

    /// A `sched_switch` on `cpu` from `prev` (leaving in `state`: 0
    /// preempted, 1 sleeping, 2 uninterruptible) to `next` (0 = idle); the
    /// stack is where `prev` blocked. Events must come in time order.
    pub fn switch(
        &mut self,
        time_ns: u64,
        cpu: u32,
        prev: i32,
        state: u64,
        next: i32,
        stack: Option<StackIdx>,
    ) {
        self.switch_prio(time_ns, cpu, prev, state, next, 120, stack);
    }

    /// [`TraceBuilder::switch`] with the priority of the thread switched in.
    #[allow(clippy::too_many_arguments)]
    pub fn switch_prio(
        &mut self,
        time_ns: u64,
        cpu: u32,
        prev: i32,
        state: u64,
        next: i32,
        next_prio: i32,
        stack: Option<StackIdx>,
    ) {
        let thread = self.thread_of(prev);
        self.event(
            time_ns,
            cpu,
            thread,
            stack,
            EventKind::Switch {
                prev_tid: prev,
                prev_state: state,
                next_tid: next,
                next_prio,
                windows: None,
            },
        );
    }

    /// A `sched_waking` of `tid`, recorded on `waker` with its stack.
    pub fn waking(
        &mut self,
        time_ns: u64,
        cpu: u32,
        waker: ThreadIdx,
        tid: i32,
        stack: Option<StackIdx>,
    ) {
        self.event(
            time_ns,
            cpu,
            waker,
            stack,
            EventKind::Waking {
                tid,
                target_cpu: cpu as i32,
            },
        );
    }

    /// A `block_rq_complete` of a write of `bytes` to `dev`, recorded on
    /// `thread` (the one the device's interrupt hit).
    pub fn block(&mut self, time_ns: u64, cpu: u32, thread: ThreadIdx, dev: u32, bytes: u64) {
        self.event(
            time_ns,
            cpu,
            thread,
            None,
            EventKind::BlockRequest {
                dev,
                sector: 0,
                bytes,
                write: true,
                complete: true,
            },
        );
    }

    /// A `sys_enter_NAME` of `thread` on CPU 0, with the stack at entry.
    pub fn syscall_enter(
        &mut self,
        time_ns: u64,
        thread: ThreadIdx,
        stack: Option<StackIdx>,
        name: &str,
        args: [u64; 6],
    ) {
        let name = self.intern(name);
        self.event(
            time_ns,
            0,
            thread,
            stack,
            EventKind::SyscallEnter {
                name,
                args: Box::new(args),
                file_op: None,
            },
        );
    }

    /// A `sys_exit_NAME` of `thread` on CPU 0; `ret` is negative errno on
    /// failure.
    pub fn syscall_exit(&mut self, time_ns: u64, thread: ThreadIdx, name: &str, ret: i64) {
        let name = self.intern(name);
        self.event(
            time_ns,
            0,
            thread,
            None,
            EventKind::SyscallExit {
                name,
                ret,
                file_op: None,
            },
        );
    }

    /// A whole syscall of `thread`: entered at `time_ns` from `stack`,
    /// returning `ret` `duration_ns` later. Events must come in time order.
    #[allow(clippy::too_many_arguments)]
    pub fn syscall(
        &mut self,
        time_ns: u64,
        thread: ThreadIdx,
        stack: Option<StackIdx>,
        name: &str,
        args: [u64; 6],
        ret: i64,
        duration_ns: u64,
    ) {
        self.syscall_enter(time_ns, thread, stack, name, args);
        self.syscall_exit(time_ns + duration_ns, thread, name, ret);
    }

    /// A Windows file operation of `thread`, as the ETL reader gives one: a
    /// `SyscallEnter` named `name` (`FileIO/Create`, …) at `time_ns` and its
    /// `SyscallExit` with `ret` `duration_ns` later, both with `op`.
    pub fn file_op(
        &mut self,
        time_ns: u64,
        thread: ThreadIdx,
        op: FileOp,
        name: &str,
        ret: i64,
        duration_ns: u64,
    ) {
        let name = self.intern(name);
        let file_op = Some(op);
        let args = [0; 6];
        self.event(
            time_ns,
            0,
            thread,
            None,
            EventKind::SyscallEnter {
                name,
                args: Box::new(args),
                file_op,
            },
        );
        self.event(
            time_ns + duration_ns,
            0,
            thread,
            None,
            EventKind::SyscallExit { name, ret, file_op },
        );
    }

    /// Makes the trace last at least until `time_ns`.
    pub fn end(&mut self, time_ns: u64) {
        self.end_ns = self.end_ns.max(time_ns);
    }

    /// The trace, spanning its samples and events, on two CPUs.
    pub fn build(mut self) -> Trace {
        self.t.meta.start_ns = 0;
        let last_sample = self.t.samples.time_ns.last().copied().unwrap_or(0);
        let last_event = self.t.events.last().map_or(0, |e| e.time_ns);
        self.t.meta.end_ns = self.end_ns.max(last_sample).max(last_event);
        self.t.meta.nr_cpus = Some(2);
        self.t
    }
}

/// A trace of one process `app` (pid 10) sampled at 1 kHz on CPU 0 whose
/// samples have the given kernel stacks, outermost frame first, each
/// `count` times: `stacks_trace(&[(&["exc_page_fault", "handle_mm_fault"], 300)])`.
pub fn stacks_trace(stacks: &[(&[&str], usize)]) -> Trace {
    let mut b = TraceBuilder::default();
    let app = b.process(10, "app");
    let mut time_ns = 0;
    for (names, count) in stacks {
        let stack = b.stack(names);
        for _ in 0..*count {
            time_ns += 1_000_000;
            b.sample(time_ns, app, 0, stack);
        }
    }
    b.build()
}

/// The edge of `detect::trend`'s threshold `min`: starting from `rising`
/// (strictly increasing), swaps neighbours in its middle (all but the
/// first and last `keep` values, which stay put), each time the swap that
/// lowers the trend least, until the trend drops below `min`. Returns the
/// last sequence at or above `min` and the first below it, which differ by
/// one swap.
pub fn trend_edge(rising: &[f64], keep: usize, min: f64) -> (Vec<f64>, Vec<f64>) {
    use crate::detect::trend;
    let mut v = rising.to_vec();
    assert!(
        trend(&v) >= min,
        "the start must be at or above the threshold"
    );
    loop {
        let swapped = |j: usize| {
            let mut w = v.clone();
            w.swap(j, j + 1);
            w
        };
        let best = (keep..v.len() - keep - 1)
            .filter(|&j| v[j] < v[j + 1])
            .map(swapped)
            .max_by(|a, b| trend(a).total_cmp(&trend(b)))
            .expect("the middle reversed is still above the threshold: lengthen the sequence");
        if trend(&best) < min {
            return (v, best);
        }
        v = best;
    }
}

impl TraceBuilder {
    /// A Windows soft fault of `thread` at `time_ns` in user mode, as the
    /// ETL reader gives one: its `kind`, `error_code` only the user bit.
    pub fn windows_fault(
        &mut self,
        time_ns: u64,
        thread: ThreadIdx,
        kind: WindowsFaultKind,
        stack: Option<StackIdx>,
    ) {
        self.event(
            time_ns,
            0,
            thread,
            stack,
            EventKind::PageFault {
                address: 0x10000,
                ip: 0x401000,
                error_code: 4,
                user: true,
                windows_kind: Some(kind),
            },
        );
    }

    /// A hard fault (`MajorFault`) of `thread` at `time_ns`.
    pub fn major_fault(&mut self, time_ns: u64, thread: ThreadIdx) {
        self.event(
            time_ns,
            0,
            thread,
            None,
            EventKind::MajorFault { address: None },
        );
    }
}

/// `small_trace` with every `work`-only sample (stack 1) turned into a
/// `memset` one (stack 2), `extra` more memset samples, and the trace
/// stretched to `duration_ms`.
pub fn grown_trace(extra: usize, duration_ms: u64) -> Trace {
    let mut t = small_trace();
    for s in t.samples.stack.iter_mut() {
        if *s == Some(StackIdx(1)) {
            *s = Some(StackIdx(2));
        }
    }
    for i in 0..extra {
        t.samples.time_ns.push(7_000_000 + i as u64);
        t.samples.thread.push(ThreadIdx(0));
        t.samples.cpu.push(0);
        t.samples.stack.push(Some(StackIdx(2)));
        t.samples.period.push(1_000_000);
    }
    t.meta.end_ns = t.meta.start_ns + duration_ms * 1_000_000;
    t
}
