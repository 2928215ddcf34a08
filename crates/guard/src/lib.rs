//! Runs code that parses untrusted input with parsers that may panic on
//! malformed data (`linux-perf-data` in `perf`, the `pdb` crate in `etl`),
//! and turns a panic into `None`: [`guard`].
//!
//! The panic is not printed: a panic hook, installed on the first call and
//! chained to the hook before it, stays silent for panics inside [`guard`]
//! on the calling thread and passes every other panic on unchanged. Each
//! caught panic is counted ([`caught_panics`]) and its message kept
//! ([`last_caught_panic`]), so that the fuzz targets and the corpus tests
//! can still fail on one.
//!
//! It does not make the guarded code correct: what it was building when it
//! panicked is lost (the caller's `None` case), and whatever it had changed
//! outside its own values stays changed (the closure is taken as
//! unwind-safe). It does not catch panics on other threads, nor aborts,
//! stack overflows or panics when the binary is built with `panic =
//! "abort"`.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once};

/// Panics [`guard`] caught since the process started.
static CAUGHT_PANICS: AtomicU64 = AtomicU64::new(0);

/// The message and place of the last panic [`guard`] caught.
static LAST_CAUGHT: Mutex<Option<String>> = Mutex::new(None);

thread_local! {
    /// Depth of [`guard`] calls on this thread: panics inside are expected
    /// and not reported.
    static QUIET: Cell<u32> = const { Cell::new(0) };
}

/// How many panics [`guard`] caught (and silenced) since the process
/// started, in any crate. Reading goes on after one, but each is a bug in
/// a parser: the fuzz targets abort when this grows, so that afl counts it
/// as a crash, and the corpus replay tests fail.
pub fn caught_panics() -> u64 {
    CAUGHT_PANICS.load(Ordering::Relaxed)
}

/// The message and source location of the last panic counted by
/// [`caught_panics`], to report it.
pub fn last_caught_panic() -> Option<String> {
    LAST_CAUGHT.lock().ok()?.clone()
}

/// Runs `f` and returns its result, or `None` if it panicked; the panic is
/// counted and kept, not printed (see the module doc). Calls may nest.
pub fn guard<R>(f: impl FnOnce() -> R) -> Option<R> {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if QUIET.with(Cell::get) == 0 {
                previous(info);
            } else if let Ok(mut last) = LAST_CAUGHT.lock() {
                *last = Some(info.to_string());
            }
        }));
    });
    QUIET.with(|q| q.set(q.get() + 1));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    QUIET.with(|q| q.set(q.get() - 1));
    if r.is_err() {
        CAUGHT_PANICS.fetch_add(1, Ordering::Relaxed);
    }
    r.ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::panic::{catch_unwind, set_hook};
    use std::sync::atomic::AtomicUsize;

    /// Panics that reached the hook installed before the guard's (the one
    /// that would print them).
    static REPORTED: AtomicUsize = AtomicUsize::new(0);

    fn reported() -> usize {
        REPORTED.load(Ordering::SeqCst)
    }

    // One test: the panic hook is the process's, and the guard's is
    // installed once, after this test's own.
    #[test]
    fn a_panic_inside_is_none_and_silent_and_one_outside_goes_on() {
        set_hook(Box::new(|_| {
            REPORTED.fetch_add(1, Ordering::SeqCst);
        }));
        assert_eq!(guard(|| 7), Some(7));
        assert_eq!(caught_panics(), 0);
        assert_eq!(last_caught_panic(), None);

        let r: Option<()> = guard(|| panic!("bad input {}", 1));
        assert_eq!(r, None);
        assert_eq!((caught_panics(), reported()), (1, 0));
        let last = last_caught_panic().unwrap();
        assert!(
            last.contains("bad input 1") && last.contains("lib.rs"),
            "{last}"
        );

        // Nested: the inner panic is the inner guard's; the outer one's
        // closure goes on after it, and its own panic is still quiet.
        let r = guard(|| {
            assert_eq!(guard(|| -> u8 { panic!("inner") }), None);
            assert_eq!(guard(|| 2), Some(2));
            3
        });
        assert_eq!(r, Some(3));
        let r: Option<()> = guard(|| {
            assert_eq!(guard(|| 1), Some(1));
            panic!("outer")
        });
        assert_eq!(r, None);
        assert_eq!((caught_panics(), reported()), (3, 0));
        assert!(last_caught_panic().unwrap().contains("outer"));

        // Outside a guard, a panic is reported and unwinds as before…
        assert!(catch_unwind(|| panic!("not guarded")).is_err());
        assert_eq!((caught_panics(), reported()), (3, 1));
        // …also on another thread while this one is inside a guard.
        let r = guard(|| std::thread::spawn(|| panic!("elsewhere")).join().is_err());
        assert_eq!(r, Some(true));
        assert_eq!((caught_panics(), reported()), (3, 2));
        assert!(last_caught_panic().unwrap().contains("outer"));
    }
}
