//! Ctrl-C (SIGINT) and SIGTERM: the first one cancels the running work —
//! the child process group being measured is killed at once — so that the
//! command can still print and save what it measured; a second one exits
//! immediately with status 130.

use anyhow::Context;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use slowlab_sweep::Cancel;

/// Starts a thread that turns SIGINT/SIGTERM into `cancel.cancel()`.
pub fn cancel_on_interrupt(cancel: Cancel) -> anyhow::Result<()> {
    let mut signals =
        Signals::new([SIGINT, SIGTERM]).context("cannot install the Ctrl-C handler")?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for _ in signals.forever() {
                if cancel.is_cancelled() {
                    eprintln!("\nslowlab: interrupted again: cleaning up and exiting now");
                    // Exiting does not unwind: undo what the lab created first.
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
