//! The signals that stop a recording or save a snapshot of it — SIGINT,
//! SIGTERM, SIGHUP and SIGUSR2 — caught for as long as a [`StopSignals`]
//! lives, *whatever the process inherited*: a non-interactive shell starts
//! `cmd &` with SIGINT ignored, and a launcher may leave signals blocked.
//! Dropping it puts the dispositions and the mask back as they were.
//!
//! The handler only counts the signals and writes a byte to a pipe; the
//! recording loop sleeps on the pipe ([`StopSignals::fd`], `wake`), reads the
//! counts with [`StopSignals::take`] and decides what they mean (`session`).
//!
//! It calls `sigaction` itself rather than through signal-hook because the
//! dispositions must be restored: signal-hook keeps its handler for the rest
//! of the process (it cannot reinstate "default" or "ignore"), and `slowlab
//! diagnose` must get the ordinary Ctrl-C back for the analysis that follows
//! the recording.

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::sync::OnceLock;

/// The signals caught, in the order [`StopSignals::take`] reports them.
pub(crate) const CAUGHT: [libc::c_int; 4] =
    [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGUSR2];

/// How many of each of [`CAUGHT`] arrived (written by the handler).
static COUNTS: [AtomicU32; 4] = [
    AtomicU32::new(0),
    AtomicU32::new(0),
    AtomicU32::new(0),
    AtomicU32::new(0),
];

/// One [`StopSignals`] at a time owns the handlers.
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// The pipe the handler writes a byte to for each signal, so that a loop asleep in
/// `poll` wakes whichever thread the signal was delivered to: its read end, and the
/// write end's number for the handler (-1 until made). Made once and kept for the
/// process's life: a handler still running on another thread as the last
/// [`StopSignals`] is dropped must not write to a number already reused.
static PIPE: OnceLock<Option<(OwnedFd, OwnedFd)>> = OnceLock::new();
static PIPE_WRITE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(sig: libc::c_int) {
    // An atomic add and a write(2): async-signal-safe. errno is kept for the code the
    // signal interrupted.
    if let Some(i) = CAUGHT.iter().position(|&s| s == sig) {
        COUNTS[i].fetch_add(1, Ordering::SeqCst);
    }
    let fd = PIPE_WRITE.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: errno is this thread's; the write end stays open for the process's
        // life; a full pipe (no one reading) makes the write fail, which is harmless.
        unsafe {
            let errno = *libc::__errno_location();
            libc::write(fd, [1u8].as_ptr().cast(), 1);
            *libc::__errno_location() = errno;
        }
    }
}

/// The signal pipe, made on first use (non-blocking, closed on exec); `None` when the
/// process has no descriptor left, in which case loops wake by the clock only.
fn pipe() -> Option<&'static (OwnedFd, OwnedFd)> {
    PIPE.get_or_init(|| {
        let mut fds = [-1; 2];
        // SAFETY: pipe2 writes two new descriptors into `fds` or fails.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
            return None;
        }
        // SAFETY: both descriptors were just made by the kernel, owned by no one else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        PIPE_WRITE.store(write.as_raw_fd(), Ordering::SeqCst);
        Some((read, write))
    })
    .as_ref()
}

/// The name of a signal, for messages (`SIGINT`).
pub(crate) fn name(sig: libc::c_int) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGKILL => "SIGKILL",
        _ => "a signal",
    }
}

/// The handlers of [`CAUGHT`], installed until dropped.
pub(crate) struct StopSignals {
    /// The dispositions replaced, to restore; empty when another
    /// `StopSignals` already owned the handlers.
    old: Vec<(libc::c_int, libc::sigaction)>,
    old_mask: Option<libc::sigset_t>,
    /// Counts already reported by `take`.
    seen: [u32; 4],
}

