//! The waits on descriptors and processes: pipes and FIFOs (who holds the
//! other end), sockets (Unix peers, loopback TCP), opening a FIFO, file
//! locks (`/proc/locks`), a pipe's mutex, and children (`wait4`,
//! `waitid`). Each names the holders in the wait's detail and follows the
//! most telling of their threads; it decides, it does not render.

use std::os::unix::fs::{FileTypeExt, MetadataExt};

use super::{
    ended, followed, name, wait, Resolved, Task, Walker, MAX_CO_WAITERS, MAX_HOLDER_PROCESSES,
};
use crate::fds::{FdIndex, Holder};
use crate::model::{EndsIn, ThreadId, WaitKind, WaitsOn};
use crate::procfs::{self, parse_locks, parse_stat, FileLock, SyscallState};
use crate::syscalls as sc;

impl Walker {
    pub(super) fn fd_link(&self, pid: i32, fd: i32) -> Option<String> {
        let link =
            std::fs::read_link(self.proc.pid_dir(pid).join("fd").join(fd.to_string())).ok()?;
        Some(link.to_string_lossy().into_owned())
    }

    pub(super) fn fd_index(&mut self) -> &FdIndex {
        let proc = &self.proc;
        self.fds.get_or_insert_with(|| FdIndex::build(proc))
    }

    pub(super) fn fd_wait(&mut self, task: &Task, fd: i32, reading: bool) -> Resolved {
        let pid = task.id.pid;
        let Some(link) = self.fd_link(pid, fd) else {
            return ended(
                wait(
                    WaitKind::Unknown,
                    &format!("descriptor {fd}, which could not be read"),
                ),
                EndsIn::Unknown,
            );
        };
        let end = if reading { "write" } else { "read" };
        if link.starts_with("pipe:[") {
            if task.state == 'D' {
                return self.pipe_mutex(task, &link);
            }
            return self.other_end(task, fd, WaitKind::Pipe, &link, &link, reading, end);
        }
        if let Some(ino) = link
            .strip_prefix("socket:[")
            .and_then(|s| s.strip_suffix(']'))
            .and_then(|s| s.parse::<u64>().ok())
        {
            return self.socket_wait(task, &link, ino);
        }
        let meta = std::fs::metadata(self.proc.pid_dir(pid).join("fd").join(fd.to_string()));
        if meta.as_ref().is_ok_and(|m| m.file_type().is_fifo()) {
            return self.other_end(task, fd, WaitKind::Fifo, &link, &link, reading, end);
        }
        let mut w = wait(WaitKind::Device, "");
        w.path = Some(link.clone());
        if link.starts_with("/dev/pts/") || link.starts_with("/dev/tty") {
            w.detail = format!(
                "the terminal {link}: waits for {}",
                if reading { "input" } else { "output to drain" }
            );
            return ended(w, EndsIn::Device);
        }
        if task.state == 'D' {
            w.detail = format!("I/O on {link}");
            return ended(w, EndsIn::Device);
        }
        w.kind = WaitKind::Unknown;
        w.detail = format!(
            "{} on {link}, which slowlab does not follow",
            if reading { "reads" } else { "writes" }
        );
        ended(w, EndsIn::Unknown)
    }

    /// Uninterruptible in a read or write of a pipe: waiting for data or
    /// room is interruptible, so this is the pipe's mutex, which a thread
    /// inside a read or write of the same pipe holds (one that is not
    /// itself waiting for the mutex). A guess when there are several.
    pub(super) fn pipe_mutex(&mut self, task: &Task, link: &str) -> Resolved {
        let function = task
            .kernel_stack
            .first()
            .map(|f| procfs::frame_function(f).to_string());
        let mut w = wait(
            WaitKind::KernelLock,
            &format!(
                "the pipe's mutex (uninterruptible in {})",
                function.as_deref().unwrap_or("a read or write of the pipe")
            ),
        );
        w.path = Some(link.to_string());
        w.function = function;
        let proc = self.proc.clone();
        let mut pids: Vec<i32> = self
            .fd_index()
            .holders(&proc, link)
            .iter()
            .map(|h| h.pid)
            .collect();
        pids.sort_unstable();
        pids.dedup();
        let mut inside = Vec::new();
        for pid in pids.into_iter().take(MAX_HOLDER_PROCESSES) {
            for tid in self.tids_of(pid) {
                let id = ThreadId { pid, tid };
                if id == task.id {
                    continue;
                }
                let Some(t) = self.task(id) else { continue };
                if let Some(SyscallState::In { nr, args, .. }) = t.syscall {
                    if t.state != 'D'
                        && (sc::reads_fd(nr) || sc::writes_fd(nr))
                        && self.fd_link(pid, args[0] as i32).as_deref() == Some(link)
                    {
                        inside.push(id);
                    }
                }
            }
        }
        match inside.first() {
            Some(&next) => {
                w.detail.push_str(&format!(
                    ": held by the thread inside a {} of the same pipe",
                    if inside.len() == 1 {
                        "read or write"
                    } else {
                        "read or write (one of several)"
                    }
                ));
                followed(w, next, false)
            }
            None => {
                w.detail.push_str(
                    ": no other thread is inside a read or write of it; the holder is unknown",
                );
                ended(w, EndsIn::Unknown)
            }
        }
    }

