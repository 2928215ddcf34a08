//! Ctrl-C (SIGINT), SIGTERM and SIGHUP for `lab` and `sweep`, whatever the
//! process inherited (a shell starts `cmd &` with SIGINT ignored): the first
//! one cancels the running work — the child process group being measured is
//! killed at once, a `lab --trace` recording is stopped and written — so
//! that the command can still print and save what it measured; a second one
//! kills any perf still running (with what it launched) and exits
//! immediately with status 130. SIGUSR2, which saves a snapshot in `slowlab
//! record --ring`, is caught and ignored here with a note rather than
//! killing slowlab (and leaving a perf behind).
//!
//! `slowlab record` and `diagnose` handle their signals in `slowlab-record`.

use anyhow::Context;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR2};
use signal_hook::iterator::Signals;
use slowlab_sweep::Cancel;

/// Starts a thread that turns SIGINT/SIGTERM/SIGHUP into `cancel.cancel()`.
pub fn cancel_on_interrupt(cancel: Cancel) -> anyhow::Result<()> {
    let caught = [SIGINT, SIGTERM, SIGHUP, SIGUSR2];
    let mut signals = Signals::new(caught).context("cannot install the Ctrl-C handler")?;
    unblock(&caught);
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                if sig == SIGUSR2 {
                    eprintln!("\nslowlab: SIGUSR2 ignored (it saves a snapshot in `slowlab record --ring` only)");
                    continue;
                }
                if cancel.is_cancelled() {
                    eprintln!("\nslowlab: interrupted again: cleaning up and exiting now");
                    // Exiting does not unwind: undo what the lab created first.
                    slowlab_record::kill_running();
                    slowlab_lab::cleanup::run_all_now();
                    std::process::exit(130);
                }
                eprintln!("\nslowlab: interrupted; stopping and keeping what was measured (Ctrl-C again to quit at once)");
                cancel.cancel();
            }
        })
        .context("cannot start the signal thread")?;
    Ok(())
}

/// Unblocks `signals` in the calling thread (the main thread: threads it
/// starts later inherit the mask), in case slowlab was started with them
/// blocked.
fn unblock(signals: &[i32]) {
    // SAFETY: `set` is initialised by sigemptyset before use; changing this
    // thread's mask has no memory-safety preconditions.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &sig in signals {
            libc::sigaddset(&mut set, sig);
        }
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}