impl StopSignals {
    /// Catches [`CAUGHT`] in this process and unblocks them in this thread.
    /// Nested calls share the first one's handlers.
    pub(crate) fn install() -> StopSignals {
        // Before the handlers: a signal from now on wakes a loop asleep on it.
        pipe();
        let mut seen = [0u32; 4];
        for (s, c) in seen.iter_mut().zip(&COUNTS) {
            *s = c.load(Ordering::SeqCst);
        }
        if INSTALLED.swap(true, Ordering::SeqCst) {
            return StopSignals {
                old: Vec::new(),
                old_mask: None,
                seen,
            };
        }
        let mut old = Vec::new();
        // SAFETY: the sigaction structs are zeroed then filled; the handler
        // only does an atomic add; sigemptyset/sigaddset initialise `set`
        // before pthread_sigmask reads it.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for &sig in &CAUGHT {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
                action.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut action.sa_mask);
                let mut previous: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, &action, &mut previous) == 0 {
                    old.push((sig, previous));
                }
                libc::sigaddset(&mut set, sig);
            }
            let mut old_mask: libc::sigset_t = std::mem::zeroed();
            let unblocked = libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, &mut old_mask) == 0;
            StopSignals {
                old,
                old_mask: unblocked.then_some(old_mask),
                seen,
            }
        }
    }

    /// The signals that arrived since the last call, each as many times as
    /// it came, in the order of [`CAUGHT`].
    pub(crate) fn take(&mut self) -> Vec<libc::c_int> {
        // The pipe first: a signal that comes after it is emptied is counted now or
        // wakes the next sleep.
        if let Some((read, _)) = pipe() {
            let mut buf = [0u8; 64];
            // SAFETY: reads into `buf`, at most its length; the pipe does not block.
            while unsafe { libc::read(read.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
        }
        let mut got = Vec::new();
        for (i, count) in COUNTS.iter().enumerate() {
            let now = count.load(Ordering::SeqCst);
            for _ in self.seen[i]..now {
                got.push(CAUGHT[i]);
            }
            self.seen[i] = now;
        }
        got
    }

    /// Readable once a caught signal came since the last [`StopSignals::take`]: for a
    /// loop to sleep on (`wake::sleep_until`).
    pub(crate) fn fd(&self) -> Option<BorrowedFd<'static>> {
        use std::os::fd::AsFd;
        pipe().map(|(read, _)| read.as_fd())
    }
}

impl Drop for StopSignals {
    fn drop(&mut self) {
        if self.old.is_empty() && self.old_mask.is_none() {
            return;
        }
        // SAFETY: restores the dispositions and the mask saved by install().
        unsafe {
            for (sig, previous) in &self.old {
                libc::sigaction(*sig, previous, std::ptr::null_mut());
            }
            if let Some(mask) = &self.old_mask {
                libc::pthread_sigmask(libc::SIG_SETMASK, mask, std::ptr::null_mut());
            }
        }
        INSTALLED.store(false, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ignored_sigusr2_is_caught_counted_and_ignored_again_after() {
        // SAFETY: setting and reading dispositions; raise() delivers to this
        // thread, which install() unblocked.
        unsafe {
            libc::signal(libc::SIGUSR2, libc::SIG_IGN);
            let mut signals = StopSignals::install();
            libc::raise(libc::SIGUSR2);
            libc::raise(libc::SIGUSR2);
            let fd = signals.fd().expect("the signal pipe");
            assert!(
                crate::wake::sleep_until(&[Some(fd)], None),
                "the signals did not make the pipe readable"
            );
            assert_eq!(signals.take(), vec![libc::SIGUSR2, libc::SIGUSR2]);
            assert!(signals.take().is_empty());
            assert!(
                !crate::wake::sleep_until(&[Some(fd)], Some(std::time::Instant::now())),
                "the pipe stays readable after take"
            );
            drop(signals);
            let mut now: libc::sigaction = std::mem::zeroed();
            libc::sigaction(libc::SIGUSR2, std::ptr::null(), &mut now);
            assert_eq!(now.sa_sigaction, libc::SIG_IGN);
            libc::signal(libc::SIGUSR2, libc::SIG_DFL);
        }
    }

    #[test]
    fn names() {
        assert_eq!(name(libc::SIGHUP), "SIGHUP");
        assert_eq!(name(libc::SIGTERM), "SIGTERM");
    }
}
