//! A guard that kills a process group the moment slowlab dies: a small `sh` in the
//! group, reading a pipe (the [`Lifeline`]) whose writing end only slowlab holds. When
//! that end closes without "ok" (slowlab was killed), the guard kills the group: perf
//! and the command it runs, or the command the eBPF recorder runs. When the group's
//! leader has ended normally, [`GroupGuard::dismiss`] leaves what it left running alone.
//!
//! Why a pipe: when slowlab is killed, the kernel closes its files one by one, last
//! opened first (its task-work list is last in, first out, since Linux 5.10), before
//! it signals the children; closing each eBPF program waits for an RCU grace period. The
//! lifeline is opened as the group starts, after the programs, so it closes first and
//! the group dies at once. It starts nothing else and decides nothing about signals.

use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

/// A pipe whose reading end the guard holds: made before the group's leader starts,
/// after anything slow to close (the eBPF programs), so that a dying slowlab closes it
/// first. Close-on-exec: the group's leader does not inherit it.
pub(crate) struct Lifeline {
    write: std::fs::File,
    read: OwnedFd,
}

impl Lifeline {
    pub(crate) fn new() -> std::io::Result<Lifeline> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 writes two new descriptors into `fds` on success.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just created and are owned here only.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok(Lifeline {
            write: std::fs::File::from(write),
            read,
        })
    }
}

/// The guard: ignores the signals sent to its group, and kills the group unless slowlab
/// says "ok" before closing the pipe.
const GUARD: &str = "trap '' INT TERM HUP USR2; read x; [ \"$x\" = ok ] || kill -KILL -\"$1\"";

/// The guard process of one process group, and the lifeline to it. Dropped without
/// [`GroupGuard::dismiss`] (an error, a panic), it kills the group.
pub(crate) struct GroupGuard {
    child: Child,
    lifeline: std::fs::File,
}

impl GroupGuard {
    /// Starts the guard of process group `pgid` on `lifeline`; `None` where `sh` cannot
    /// start (then only what else stops the group does).
    pub(crate) fn start(pgid: i32, lifeline: Lifeline) -> Option<GroupGuard> {
        let child = Command::new("/bin/sh")
            .args(["-c", GUARD, "slowlab-guard", &pgid.to_string()])
            .stdin(Stdio::from(lifeline.read))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(pgid)
            .spawn()
            .ok()?;
        Some(GroupGuard {
            child,
            lifeline: lifeline.write,
        })
    }

    /// The group's leader has ended: the guard leaves the group alone and exits.
    pub(crate) fn dismiss(mut self) {
        let _ = self.lifeline.write_all(b"ok\n");
        let GroupGuard {
            mut child,
            lifeline,
        } = self;
        drop(lifeline);
        let _ = child.wait();
    }
}
