//! What one wait waited for, and who held it: the resource of a blocked
//! span ([`wait_on`]) from its blocking stack, the waiting syscall's
//! arguments ([`crate::wait_calls`]) and the wake-up.
//!
//! Futex waits are told apart in this order, first match wins:
//! 1. the waker was exiting (the kernel's clear-tid wake-up), or the wait
//!    expected the word to hold a thread's tid → `join`;
//! 2. the waker's user frames name the release: `__lll_lock_wake` or a
//!    mutex's unlock → `mutex`, `pthread_rwlock_unlock` → `rwlock`,
//!    `pthread_cond_signal`/`broadcast` or `sem_post` → `condvar`;
//! 3. the waiter's user frames: `__lll_lock_wait`, a mutex's lock →
//!    `mutex`; `rwlock` → `rwlock`; a condition variable or a semaphore →
//!    `condvar`; `pthread_join` → `join`;
//! 4. the futex operation: PI lock → `mutex`, requeue-PI wait → `condvar`;
//!    a plain wait expecting 2 (the "locked, with waiters" state of
//!    glibc's and Rust's mutexes) → `mutex`;
//! 5. anything else → `futex`.
//!
//! (On glibc 2.36 the waiter's user leaf is often
//! `__futex_abstimed_wait_common` for a condition variable, a semaphore, a
//! join and an rwlock alike, and frame-pointer stacks skip glibc's own
//! frames; the waker's leaf — `pthread_rwlock_unlock`, `sem_post` — is
//! where the object shows.)
//!
//! Other waits go by their kernel stack: a child wait (the child whose exit
//! woke it; the walker names the owner of one nothing ended), a pipe, a
//! socket, a file lock, a kernel lock (named by the first function outside
//! the lock code), storage, a timer; a poll by what its waker wrote to. The holder is the thread that ended the wait
//! when a thread ended it (not an interrupt, not a signal). Pure.

use slowlab_model::critical_path::{PathThread, Resource, ResourceKind, WaitKind};
use slowlab_model::trace::{StackIdx, ThreadIdx, Trace};

use crate::classify::{
    self, any_part, wake_context, EndedBy, FILE_LOCK, FUTEX, KERNEL_LOCK, PIPE, SOCKET,
};
use crate::states::{BlockedSpan, ThreadStates};
use crate::wait_calls::{futex_op, WaitSyscall};

/// What a blocked span waited for: the resource's kind, its futex word
/// (in the waiter's address space), a name, and the thread that held it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WaitOn {
    pub kind: ResourceKind,
    pub address: Option<u64>,
    pub holder: Option<ThreadIdx>,
    /// The stack the name comes from (a kernel lock's taker, a syscall).
    pub stack: Option<StackIdx>,
}

/// The slow path of a kernel lock that the lock frames of `classify` do
/// not name (the scheduler's own section hides `mutex_lock` on some
/// kernels).
const KERNEL_LOCK_WAIT: &[&str] = &["schedule_preempt_disabled"];

/// The user-space frames of a stack (after its kernel frames), innermost
/// first, at most `n`.
fn user_frames(trace: &Trace, stack: Option<StackIdx>, n: usize) -> Vec<&str> {
    trace
        .stack_frames(stack)
        .map(|f| trace.frame_function(f))
        .filter(|&func| !trace.functions[func.ix()].kernel)
        .take(n)
        .map(|func| trace.function_name(func))
        .collect()
}

/// Whether the innermost user frame of a stack is glibc's.
fn in_glibc(trace: &Trace, stack: Option<StackIdx>) -> bool {
    trace
        .stack_frames(stack)
        .map(|f| trace.frame_function(f))
        .find(|&func| !trace.functions[func.ix()].kernel)
        .is_some_and(|func| trace.function_module(func).starts_with("libc.so"))
}

/// The `pthread_rwlock_t` a glibc rwlock's futex word is in: readers and
/// a writer waiting for readers wait on `__wrphase_futex` (offset 8),
/// writers waiting for a writer on `__writers_futex` (offset 12); the
/// object is 8-byte aligned (x86-64 `bits/struct_rwlock.h`, glibc 2.25 and
/// later).
fn glibc_rwlock_object(word: u64) -> u64 {
    if word % 8 == 4 {
        word.wrapping_sub(12)
    } else {
        word.wrapping_sub(8)
    }
}

