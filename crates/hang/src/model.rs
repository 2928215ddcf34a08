//! The result of a walk: what `slowlab hang --json` prints, field for field
//! (the schema is documented in the README's `slowlab hang` section).
//!
//! Plain serde types, no I/O and no logic beyond ordering the chains and
//! choosing the exit code. They live in this crate, not in `slowlab-model`,
//! because nothing else produces or reads them: putting them in the shared
//! model would make every crate of the workspace depend on a change here.

use serde::{Deserialize, Serialize};

/// Everything `slowlab hang PID` found.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct HangReport {
    /// The process walked, as seen from slowlab's pid namespace.
    pub pid: i32,
    /// Its name.
    pub comm: String,
    /// Its pids from the outermost namespace to its own (`NSpid` in
    /// `/proc/PID/status`); one entry when it shares slowlab's namespace.
    pub ns_pid: Vec<i32>,
    /// How many threads it has.
    pub thread_count: usize,
    /// One entry per reported thread: the blocked ones, or all of them with
    /// `--all-threads`; cycles first, then the longest chains.
    pub threads: Vec<ThreadChain>,
    /// What could not be read (kernel stacks without root, sockets of
    /// another network namespace, …): one line each.
    pub warnings: Vec<String>,
}

/// One thread of the process and the chain that starts at it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ThreadChain {
    pub tid: i32,
    pub comm: String,
    /// The kernel's state letter as a word (`running`, `sleeping`,
    /// `disk-sleep`, `stopped`, `traced`, `zombie`, `idle`, …).
    pub state: String,
    /// What this thread waits on; `null` when it waits on nothing.
    pub waits_on: Option<WaitsOn>,
    /// The hops from this thread (the first hop) to the end of the chain.
    pub chain: Vec<Hop>,
    /// The chain closes on a thread already in it: a deadlock.
    pub cycle: bool,
    /// How the chain ends.
    pub ends_in: EndsIn,
}

/// A thread on a chain.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Hop {
    pub pid: i32,
    pub tid: i32,
    pub comm: String,
    /// The process's name when the hop is in another process than the one
    /// walked (`null` otherwise).
    pub process: Option<String>,
    /// The thread's ids from the outermost pid namespace to its own, when
    /// it lives in a nested one, as in a container (`null` otherwise).
    pub ns_tid: Option<Vec<i32>>,
    pub state: String,
    pub waits_on: Option<WaitsOn>,
    /// The system call it is in; `null` when running or not in one.
    pub syscall: Option<Syscall>,
    /// Seconds since it last ran, from the kernel's scheduler statistics
    /// (`se.exec_start` of `/proc/PID/task/TID/sched`); `null` when
    /// running or unknown.
    pub off_cpu_s: Option<f64>,
    /// `/proc/PID/task/TID/stack`, innermost first (empty without root).
    pub kernel_stack: Vec<String>,
    /// Return addresses found on the user stack, innermost first, as
    /// `function+0xOFF (module)` or `0xFILEOFFSET (module)`: found by scanning the
    /// stack from its pointer for values that follow a call instruction,
    /// so best effort (a stale value can appear).
    pub user_stack: Vec<String>,
}

/// The resource a thread waits on.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct WaitsOn {
    pub kind: WaitKind,
    /// A futex word's address in the waiting process (`0x…`); `null` for
    /// other kinds.
    pub address: Option<String>,
    /// A file, pipe or socket (`pipe:[123]`, `socket:[456]`, a FIFO's
    /// path); `null` for other kinds.
    pub path: Option<String>,
    /// The user function that called the lock (outside libc), when the
    /// stack shows one.
    pub function: Option<String>,
    /// Who holds it, or why that is unknown, in words.
    pub detail: String,
    /// The thread that holds it, when known: the next hop.
    pub held_by: Option<ThreadId>,
}

/// A thread named by its process and its own id.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThreadId {
    pub pid: i32,
    pub tid: i32,
}

