//! The walk: for each thread of a process, what it waits on and who holds
//! that, hop after hop across threads and processes, until a thread that
//! waits on nothing slowlab can follow, or a thread already on the chain
//! (a cycle: a deadlock).
//!
//! Everything is read from `/proc` under a root directory, from the
//! waiting processes' memory through `/proc/PID/mem`, and from `sock_diag`
//! for Unix socket peers. Nothing is stopped or attached to: each file is a
//! snapshot, so a thread may move on between two reads; a thread or
//! process that is gone by the time it is read ends its chain as
//! `unknown`. This module decides and describes; it does not render.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::rc::Rc;

mod chain;
mod descriptors;
mod futex_wait;

use crate::error::HangError;
use crate::fds::FdIndex;
use crate::futex::{self, FutexCall, Owner};
use crate::kernel::{self, KernelWait};
use crate::model::{EndsIn, HangReport, Hop, Syscall, ThreadChain, ThreadId, WaitKind, WaitsOn};
use crate::procfs::{
    self, parse_kernel_stack, parse_stat, parse_status, parse_syscall, FileLock, Proc, ReadError,
    SyscallState, PF_KTHREAD,
};
use crate::symbols::{Frame, Symbolizer};
use crate::syscalls as sc;

/// Chains longer than this end as `unknown` (no real chain is this long;
/// it guards against a loop slowlab failed to see as one).
pub const MAX_CHAIN: usize = 64;
/// Processes holding a descriptor whose threads are ranked to choose the
/// next hop (a jobserver pipe is held by every job of a build).
pub const MAX_HOLDER_PROCESSES: usize = 16;
/// Names listed for the other waiters on a futex before "and N more".
pub const MAX_CO_WAITERS: usize = 5;

#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Report every thread, not only the blocked ones.
    pub all_threads: bool,
}

/// Walks process `pid` under `root` (`/` on a live machine).
pub fn walk(root: &Path, pid: i32, options: &Options) -> Result<HangReport, HangError> {
    let mut w = Walker::new(root, pid);
    let (comm, ns_pid) = w.check_target()?;
    let pid = w.target;
    let tids = match w.proc.tids(pid) {
        Ok(t) => t,
        Err(ReadError::Gone) => return Err(HangError::Exited(pid)),
        Err(ReadError::Denied) => {
            return Err(HangError::not_permitted(pid, format!("/proc/{pid}/task")))
        }
        Err(ReadError::Other(e)) => {
            return Err(HangError::Io {
                path: format!("/proc/{pid}/task"),
                source: e,
            })
        }
    };
    let ids: Vec<ThreadId> = tids.iter().map(|&tid| ThreadId { pid, tid }).collect();
    w.prefetch(&ids);
    if ids.iter().all(|id| w.task(*id).is_none()) {
        return Err(HangError::Exited(pid));
    }
    let mut threads = Vec::new();
    for id in ids {
        let Some(task) = w.task(id) else { continue };
        let first = w.resolve(id);
        let blocked = match &first.waits_on {
            None => false,
            Some(wo) => !matches!(wo.kind, WaitKind::Timer | WaitKind::Stopped),
        };
        if !blocked && !options.all_threads {
            continue;
        }
        let chain = w.chain(id);
        threads.push(ThreadChain {
            tid: id.tid,
            comm: task.comm.clone(),
            state: procfs::state_word(task.state).to_string(),
            waits_on: first.waits_on.clone(),
            chain: chain.hops,
            cycle: chain.ends_in == EndsIn::Cycle,
            ends_in: chain.ends_in,
        });
    }
    // The process went away while it was read: what was read may mix its
    // last moments with its exit.
    if w.proc.read(&w.proc.pid_dir(pid).join("stat")).is_err() {
        return Err(HangError::Exited(pid));
    }
    let mut report = HangReport {
        pid,
        comm,
        ns_pid,
        thread_count: tids.len(),
        threads,
        warnings: w.warnings.into_iter().collect(),
    };
    report.sort();
    Ok(report)
}

/// A thread as read once.
struct Task {
    id: ThreadId,
    comm: String,
    state: char,
    syscall: Option<SyscallState>,
    kernel_stack: Vec<String>,
    /// When it last ran (`se.exec_start`), in ms of the scheduler's clock.
    exec_start_ms: Option<f64>,
}

/// What one thread waits on, and the next hop.
struct Resolved {
    waits_on: Option<WaitsOn>,
    next: Next,
}

