//! One record of a scheduler recording made into what the trace model has of it: a
//! sample, a `Switch`, `Waking`, `SyscallEnter`/`SyscallExit`, `BlockRequest`,
//! `PageFault` or `MajorFault` event, or a change of a process's or thread's life
//! (`lifetimes`), with its stack (`stacks`); and, at the end, the names of the events the
//! records were, for the trace's meta. Records must come in time order. It does not
//! order them, read paths, name frames or set the rest of the meta (`lib.rs` does).

use slowlab_bpf::sched::format::{block_flags, RecordKind, SchedRecord};
use slowlab_bpf::sched::{RecordedSyscall, SchedLog};
use slowlab_model::trace::{Event, EventKind, StackIdx, ThreadIdx, Trace};

use crate::lifetimes::Lifetimes;
use crate::stacks::Stacks;

/// The names the model gives the recorded events, in the order of [`TraceMeta::events`].
const EVENT_NAMES: [&str; 3] = ["cpu-clock", "sched:sched_switch", "sched:sched_waking"];

/// Which kinds of records a recording has (the names of their events go into the trace's
/// list; a recording made before they were recorded has none).
#[derive(Default)]
struct Seen {
    /// The syscalls of the records, a bit each (bit `c`, the record's id).
    calls: u32,
    block: bool,
    major_faults: bool,
    page_faults: bool,
}

/// Adds the event of record `r` (its time and CPU) to the trace.
fn push(
    trace: &mut Trace,
    r: &SchedRecord,
    thread: ThreadIdx,
    stack: Option<StackIdx>,
    kind: EventKind,
) {
    trace.events.push(Event {
        time_ns: r.time_ns,
        cpu: u32::from(r.cpu),
        thread,
        stack,
        kind,
    });
}

/// What the records made so far know: the threads' lives, the stacks, which kinds came.
pub(crate) struct Events<'a> {
    life: Lifetimes,
    stacks: Stacks<'a>,
    seen: Seen,
    /// Syscall records naming a syscall this build does not know, skipped.
    unknown_syscalls: u64,
    /// A CPU sample's period, from the recording's sampling rate.
    period: u64,
}

