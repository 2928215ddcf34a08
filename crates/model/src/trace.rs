//! The recorded-trace model: processes, threads, samples and scheduler events
//! as read from a perf.data file. Filled in by the `perf` crate; read by
//! `analyze`. No parsing and no analysis lives here.
//!
//! # Shape
//!
//! The model follows the Firefox profiler's processed format (as samply
//! writes it): every string, module, function, frame and stack is stored once
//! in a table and referred to by a small index.
//!
//! - [`Trace::frames`]: one row per unique code address (per module);
//!   symbolized once, pointing at a [`Function`].
//! - [`Trace::stacks`]: a prefix tree. A [`StackNode`] is one frame plus the
//!   node of its caller, so a call stack is a single [`StackIdx`] (its
//!   innermost frame) and stacks that share callers share nodes.
//! - [`Trace::samples`]: the CPU samples of the sampling event, in time
//!   order, as parallel columns (time, thread, cpu, stack, period).
//! - [`Trace::events`]: everything else that happened at a point in time and
//!   may carry a stack — context switches, wake-ups, page faults, syscalls,
//!   other tracepoints — decoded into [`EventKind`], in time order.
//! - [`Trace::processes`] and [`Trace::threads`]: one row per lifetime (a
//!   reused pid or tid gets a new row), with fork/exec/exit times.
//!
//! A Windows trace (read by the `etl` crate) fills the same types, each
//! Linux field with its Linux meaning; what only Windows records has typed
//! fields that a Linux trace leaves `None`: the state and wait reason of a
//! thread switched out ([`WindowsSwitchOut`] on [`EventKind::Switch`]), the
//! kind of a soft fault ([`WindowsFaultKind`] on [`EventKind::PageFault`])
//! and which file operation a syscall-like call is ([`FileOp`] on
//! [`EventKind::SyscallEnter`] and [`EventKind::SyscallExit`]).
//!
//! Times are nanoseconds on the trace's clock (perf's `perf_clock`, which is
//! `CLOCK_MONOTONIC`-like); [`TraceMeta::start_ns`] is the first record's time.

use serde::{Deserialize, Serialize};

macro_rules! index_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub u32);

        impl $name {
            /// The index as a `usize`, for indexing the table.
            #[inline]
            pub fn ix(self) -> usize {
                self.0 as usize
            }
        }
    };
}

index_type!(
    /// Index into [`Trace::strings`].
    StrIdx
);
index_type!(
    /// Index into [`Trace::processes`].
    ProcIdx
);
index_type!(
    /// Index into [`Trace::threads`].
    ThreadIdx
);
index_type!(
    /// Index into [`Trace::modules`].
    ModuleIdx
);
index_type!(
    /// Index into [`Trace::functions`].
    FuncIdx
);
index_type!(
    /// Index into [`Trace::frames`].
    FrameIdx
);
index_type!(
    /// Index into [`Trace::stacks`].
    StackIdx
);

/// A whole trace, read from one perf.data file.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Trace {
    pub meta: TraceMeta,
    /// Interned strings; see [`Trace::str`].
    pub strings: Vec<String>,
    pub processes: Vec<Process>,
    pub threads: Vec<Thread>,
    pub modules: Vec<Module>,
    pub functions: Vec<Function>,
    pub frames: Vec<Frame>,
    pub stacks: Vec<StackNode>,
    pub samples: Samples,
    pub events: Vec<Event>,
    pub stats: ReadStats,
}

/// What the file says about itself and how it was recorded.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TraceMeta {
    pub hostname: Option<String>,
    pub os_release: Option<String>,
    pub arch: Option<String>,
    pub perf_version: Option<String>,
    pub cmdline: Vec<String>,
    pub nr_cpus: Option<u32>,
    /// Time of the first record (ns).
    pub start_ns: u64,
    /// Time of the last record (ns).
    pub end_ns: u64,
    /// Name of the event whose samples are in [`Trace::samples`]
    /// (e.g. `cpu-clock`, `cycles`).
    pub sample_event: Option<String>,
    /// Sampling frequency in Hz when the sampling event was frequency-based.
    pub sample_freq: Option<u64>,
    /// Names of all events in the file, in attribute order.
    pub events: Vec<String>,
    /// Address of the kernel's `_text` when the trace was recorded (from
    /// perf's kernel map record), to follow the kernel if it moved (KASLR)
    /// since.
    #[serde(default)]
    pub kernel_text: Option<u64>,
    /// One instant on both the trace's clock and the wall clock (perf's
    /// clock data, written when the trace was recorded with `-k`), to turn
    /// trace times into dates; `None` when the file has none.
    #[serde(default)]
    pub wall_clock: Option<WallClock>,
    /// The process of the command the recording ran (`slowlab record -- CMD` with the
    /// eBPF recorder, which knows it), by pid: the analysis's default root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_pid: Option<i32>,
}

