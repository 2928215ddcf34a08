//! teardown-lock's holder processes (`__child teardown-holder`): started
//! one by one in one process group, each in a new network namespace it
//! makes before it says it is ready (or not, for the control), dying with
//! the thread that started them (PR_SET_PDEATHSIG); killed together with one
//! SIGKILL and reaped, by `kill_and_reap` or else by the `Cleanup` guard on
//! every exit path.
//!
//! What it does not do: time anything (the monitor does) or touch any
//! namespace but the holders' own.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use slowlab_sweep::Cancel;

use super::{holder_args, Kind};
use crate::cleanup::Cleanup;

/// How many holders may be starting (not yet read as ready) at once: their start-ups
/// (exec, the namespace) overlap as they did when the namespace was made between fork and
/// exec, and this process keeps that many pipes open at most. Waiting for each before the
/// next, `slowlab lab teardown-lock` took 15.8 s, against 11–12 s.
const READY_WINDOW: usize = 32;

/// The holder processes: one process group, killed and reaped by the guard
/// on every exit path unless `kill_and_reap` did it first.
pub(super) struct HolderGroup {
    /// The group id, 0 before the first holder and after the reap.
    pgid: Arc<AtomicI32>,
    count: usize,
    /// The stdout of each holder started whose `ready` is not read yet, oldest first.
    pending: VecDeque<ChildStdout>,
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
            pending: VecDeque::new(),
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

    /// Starts one holder: it makes a network namespace of its own for [`Kind::Netns`] and
    /// binds itself to die with the thread that started it, then says it is ready. Up to
    /// [`READY_WINDOW`] holders get ready while the next ones start; [`Self::wait_ready`]
    /// waits for the rest.
    pub(super) fn spawn(&mut self, exe: &Path, kind: Kind) -> std::io::Result<()> {
        let parent = std::process::id() as libc::pid_t;
        // No code runs between fork and exec (the holder makes its namespace itself), so
        // the standard library starts it with posix_spawn, which does not copy this
        // process's page tables. Under `lab --trace` this process holds the eBPF
        // recorder and the last variant's analysis (50–100 MB): forked 1,000 times, it
        // spent 95% of its CPU in the kernel, 73% of that in `__do_sys_clone`, and the
        // traced teardown-lock took 16.5 s, now 9.9 s.
        let mut child = Command::new(exe)
            .arg("__child")
            .args(holder_args(parent, kind))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(self.pgid.load(Ordering::SeqCst))
            .spawn()?;
        let pid = child.id() as libc::pid_t;
        if self.count == 0 {
            self.pgid.store(pid, Ordering::SeqCst);
            self.cancel.set_running_group(pid);
        }
        self.count += 1;
        self.pending
            .push_back(child.stdout.take().expect("the holder's stdout is piped"));
        if self.pending.len() >= READY_WINDOW {
            self.wait_oldest()?;
        }
        Ok(())
    }

    /// Waits until every holder started is ready.
    pub(super) fn wait_ready(&mut self) -> std::io::Result<()> {
        while !self.pending.is_empty() {
            self.wait_oldest()?;
        }
        Ok(())
    }

    /// Reads the oldest pending holder's one line, then closes its pipe: `ready`, or why
    /// not (the holder then exits).
    fn wait_oldest(&mut self) -> std::io::Result<()> {
        let Some(out) = self.pending.pop_front() else {
            return Ok(());
        };
        let mut said = String::new();
        BufReader::new(out).read_line(&mut said)?;
        match said.trim_end() {
            "ready" => Ok(()),
            "" => Err(std::io::Error::other("it exited before it was ready")),
            why => Err(std::io::Error::other(why.to_string())),
        }
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
