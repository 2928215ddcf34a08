//! Ctrl-C (SIGINT), SIGTERM and SIGHUP for `lab` and `sweep`, whatever the
//! process inherited (a shell starts `cmd &` with SIGINT ignored): the first
//! one cancels the running work — the child process group being measured is
//! killed at once, a `lab --trace` recording is stopped and written — so
//! that the command can still print and save what it measured; a second one
//! kills any perf still running (with what it launched) and exits
//! immediately. Either way the status is 128 + the first signal ([`exit_code`]:
//! 130 for Ctrl-C, 143 for SIGTERM), as a shell reports it. SIGUSR2, which saves a snapshot in `slowlab
//! record --ring`, is caught and ignored here with a note rather than
//! killing slowlab (and leaving a perf behind).
//!
//! `slowlab record` and `diagnose` handle their signals in `slowlab-record`.

use std::sync::atomic::{AtomicI32, Ordering};

use anyhow::Context;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR2};
use signal_hook::iterator::Signals;
use slowlab_sweep::Cancel;

/// The first stop signal that came (0: none yet).
static FIRST: AtomicI32 = AtomicI32::new(0);

/// The exit status of work a signal cancelled: 128 + the first signal (SIGINT when none
/// came, as for a cancel of another kind).
pub fn exit_code() -> i32 {
    128 + match FIRST.load(Ordering::SeqCst) {
        0 => SIGINT,
        sig => sig,
    }
}

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
                    std::process::exit(exit_code());
                }
                FIRST.store(sig, Ordering::SeqCst);
                eprintln!(
                    "\nslowlab: {}; stopping and keeping what was measured (Ctrl-C again to quit at once)",
                    match sig {
                        SIGINT => "interrupted".to_string(),
                        sig => format!("{} received", slowlab_model::signals::name(sig)),
                    }
                );
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
