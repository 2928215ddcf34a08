//! Waking a recording thread asleep in `poll(2)` (the scheduler recorder's drain, the path
//! capture's): a [`Nudge`] is an eventfd its owner writes to when it sets the stop flag or
//! asks the thread something, and [`sleep_until_readable`] is the thread's sleep on it
//! beside the ring buffers' descriptors. So the thread sleeps until there are records to
//! read, a question or the stop, or until its own next chore, instead of waking every 50
//! ms to look: an idle flight recorder's drain woke 20 times a second, and a wake-up costs
//! this VM 70–140 µs of CPU (`bench/record/idle_cost.sh`).
//!
//! It does not know what the thread does when woken.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

/// An eventfd shared by a thread and its owner.
#[derive(Clone, Debug)]
pub(crate) struct Nudge(Arc<OwnedFd>);

impl Nudge {
    pub(crate) fn new() -> io::Result<Nudge> {
        // SAFETY: eventfd takes an initial count and flags; it returns a new descriptor or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the descriptor was just made by the kernel, owned by no one else.
        Ok(Nudge(Arc::new(unsafe { OwnedFd::from_raw_fd(fd) })))
    }

    /// Wakes the thread (or makes its next sleep end at once).
    pub(crate) fn nudge(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from `one` to the eventfd. It fails only when the count
        // would overflow, when the thread has 2^64 - 2 nudges to read already.
        unsafe { libc::write(self.0.as_raw_fd(), one.as_ptr().cast(), one.len()) };
    }

    /// Takes the nudges that came: the next sleep waits again. Called before the thread
    /// looks at what it was nudged for, so that a nudge after it ends the next sleep.
    pub(crate) fn clear(&self) {
        let mut count = [0u8; 8];
        // SAFETY: reads at most 8 bytes into `count`; the eventfd does not block.
        unsafe { libc::read(self.0.as_raw_fd(), count.as_mut_ptr().cast(), count.len()) };
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

/// Sleeps until one of `fds` is readable (or hung up), at most `timeout` (rounded up to
/// the millisecond: a deadline 0.4 ms away is not a busy loop of zero-timeout polls), or
/// until a signal comes to this thread. Whether one of `fds` ended it. (Also the sleep of
/// `slowlab-record`'s loops.)
pub fn sleep_until_readable(fds: &[BorrowedFd<'_>], timeout: Duration) -> bool {
    let mut polled: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let millis = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
    // SAFETY: `polled` is a live array of `polled.len()` pollfd structs; poll only writes
    // their `revents`.
    unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, millis) > 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_nudge_from_another_thread_ends_a_sleep_and_clear_rearms_it() {
        let nudge = Nudge::new().expect("an eventfd");
        let other = nudge.clone();
        let start = Instant::now();
        let thread = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            other.nudge();
        });
        assert!(sleep_until_readable(&[nudge.fd()], Duration::from_secs(10)));
        thread.join().expect("the nudging thread");
        let slept = start.elapsed();
        assert!(slept >= Duration::from_millis(20), "woke before the nudge");
        assert!(
            slept < Duration::from_secs(5),
            "the nudge did not wake it: {slept:?}"
        );
        // Two nudges before a clear are one; after it, a sleep lasts its timeout.
        nudge.nudge();
        nudge.clear();
        let start = Instant::now();
        assert!(!sleep_until_readable(
            &[nudge.fd()],
            Duration::from_millis(30)
        ));
        assert!(
            start.elapsed() >= Duration::from_millis(30),
            "a cleared nudge still ended the sleep"
        );
    }
}