    /// A pipe or FIFO: the processes holding the end that would end the
    /// wait (the write end for a reader).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn other_end(
        &mut self,
        task: &Task,
        own_fd: i32,
        kind: WaitKind,
        path: &str,
        link: &str,
        reading: bool,
        end: &str,
    ) -> Resolved {
        let proc = self.proc.clone();
        let holders: Vec<Holder> = self
            .fd_index()
            .holders(&proc, link)
            .into_iter()
            .filter(|h| !(h.pid == task.id.pid && h.fd == own_fd))
            .filter(|h| if reading { h.can_write() } else { h.can_read() })
            .collect();
        let mut w = wait(kind, "");
        w.path = Some(path.to_string());
        self.follow_holders(task, w, &holders, &format!("the {end} end"), Some(link))
    }

    /// Names the holders in the detail and follows the most telling thread
    /// among the processes holding it (other processes before the waiter's
    /// own; at most [`MAX_HOLDER_PROCESSES`] looked at). With `avoid`, a
    /// thread waiting on that same pipe is the last choice: it waits too.
    pub(super) fn follow_holders(
        &mut self,
        task: &Task,
        mut w: WaitsOn,
        holders: &[Holder],
        what: &str,
        avoid: Option<&str>,
    ) -> Resolved {
        if holders.is_empty() {
            w.detail = format!("no process holds {what}");
            return ended(w, EndsIn::Unknown);
        }
        let mut pids: Vec<i32> = holders.iter().map(|h| h.pid).collect();
        pids.sort_unstable();
        pids.dedup();
        let list: Vec<String> = holders
            .iter()
            .take(MAX_CO_WAITERS)
            .map(|h| format!("{} (fd {})", name(&self.comm(h.pid), h.pid), h.fd))
            .collect();
        let more = holders.len().saturating_sub(MAX_CO_WAITERS);
        w.detail = format!(
            "{what} held by {}{}",
            list.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        );
        if pids.iter().all(|&p| p == task.id.pid) {
            w.detail.push_str(
                ": only its own process, so only another of its threads can end the wait",
            );
        }
        let others: Vec<i32> = pids.iter().copied().filter(|&p| p != task.id.pid).collect();
        let candidates = if others.is_empty() { pids } else { others };
        let mut best: Option<(u8, ThreadId)> = None;
        let mut threads = 0;
        for pid in candidates.into_iter().take(MAX_HOLDER_PROCESSES) {
            threads += self
                .tids_of(pid)
                .iter()
                .filter(|&&t| t != task.id.tid)
                .count();
            if let Some((r, id)) = self.pick_ranked(pid, task.id, avoid) {
                if best.is_none_or(|(br, _)| r < br) {
                    best = Some((r, id));
                }
            }
        }
        match best.map(|(_, id)| id) {
            Some(next) => followed(w, next, threads == 1),
            None => ended(w, EndsIn::Unknown),
        }
    }

    pub(super) fn socket_wait(&mut self, task: &Task, link: &str, ino: u64) -> Resolved {
        if self.unix_peers.is_none() {
            self.unix_peers = Some(crate::unix_diag::unix_peers().map_err(|e| e.to_string()));
        }
        let peer = match self.unix_peers.as_ref() {
            Some(Ok(peers)) => peers.get(&ino).copied(),
            Some(Err(e)) => {
                self.warnings.insert(format!(
                    "Unix socket peers unavailable (sock_diag: {e}): load the unix_diag module (modprobe unix_diag)"
                ));
                None
            }
            None => None,
        };
        let (kind, peer) = match peer {
            Some(p) => (WaitKind::UnixSocket, Some(p)),
            None => (WaitKind::Socket, self.tcp_peer(task.id.pid, ino)),
        };
        let Some(peer) = peer else {
            let mut w = wait(
                WaitKind::Socket,
                "a socket whose other end slowlab cannot find (not a connected Unix socket of this network namespace, nor a loopback TCP connection)",
            );
            w.path = Some(link.to_string());
            return ended(w, EndsIn::Unknown);
        };
        let peer_link = format!("socket:[{peer}]");
        let proc = self.proc.clone();
        let holders = self.fd_index().holders(&proc, &peer_link);
        let mut w = wait(kind, "");
        w.path = Some(link.to_string());
        self.follow_holders(task, w, &holders, &format!("the peer {peer_link}"), None)
    }

    /// The other end of a loopback TCP connection, from the waiting
    /// process's own view of its network namespace.
    pub(super) fn tcp_peer(&self, pid: i32, ino: u64) -> Option<u64> {
        let mut sockets = Vec::new();
        for file in ["net/tcp", "net/tcp6"] {
            if let Ok(text) = self.proc.read(&self.proc.pid_dir(pid).join(file)) {
                sockets.extend(crate::net::parse_tcp(&text));
            }
        }
        crate::net::loopback_peer(&sockets, ino)
    }

    pub(super) fn open_wait(
        &mut self,
        task: &Task,
        dirfd: i32,
        path_addr: u64,
        flags: u64,
    ) -> Resolved {
        let pid = task.id.pid;
        let Some(path) = self.read_c_string(pid, path_addr) else {
            return ended(
                wait(WaitKind::Unknown, "in open, path unreadable"),
                EndsIn::Unknown,
            );
        };
        let absolute = if path.starts_with('/') {
            path.clone()
        } else {
            let base = if dirfd == -100 {
                std::fs::read_link(self.proc.pid_dir(pid).join("cwd"))
                    .ok()
                    .map(|p| p.to_string_lossy().into_owned())
            } else {
                self.fd_link(pid, dirfd)
            };
            match base {
                Some(b) => format!("{}/{path}", b.trim_end_matches('/')),
                None => path.clone(),
            }
        };
        let in_root = self
            .proc
            .pid_dir(pid)
            .join("root")
            .join(absolute.trim_start_matches('/'));
        let is_fifo = std::fs::metadata(&in_root).is_ok_and(|m| m.file_type().is_fifo());
        if !is_fifo {
            let mut w = wait(
                if task.state == 'D' {
                    WaitKind::Device
                } else {
                    WaitKind::Unknown
                },
                "opening a file",
            );
            w.path = Some(absolute);
            let ends = if task.state == 'D' {
                EndsIn::Device
            } else {
                EndsIn::Unknown
            };
            return ended(w, ends);
        }
        // Opening a FIFO for reading waits for a writer and the other way
        // round; a process already holding that end would have ended it.
        let reading = flags & libc::O_ACCMODE as u64 == libc::O_RDONLY as u64;
        let end = if reading { "writing" } else { "reading" };
        let proc = self.proc.clone();
        let holders: Vec<Holder> = self
            .fd_index()
            .holders(&proc, &absolute)
            .into_iter()
            .filter(|h| if reading { h.can_write() } else { h.can_read() })
            .collect();
        let mut w = wait(WaitKind::Fifo, "");
        w.path = Some(absolute.clone());
        if holders.is_empty() {
            w.detail = format!(
                "opening a FIFO for {}: no process has it open for {end}",
                if reading { "reading" } else { "writing" }
            );
            return ended(w, EndsIn::Unknown);
        }
        self.follow_holders(task, w, &holders, &format!("the FIFO open for {end}"), None)
    }

    pub(super) fn read_c_string(&self, pid: i32, addr: u64) -> Option<String> {
        let mut out = Vec::new();
        let mut chunk = [0u8; 256];
        for i in 0..16u64 {
            // A chunk may cross into an unmapped page: fall back to bytes.
            let at = addr + i * 256;
            if self.proc.read_mem(pid, at, &mut chunk).is_err() {
                for j in 0..256u64 {
                    let mut b = [0u8; 1];
                    self.proc.read_mem(pid, at + j, &mut b).ok()?;
                    if b[0] == 0 {
                        return Some(String::from_utf8_lossy(&out).into_owned());
                    }
                    out.push(b[0]);
                }
                continue;
            }
            if let Some(end) = chunk.iter().position(|&b| b == 0) {
                out.extend_from_slice(&chunk[..end]);
                return Some(String::from_utf8_lossy(&out).into_owned());
            }
            out.extend_from_slice(&chunk);
        }
        None
    }

    pub(super) fn file_lock(&mut self, task: &Task, fd: i32, classes: &[&str]) -> Resolved {
        let pid = task.id.pid;
        let path = self.fd_link(pid, fd).unwrap_or_else(|| format!("fd {fd}"));
        let mut w = wait(WaitKind::FileLock, "");
        w.path = Some(path.clone());
        let Ok(meta) = std::fs::metadata(self.proc.pid_dir(pid).join("fd").join(fd.to_string()))
        else {
            w.detail = "the locked file could not be read".into();
            return ended(w, EndsIn::Unknown);
        };
        if self.locks.is_none() {
            self.locks = Some(
                self.proc
                    .read(&self.proc.path("locks"))
                    .map(|t| parse_locks(&t))
                    .unwrap_or_default(),
            );
        }
        let (major, minor) = (libc::major(meta.dev()), libc::minor(meta.dev()));
        let ino = meta.ino();
        let candidates: Vec<FileLock> = self
            .locks
            .iter()
            .flatten()
            .filter(|l| !l.blocked && l.inode == ino && classes.contains(&l.class.as_str()))
            .cloned()
            .collect();
        // /proc/locks names the superblock's device, which is not always
        // what stat says (btrfs subvolumes, overlayfs): the inode alone
        // when no lock matches both.
        let same_dev: Vec<&FileLock> = candidates
            .iter()
            .filter(|l| l.major == major && l.minor == minor)
            .collect();
        let holders: Vec<&FileLock> = if same_dev.is_empty() {
            candidates.iter().collect()
        } else {
            same_dev
        };
        let Some(lock) = holders.first() else {
            w.detail = "no holder listed in /proc/locks (released just now?)".into();
            return ended(w, EndsIn::Unknown);
        };
        if lock.pid <= 0 {
            w.detail = format!(
                "{} {} lock held through an open file description (OFD): /proc/locks does not name its process",
                lock.class, lock.mode
            );
            return ended(w, EndsIn::Unknown);
        }
        let holder = lock.pid;
        w.detail = format!(
            "{} {} lock held by {}",
            lock.class,
            lock.mode,
            name(&self.comm(holder), holder)
        );
        let threads = self.tids_of(holder).len();
        match self.pick_thread(holder, task.id) {
            Some(next) => followed(w, next, threads == 1),
            None => {
                w.detail.push_str(", which is gone");
                ended(w, EndsIn::Unknown)
            }
        }
    }

    pub(super) fn child_wait(&mut self, task: &Task, which: i32) -> Resolved {
        let pid = task.id.pid;
        let mut children = self.children(pid);
        if which > 0 {
            children.retain(|&c| c == which);
        }
        let mut w = wait(WaitKind::Child, "");
        if children.is_empty() {
            w.detail = "no child found".into();
            return ended(w, EndsIn::Unknown);
        }
        let names: Vec<String> = children
            .iter()
            .take(MAX_CO_WAITERS)
            .map(|&c| name(&self.comm(c), c))
            .collect();
        w.detail = if children.len() == 1 {
            format!("waits for its child {}", names[0])
        } else {
            format!(
                "waits for any of {} children: {}",
                children.len(),
                names.join(", ")
            )
        };
        // The child whose best thread ranks first.
        let mut best: Option<(u8, ThreadId)> = None;
        let mut threads = 0;
        for c in children {
            threads += self.tids_of(c).len();
            if let Some(t) = self.pick_thread(c, task.id) {
                let r = self.rank(t, None);
                if best.is_none_or(|(br, _)| r < br) {
                    best = Some((r, t));
                }
            }
        }
        match best {
            Some((_, next)) => followed(w, next, threads == 1),
            None => ended(w, EndsIn::Unknown),
        }
    }

    /// The children of every thread of `pid` (`task/*/children`), or of
    /// the process by scanning every process's parent when the kernel has
    /// no children files.
    pub(super) fn children(&mut self, pid: i32) -> Vec<i32> {
        let mut children = Vec::new();
        let mut have_files = false;
        for tid in self.tids_of(pid) {
            if let Ok(text) = self
                .proc
                .read(&self.proc.task_dir(pid, tid).join("children"))
            {
                have_files = true;
                children.extend(
                    text.split_whitespace()
                        .filter_map(|s| s.parse::<i32>().ok()),
                );
            }
        }
        if !have_files {
            for p in self.proc.pids() {
                let ppid = self
                    .proc
                    .read(&self.proc.pid_dir(p).join("stat"))
                    .ok()
                    .and_then(|s| parse_stat(&s))
                    .map(|s| s.ppid);
                if ppid == Some(pid) {
                    children.push(p);
                }
            }
        }
        children.sort_unstable();
        children.dedup();
        children
    }
}