/// The kinds of resource a thread can wait on.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum WaitKind {
    /// A glibc mutex (the owner from `__owner` or, for robust and PI
    /// mutexes, the word itself).
    Mutex,
    /// A glibc rwlock held for writing (`__cur_writer`).
    Rwlock,
    /// `pthread_join` (the joined thread's tid word).
    Join,
    /// A condition variable: no owner by nature.
    Condvar,
    /// A semaphore: no owner by nature.
    Semaphore,
    /// A futex that is none of the above as far as slowlab can tell.
    Futex,
    Pipe,
    Fifo,
    UnixSocket,
    Socket,
    FileLock,
    /// `wait4`/`waitid` on children.
    Child,
    /// A lock inside the kernel, from the kernel stack.
    KernelLock,
    /// Disk or other device I/O.
    Device,
    /// A timed sleep.
    Timer,
    /// `poll`, `select`, `epoll_wait`: any of several descriptors.
    Events,
    /// `pause`, `sigsuspend`, `sigwait`: a signal.
    Signal,
    /// Stopped by a signal or a tracer.
    Stopped,
    Unknown,
}

impl WaitKind {
    /// The word used in the text output.
    pub fn word(self) -> &'static str {
        match self {
            WaitKind::Mutex => "mutex",
            WaitKind::Rwlock => "rwlock",
            WaitKind::Join => "the exit of",
            WaitKind::Condvar => "condition variable",
            WaitKind::Semaphore => "semaphore",
            WaitKind::Futex => "futex",
            WaitKind::Pipe => "pipe",
            WaitKind::Fifo => "FIFO",
            WaitKind::UnixSocket => "unix socket",
            WaitKind::Socket => "socket",
            WaitKind::FileLock => "file lock on",
            WaitKind::Child => "child",
            WaitKind::KernelLock => "kernel lock",
            WaitKind::Device => "device",
            WaitKind::Timer => "a timer",
            WaitKind::Events => "events",
            WaitKind::Signal => "a signal",
            WaitKind::Stopped => "being continued",
            WaitKind::Unknown => "something unknown",
        }
    }
}

/// A system call and its six raw arguments.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Syscall {
    pub nr: u64,
    /// Its name on x86-64 (`syscall_NR` for others).
    pub name: String,
    /// The arguments as the kernel holds them (`0x…`).
    pub args: Vec<String>,
}

/// How a chain ends.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum EndsIn {
    Running,
    Runnable,
    Sleeping,
    Stopped,
    Device,
    Unknown,
    Cycle,
}

impl EndsIn {
    pub fn word(self) -> &'static str {
        match self {
            EndsIn::Running => "running",
            EndsIn::Runnable => "runnable",
            EndsIn::Sleeping => "sleeping",
            EndsIn::Stopped => "stopped",
            EndsIn::Device => "device",
            EndsIn::Unknown => "unknown",
            EndsIn::Cycle => "cycle",
        }
    }
}

impl ThreadChain {
    /// A thread that waits on something: what `slowlab hang` reports
    /// without `--all-threads`. Running, runnable, stopped and timed
    /// sleeps are not blocked.
    pub fn is_blocked(&self) -> bool {
        match &self.waits_on {
            None => false,
            Some(w) => !matches!(w.kind, WaitKind::Timer | WaitKind::Stopped),
        }
    }
}

impl HangReport {
    /// 0: no blocked chain; 1: chains found; 3: a cycle among them.
    pub fn exit_code(&self) -> i32 {
        if self.threads.iter().any(|t| t.cycle) {
            3
        } else if self.threads.iter().any(|t| t.is_blocked()) {
            1
        } else {
            0
        }
    }

    /// Cycles first, then the longest chains, then by thread id.
    pub fn sort(&mut self) {
        self.threads.sort_by(|a, b| {
            b.cycle
                .cmp(&a.cycle)
                .then(b.is_blocked().cmp(&a.is_blocked()))
                .then(b.chain.len().cmp(&a.chain.len()))
                .then(a.tid.cmp(&b.tid))
        });
    }
}