impl<'a> Events<'a> {
    pub(crate) fn new(log: &'a SchedLog) -> Events<'a> {
        Events {
            life: Lifetimes::new(log),
            stacks: Stacks::new(log),
            seen: Seen::default(),
            unknown_syscalls: 0,
            period: 1_000_000_000u64
                .checked_div(u64::from(log.sample_freq))
                .unwrap_or(0),
        }
    }

    /// Adds what record `r` says to `trace`.
    pub(crate) fn add(&mut self, trace: &mut Trace, r: &SchedRecord) {
        let t = r.time_ns;
        match r.kind {
            RecordKind::Switch => {
                let thread = self.life.thread(trace, r.tid, t);
                self.life.thread(trace, r.a, t);
                let pid = self.life.pid_of(r.tid);
                let stack = self.stacks.stack(trace, pid, r.kstack, r.ustack, t, false);
                let prev_state = match r.c {
                    0 => 0,
                    0xff => 0x100,
                    c => 1u64 << (c.min(63) - 1),
                };
                push(
                    trace,
                    r,
                    thread,
                    stack,
                    EventKind::Switch {
                        prev_tid: r.tid as i32,
                        prev_state,
                        next_tid: r.a as i32,
                        next_prio: r.b as i32,
                        windows: None,
                    },
                );
            }
            RecordKind::Waking => {
                let thread = self.life.thread(trace, r.tid, t);
                self.life.thread(trace, r.a, t);
                let pid = self.life.pid_of(r.tid);
                let stack = self.stacks.stack(trace, pid, r.kstack, r.ustack, t, false);
                push(
                    trace,
                    r,
                    thread,
                    stack,
                    EventKind::Waking {
                        tid: r.a as i32,
                        target_cpu: r.b as i32,
                    },
                );
            }
            RecordKind::Sample => {
                self.life.note_pid(r.tid, r.a);
                let thread = self.life.thread(trace, r.tid, t);
                let stack = self.stacks.stack(trace, r.a, r.kstack, r.ustack, t, true);
                let s = &mut trace.samples;
                s.time_ns.push(t);
                s.thread.push(thread);
                s.cpu.push(u32::from(r.cpu));
                s.stack.push(stack);
                s.period.push(self.period);
            }
            RecordKind::Fork => self.life.fork(trace, r.tid, r.a, r.b, t),
            RecordKind::Exec => self.life.exec(trace, r.tid, r.a, r.comm(), t),
            RecordKind::Exit => self.life.exit(trace, r.tid, r.a, t),
            RecordKind::Rename => self.life.rename(trace, r.tid, r.a, r.comm(), t),
            RecordKind::Block => {
                self.seen.block = true;
                let thread = self.life.thread(trace, r.tid, t);
                push(
                    trace,
                    r,
                    thread,
                    None,
                    EventKind::BlockRequest {
                        dev: r.a,
                        sector: r.value,
                        bytes: u64::from(r.b) * 512,
                        write: r.c & block_flags::WRITE != 0,
                        complete: r.c & block_flags::COMPLETE != 0,
                    },
                );
            }
            RecordKind::PageFault => {
                self.seen.page_faults = true;
                let kind = EventKind::PageFault {
                    address: r.value,
                    ip: r.ip,
                    error_code: r.b,
                    user: r.c == 1,
                    windows_kind: None,
                };
                self.push_of_process(trace, r, r.kstack, kind);
            }
            RecordKind::SysCall => {
                let Some(call) = RecordedSyscall::from_u8(r.c) else {
                    self.unknown_syscalls += 1;
                    return;
                };
                self.seen.calls |= 1 << r.c;
                let kind = EventKind::SyscallEnter {
                    name: self.life.s(trace, call.name()),
                    args: Box::new(r.args()),
                    file_op: None,
                };
                self.push_of_process(trace, r, None, kind);
            }
            RecordKind::MajorFault => {
                self.seen.major_faults = true;
                let kind = EventKind::MajorFault {
                    address: Some(r.value),
                };
                self.push_of_process(trace, r, r.kstack, kind);
            }
            // Paths are read apart (`captured_paths`).
            RecordKind::Path => {}
            RecordKind::SysEnter | RecordKind::SysExit => {
                let Some(call) = RecordedSyscall::from_u8(r.c) else {
                    self.unknown_syscalls += 1;
                    return;
                };
                self.seen.calls |= 1 << r.c;
                let thread = self.life.thread(trace, r.tid, t);
                let name = self.life.s(trace, call.name());
                let kind = if r.kind == RecordKind::SysEnter {
                    EventKind::SyscallEnter {
                        name,
                        args: Box::new([r.value, u64::from(r.a), u64::from(r.b), 0, 0, 0]),
                        file_op: None,
                    }
                } else {
                    EventKind::SyscallExit {
                        name,
                        ret: r.value as i64,
                        file_op: None,
                    }
                };
                push(trace, r, thread, None, kind);
            }
        }
    }

    /// Adds `kind`, the event of record `r` that names its thread's process (`r.a`: a
    /// fault or a detector's syscall), with `kstack` (if any) and `r`'s user stack.
    fn push_of_process(
        &mut self,
        trace: &mut Trace,
        r: &SchedRecord,
        kstack: Option<u32>,
        kind: EventKind,
    ) {
        self.life.note_pid(r.tid, r.a);
        let thread = self.life.thread(trace, r.tid, r.time_ns);
        let stack = self
            .stacks
            .stack(trace, r.a, kstack, r.ustack, r.time_ns, false);
        push(trace, r, thread, stack, kind);
    }

    /// Ends the records: adds the threads alive at the start that never ran, and returns
    /// the names of the events the records were (for [`TraceMeta::events`]) and how many
    /// syscall records were skipped as unknown.
    ///
    /// [`TraceMeta::events`]: slowlab_model::trace::TraceMeta::events
    pub(crate) fn finish(mut self, trace: &mut Trace, log: &SchedLog) -> (Vec<String>, u64) {
        // Threads alive at the start that never ran (a hung process): rows too, as perf's
        // trace has every process alive when it started.
        self.life.quiet_threads(trace, log);
        let mut events: Vec<String> = EVENT_NAMES.iter().map(|s| s.to_string()).collect();
        if self.seen.page_faults {
            events.push("exceptions:page_fault_user".to_string());
            events.push("exceptions:page_fault_kernel".to_string());
        }
        if self.seen.major_faults {
            events.push("major-faults".to_string());
        }
        if self.seen.block {
            events.push("block:block_rq_issue".to_string());
            events.push("block:block_rq_complete".to_string());
        }
        for (i, call) in RecordedSyscall::ALL.iter().enumerate() {
            if self.seen.calls & (1 << (i + 1)) != 0 {
                for dir in ["enter", "exit"] {
                    events.push(format!("syscalls:sys_{dir}_{}", call.name()));
                }
            }
        }
        (events, self.unknown_syscalls)
    }
}
