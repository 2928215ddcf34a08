//! The critical path of one slow process: its wall time cut into segments
//! that say, for every moment, what it was waiting for — its own CPU work,
//! a CPU it could not get, or a wait that is followed into the thread that
//! ended it. The JSON of these types is `critical_path.json` of `slowlab
//! diagnose` and `slowlab analyze --critical-path --json` (README.md).
//!
//! Only the types live here; the walk, and how a part of the path is said
//! in words, are `slowlab_analyze::critical_path`.

use serde::{Deserialize, Serialize};

/// What a thread on the path was doing during a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SegmentState {
    /// On a CPU.
    Cpu,
    /// Ready to run but not running: preempted, or not yet scheduled.
    Runnable,
    /// Off the CPU, waiting for something; see [`WaitKind`].
    Blocked,
}

/// Why a thread was blocked, from its blocking stack, its task state and
/// what ended the wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WaitKind {
    /// A futex, kernel mutex or rw-semaphore.
    Lock,
    /// Storage: block I/O, journal commits, writeback, page-cache reads.
    Io,
    /// A timed sleep or a timeout that nobody ended.
    Sleep,
    /// A pipe, socket, poll, or a child or thread to finish: ended by
    /// another thread or process.
    Ipc,
    /// A page fault waiting for its page.
    Fault,
    /// Anything else (or no stack to tell).
    Other,
}

impl WaitKind {
    pub const ALL: [WaitKind; 6] = [
        WaitKind::Lock,
        WaitKind::Io,
        WaitKind::Sleep,
        WaitKind::Ipc,
        WaitKind::Fault,
        WaitKind::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            WaitKind::Lock => "lock",
            WaitKind::Io => "io",
            WaitKind::Sleep => "sleep",
            WaitKind::Ipc => "ipc",
            WaitKind::Fault => "fault",
            WaitKind::Other => "other",
        }
    }
}

/// What a blocked thread waited for: the resource behind the wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResourceKind {
    /// A mutex (a futex word used as a lock: glibc's, Rust's, a PI mutex).
    Mutex,
    /// A reader-writer lock.
    Rwlock,
    /// A condition variable or a semaphore: another thread signals it.
    Condvar,
    /// A thread to finish (`pthread_join`: the kernel's clear-tid futex).
    Join,
    /// A child process to exit or stop (`wait4`, `waitid`, `sigsuspend`).
    Child,
    Pipe,
    Socket,
    /// A file lock (`flock`, `fcntl`).
    FileLock,
    /// A futex word whose use the trace does not tell.
    Futex,
    /// A lock inside the kernel (`mutex_lock`, `down_write`…).
    KernelLock,
    /// Storage: the disk, a page fault's read.
    Device,
    /// A timed sleep, or a time-out nobody ended.
    Timer,
    /// Nothing the trace names.
    None,
}

impl ResourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceKind::Mutex => "mutex",
            ResourceKind::Rwlock => "rwlock",
            ResourceKind::Condvar => "condvar",
            ResourceKind::Join => "join",
            ResourceKind::Child => "child",
            ResourceKind::Pipe => "pipe",
            ResourceKind::Socket => "socket",
            ResourceKind::FileLock => "file-lock",
            ResourceKind::Futex => "futex",
            ResourceKind::KernelLock => "kernel-lock",
            ResourceKind::Device => "device",
            ResourceKind::Timer => "timer",
            ResourceKind::None => "none",
        }
    }

    /// A lock some thread holds, that waiters queue on.
    pub fn is_lock(self) -> bool {
        matches!(
            self,
            ResourceKind::Mutex
                | ResourceKind::Rwlock
                | ResourceKind::FileLock
                | ResourceKind::KernelLock
        )
    }
}

/// The resource of a wait and the thread that held it (a lock's holder
/// that released it, the thread that signalled, the joined thread, the
/// child, the pipe's writer).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Resource {
    pub kind: ResourceKind,
    /// The futex word (`0x…`, in the waiter's address space).
    pub address: Option<String>,
    /// A name when the trace gives one: the syscall of a sleep or a disk
    /// wait, the kernel lock's taker, the child's command.
    pub name: Option<String>,
    pub holder: Option<PathThread>,
}

/// A thread named in the path's output.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PathThread {
    pub pid: i32,
    pub tid: i32,
    pub comm: String,
}

/// The root the path was computed for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathRoot {
    pub pid: i32,
    /// The thread walked: the process's main thread.
    pub tid: i32,
    pub comm: String,
    /// Where the root's wall time starts, in seconds after the trace start.
    pub start_s: f64,
}

/// Blocked seconds by kind.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BlockedBreakdown {
    pub lock: f64,
    pub io: f64,
    pub sleep: f64,
    pub ipc: f64,
    pub fault: f64,
    pub other: f64,
}

impl BlockedBreakdown {
    pub fn get(&self, kind: WaitKind) -> f64 {
        match kind {
            WaitKind::Lock => self.lock,
            WaitKind::Io => self.io,
            WaitKind::Sleep => self.sleep,
            WaitKind::Ipc => self.ipc,
            WaitKind::Fault => self.fault,
            WaitKind::Other => self.other,
        }
    }