/// The same instant on the trace's clock and on the wall clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WallClock {
    /// The trace clock's time (ns).
    pub clock_ns: u64,
    /// Nanoseconds since the Unix epoch at that instant.
    pub unix_ns: u64,
}

impl TraceMeta {
    /// Duration of the trace in seconds.
    pub fn duration_s(&self) -> f64 {
        self.end_ns.saturating_sub(self.start_ns) as f64 / 1e9
    }

    /// Nanoseconds since the Unix epoch at trace time `t_ns`, when the
    /// file recorded the wall clock.
    pub fn unix_ns(&self, t_ns: u64) -> Option<u64> {
        let w = self.wall_clock?;
        Some((w.unix_ns as i128 + t_ns as i128 - w.clock_ns as i128).max(0) as u64)
    }
}

/// Counts of what was read, lost or skipped; the source of every warning.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ReadStats {
    /// Records read from the data section.
    pub records: u64,
    /// Events the kernel dropped (PERF_RECORD_LOST / LOST_SAMPLES).
    pub lost_events: u64,
    /// Records that could not be parsed and were skipped.
    pub unparsed_records: u64,
    /// Bytes at the end of the data section that could not be read
    /// (a truncated file).
    pub truncated_bytes: u64,
    /// True when the header said the data section was empty or too long,
    /// i.e. `perf record` did not finish writing the file.
    pub unfinished_file: bool,
    /// Distinct stack positions (caller stack + frame) whose address fell
    /// into no known mapping (all such addresses are one `[unknown]` frame:
    /// no binary names them).
    pub unmapped_frames: u64,
    /// Samples whose callchain was cut by the kernel's depth limit or empty.
    pub samples_without_stack: u64,
    /// Human-readable warnings, each with what to do about it.
    pub warnings: Vec<String>,
}

/// One process lifetime.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Process {
    pub pid: i32,
    /// Parent pid when the fork was recorded.
    pub ppid: Option<i32>,
    /// The last command name seen (after exec, the new program).
    pub comm: StrIdx,
    /// Fork time, when the fork happened during the trace.
    pub start_ns: Option<u64>,
    /// Time of the last exec during the trace.
    pub exec_ns: Option<u64>,
    /// Exit time, when the exit happened during the trace.
    pub end_ns: Option<u64>,
    /// Threads of this process, in creation order.
    pub threads: Vec<ThreadIdx>,
}

/// One thread lifetime.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Thread {
    pub tid: i32,
    pub process: ProcIdx,
    /// The last command name seen for this thread.
    pub comm: StrIdx,
    pub start_ns: Option<u64>,
    pub end_ns: Option<u64>,
}

/// Where a module's code lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModuleKind {
    /// The kernel image (`[kernel.kallsyms]`).
    Kernel,
    /// A loadable kernel module (`[ext4]`).
    KernelModule,
    /// A user-space ELF file.
    User,
    /// Anonymous or JIT memory, the vdso, or no mapping at all.
    Other,
}

/// A mapped binary (or pseudo-binary such as the kernel).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Module {
    /// Short name: the file name, or `[kernel.kallsyms]`.
    pub name: StrIdx,
    /// Full path as recorded.
    pub path: StrIdx,
    pub kind: ModuleKind,
    /// GNU build id from the perf.data build-id table, hex.
    pub build_id: Option<String>,
    /// Why this module's frames have no function names, if they have none
    /// (or, for a binary named only in part, why some have none), with
    /// what to do about it.
    pub symbol_error: Option<String>,
}

