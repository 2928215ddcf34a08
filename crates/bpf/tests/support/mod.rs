//! Helpers shared by the capture tests: starting a capture or skipping with a printed
//! reason when this machine cannot run one, and running captures one at a time (each sees
//! the whole system, so parallel captures would only slow each other down).

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use slowlab_bpf::{BpfError, CaptureOptions, PathCapture};

static SERIAL: Mutex<()> = Mutex::new(());

/// Holds the lock that keeps captures in this test binary from overlapping.
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Starts a capture, or prints `SKIP: …` and returns `None` when this machine cannot run
/// one (not root, no BPF, no syscall tracepoints). Any other error fails the test.
pub fn start_or_skip(test: &str, output: &Path, options: &CaptureOptions) -> Option<PathCapture> {
    match PathCapture::start_with(output, options) {
        Ok(capture) => Some(capture),
        Err(e @ (BpfError::NotPermitted { .. } | BpfError::Unsupported { .. })) => {
            slowlab_testkit::skip(format_args!("{test}: {e}"));
            None
        }
        Err(e) => panic!("{test}: starting the capture failed: {e}"),
    }
}