    pub fn add(&mut self, kind: WaitKind, seconds: f64) {
        let slot = match kind {
            WaitKind::Lock => &mut self.lock,
            WaitKind::Io => &mut self.io,
            WaitKind::Sleep => &mut self.sleep,
            WaitKind::Ipc => &mut self.ipc,
            WaitKind::Fault => &mut self.fault,
            WaitKind::Other => &mut self.other,
        };
        *slot += seconds;
    }

    pub fn total(&self) -> f64 {
        WaitKind::ALL.iter().map(|&k| self.get(k)).sum()
    }
}

/// The wall time by state; `cpu + runnable + blocked.total()` is `wall_s`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Breakdown {
    pub cpu: f64,
    pub runnable: f64,
    pub blocked: BlockedBreakdown,
}

/// One stretch of the path: one thread in one state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Segment {
    /// Seconds after the root's start.
    pub from_s: f64,
    pub to_s: f64,
    pub pid: i32,
    pub tid: i32,
    pub comm: String,
    pub state: SegmentState,
    /// For blocked segments: why.
    pub kind: Option<WaitKind>,
    /// For CPU segments: the function most samples of the stretch were in.
    pub top_function: Option<String>,
    /// For blocked segments: the thread that ended the wait, when the path
    /// could not follow it (a cycle, the depth bound, or before the waker
    /// was seen).
    pub woken_by: Option<PathThread>,
    /// For blocked segments ended from an interrupt: `timer` or `device`
    /// (`interrupt` when the stack does not tell which).
    pub ended_by: Option<String>,
    /// For runnable segments: the thread that was on the CPUs most of it.
    pub ran_instead: Option<PathThread>,
    /// For blocked segments: the innermost function of the blocking stack
    /// that is not scheduler plumbing (e.g. `futex_wait`, `pipe_read`).
    pub blocked_in: Option<String>,
    /// How many waits were followed to reach this thread (0: the root).
    pub depth: u32,
    /// The kind of the wait that was followed into this thread, and the
    /// thread that waited (absent at depth 0).
    pub via: Option<WaitKind>,
    pub waiter: Option<PathThread>,
    /// For blocked segments: what the thread waited for, and who held it.
    /// Absent in files written before it existed.
    #[serde(default)]
    pub resource: Option<Resource>,
    /// At depth > 0: the resource of the wait followed into this thread
    /// (the waiter's `resource`; its holder is this thread).
    #[serde(default)]
    pub via_resource: Option<Resource>,
    /// A lock this thread held during the segment while others waited on
    /// it (from the trace's lock analysis).
    #[serde(default)]
    pub holding: Option<Resource>,
    /// The thread's state is not known here: no scheduler event of it tells
    /// what it did (the root's first moments, before an event that implies
    /// them, such as its first switch). Counted as blocked (other), and in
    /// `unknown_s`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unknown: bool,
}

impl Segment {
    pub fn duration_s(&self) -> f64 {
        self.to_s - self.from_s
    }
}

/// A group of segments with the same process, state, kind and function,
/// for the text and the one-line answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathPart {
    pub pid: i32,
    pub comm: String,
    pub state: SegmentState,
    pub kind: Option<WaitKind>,
    /// CPU: the top function; blocked: where it blocked.
    pub function: Option<String>,
    pub via: Option<WaitKind>,
    /// Blocked: what the part waited for (its holder), as the segments'.
    #[serde(default)]
    pub resource: Option<Resource>,
    /// Followed into: what the waiter waited for, and who the waiter was.
    #[serde(default)]
    pub via_resource: Option<Resource>,
    #[serde(default)]
    pub waiter: Option<String>,
    /// A lock held meanwhile.
    #[serde(default)]
    pub holding: Option<Resource>,
    pub seconds: f64,
    pub share: f64,
}

/// The critical path of one root process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CriticalPath {
    pub wall_s: f64,
    pub root: PathRoot,
    pub breakdown: Breakdown,
    /// In time order; their durations add up to `wall_s`.
    pub segments: Vec<Segment>,
    /// The segments grouped, largest first.
    pub parts: Vec<PathPart>,
    /// The answer in one or two sentences with numbers.
    pub summary: String,
    /// Seconds of the path where no scheduler event said what the thread
    /// was doing (counted as blocked `other`).
    pub unknown_s: f64,
    /// When the root, or a process it started, was killed by a signal from
    /// another process (`timeout`, `kill`, a recording stopped by Ctrl-C):
    /// who, by whom, when. The summary's shares are then of the time
    /// before the kill. Absent in files written before it existed.
    #[serde(default)]
    pub killed: Option<Killed>,
}

/// A kill of the root or of a process it started (the earliest, in its
/// wall time), by a thread of another process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Killed {
    /// The process killed: its main thread.
    pub process: PathThread,
    /// The thread that sent the signal.
    pub by: PathThread,
    /// The signal's name (`SIGTERM`); `null` when the trace shows the
    /// kill only by its wake-up (no `kill` syscall recorded).
    pub signal: Option<String>,
    /// Seconds after the root's start.
    pub at_s: f64,
}
