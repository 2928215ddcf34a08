//! The chain of hops from one thread: which thread of a process holding a
//! resource to follow (ranked by how telling its own wait is), one hop
//! after another until a thread waits on nothing slowlab follows or on a
//! thread already on the chain. Part of the [`super::Walker`].

use super::*;

impl Walker {
    /// How telling a thread is as the one to follow into a process that
    /// holds a resource (lower first): running or stopped, waiting on a
    /// lock with an owner or in the disk, busy with a descriptor, idle.
    pub(super) fn rank(&mut self, id: ThreadId, avoid: Option<&str>) -> u8 {
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
    pub(super) fn pick_thread(&mut self, pid: i32, exclude: ThreadId) -> Option<ThreadId> {
        self.pick_ranked(pid, exclude, None).map(|(_, id)| id)
    }

    /// The best-ranked thread of `pid` and its rank; threads waiting on
    /// `avoid` rank last.
    pub(super) fn pick_ranked(
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
    pub(super) fn chain(&mut self, start: ThreadId) -> Chain {
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

    pub(super) fn hop(&mut self, id: ThreadId) -> Hop {
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