/// A function: a symbol name within a module.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Function {
    /// Demangled name, or `[unknown]` when the address had no symbol.
    pub name: StrIdx,
    pub module: ModuleIdx,
    pub kernel: bool,
}

/// One unique code address.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Frame {
    pub module: ModuleIdx,
    /// For user modules: the file offset of the looked-up address; for the
    /// kernel: the absolute address. Return addresses are stored minus one
    /// (pointing into the call instruction), sampled addresses as they are.
    pub address: u64,
    pub function: FuncIdx,
    pub kernel: bool,
}

/// A node of the stack prefix tree: a frame under its caller's node.
///
/// A big trace has millions of nodes, so a node takes 8 bytes: the caller
/// is stored as a plain `u32` with `u32::MAX` for none (an
/// `Option<StackIdx>` would take 8 bytes alone), read with
/// [`StackNode::parent`]. In JSON it is `{"parent": n or null, "frame": n}`.
/// A node's depth is not stored: walk its parents, or carry it down from
/// the root as the views do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "StackNodeFields", into = "StackNodeFields")]
pub struct StackNode {
    parent: u32,
    pub frame: FrameIdx,
}

/// The stored value of a node without a parent.
const NO_PARENT: u32 = u32::MAX;

impl StackNode {
    /// The node of `frame` under `parent` (`None`: an outermost frame).
    /// Stack indices stop below `u32::MAX`.
    pub fn new(parent: Option<StackIdx>, frame: FrameIdx) -> Self {
        debug_assert!(!matches!(parent, Some(p) if p.0 == NO_PARENT));
        StackNode {
            parent: parent.map_or(NO_PARENT, |p| p.0),
            frame,
        }
    }

    /// The caller's node; `None` for an outermost frame.
    #[inline]
    pub fn parent(&self) -> Option<StackIdx> {
        (self.parent != NO_PARENT).then_some(StackIdx(self.parent))
    }

    /// Moves the node under another caller.
    pub fn set_parent(&mut self, parent: Option<StackIdx>) {
        *self = StackNode::new(parent, self.frame);
    }
}

/// [`StackNode`] as it reads and writes in JSON. Older files also hold a
/// `depth`, ignored when read.
#[derive(Serialize, Deserialize)]
struct StackNodeFields {
    parent: Option<StackIdx>,
    frame: FrameIdx,
}

impl From<StackNodeFields> for StackNode {
    fn from(f: StackNodeFields) -> Self {
        // A damaged file's `u32::MAX` parent reads as none.
        StackNode::new(f.parent.filter(|p| p.0 != NO_PARENT), f.frame)
    }
}

impl From<StackNode> for StackNodeFields {
    fn from(n: StackNode) -> Self {
        StackNodeFields {
            parent: n.parent(),
            frame: n.frame,
        }
    }
}

/// The samples of the sampling event, as parallel columns in time order.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Samples {
    pub time_ns: Vec<u64>,
    pub thread: Vec<ThreadIdx>,
    pub cpu: Vec<u32>,
    /// Innermost frame of the sample's stack; `None` when there was none.
    pub stack: Vec<Option<StackIdx>>,
    /// The sample's period (ns of CPU time for `cpu-clock`).
    pub period: Periods,
}

/// The sample periods: a column of `u64` that is usually one value for the
/// whole trace (sampling by frequency on a software clock), stored then as
/// that value and a count instead of 8 bytes a sample (119 MB on a 2.3 GB
/// trace of 14.9 million samples). Indexes like a `Vec<u64>`; reads and
/// writes in JSON as a plain array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Periods(PeriodsRepr);

#[derive(Clone, Debug, PartialEq, Eq)]
enum PeriodsRepr {
    Same { value: u64, len: usize },
    Each(Vec<u64>),
}

impl Default for Periods {
    fn default() -> Self {
        Periods(PeriodsRepr::Same { value: 0, len: 0 })
    }
}

