//! A cancellation token shared between a signal-handling thread and whatever
//! is running child processes: `cancel()` marks the work as stopped and kills
//! the process group of the child running at that moment.
//!
//! It does not install signal handlers itself (the binary does that); it only
//! knows which process group to kill.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;

#[derive(Debug, Default)]
struct State {
    cancelled: AtomicBool,
    /// Process group of the child being waited for, 0 when none.
    running_group: AtomicI32,
}

/// Cheap to clone; all clones share one state.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<State>);

impl Cancel {
    pub fn new() -> Self {
        Self::default()
    }

    /// Stops the work: marks it cancelled and kills the running child's whole
    /// process group with SIGKILL. Async-signal-safe apart from the atomics,
    /// so it may also be called from a signal-handling thread.
    pub fn cancel(&self) {
        self.0.cancelled.store(true, Ordering::SeqCst);
        let group = self.0.running_group.load(Ordering::SeqCst);
        if group > 0 {
            kill_group(group);
        }
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.cancelled.load(Ordering::SeqCst)
    }

    /// Records the process group of a child that was just started. If
    /// cancellation raced with the start, the group is killed at once.
    pub fn set_running_group(&self, group: i32) {
        self.0.running_group.store(group, Ordering::SeqCst);
        if self.is_cancelled() && group > 0 {
            kill_group(group);
        }
    }

    pub fn clear_running_group(&self) {
        self.0.running_group.store(0, Ordering::SeqCst);
    }
}

/// SIGKILL to every process in a group; an already-empty group is fine.
pub fn kill_group(group: i32) {
    if group > 0 {
        // SAFETY: kill(2) with a negative pid targets a process group; it has
        // no memory-safety preconditions.
        unsafe {
            libc::kill(-group, libc::SIGKILL);
        }
    }
}
