//! Futex waits in the walk: whose word a thread waits on (a mutex's or
//! an rwlock's owner, a joined thread's tid word, a condition variable's
//! or a semaphore's other waiters), across pid namespaces. Part of the
//! [`super::Walker`]; it decides, it does not render.

use super::*;

impl Walker {
    pub(super) fn futex(&mut self, task: &Task, args: [u64; 6]) -> Resolved {
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
    pub(super) fn ns_tids(&mut self, pid: i32) -> Option<Rc<HashMap<i32, i32>>> {
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
    pub(super) fn is_nested(&mut self, pid: i32) -> bool {
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
    pub(super) fn co_waiters(&mut self, task: &Task, addr: u64) -> String {
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
}