impl Periods {
    pub fn len(&self) -> usize {
        match &self.0 {
            PeriodsRepr::Same { len, .. } => *len,
            PeriodsRepr::Each(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends a period; a column of one value becomes one of each value
    /// when another comes.
    #[inline]
    pub fn push(&mut self, period: u64) {
        match &mut self.0 {
            PeriodsRepr::Same {
                len: len @ 0,
                value,
            } => (*value, *len) = (period, 1),
            PeriodsRepr::Same { value, len } if *value == period => *len += 1,
            PeriodsRepr::Same { value, len } => {
                let mut each = vec![*value; *len];
                each.push(period);
                self.0 = PeriodsRepr::Each(each);
            }
            PeriodsRepr::Each(v) => v.push(period),
        }
    }

    /// The mean period; `None` when there is none. One value for the whole trace is
    /// that value; otherwise the sum is taken in f64, where a damaged trace's periods of
    /// 2^63 would overflow a `u64`'s.
    pub fn mean(&self) -> Option<f64> {
        match &self.0 {
            PeriodsRepr::Same { len: 0, .. } => None,
            PeriodsRepr::Same { value, .. } => Some(*value as f64),
            PeriodsRepr::Each(v) if v.is_empty() => None,
            PeriodsRepr::Each(v) => Some(v.iter().map(|&p| p as f64).sum::<f64>() / v.len() as f64),
        }
    }

    /// The periods in order.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        let (same, each) = match &self.0 {
            PeriodsRepr::Same { value, len } => (Some(std::iter::repeat_n(*value, *len)), None),
            PeriodsRepr::Each(v) => (None, Some(v.iter().copied())),
        };
        same.into_iter().flatten().chain(each.into_iter().flatten())
    }
}

impl std::ops::Index<usize> for Periods {
    type Output = u64;

    #[inline]
    fn index(&self, i: usize) -> &u64 {
        match &self.0 {
            PeriodsRepr::Same { value, len } => {
                assert!(i < *len, "period {i} of {len}");
                value
            }
            PeriodsRepr::Each(v) => &v[i],
        }
    }
}

impl FromIterator<u64> for Periods {
    fn from_iter<I: IntoIterator<Item = u64>>(iter: I) -> Self {
        let mut p = Periods::default();
        for x in iter {
            p.push(x);
        }
        p
    }
}

impl Serialize for Periods {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for Periods {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Vec::<u64>::deserialize(d)?.into_iter().collect())
    }
}

impl Samples {
    pub fn len(&self) -> usize {
        self.time_ns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.time_ns.is_empty()
    }
}

/// A point event other than a CPU sample.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Event {
    pub time_ns: u64,
    pub cpu: u32,
    /// The thread on whose behalf the event was emitted.
    pub thread: ThreadIdx,
    /// The call stack at the event, when recorded with `-g`.
    pub stack: Option<StackIdx>,
    pub kind: EventKind,
}