/// The futex object a user frame names, if it names one.
fn object_in(frames: &[&str]) -> Option<ResourceKind> {
    for f in frames {
        let l = f.to_ascii_lowercase();
        if l.contains("rwlock") {
            return Some(ResourceKind::Rwlock);
        }
        if l.contains("lll_lock") || l.contains("mutex") {
            return Some(ResourceKind::Mutex);
        }
        if l.contains("cond_") || l.contains("condvar") || l.contains("sem_") {
            return Some(ResourceKind::Condvar);
        }
        if l.contains("join") {
            return Some(ResourceKind::Join);
        }
    }
    None
}

/// The thread of the waiter's process whose tid is `tid`, alive at `at`.
fn thread_of_tid(trace: &Trace, waiter: ThreadIdx, tid: i32, at: u64) -> Option<ThreadIdx> {
    trace
        .thread_process(waiter)
        .threads
        .iter()
        .copied()
        .find(|&t| {
            let th = &trace.threads[t.ix()];
            th.tid == tid && th.start_ns.is_none_or(|s| s <= at)
        })
}

/// The kind of a futex wait (module doc, rules 1–5).
fn futex_kind(
    trace: &Trace,
    states: &ThreadStates,
    waiter: ThreadIdx,
    b: &BlockedSpan,
    exiting_waker: bool,
    at: u64,
) -> ResourceKind {
    let call = b.call.map(|c| states.calls[c.ix()].call);
    let expected = match call {
        Some(WaitSyscall::Futex { val, .. }) => Some(val),
        _ => None,
    };
    let names_tid =
        expected.is_some_and(|v| v != 0 && thread_of_tid(trace, waiter, v as i32, at).is_some());
    if exiting_waker || names_tid {
        return ResourceKind::Join;
    }
    if b.waker.is_some() {
        if let Some(k) = object_in(&user_frames(trace, b.waker_stack, 2)) {
            return k;
        }
    }
    if let Some(k) = object_in(&user_frames(trace, b.stack, 2)) {
        return k;
    }
    if let Some(WaitSyscall::Futex { op, val, .. }) = call {
        let cmd = op & futex_op::CMD_MASK;
        match cmd {
            futex_op::LOCK_PI | futex_op::LOCK_PI2 | futex_op::TRYLOCK_PI => {
                return ResourceKind::Mutex
            }
            futex_op::WAIT_REQUEUE_PI => return ResourceKind::Condvar,
            futex_op::WAIT | futex_op::WAIT_BITSET
                if val == 2 && op & futex_op::CLOCK_REALTIME == 0 =>
            {
                return ResourceKind::Mutex
            }
            _ => {}
        }
    }
    ResourceKind::Futex
}

/// What `waiter`'s blocked span `b` (which started at `at`) waited for.
pub fn wait_on(
    trace: &Trace,
    states: &ThreadStates,
    waiter: ThreadIdx,
    b: &BlockedSpan,
    at: u64,
) -> WaitOn {
    let names = classify::names(trace, b.stack);
    let wake = if b.woken {
        wake_context(&classify::names(trace, b.waker_stack))
    } else {
        classify::NO_WAKE
    };
    // A thread that ended the wait (not an interrupt, not a signal).
    let by_thread = if b.woken && wake.interrupt.is_none() && !wake.signal {
        b.waker
    } else {
        None
    };
    let futex_call = b.call.and_then(|c| match states.calls[c.ix()].call {
        WaitSyscall::Futex { uaddr, .. } => Some(uaddr),
        _ => None,
    });
    let base = WaitOn {
        kind: ResourceKind::None,
        address: None,
        holder: by_thread,
        stack: b.stack,
    };
    let kind = classify::wait_kind(&names, b.task_state, wake);
    match kind {
        WaitKind::Fault | WaitKind::Io => {
            return WaitOn {
                kind: ResourceKind::Device,
                holder: None,
                ..base
            }
        }
        WaitKind::Sleep if !any_part(&names, FUTEX) && !classify::is_child_wait(&names) => {
            return WaitOn {
                kind: ResourceKind::Timer,
                holder: None,
                ..base
            }
        }
        _ => {}
    }
    if classify::is_child_wait(&names) {
        // The child whose exit (or stop) woke it.
        return WaitOn {
            kind: ResourceKind::Child,
            ..base
        };
    }
    if futex_call.is_some() || any_part(&names, FUTEX) {
        let timed_out = b.woken && wake.interrupt == Some(EndedBy::Timer);
        let kind = futex_kind(trace, states, waiter, b, wake.exiting, at);
        let glibc = in_glibc(trace, b.stack) || in_glibc(trace, b.waker_stack);
        return WaitOn {
            kind,
            address: futex_call.map(|word| match kind {
                ResourceKind::Rwlock if glibc => glibc_rwlock_object(word),
                _ => word,
            }),
            holder: if timed_out { None } else { by_thread },
            ..base
        };
    }
    let kind = if any_part(&names, FILE_LOCK) {
        ResourceKind::FileLock
    } else if any_part(&names, KERNEL_LOCK) || any_part(&names, KERNEL_LOCK_WAIT) {
        ResourceKind::KernelLock
    } else if any_part(&names, PIPE) {
        ResourceKind::Pipe
    } else if any_part(&names, SOCKET) {
        ResourceKind::Socket
    } else if b.woken && wake.interrupt == Some(EndedBy::Timer) {
        ResourceKind::Timer
    } else if by_thread.is_some() {
        // A poll, a select, an epoll: what the waker wrote to says.
        let waker = classify::names(trace, b.waker_stack);
        if any_part(&waker, PIPE) {
            ResourceKind::Pipe
        } else if any_part(&waker, SOCKET) || any_part(&waker, &["sock_def_readable"]) {
            ResourceKind::Socket
        } else {
            ResourceKind::None
        }
    } else {
        ResourceKind::None
    };
    WaitOn { kind, ..base }
}

