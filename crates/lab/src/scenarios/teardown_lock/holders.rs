//! teardown-lock's holder processes (`__child teardown-holder`): started
//! one by one in one process group, each in a new network namespace made
//! between fork and exec (or not, for the control), dying with the thread
//! that started them (PR_SET_PDEATHSIG); killed together with one SIGKILL
//! and reaped, by `kill_and_reap` or else by the `Cleanup` guard on every
//! exit path.
//!
//! What it does not do: time anything (the monitor does) or touch any
//! namespace but the holders' own.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use slowlab_sweep::Cancel;

use super::{holder_args, Kind};
use crate::cleanup::Cleanup;

/// The holder processes: one process group, killed and reaped by the guard
/// on every exit path unless `kill_and_reap` did it first.
pub(super) struct HolderGroup {
    /// The group id, 0 before the first holder and after the reap.
    pgid: Arc<AtomicI32>,
    count: usize,
    cancel: Cancel,
    _guard: Cleanup,
}

impl HolderGroup {
    pub(super) fn new(cancel: Cancel) -> Self {
        let pgid = Arc::new(AtomicI32::new(0));
        let guard_pgid = Arc::clone(&pgid);
        let guard_cancel = cancel.clone();
        HolderGroup {
            pgid,
            count: 0,
            cancel,
            _guard: Cleanup::register("kill the teardown-lock holders", move || {
                let group = guard_pgid.swap(0, Ordering::SeqCst);
                if group > 0 {
                    guard_cancel.clear_running_group();
                    slowlab_sweep::cancel::kill_group(group);
                    reap_group(group, usize::MAX, Duration::from_secs(10));
                }
            }),
        }
    }

    pub(super) fn spawn(&mut self, exe: &Path, kind: Kind) -> std::io::Result<()> {
        let parent = std::process::id() as libc::pid_t;
        let mut command = Command::new(exe);
        command
            .arg("__child")
            .args(holder_args())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(self.pgid.load(Ordering::SeqCst));
        let netns = kind == Kind::Netns;
        // SAFETY: the closure runs between fork and exec and only makes
        // async-signal-safe system calls; it allocates nothing.
        unsafe {
            command.pre_exec(move || {
                crate::system::die_with_parent(parent)?;
                if netns && libc::unshare(libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn()?;
        let pid = child.id() as libc::pid_t;
        if self.count == 0 {
            self.pgid.store(pid, Ordering::SeqCst);
            self.cancel.set_running_group(pid);
        }
        self.count += 1;
        Ok(())
    }

    /// One SIGKILL to the group, then waits for every holder; returns how
    /// many were reaped.
    pub(super) fn kill_and_reap(&mut self) -> usize {
        let group = self.pgid.load(Ordering::SeqCst);
        if group <= 0 {
            return 0;
        }
        slowlab_sweep::cancel::kill_group(group);
        self.cancel.clear_running_group();
        let reaped = reap_group(group, self.count, Duration::from_secs(60));
        if reaped == self.count {
            self.pgid.store(0, Ordering::SeqCst);
        }
        reaped
    }
}

/// Reaps children of group `group` until `expected` were reaped, none is
/// left, or `limit` passed; returns how many.
fn reap_group(group: libc::pid_t, expected: usize, limit: Duration) -> usize {
    let deadline = Instant::now() + limit;
    let mut reaped = 0;
    while reaped < expected {
        let mut status = 0;
        // SAFETY: waits only for our own children in the holders' group.
        let rc = unsafe { libc::waitpid(-group, &mut status, libc::WNOHANG) };
        if rc > 0 {
            reaped += 1;
            continue;
        }
        if rc < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            break; // ECHILD: none left
        }
        if Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    reaped
}
