//! The thread behind a recording (the path capture's, the scheduler
//! recorder's): started with a stop flag and a channel on which it says
//! once whether it is ready (its programs attached) or why not; run until
//! the flag is set (and nudged, when it sleeps on a [`Nudge`]); joined
//! exactly once, when stopped or when its owner is dropped. It does not
//! know what the thread records.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};

use crate::error::BpfError;
use crate::nudge::Nudge;

/// What a worker says once it is set up: `R`, or why it could not start.
pub(crate) type Ready<R> = mpsc::SyncSender<Result<R, BpfError>>;

/// A step of a worker's body before it is ready: `setup!(ready, step)` is the step's value
/// or, when it failed, sends the error on `ready` (the starter, waiting there, returns it)
/// and ends the body with nothing recorded (`Ok` of its default).
macro_rules! setup {
    ($ready:expr, $step:expr) => {
        match $step {
            Ok(v) => v,
            Err(err) => {
                let _ = $ready.send(Err(err));
                return Ok(Default::default());
            }
        }
    };
}
pub(crate) use setup;

pub(crate) struct Worker<T> {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<T, BpfError>>>,
    /// What the thread sleeps on, nudged once the stop flag is set.
    nudge: Option<Nudge>,
}

impl<T: Send + 'static> Worker<T> {
    /// Starts `body` on a thread named `name` (`what` names it in an
    /// error), giving it the stop flag and the readiness channel, and waits
    /// until it is ready. A thread that cannot get ready is joined and its
    /// reason returned.
    pub(crate) fn start<R: Send + 'static>(
        name: &str,
        what: &str,
        body: impl FnOnce(Arc<AtomicBool>, Ready<R>) -> Result<T, BpfError> + Send + 'static,
    ) -> Result<(Worker<T>, R), BpfError> {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<R, BpfError>>(1);
        let thread = {
            let stop = Arc::clone(&stop);
            thread::Builder::new()
                .name(name.into())
                .spawn(move || body(stop, ready_tx))
                .map_err(|e| BpfError::Load {
                    message: format!("cannot start the {what}: {e}"),
                    log: String::new(),
                })?
        };
        match ready_rx.recv() {
            Ok(Ok(ready)) => Ok((
                Worker {
                    stop,
                    thread: Some(thread),
                    nudge: None,
                },
                ready,
            )),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => match thread.join() {
                Ok(Err(e)) => Err(e),
                _ => Err(BpfError::ThreadPanicked),
            },
        }
    }
}

impl<T> Worker<T> {
    /// Nudges `nudge` at the stop: the thread sleeps on it.
    pub(crate) fn nudged_by(&mut self, nudge: Nudge) {
        self.nudge = Some(nudge);
    }

    /// Whether the thread has ended (by itself, if [`finish`](Self::finish) was not
    /// called: it failed, and `finish` returns why).
    pub(crate) fn has_ended(&self) -> bool {
        self.thread.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Sets the stop flag and joins the thread; its result.
    pub(crate) fn finish(&mut self) -> Result<T, BpfError> {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(n) = &self.nudge {
            n.nudge();
        }
        match self.thread.take() {
            Some(t) => t.join().map_err(|_| BpfError::ThreadPanicked)?,
            None => Err(BpfError::ThreadPanicked),
        }
    }
}

impl<T> Drop for Worker<T> {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.finish();
        }
    }
}

impl<T> std::fmt::Debug for Worker<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("running", &self.thread.is_some())
            .finish()
    }
}