/// A kernel lock's name: the first function of the blocking stack outside
/// the lock code and the scheduler (`rtnl_lock`, `lock_rename`).
fn kernel_lock_taker(names: &[&str]) -> Option<String> {
    let mut past_lock = false;
    for n in names {
        let in_lock = KERNEL_LOCK
            .iter()
            .chain(KERNEL_LOCK_WAIT)
            .any(|p| n.contains(p));
        if in_lock {
            past_lock = true;
        } else if past_lock && !classify::is_plumbing(n) {
            return Some(n.to_string());
        }
    }
    None
}

/// `thread` as the path names it.
pub fn path_thread(trace: &Trace, t: ThreadIdx) -> PathThread {
    let th = &trace.threads[t.ix()];
    PathThread {
        pid: trace.thread_process(t).pid,
        tid: th.tid,
        comm: trace.str(th.comm).to_string(),
    }
}

/// The JSON form of a [`WaitOn`]: the address in hex, a name where the
/// trace gives one (the syscall of a sleep or a disk wait, a kernel lock's
/// taker, a child's command), the holder.
pub fn resource(trace: &Trace, w: &WaitOn) -> Resource {
    let names = classify::names(trace, w.stack);
    let name = match w.kind {
        ResourceKind::KernelLock => kernel_lock_taker(&names),
        ResourceKind::Timer | ResourceKind::Device => classify::syscall_of(&names),
        ResourceKind::Child => w
            .holder
            .map(|t| trace.str(trace.threads[t.ix()].comm).to_string()),
        _ => None,
    };
    Resource {
        kind: w.kind,
        address: w.address.map(|a| format!("{a:#x}")),
        name,
        holder: w.holder.map(|t| path_thread(trace, t)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_frames_name_the_futex_object() {
        assert_eq!(
            object_in(&["__GI___lll_lock_wait", "start_thread"]),
            Some(ResourceKind::Mutex)
        );
        assert_eq!(
            object_in(&["pthread_rwlock_unlock@@GLIBC_2.34"]),
            Some(ResourceKind::Rwlock)
        );
        assert_eq!(
            object_in(&["pthread_cond_signal@@GLIBC_2.3.2"]),
            Some(ResourceKind::Condvar)
        );
        assert_eq!(
            object_in(&["sem_post@GLIBC_2.2.5"]),
            Some(ResourceKind::Condvar)
        );
        assert_eq!(
            object_in(&["std::sys::sync::mutex::futex::Mutex::lock_contended"]),
            Some(ResourceKind::Mutex)
        );
        assert_eq!(
            object_in(&["__futex_abstimed_wait_common", "start_thread"]),
            None
        );
    }

    #[test]
    fn a_kernel_lock_is_named_by_its_taker() {
        let names = [
            "__schedule",
            "schedule",
            "schedule_preempt_disabled",
            "__mutex_lock.constprop.0",
            "rtnl_lock",
            "dev_ioctl",
        ];
        // `rtnl_lock` takes the mutex: the first frame past the lock code.
        assert_eq!(kernel_lock_taker(&names).as_deref(), Some("rtnl_lock"));
    }
}