enum Next {
    /// The one thread that can end the wait (a lock's owner).
    Thread(ThreadId),
    /// The most telling of several threads that could end it (a process
    /// holding a pipe's other end, any of several children): a cycle
    /// through such a hop is not a deadlock by itself.
    Likely(ThreadId),
    End(EndsIn),
}

struct Chain {
    hops: Vec<Hop>,
    ends_in: EndsIn,
}

struct Walker {
    proc: Proc,
    target: i32,
    tasks: HashMap<ThreadId, Option<Rc<Task>>>,
    resolved: HashMap<ThreadId, Rc<Resolved>>,
    frames: HashMap<ThreadId, Rc<Vec<Frame>>>,
    process_tids: HashMap<i32, Vec<i32>>,
    /// Per process: its threads in a futex call, by the word's address.
    futex_waiters: HashMap<i32, HashMap<u64, Vec<i32>>>,
    /// Per process: does it live in a nested pid namespace?
    nested: HashMap<i32, bool>,
    /// Per nested process: its threads' own ids → ours.
    ns_maps: HashMap<i32, Option<Rc<HashMap<i32, i32>>>>,
    symbols: Symbolizer,
    fds: Option<FdIndex>,
    unix_peers: Option<Result<HashMap<u64, u64>, String>>,
    locks: Option<Vec<FileLock>>,
    now_ms: Option<f64>,
    warnings: BTreeSet<String>,
}

fn name(comm: &str, tid: i32) -> String {
    format!("{comm} [{tid}]")
}

impl Walker {
    fn new(root: &Path, target: i32) -> Walker {
        let proc = Proc::new(root);
        // The scheduler's clock now: this thread's own last start, which
        // is at most a tick old while it runs.
        let now_ms = proc
            .read(&proc.path("thread-self/sched"))
            .ok()
            .and_then(|t| procfs::parse_exec_start(&t));
        Walker {
            proc,
            target,
            tasks: HashMap::new(),
            resolved: HashMap::new(),
            frames: HashMap::new(),
            process_tids: HashMap::new(),
            futex_waiters: HashMap::new(),
            nested: HashMap::new(),
            ns_maps: HashMap::new(),
            symbols: Symbolizer::default(),
            fds: None,
            unix_peers: None,
            locks: None,
            now_ms,
            warnings: BTreeSet::new(),
        }
    }

    /// The target's name and namespace pids, or why it cannot be walked.
    fn check_target(&mut self) -> Result<(String, Vec<i32>), HangError> {
        let pid = self.target;
        let dir = self.proc.pid_dir(pid);
        let stat = match self.proc.read(&dir.join("stat")) {
            Ok(s) => s,
            Err(ReadError::Gone) => return Err(HangError::NoSuchProcess(pid)),
            Err(ReadError::Denied) => {
                return Err(HangError::not_permitted(pid, format!("/proc/{pid}/stat")))
            }
            Err(ReadError::Other(e)) => {
                return Err(HangError::Io {
                    path: dir.join("stat").display().to_string(),
                    source: e,
                })
            }
        };
        let stat = parse_stat(&stat)
            .ok_or_else(|| HangError::Unsupported(format!("a readable /proc/{pid}/stat")))?;
        let status = self
            .proc
            .read(&dir.join("status"))
            .map(|s| parse_status(&s))
            .unwrap_or_default();
        if status.tgid > 0 && status.tgid != pid {
            // A thread id (from `top -H`): walk its whole process.
            self.warnings.insert(format!(
                "{pid} is a thread of process {}; walked the whole process",
                status.tgid
            ));
            self.target = status.tgid;
            return self.check_target();
        }
        if stat.flags & PF_KTHREAD != 0 {
            return Err(HangError::KernelThread {
                pid,
                comm: stat.comm,
            });
        }
        if matches!(stat.state, 'Z' | 'X') && self.proc.tids(pid).map_or(true, |t| t.len() <= 1) {
            return Err(HangError::Zombie {
                pid,
                comm: stat.comm,
                ppid: stat.ppid,
            });
        }
        match self.proc.read(&dir.join("syscall")) {
            Ok(_) => {}
            Err(ReadError::Denied) => {
                return Err(HangError::not_permitted(
                    pid,
                    format!("/proc/{pid}/syscall"),
                ))
            }
            Err(ReadError::Gone) if self.proc.read(&dir.join("stat")).is_ok() => {
                return Err(HangError::Unsupported(format!(
                    "/proc/{pid}/syscall (CONFIG_HAVE_ARCH_TRACEHOOK)"
                )))
            }
            Err(ReadError::Gone) => return Err(HangError::Exited(pid)),
            Err(ReadError::Other(_)) => {}
        }
        let mut ns_pid = status.nspid;
        if ns_pid.is_empty() {
            ns_pid.push(pid);
        }
        Ok((stat.comm, ns_pid))
    }

