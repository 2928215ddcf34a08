//! Sleeping until a recording loop has something to look at. The loops that wait for a
//! stop signal, a command's exit, a `--save` client or a trigger (a command's recording,
//! the machine's, the flight recorder's) sleep in `poll(2)` on what can end the wait —
//! the signal handler's pipe ([`crate::signals::StopSignals::fd`]), the command's pidfd
//! ([`exit_fd`]), the control socket — and wake by themselves only when something of
//! theirs falls due (a trigger's next look) or after [`HEARTBEAT`]. They had woken every
//! 5–50 ms to find nothing: an idle flight recorder's loop woke 20 times a second, and a
//! wake-up costs this VM 70–140 µs of CPU (`bench/record/idle_cost.sh`).
//!
//! It does not decide what a wake-up means; the loops look at everything each time.

use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// The longest a loop sleeps with nothing due: how soon it sees what nothing wakes it
/// for (a recorder that failed: a full disk).
pub(crate) const HEARTBEAT: Duration = Duration::from_millis(500);

/// A file descriptor that becomes readable when process `pid` (a child of this process,
/// not reaped yet) exits; `None` where the kernel has no `pidfd_open` (before 5.3): the
/// caller then looks at the process every few milliseconds, as before.
pub(crate) fn exit_fd(pid: u32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    let fd = i32::try_from(fd).ok().filter(|&fd| fd >= 0)?;
    // SAFETY: the kernel just gave this descriptor to this process, owned by no one else.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Sleeps until one of `fds` is readable (or hung up), or until `until` (at most
/// [`HEARTBEAT`] from now), or until a signal comes to this thread. Whether one of `fds`
/// ended it.
pub(crate) fn sleep_until(fds: &[Option<BorrowedFd<'_>>], until: Option<Instant>) -> bool {
    let timeout = until
        .map_or(HEARTBEAT, |at| at.saturating_duration_since(Instant::now()))
        .min(HEARTBEAT);
    let fds: Vec<BorrowedFd<'_>> = fds.iter().flatten().copied().collect();
    slowlab_bpf::sleep_until_readable(&fds, timeout)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_sleep_ends_when_a_child_exits_not_at_its_heartbeat() {
        // 0.1 s, well within the heartbeat (and a poll that times out looks at its fds
        // once more: only a child still running at the heartbeat could fail this).
        let mut child = std::process::Command::new("sleep")
            .arg("0.1")
            .spawn()
            .expect("sleep runs");
        let Some(fd) = exit_fd(child.id()) else {
            eprintln!("skipped: this kernel has no pidfd_open");
            let _ = child.wait();
            return;
        };
        let woken = sleep_until(&[Some(fd.as_fd())], None);
        assert!(woken, "the sleep ended at its heartbeat, not at the exit");
        assert!(
            child.try_wait().expect("waits").is_some(),
            "the sleep ended before the child exited"
        );
    }

    #[test]
    fn a_sleep_with_nothing_to_wake_it_ends_at_its_deadline_or_heartbeat() {
        let start = Instant::now();
        assert!(!sleep_until(
            &[None],
            Some(start + Duration::from_millis(30))
        ));
        let slept = start.elapsed();
        assert!(slept >= Duration::from_millis(30), "woke early: {slept:?}");
        let start = Instant::now();
        assert!(!sleep_until(&[], None));
        assert!(start.elapsed() >= HEARTBEAT, "woke before the heartbeat");
    }
}
