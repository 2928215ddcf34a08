//! Undoing what scenarios create — processes, mounts, cgroups, temporary
//! files — on success, failure, panic and Ctrl-C.
//!
//! Every resource is registered with an undo action and held as a
//! `Cleanup` guard: dropping the guard runs the action (normal return, `?`,
//! panic unwinding). The actions also live in a process-wide registry so
//! that an emergency exit (a second Ctrl-C, which does not unwind) can run
//! every action still pending with `run_all_now`. Each action runs exactly
//! once, whichever path gets to it first.
//!
//! This module does not know what the resources are; the scenarios do.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

type Action = Box<dyn FnOnce() + Send>;

static REGISTRY: Mutex<BTreeMap<u64, (String, Action)>> = Mutex::new(BTreeMap::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Runs its undo action when dropped (unless `run_all_now` ran it first).
#[must_use = "dropping the guard undoes the resource at once"]
pub struct Cleanup {
    id: u64,
}

impl Cleanup {
    /// Registers `action` to undo `what` (a short description for debugging).
    pub fn register(what: impl Into<String>, action: impl FnOnce() + Send + 'static) -> Self {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        lock().insert(id, (what.into(), Box::new(action)));
        Cleanup { id }
    }

    /// Runs the action now (same as dropping the guard).
    pub fn run(self) {}
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let entry = lock().remove(&self.id);
        if let Some((_, action)) = entry {
            action();
        }
    }
}

/// Runs every pending action, newest first (undo in reverse order of
/// creation). For the emergency-exit path.
pub fn run_all_now() {
    loop {
        let newest = {
            let mut registry = lock();
            let id = registry.keys().next_back().copied();
            id.and_then(|id| registry.remove(&id))
        };
        match newest {
            Some((_, action)) => action(),
            None => break,
        }
    }
}

/// Descriptions of the pending actions (for tests and debugging).
pub fn pending() -> Vec<String> {
    lock().values().map(|(what, _)| what.clone()).collect()
}

fn lock() -> std::sync::MutexGuard<'static, BTreeMap<u64, (String, Action)>> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    #[test]
    fn drop_runs_the_action_once_and_emergency_runs_the_rest() {
        let count = Arc::new(AtomicUsize::new(0));
        let c1 = Arc::clone(&count);
        let first = Cleanup::register("test-first", move || {
            c1.fetch_add(1, Ordering::SeqCst);
        });
        let c2 = Arc::clone(&count);
        let second = Cleanup::register("test-second", move || {
            c2.fetch_add(10, Ordering::SeqCst);
        });
        drop(first);
        assert_eq!(count.load(Ordering::SeqCst), 1);
        run_all_now();
        assert_eq!(count.load(Ordering::SeqCst), 11);
        // The guard's own drop finds nothing left to do.
        drop(second);
        assert_eq!(count.load(Ordering::SeqCst), 11);
        assert!(!pending().iter().any(|w| w.starts_with("test-")));
    }
}
