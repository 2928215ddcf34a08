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

mod descriptors;

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
            return Err(HangError::NotPermitted {
                pid,
                what: format!("/proc/{pid}/task"),
            })
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
                return Err(HangError::NotPermitted {
                    pid,
                    what: format!("/proc/{pid}/stat"),
                })
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
                return Err(HangError::NotPermitted {
                    pid,
                    what: format!("/proc/{pid}/syscall"),
                })
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

    fn futex(&mut self, task: &Task, args: [u64; 6]) -> Resolved {
        let pid = task.id.pid;
        // In a nested pid namespace the words hold the process's own
        // thread ids: translated to ours through each thread's NSpid.
        let ns = self.ns_tids(pid);
        let global = |t: i32| match &ns {
            Some(map) => map.get(&t).copied(),
            None => Some(t),
        };
        let waiter_tid = match &ns {
            Some(map) => map
                .iter()
                .find(|(_, &g)| g == task.id.tid)
                .map_or(task.id.tid, |(&l, _)| l),
            None => task.id.tid,
        };
        let call = FutexCall {
            addr: args[0],
            op: args[1],
            waiter_tid,
        };
        let frames = self.frames(task);
        let hint = futex::hint(&frames);
        // FUTEX_PRIVATE_FLAG: the word is only seen by this process.
        let shared = args[1] & 128 == 0;
        let proc = self.proc.clone();
        let read_i32 = |addr: u64| proc.read_i32(pid, addr);
        let alive = |tid: i32| match global(tid) {
            Some(g) => proc.task_dir(pid, g).join("stat").exists(),
            // Another process's thread (a process-shared object); in a
            // nested namespace those ids are not translated.
            None => false,
        } || (shared && ns.is_none() && proc.tgid_of(tid).is_some());
        let found = futex::interpret(&call, hint, &read_i32, &alive);
        let found = futex::Finding {
            owner: match found.owner {
                Owner::Thread(t) => Owner::Thread(global(t).unwrap_or(t)),
                other => other,
            },
            ..found
        };
        let mut w = wait(found.kind, &found.how);
        w.address = Some(format!("{:#x}", call.addr));
        w.function = frames
            .iter()
            .find(|f| !f.in_libc() && f.function.is_some())
            .and_then(|f| f.function.clone());
        match found.owner {
            Owner::Thread(tid) => match self.thread_of(pid, tid, true) {
                Some(owner) => {
                    w.held_by = Some(owner);
                    Resolved {
                        waits_on: Some(w),
                        next: Next::Thread(owner),
                    }
                }
                None => {
                    w.detail = format!(
                        "{}; held by thread {tid}, which exited during the walk",
                        w.detail
                    );
                    ended(w, EndsIn::Unknown)
                }
            },
            Owner::Gone(tid) => {
                w.detail = format!(
                    "{}; held by thread {tid}, which no longer exists: it exited holding it",
                    w.detail
                );
                ended(w, EndsIn::Unknown)
            }
            Owner::Unknown => {
                let others = self.co_waiters(task, call.addr);
                if !others.is_empty() {
                    w.detail = format!("{}; also waiting on it: {others}", w.detail);
                }
                ended(w, EndsIn::Unknown)
            }
        }
    }

    /// For a process in a nested pid namespace, its threads' own ids (the
    /// innermost of NSpid) → ours; `None` when it shares our namespace.
    fn ns_tids(&mut self, pid: i32) -> Option<Rc<HashMap<i32, i32>>> {
        if let Some(m) = self.ns_maps.get(&pid) {
            return m.clone();
        }
        let map = if self.is_nested(pid) {
            let mut map = HashMap::new();
            for tid in self.tids_of(pid) {
                let status = self.proc.read(&self.proc.task_dir(pid, tid).join("status"));
                if let Some(own) = status
                    .ok()
                    .and_then(|s| parse_status(&s).nspid.last().copied())
                {
                    map.insert(own, tid);
                }
            }
            Some(Rc::new(map))
        } else {
            None
        };
        self.ns_maps.insert(pid, map.clone());
        map
    }

    /// Does the process live in a nested pid namespace (its NSpid says)?
    fn is_nested(&mut self, pid: i32) -> bool {
        if let Some(&n) = self.nested.get(&pid) {
            return n;
        }
        let n = self
            .proc
            .read(&self.proc.pid_dir(pid).join("status"))
            .is_ok_and(|s| parse_status(&s).nspid.len() > 1);
        self.nested.insert(pid, n);
        n
    }

    /// The other threads of the waiter's process in a futex call on the
    /// same word, as "name [tid], …" (the first few, then a count). The
    /// process's futex waiters are grouped by word once.
    fn co_waiters(&mut self, task: &Task, addr: u64) -> String {
        let pid = task.id.pid;
        if !self.futex_waiters.contains_key(&pid) {
            let mut by_word: HashMap<u64, Vec<i32>> = HashMap::new();
            for tid in self.tids_of(pid) {
                if let Some(t) = self.task(ThreadId { pid, tid }) {
                    if let Some(SyscallState::In {
                        nr: sc::FUTEX,
                        args,
                        ..
                    }) = t.syscall
                    {
                        by_word.entry(args[0]).or_default().push(tid);
                    }
                }
            }
            self.futex_waiters.insert(pid, by_word);
        }
        let others: Vec<i32> = self.futex_waiters[&pid]
            .get(&addr)
            .map(|v| v.iter().copied().filter(|&t| t != task.id.tid).collect())
            .unwrap_or_default();
        let mut names = Vec::new();
        for &tid in others.iter().take(MAX_CO_WAITERS) {
            if let Some(t) = self.task(ThreadId { pid, tid }) {
                names.push(name(&t.comm, tid));
            }
        }
        let mut text = names.join(", ");
        let more = others.len().saturating_sub(MAX_CO_WAITERS);
        if more > 0 {
            text.push_str(&format!(" and {more} more"));
        }
        text
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

    /// How telling a thread is as the one to follow into a process that
    /// holds a resource (lower first): running or stopped, waiting on a
    /// lock with an owner or in the disk, busy with a descriptor, idle.
    fn rank(&mut self, id: ThreadId, avoid: Option<&str>) -> u8 {
        let Some(task) = self.task(id) else { return 9 };
        // Waiting on the very pipe it is supposed to hold the other end
        // of (a jobserver pipe that everyone reads): a fellow waiter.
        if let (Some(avoid), Some(SyscallState::In { nr, args, .. })) = (avoid, &task.syscall) {
            if (sc::reads_fd(*nr) || sc::writes_fd(*nr))
                && self.fd_link(id.pid, args[0] as i32).as_deref() == Some(avoid)
            {
                return 7;
            }
        }
        match task.state {
            'R' | 'T' | 't' => 0,
            'D' => 1,
            'Z' | 'X' => 8,
            _ => match task.syscall {
                Some(SyscallState::In { nr: sc::FUTEX, .. }) => {
                    let r = self.resolve(id);
                    match (&r.waits_on, &r.next) {
                        (Some(w), Next::Thread(_) | Next::Likely(_))
                            if w.kind != WaitKind::Join =>
                        {
                            1
                        }
                        (Some(w), _) if w.kind == WaitKind::Join => 5,
                        _ => 3,
                    }
                }
                Some(SyscallState::In { nr, .. })
                    if sc::polls(nr)
                        || matches!(
                            nr,
                            sc::ACCEPT
                                | sc::ACCEPT4
                                | sc::NANOSLEEP
                                | sc::CLOCK_NANOSLEEP
                                | sc::PAUSE
                        ) =>
                {
                    4
                }
                _ => 2,
            },
        }
    }

    /// The thread of `pid` to follow (never `exclude`, the waiter).
    fn pick_thread(&mut self, pid: i32, exclude: ThreadId) -> Option<ThreadId> {
        self.pick_ranked(pid, exclude, None).map(|(_, id)| id)
    }

    /// The best-ranked thread of `pid` and its rank; threads waiting on
    /// `avoid` rank last.
    fn pick_ranked(
        &mut self,
        pid: i32,
        exclude: ThreadId,
        avoid: Option<&str>,
    ) -> Option<(u8, ThreadId)> {
        let mut best: Option<(u8, ThreadId)> = None;
        for tid in self.tids_of(pid) {
            let id = ThreadId { pid, tid };
            if id == exclude {
                continue;
            }
            let r = self.rank(id, avoid);
            if r < 9 && best.is_none_or(|(br, _)| r < br) {
                best = Some((r, id));
            }
        }
        best
    }

    /// The chain from `start`.
    fn chain(&mut self, start: ThreadId) -> Chain {
        let mut ids = vec![start];
        // Whether each hop's next thread is the only one that can end its
        // wait.
        let mut exact = Vec::new();
        let mut back_to: Option<ThreadId> = None;
        let ends_in = loop {
            let current = *ids.last().unwrap_or(&start);
            let r = self.resolve(current);
            let next = match r.next {
                Next::End(e) => break e,
                Next::Thread(next) => {
                    exact.push(true);
                    next
                }
                Next::Likely(next) => {
                    exact.push(false);
                    next
                }
            };
            if let Some(at) = ids.iter().position(|&id| id == next) {
                // A deadlock only when every wait around the loop has a
                // single way out; with choices it is an "any of" wait that
                // another of its candidates may yet end.
                if exact[at..].iter().all(|&e| e) {
                    break EndsIn::Cycle;
                }
                back_to = Some(next);
                break EndsIn::Unknown;
            }
            if ids.len() >= MAX_CHAIN {
                break EndsIn::Unknown;
            }
            ids.push(next);
        };
        let mut hops: Vec<Hop> = ids.iter().map(|&id| self.hop(id)).collect();
        if let (Some(back), Some(last)) = (back_to, hops.last_mut()) {
            let back_name = self
                .task(back)
                .map_or_else(|| format!("[{}]", back.tid), |t| name(&t.comm, back.tid));
            if let Some(w) = last.waits_on.as_mut() {
                w.detail = format!(
                    "{}; the most telling of them, {back_name}, is already on this chain, but others could end the wait: not a deadlock by itself",
                    w.detail
                );
                w.held_by = None;
            }
        }
        Chain { hops, ends_in }
    }

    fn hop(&mut self, id: ThreadId) -> Hop {
        let r = self.resolve(id);
        let task = self.task(id);
        let (comm, state, syscall, kernel_stack) = match &task {
            Some(t) => (
                t.comm.clone(),
                procfs::state_word(t.state).to_string(),
                t.syscall.clone(),
                t.kernel_stack.clone(),
            ),
            None => ("?".into(), "gone".into(), None, Vec::new()),
        };
        let user_stack = match &task {
            Some(t) => self.frames(t).iter().map(Frame::text).collect(),
            None => Vec::new(),
        };
        let syscall = match syscall {
            Some(SyscallState::In { nr, args, .. }) => Some(Syscall {
                nr,
                name: sc::name(nr),
                args: args.iter().map(|a| format!("{a:#x}")).collect(),
            }),
            _ => None,
        };
        let off_cpu_s = match (task.as_ref().and_then(|t| t.exec_start_ms), self.now_ms) {
            (Some(start), Some(now)) => Some(((now - start) / 1000.0).max(0.0)),
            _ => None,
        };
        let dir = self.proc.task_dir(id.pid, id.tid);
        let process = (id.pid != self.target).then(|| self.comm(id.pid));
        // A thread's own ids in nested pid namespaces: read only for
        // processes that live in one (their main thread's NSpid says).
        let nested = self.is_nested(id.pid);
        let ns_tid = if nested {
            self.proc
                .read(&dir.join("status"))
                .ok()
                .map(|s| parse_status(&s).nspid)
                .filter(|n| n.len() > 1)
        } else {
            None
        };
        Hop {
            pid: id.pid,
            tid: id.tid,
            comm,
            process,
            ns_tid,
            state,
            waits_on: r.waits_on.clone(),
            syscall,
            off_cpu_s,
            kernel_stack,
            user_stack,
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
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    /// A fake `/proc` with process 100 (pid 7 in a namespace of its own;
    /// the owner words hold those inner ids): threads 100 and 101 in an ABBA
    /// deadlock, 102 asleep, 103 waiting on a word whose owner field names
    /// a thread that does not exist;
    /// its memory is a sparse `mem` file holding the mutexes.
    fn fake_proc() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("proc/100");
        let threads = [
            (
                100,
                "main",
                "202 0x1000 0x80 0x2 0x0 0x0 0x0 0x7ff0 0x401000",
            ),
            (
                101,
                "worker",
                "202 0x2000 0x80 0x2 0x0 0x0 0x0 0x7ff0 0x401000",
            ),
            (
                102,
                "napper",
                "230 0x0 0x0 0x7ff0 0x7ff0 0x0 0x0 0x7ff0 0x401000",
            ),
            (
                103,
                "orphan",
                "202 0x3000 0x80 0x2 0x0 0x0 0x0 0x7ff0 0x401000",
            ),
        ];
        for (tid, comm, syscall) in threads {
            let t = p.join(format!("task/{tid}"));
            std::fs::create_dir_all(&t).unwrap();
            let stat = format!("{tid} ({comm}) S 1 100 100 0 -1 4194560 0 0 0 0");
            std::fs::write(t.join("stat"), &stat).unwrap();
            std::fs::write(t.join("syscall"), syscall).unwrap();
            std::fs::write(t.join("stack"), "[<0>] futex_wait_queue+0x60/0x90\n").unwrap();
            // In a pid namespace of its own: tids 7 to 10 there.
            let status = format!("Name:\t{comm}\nTgid:\t100\nNSpid:\t{tid}\t{}\n", tid - 93);
            std::fs::write(t.join("status"), status).unwrap();
            if tid == 100 {
                std::fs::write(p.join("stat"), &stat).unwrap();
                std::fs::write(p.join("syscall"), syscall).unwrap();
            }
        }
        std::fs::write(
            p.join("status"),
            "Name:\tmain\nTgid:\t100\nPPid:\t1\nNSpid:\t100\t7\n",
        )
        .unwrap();
        std::fs::write(p.join("maps"), "").unwrap();
        let mem = std::fs::File::create(p.join("mem")).unwrap();
        for (addr, value) in [
            (0x1000u64, 2i32),
            (0x1008, 8), // worker, as its namespace numbers it
            (0x2000, 2),
            (0x2008, 7),
            (0x3000, 2),
            (0x3008, 555),
        ] {
            mem.write_all_at(&value.to_le_bytes(), addr).unwrap();
        }
        dir
    }

    #[test]
    fn a_fake_abba_deadlock_is_a_cycle_and_a_dead_owner_ends_the_chain() {
        let root = fake_proc();
        let report = walk(root.path(), 100, &Options::default()).unwrap();
        assert_eq!(report.ns_pid, vec![100, 7]);
        assert_eq!(report.thread_count, 4);
        let tids: Vec<i32> = report.threads.iter().map(|t| t.tid).collect();
        assert_eq!(tids, [100, 101, 103], "the sleeper is not blocked");
        assert_eq!(report.exit_code(), 3);
        let main = &report.threads[0];
        assert!(main.cycle);
        assert_eq!(
            main.chain.iter().map(|h| h.tid).collect::<Vec<_>>(),
            [100, 101]
        );
        let w = main.waits_on.as_ref().unwrap();
        assert_eq!(w.kind, WaitKind::Mutex);
        assert_eq!(w.address.as_deref(), Some("0x1000"));
        let orphan = &report.threads[2];
        assert_eq!(orphan.ends_in, EndsIn::Unknown);
        // Without a stack to say it is a mutex, a dead thread's id in the
        // owner's place is not trusted: the owner stays unknown.
        let w = orphan.waits_on.as_ref().unwrap();
        assert_eq!((w.kind, w.held_by), (WaitKind::Futex, None));
        let text = crate::render::text(&report);
        assert!(
            text.contains("main [100] waits on mutex 0x1000 held by worker [101], which waits on mutex 0x2000 held by main [100]: deadlock"),
            "{text}"
        );
        let all = walk(root.path(), 100, &Options { all_threads: true }).unwrap();
        let napper = all.threads.iter().find(|t| t.tid == 102).unwrap();
        assert_eq!(napper.ends_in, EndsIn::Sleeping);
    }

    #[test]
    fn fake_bad_targets_are_clear_errors() {
        let root = fake_proc();
        let err = walk(root.path(), 999, &Options::default()).unwrap_err();
        assert_eq!(err.to_string(), "no process 999");
        let p = root.path().join("proc/100");
        std::fs::write(
            p.join("stat"),
            "100 (main) Z 42 100 100 0 -1 4194560 0 0 0 0",
        )
        .unwrap();
        for tid in [101, 102, 103] {
            std::fs::remove_dir_all(p.join(format!("task/{tid}"))).unwrap();
        }
        let err = walk(root.path(), 100, &Options::default()).unwrap_err();
        assert!(err.to_string().contains("slowlab hang 42"), "{err}");
        std::fs::write(
            p.join("stat"),
            "100 (kworker/0:1) I 2 0 0 0 -1 69238880 0 0 0 0",
        )
        .unwrap();
        let err = walk(root.path(), 100, &Options::default()).unwrap_err();
        assert!(matches!(err, HangError::KernelThread { .. }), "{err}");
    }
}