/// Decoded tracepoint and software events. Fields are raw kernel values;
/// interpreting them (blocked vs runnable, errno names) is for `analyze`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    /// `sched:sched_switch`: the CPU switched from `prev_tid` to `next_tid`.
    /// `prev_state` is the kernel task state (0 = runnable, i.e. preempted;
    /// 1 = interruptible sleep, 2 = uninterruptible sleep, …); a Windows
    /// trace gives the Linux-like state its thread state maps to (0, 1 or
    /// 2, see `slowlab_etl::model`) and keeps its own in `windows`.
    Switch {
        prev_tid: i32,
        prev_state: u64,
        next_tid: i32,
        /// The kernel priority of the thread switched in (`next_prio`:
        /// 120 + nice for ordinary threads, below 100 for real-time ones);
        /// 120 when the trace did not record it.
        #[serde(default = "default_prio")]
        next_prio: i32,
        /// The Windows state and wait reason of the thread switched out
        /// (a Windows trace's `CSwitch`); `None` in a Linux trace.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        windows: Option<WindowsSwitchOut>,
    },
    /// `sched:sched_waking`: the event's thread woke `tid`.
    Waking { tid: i32, target_cpu: i32 },
    /// `exceptions:page_fault_user` / `_kernel`; in a Windows trace, a soft
    /// fault (`PageFault/TransitionFault`, …) with its kind in
    /// `windows_kind`.
    PageFault {
        address: u64,
        ip: u64,
        /// x86 page-fault error code (bit 0 protection, 1 write, 2 user;
        /// the kernel's is an `unsigned long`, of which x86 defines the low
        /// 16 bits). A Windows trace records none: only bit 2 is set, from
        /// `user`.
        error_code: u32,
        user: bool,
        /// The kind of a Windows soft fault; `None` in a Linux trace.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        windows_kind: Option<WindowsFaultKind>,
    },
    /// The `major-faults` software event.
    MajorFault { address: Option<u64> },
    /// `syscalls:sys_enter_NAME`; in a Windows trace, the start of a file
    /// operation (`name` `FileIO/Create`, …; `file_op` says which) or a
    /// `VirtualAlloc`/`VirtualFree` (see `slowlab_etl::model::io`).
    SyscallEnter {
        name: StrIdx,
        /// The six arguments, out of line: they would make every event of a
        /// trace 80 bytes instead of 48 (a `Box`, serialized as the array).
        args: Box<[u64; 6]>,
        /// Which Windows file operation this is; `None` for anything else,
        /// including every syscall of a Linux trace.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        file_op: Option<FileOp>,
    },
    /// `syscalls:sys_exit_NAME`; `ret` is negative errno on failure. In a
    /// Windows trace, the end of a file operation (`file_op` as at its
    /// start) or of a `VirtualAlloc`/`VirtualFree`.
    SyscallExit {
        name: StrIdx,
        ret: i64,
        /// As [`EventKind::SyscallEnter`]'s.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        file_op: Option<FileOp>,
    },
    /// `block:block_rq_issue` (`complete` false: a request sent to the
    /// device, on behalf of the event's thread) and `block:block_rq_complete`
    /// (true: the device finished it, usually in interrupt context).
    BlockRequest {
        /// The device as the kernel's `dev_t` (major << 20 | minor).
        dev: u32,
        sector: u64,
        /// Bytes of the request (sectors × 512).
        bytes: u64,
        /// A write (`rwbs` has `W`), else a read, flush or discard.
        write: bool,
        complete: bool,
    },
    /// `sched:sched_process_fork` etc. and any other tracepoint, not decoded.
    Other { name: StrIdx },
}

pub use crate::windows_fields::{
    FileOp, WindowsFaultKind, WindowsSwitchOut, WindowsThreadState, WindowsWaitReason,
};

/// `major:minor` of a kernel `dev_t` as block tracepoints record it
/// (major << 20 | minor).
pub fn dev_name(dev: u32) -> String {
    format!("{}:{}", dev >> 20, dev & 0xfffff)
}

/// Priority of a nice-0 thread, for switches recorded without one.
pub fn default_prio() -> i32 {
    120
}

impl Trace {
    /// The string at `idx`; `""` for an index out of range.
    #[inline]
    pub fn str(&self, idx: StrIdx) -> &str {
        self.strings.get(idx.ix()).map(String::as_str).unwrap_or("")
    }

    /// Frames of a stack, innermost first.
    pub fn stack_frames(&self, stack: Option<StackIdx>) -> StackWalk<'_> {
        StackWalk {
            trace: self,
            next: stack,
        }
    }

    /// The function of a frame.
    #[inline]
    pub fn frame_function(&self, frame: FrameIdx) -> FuncIdx {
        self.frames[frame.ix()].function
    }

    /// A function's display name.
    pub fn function_name(&self, func: FuncIdx) -> &str {
        self.str(self.functions[func.ix()].name)
    }

    /// A function's module's short name.
    pub fn function_module(&self, func: FuncIdx) -> &str {
        let m = self.functions[func.ix()].module;
        self.str(self.modules[m.ix()].name)
    }

    /// The process a thread belongs to.
    pub fn thread_process(&self, thread: ThreadIdx) -> &Process {
        &self.processes[self.threads[thread.ix()].process.ix()]
    }
}

/// Iterator over the frames of a stack, innermost first.
pub struct StackWalk<'a> {
    trace: &'a Trace,
    next: Option<StackIdx>,
}

impl Iterator for StackWalk<'_> {
    type Item = FrameIdx;

    fn next(&mut self) -> Option<FrameIdx> {
        let node = self.trace.stacks.get(self.next?.ix())?;
        self.next = node.parent();
        Some(node.frame)
    }
}

#[cfg(test)]
mod tests;
