//! Everything the interactive `report.html` shows, as one serializable
//! value: the trace's processes and threads, its CPU samples, thread state
//! spans, page faults and syscalls as compact columns (small integers, times
//! in microseconds after the trace start, delta-encoded where they come in
//! order), the critical path on the trace's clock, the findings with the
//! time range and threads they are about, and the locks threads waited on
//! with who held them. Assembled by
//! `slowlab_analyze::report_data`, embedded in the page by
//! `slowlab_report::interactive`.

use serde::Serialize;

use crate::critical_path::{Breakdown, PathPart, PathRoot, ResourceKind};
use crate::findings::Finding;

/// The format of [`ReportData`]; the page refuses data of another.
pub const FORMAT_VERSION: u32 = 1;

/// What the page says about the trace and how the report was made.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Meta {
    pub title: String,
    /// The command diagnosed, when there is one.
    pub command: Vec<String>,
    pub hostname: Option<String>,
    pub os_release: Option<String>,
    pub nr_cpus: Option<u32>,
    /// The whole trace, and the range the report covers (`analyze --from
    /// --to`), µs after the trace start.
    pub duration_us: i64,
    pub from_us: i64,
    pub to_us: i64,
    pub sample_event: Option<String>,
    /// Mean CPU time one sample stands for (µs).
    pub sample_us: f64,
    /// The filters the report was made with (`process=make`, …).
    pub filters: Vec<String>,
    pub warnings: Vec<String>,
    /// Whether the trace had scheduler events (else no spans, no path).
    pub has_sched_events: bool,
}

/// Processes as columns (string indices for names; -1 for a time or parent
/// not in the trace). `tree` is 1 for the diagnosed command's processes.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ProcessColumns {
    pub pid: Vec<i32>,
    pub ppid: Vec<i32>,
    pub comm: Vec<u32>,
    pub start: Vec<i64>,
    pub exec: Vec<i64>,
    pub end: Vec<i64>,
    pub tree: Vec<u8>,
}

/// Threads as columns; `process` indexes [`ProcessColumns`].
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ThreadColumns {
    pub tid: Vec<i32>,
    pub process: Vec<u32>,
    pub comm: Vec<u32>,
    pub start: Vec<i64>,
    pub end: Vec<i64>,
}

/// The critical path for the page: the model's summary and parts, and the
/// segments as columns on the trace's clock (µs) with their threads.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PathData {
    pub summary: String,
    pub wall_s: f64,
    pub root: PathRoot,
    pub breakdown: Breakdown,
    pub parts: Vec<PathPart>,
    pub unknown_s: f64,
    pub from: Vec<i64>,
    pub to: Vec<i64>,
    /// Report thread index, -1 when the thread is not shown.
    pub thread: Vec<i32>,
    /// 0 cpu, 1 runnable, 2.. blocked as in [`SpanColumns`].
    pub state: Vec<u8>,
    /// The top function (CPU) or where it blocked, a string index or -1.
    pub label: Vec<i32>,
    pub depth: Vec<u32>,
}

/// A finding with what selecting it selects.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FindingData {
    #[serde(flatten)]
    pub finding: Finding,
    /// Report thread indices: the culprit's threads (or the diagnosed
    /// command's, when the finding names no process).
    pub threads: Vec<u32>,
    pub from_us: i64,
    pub to_us: i64,
}

/// The whole page's data.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ReportData {
    pub version: u32,
    pub meta: Meta,
    pub strings: Vec<String>,
    pub funcs: FuncColumns,
    pub stacks: StackColumns,
    pub processes: ProcessColumns,
    pub threads: ThreadColumns,
    pub samples: SampleColumns,
    pub spans: SpanColumns,
    pub wait_names: WaitNames,
    pub faults: FaultColumns,
    pub syscalls: SyscallColumns,
    pub critical_path: Option<PathData>,
    pub findings: Vec<FindingData>,
    /// The locks with waits in the report's threads and time range, most
    /// waited-on first (at most [`MAX_LOCKS`]).
    pub locks: Vec<LockData>,
}

/// The most locks the page lists, and the most waits of one it ships.
pub const MAX_LOCKS: usize = 50;
pub const MAX_LOCK_WAITS: usize = 2000;