    /// Reads a thread once; `None` once it is gone.
    fn task(&mut self, id: ThreadId) -> Option<Rc<Task>> {
        if let Some(t) = self.tasks.get(&id) {
            return t.clone();
        }
        let task = self.read_task(id).map(Rc::new);
        self.tasks.insert(id, task.clone());
        task
    }

    fn read_task(&mut self, id: ThreadId) -> Option<Task> {
        let (task, warnings) = read_task(&self.proc, id);
        self.warnings.extend(warnings);
        task
    }

    /// Reads many threads of one process at once, on a few threads of
    /// slowlab's own (the kernel formats each file: on a process with
    /// 1,000 threads that is most of the walk).
    fn prefetch(&mut self, ids: &[ThreadId]) {
        let workers = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(4);
        if ids.len() < 64 || workers < 2 {
            for id in ids {
                self.task(*id);
            }
            return;
        }
        let chunk = ids.len().div_ceil(workers);
        let results: Vec<Vec<ReadTask>> = std::thread::scope(|scope| {
            let handles: Vec<_> = ids
                .chunks(chunk)
                .map(|part| {
                    // Each worker has its own Proc (its caches are not shared).
                    let root = self.proc.root();
                    scope.spawn(move || {
                        let proc = Proc::new(&root);
                        part.iter()
                            .map(|&id| {
                                let (task, warnings) = read_task(&proc, id);
                                (id, task, warnings)
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles.into_iter().filter_map(|h| h.join().ok()).collect()
        });
        for (id, task, warnings) in results.into_iter().flatten() {
            self.warnings.extend(warnings);
            self.tasks.insert(id, task.map(Rc::new));
        }
    }

    /// The thread ids of a process, read once.
    fn tids_of(&mut self, pid: i32) -> Vec<i32> {
        if let Some(t) = self.process_tids.get(&pid) {
            return t.clone();
        }
        let tids = self.proc.tids(pid).unwrap_or_default();
        self.process_tids.insert(pid, tids.clone());
        tids
    }

    /// The user stack of a thread blocked in the kernel, read once.
    fn frames(&mut self, task: &Task) -> Rc<Vec<Frame>> {
        if let Some(f) = self.frames.get(&task.id) {
            return f.clone();
        }
        let frames = match task.syscall {
            Some(SyscallState::In { sp, pc, .. }) | Some(SyscallState::NotInSyscall { sp, pc }) => {
                self.symbols.user_stack(&self.proc, task.id.pid, sp, pc)
            }
            _ => Vec::new(),
        };
        let frames = Rc::new(frames);
        self.frames.insert(task.id, frames.clone());
        frames
    }

    /// A thread id seen in a word of process `pid`'s memory, as a live
    /// thread: one of `pid`'s own, or, when `shared`, of any process.
    fn thread_of(&mut self, pid: i32, tid: i32, shared: bool) -> Option<ThreadId> {
        if tid <= 0 {
            return None;
        }
        if self.proc.task_dir(pid, tid).join("stat").exists() {
            return Some(ThreadId { pid, tid });
        }
        if shared {
            let tgid = self.proc.tgid_of(tid)?;
            return Some(ThreadId { pid: tgid, tid });
        }
        None
    }

    /// What a thread waits on, resolved once.
    fn resolve(&mut self, id: ThreadId) -> Rc<Resolved> {
        if let Some(r) = self.resolved.get(&id) {
            return r.clone();
        }
        let r = Rc::new(match self.task(id) {
            None => Resolved {
                waits_on: Some(wait(WaitKind::Unknown, "the thread exited during the walk")),
                next: Next::End(EndsIn::Unknown),
            },
            Some(task) => self.resolve_task(&task),
        });
        self.resolved.insert(id, r.clone());
        r
    }

    fn resolve_task(&mut self, task: &Task) -> Resolved {
        match task.state {
            'T' => {
                return Resolved {
                    waits_on: Some(wait(
                        WaitKind::Stopped,
                        "is stopped by a signal (SIGSTOP, SIGTSTP, …): `kill -CONT` resumes it",
                    )),
                    next: Next::End(EndsIn::Stopped),
                }
            }
            't' => {
                return Resolved {
                    waits_on: Some(wait(
                        WaitKind::Stopped,
                        "is stopped by its tracer (a debugger: TracerPid in its status)",
                    )),
                    next: Next::End(EndsIn::Stopped),
                }
            }
            // An exited thread (a zombie leader whose other threads live
            // on) waits on nothing.
            'Z' | 'X' => {
                return Resolved {
                    waits_on: None,
                    next: Next::End(EndsIn::Unknown),
                }
            }
            'R' => {
                let ends = if task.syscall == Some(SyscallState::Running) {
                    EndsIn::Running
                } else {
                    EndsIn::Runnable
                };
                return Resolved {
                    waits_on: None,
                    next: Next::End(ends),
                };
            }
            _ => {}
        }
        match kernel::classify(&task.kernel_stack) {
            Some(KernelWait::Lock { function, caller }) => {
                let mut w = wait(
                    WaitKind::KernelLock,
                    &format!(
                        "kernel lock {function}{}: the kernel does not say who holds it",
                        caller
                            .map(|c| format!(" (called from {c})"))
                            .unwrap_or_default()
                    ),
                );
                w.function = Some(function);
                return ended(w, EndsIn::Unknown);
            }
            Some(KernelWait::Io { function, caller }) => {
                let w = wait(
                    WaitKind::Device,
                    &format!(
                        "I/O: {function}{}",
                        caller
                            .map(|c| format!(" (called from {c})"))
                            .unwrap_or_default()
                    ),
                );
                return ended(w, EndsIn::Device);
            }
            Some(KernelWait::UserFault) => {
                return ended(
                    wait(
                        WaitKind::Unknown,
                        "a page fault on memory registered with userfaultfd: waits for the process that serves it to fill the page",
                    ),
                    EndsIn::Unknown,
                )
            }
            Some(KernelWait::Timer) => {
                let call = match &task.syscall {
                    Some(SyscallState::In { nr, .. }) => format!(" ({})", sc::name(*nr)),
                    _ => String::new(),
                };
                return ended(
                    wait(WaitKind::Timer, &format!("sleeps on a timer{call}")),
                    EndsIn::Sleeping,
                );
            }
            None => {}
        }
        let Some(syscall) = task.syscall.clone() else {
            return ended(
                wait(WaitKind::Unknown, "its system call could not be read"),
                EndsIn::Unknown,
            );
        };
        let (nr, args) = match syscall {
            SyscallState::Running => {
                return Resolved {
                    waits_on: None,
                    next: Next::End(EndsIn::Running),
                }
            }
            SyscallState::NotInSyscall { .. } => {
                return if task.state == 'D' {
                    ended(
                        wait(
                            WaitKind::Device,
                            "outside a system call (a page fault waiting for I/O)",
                        ),
                        EndsIn::Device,
                    )
                } else {
                    ended(
                        wait(WaitKind::Unknown, "blocked outside a system call"),
                        EndsIn::Unknown,
                    )
                };
            }
            SyscallState::In { nr, args, .. } => (nr, args),
        };
        match nr {
            sc::FUTEX => self.futex(task, args),
            sc::NANOSLEEP | sc::CLOCK_NANOSLEEP => ended(
                wait(
                    WaitKind::Timer,
                    &format!("sleeps on a timer ({})", sc::name(nr)),
                ),
                EndsIn::Sleeping,
            ),
            n if sc::reads_fd(n) || sc::writes_fd(n) => {
                self.fd_wait(task, args[0] as i32, sc::reads_fd(n))
            }
            sc::OPEN => self.open_wait(task, -100, args[0], args[1]),
            sc::OPENAT => self.open_wait(task, args[0] as i32, args[1], args[2]),
            sc::FLOCK => self.file_lock(task, args[0] as i32, &["FLOCK"]),
            // F_SETLKW (7) and F_OFD_SETLKW (38) wait; other commands do not.
            sc::FCNTL if args[1] == 7 || args[1] == 38 => {
                self.file_lock(task, args[0] as i32, &["POSIX", "OFDLCK"])
            }
            sc::WAIT4 => self.child_wait(task, args[0] as i32),
            // idtype P_ALL (0), P_PID (1): the pid in the second argument.
            sc::WAITID => self.child_wait(task, if args[0] == 1 { args[1] as i32 } else { -1 }),
            n if sc::polls(n) => ended(
                wait(
                    WaitKind::Events,
                    &format!(
                        "{}: waits for any of several descriptors, which slowlab does not follow",
                        sc::name(n)
                    ),
                ),
                EndsIn::Unknown,
            ),
            sc::ACCEPT | sc::ACCEPT4 => {
                let mut w = wait(WaitKind::Socket, "waits for a connection (accept)");
                w.path = self.fd_link(task.id.pid, args[0] as i32);
                ended(w, EndsIn::Unknown)
            }
            sc::PAUSE | sc::RT_SIGSUSPEND | sc::RT_SIGTIMEDWAIT => ended(
                wait(
                    WaitKind::Signal,
                    &format!("waits for a signal ({})", sc::name(nr)),
                ),
                EndsIn::Unknown,
            ),
            n if task.state == 'D' => self.uninterruptible(task, &sc::name(n)),
            n => ended(
                wait(
                    WaitKind::Unknown,
                    &format!("in {}, which slowlab does not follow", sc::name(n)),
                ),
                EndsIn::Unknown,
            ),
        }
    }

    /// Uninterruptible sleep that the kernel stack does not explain: the
    /// kernel's unwinder hides every function of the scheduler's section,
    /// which holds the sleeping locks' own (`mutex_lock`, `down_read`,
    /// `rwsem_down_*`, `wait_for_completion`, `io_schedule`), so the
    /// innermost frame shown is the function that took the lock.
    fn uninterruptible(&mut self, task: &Task, call: &str) -> Resolved {
        let frames: Vec<&str> = task
            .kernel_stack
            .iter()
            .map(|f| procfs::frame_function(f))
            .collect();
        let mut w = wait(WaitKind::KernelLock, "");
        match frames.first() {
            Some(f) => {
                w.function = Some(f.to_string());
                w.detail = format!(
                    "kernel lock taken in {f}{}: uninterruptible in {call}; the kernel stack hides the lock's own functions and does not say who holds it (or I/O that the stack does not show)",
                    frames
                        .get(1)
                        .map(|c| format!(" (called from {c})"))
                        .unwrap_or_default()
                );
            }
            None => {
                w.kind = WaitKind::Device;
                w.detail =
                    format!("uninterruptible in {call} (no kernel stack: run as root to see why)");
            }
        }
        let ends = if w.kind == WaitKind::Device {
            EndsIn::Device
        } else {
            EndsIn::Unknown
        };
        ended(w, ends)
    }

    fn comm(&mut self, pid: i32) -> String {
        match self.task(ThreadId { pid, tid: pid }) {
            Some(t) => t.comm.clone(),
            None => "?".to_string(),
        }
    }
}

/// A thread as a prefetch worker read it, with its warnings.
type ReadTask = (ThreadId, Option<Task>, Vec<String>);

/// Reads one thread's files; the warnings for what could not be read.
fn read_task(proc: &Proc, id: ThreadId) -> (Option<Task>, Vec<String>) {
    let mut warnings = Vec::new();
    let task = (|| {
        let dir = proc.open_dir(&proc.task_dir(id.pid, id.tid)).ok()?;
        let stat = parse_stat(&dir.read(c"stat").ok()?)?;
        let syscall = match dir.read(c"syscall") {
            Ok(text) => parse_syscall(&text),
            Err(ReadError::Denied) => {
                warnings.push(format!(
                    "not permitted to read the system calls of process {}: run as root to follow it",
                    id.pid
                ));
                None
            }
            Err(_) => None,
        };
        let kernel_stack = if matches!(stat.state, 'S' | 'D' | 'I' | 'T' | 't') {
            match dir.read(c"stack") {
                Ok(text) => parse_kernel_stack(&text),
                Err(ReadError::Denied) => {
                    warnings.push(
                        "kernel stacks need root (/proc/PID/task/TID/stack): run as root to see them and kernel locks"
                            .to_string(),
                    );
                    Vec::new()
                }
                Err(_) => Vec::new(),
            }
        } else {
            Vec::new()
        };
        let exec_start_ms = if stat.state == 'R' {
            None
        } else {
            dir.read(c"sched")
                .ok()
                .and_then(|t| procfs::parse_exec_start(&t))
        };
        Some(Task {
            id,
            comm: stat.comm,
            state: stat.state,
            syscall,
            kernel_stack,
            exec_start_ms,
        })
    })();
    (task, warnings)
}

fn wait(kind: WaitKind, detail: &str) -> WaitsOn {
    WaitsOn {
        kind,
        address: None,
        path: None,
        function: None,
        detail: detail.to_string(),
        held_by: None,
    }
}

/// A wait that the thread `next` can end; `only` when no other thread
/// could.
fn followed(mut w: WaitsOn, next: ThreadId, only: bool) -> Resolved {
    w.held_by = Some(next);
    Resolved {
        waits_on: Some(w),
        next: if only {
            Next::Thread(next)
        } else {
            Next::Likely(next)
        },
    }
}

fn ended(w: WaitsOn, ends: EndsIn) -> Resolved {
    Resolved {
        waits_on: Some(w),
        next: Next::End(ends),
    }
}

#[cfg(test)]
mod tests;