/// A lock (a mutex or rwlock futex word) for the page. Seconds are
/// clipped to the report's time range; times (`from_s`, `to_s`) are
/// seconds after the trace start, the timeline's origin.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LockData {
    /// `0x…`, in the address space of `pid`.
    pub address: String,
    pub kind: ResourceKind,
    pub pid: i32,
    pub process: String,
    /// Where its waiters blocked (the function most of the wait time was
    /// in), when their stacks name one.
    pub name: Option<String>,
    /// Most blocked first.
    pub waiters: Vec<LockWaiter>,
    /// Most held first: the threads whose releases ended waits.
    pub holders: Vec<LockHolder>,
    pub total_wait_s: f64,
    pub longest_hold_s: f64,
    /// In time order; the longest [`MAX_LOCK_WAITS`] when there are more
    /// (fewer, for the less waited-on locks of a page with very many).
    pub waits: Vec<LockWaitData>,
    /// The waits in the range, shipped or not.
    pub waits_total: usize,
}

/// A thread that waited on a lock: its blocked time and number of waits.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LockWaiter {
    pub tid: i32,
    pub comm: String,
    /// Report thread index, -1 when the thread is not shown.
    pub thread: i32,
    pub blocked_s: f64,
    pub waits: usize,
}

/// A thread that held a lock while others waited: its time holding it
/// and its number of holds that ended waits.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LockHolder {
    pub tid: i32,
    pub comm: String,
    /// Report thread index, -1 when the thread is not shown.
    pub thread: i32,
    pub held_s: f64,
    pub holds: usize,
}

/// One wait on a lock: who waited, from when to when, and whose release
/// ended it (`null`: a time-out, or the trace lost the wake-up).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LockWaitData {
    pub waiter_tid: i32,
    pub holder_tid: Option<i32>,
    /// Report thread indices, -1 when not shown (or no holder).
    pub waiter: i32,
    pub holder: i32,
    pub from_s: f64,
    pub to_s: f64,
}

/// Functions as columns: name and module (string indices) and kind
/// (0 user code, 1 kernel, 2 a process: the root of a stack).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct FuncColumns {
    pub name: Vec<u32>,
    pub module: Vec<u32>,
    pub kind: Vec<u8>,
}

/// Stack nodes as columns: the caller's node (-1 for a root) and the
/// function (index into [`FuncColumns`]).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct StackColumns {
    pub parent: Vec<i32>,
    pub func: Vec<u32>,
}

/// CPU samples in time order: `t` is the delta to the previous sample's
/// time (µs), `thread` an index into the report's threads, `stack` a node.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct SampleColumns {
    pub t: Vec<i64>,
    pub thread: Vec<u32>,
    pub stack: Vec<u32>,
}

/// Thread states, grouped by thread (`offset[i]..offset[i+1]` are thread
/// i's spans, in time order). `gap` is the start minus the previous span's
/// end (the first: its start), `dur` the length (µs); `state` 0 running,
/// 1 runnable, 2.. blocked by [`WaitKind`] in `WaitKind::ALL` order
/// (2 lock, 3 io, 4 sleep, 5 ipc, 6 fault, 7 other); `stack` the blocking
/// stack (-1 when none); `waker` the thread that ended the wait (-1: not
/// woken or not known, -2: an interrupt, -3: a timer, -4: a device).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct SpanColumns {
    pub offset: Vec<u32>,
    pub gap: Vec<i64>,
    pub dur: Vec<i64>,
    pub state: Vec<u8>,
    pub stack: Vec<i32>,
    pub waker: Vec<i32>,
}

/// For each blocking stack: the innermost function that is not scheduler
/// plumbing (a string index), to name a wait.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct WaitNames {
    pub stack: Vec<u32>,
    pub name: Vec<u32>,
}

/// Page faults counted per (bucket, thread, stack, major): `t` the bucket's
/// start (µs, delta-encoded), `count`, `major` 1 for the major-fault event.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct FaultColumns {
    pub bucket_us: i64,
    pub t: Vec<i64>,
    pub thread: Vec<u32>,
    pub stack: Vec<u32>,
    pub count: Vec<u32>,
    pub major: Vec<u8>,
}

/// Syscalls in time order of entry: `t` delta µs, `name` and `error`
/// (errno name, -1 when it succeeded or did not return) string indices,
/// `dur` µs (-1 unknown), `path` the captured path with its numbers folded
/// (`/tmp/log.N`), -1 when none.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct SyscallColumns {
    pub t: Vec<i64>,
    pub thread: Vec<u32>,
    pub name: Vec<u32>,
    pub dur: Vec<i64>,
    pub error: Vec<i32>,
    pub path: Vec<i32>,
    /// Calls whose path was not captured although the call takes one.
    pub uncaptured_paths: u64,
}
