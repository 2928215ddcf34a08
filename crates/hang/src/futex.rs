//! Who holds the futex a thread waits on, from the words around it in the
//! waiting process's memory and the C library function on its stack. Pure:
//! memory and thread lookups are passed in, so tests use plain closures.
//!
//! The layouts are glibc's on x86-64, checked against this machine's
//! headers (glibc 2.36, `bits/struct_mutex.h`, `bits/struct_rwlock.h`);
//! they have not changed since glibc 2.25, but another C library (musl) or
//! architecture lays them out differently, and then an owner is only found
//! when the candidate word holds a live thread's id:
//!
//! - `pthread_mutex_t`: `int __lock` (the futex word) at 0, `unsigned
//!   __count` at 4, `int __owner` at 8 ([`MUTEX_OWNER_OFFSET`]). Robust
//!   mutexes keep the owner's tid in the word itself; PI mutexes too
//!   (`FUTEX_LOCK_PI`, the tid under `FUTEX_TID_MASK`).
//! - `pthread_rwlock_t`: readers and writers wait on `__wrphase_futex` (8)
//!   or `__writers_futex` (12); `int __cur_writer` is at 24, so 16 or 12
//!   bytes above the word waited on ([`RWLOCK_WRITER_FROM_WRPHASE`],
//!   [`RWLOCK_WRITER_FROM_WRITERS`]). Readers are counted, not named.
//! - `pthread_join` waits on the joined thread's `tid` word in its
//!   `struct pthread`, which holds that thread's id until the kernel clears
//!   it at exit (`CLONE_CHILD_CLEARTID`): the word's value names the thread.
//! - Condition variables (`__g_signals`), semaphores and barriers have no
//!   owner: whoever signals ends the wait. The walk lists who else waits
//!   on the same word instead.

use crate::model::WaitKind;
use crate::symbols::Frame;
use crate::syscalls::futex as f;

/// `__owner` in `pthread_mutex_t` (glibc, x86-64 and every 64-bit ABI).
pub const MUTEX_OWNER_OFFSET: u64 = 8;
/// `__cur_writer` (24) minus `__wrphase_futex` (8) in `pthread_rwlock_t`.
pub const RWLOCK_WRITER_FROM_WRPHASE: u64 = 16;
/// `__cur_writer` (24) minus `__writers_futex` (12).
pub const RWLOCK_WRITER_FROM_WRITERS: u64 = 12;

/// What the waiting thread's stack says it called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hint {
    Mutex,
    Rwlock,
    Join,
    Condvar,
    Semaphore,
    Barrier,
    /// glibc's internal locks (`__lll_lock_wait_private`: stdio, malloc
    /// arenas, the loader): no owner field.
    LibcLock,
    None,
}

/// The first C library function on the stack that tells what kind of
/// object the futex is.
pub fn hint(frames: &[Frame]) -> Hint {
    for frame in frames {
        let Some(name) = frame.function.as_deref() else {
            continue;
        };
        let name = name.trim_start_matches('_');
        let hint = if name == "lll_lock_wait_private" {
            Hint::LibcLock
        } else if name.starts_with("pthread_mutex_") && name.contains("lock") {
            Hint::Mutex
        } else if name.starts_with("pthread_rwlock_") {
            Hint::Rwlock
        } else if name.starts_with("pthread_") && name.contains("join") {
            Hint::Join
        } else if name.starts_with("pthread_cond_") {
            Hint::Condvar
        } else if name.starts_with("sem_") && name.contains("wait") {
            Hint::Semaphore
        } else if name == "pthread_barrier_wait" {
            Hint::Barrier
        } else {
            continue;
        };
        return hint;
    }
    Hint::None
}

/// Who holds it.
#[derive(Clone, Debug, PartialEq)]
pub enum Owner {
    /// This thread id (resolved to a live thread by the caller).
    Thread(i32),
    /// The owner field names a thread that no longer exists: it exited
    /// (or died) holding the lock.
    Gone(i32),
    /// No owner by nature, or none recorded.
    Unknown,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    pub kind: WaitKind,
    pub owner: Owner,
    /// How the owner was found, or why there is none.
    pub how: String,
}

/// The waiter's futex call, as `/proc/PID/task/TID/syscall` gives it.
pub struct FutexCall {
    pub addr: u64,
    /// The operation with its flags.
    pub op: u64,
    pub waiter_tid: i32,
}

impl FutexCall {
    pub fn cmd(&self) -> u64 {
        self.op & f::CMD_MASK
    }
}

/// Interprets a futex wait. `read_i32(addr)` reads the waiting process's
/// memory; `alive(tid)` says whether a thread with that id exists where
/// the object can be seen (the waiter's process, or any process for a
/// process-shared object).
pub fn interpret(
    call: &FutexCall,
    hint: Hint,
    read_i32: &dyn Fn(u64) -> Option<i32>,
    alive: &dyn Fn(i32) -> bool,
) -> Finding {
    let word = read_i32(call.addr);
    let found = |kind, owner, how: &str| Finding {
        kind,
        owner,
        how: how.to_string(),
    };
    match call.cmd() {
        f::LOCK_PI | f::LOCK_PI2 | f::TRYLOCK_PI => {
            let tid = word.map_or(0, |w| (w as u32 & f::TID_MASK) as i32);
            let owner = match tid {
                0 => Owner::Unknown,
                t if alive(t) => Owner::Thread(t),
                t => Owner::Gone(t),
            };
            return found(
                WaitKind::Mutex,
                owner,
                "priority-inheritance mutex: the owner's tid is in the futex word",
            );
        }
        f::WAIT_REQUEUE_PI => {
            return found(
                WaitKind::Condvar,
                Owner::Unknown,
                "condition variable (with a PI mutex): no owner by nature",
            )
        }
        _ => {}
    }
    let at = |off: u64| read_i32(call.addr + off).filter(|&t| t > 0);
    let live = |t: Option<i32>| t.filter(|&t| alive(t));
    let robust = word
        .map(|w| (w as u32 & f::TID_MASK) as i32)
        .filter(|&t| t > 2 && alive(t));
    let mutex = || {
        if let Some(t) = robust {
            Some(found(
                WaitKind::Mutex,
                Owner::Thread(t),
                "robust mutex: the owner's tid is in the lock word",
            ))
        } else {
            live(at(MUTEX_OWNER_OFFSET)).map(|t| {
                found(
                    WaitKind::Mutex,
                    Owner::Thread(t),
                    "mutex: the owner from pthread_mutex_t.__owner",
                )
            })
        }
    };
    let join = || {
        word.filter(|&w| w > 2 && w != call.waiter_tid && alive(w))
            .map(|t| {
                found(
                    WaitKind::Join,
                    Owner::Thread(t),
                    "pthread_join: the word is the joined thread's tid",
                )
            })
    };
    let rwlock = || {
        live(at(RWLOCK_WRITER_FROM_WRPHASE))
            .or_else(|| live(at(RWLOCK_WRITER_FROM_WRITERS)))
            .map(|t| {
                found(
                    WaitKind::Rwlock,
                    Owner::Thread(t),
                    "rwlock held for writing: the writer from __cur_writer",
                )
            })
    };
    match hint {
        Hint::Mutex => mutex().unwrap_or_else(|| match at(MUTEX_OWNER_OFFSET) {
            Some(t) => found(
                WaitKind::Mutex,
                Owner::Gone(t),
                "mutex: __owner names a thread that no longer exists",
            ),
            None => found(
                WaitKind::Mutex,
                Owner::Unknown,
                "mutex with no owner recorded (being released, or a lock of another layout)",
            ),
        }),
        Hint::Rwlock => rwlock().unwrap_or_else(|| {
            found(
                WaitKind::Rwlock,
                Owner::Unknown,
                "rwlock held for reading: readers are counted, not named",
            )
        }),
        Hint::Join => join().unwrap_or_else(|| match word.filter(|&w| w > 0) {
            Some(t) => found(
                WaitKind::Join,
                Owner::Gone(t),
                "pthread_join: the thread is exiting",
            ),
            None => found(WaitKind::Join, Owner::Unknown, "pthread_join"),
        }),
        Hint::Condvar => found(
            WaitKind::Condvar,
            Owner::Unknown,
            "condition variable: no owner by nature (whoever signals it ends the wait)",
        ),
        Hint::Semaphore => found(
            WaitKind::Semaphore,
            Owner::Unknown,
            "semaphore: no owner by nature (whoever posts it ends the wait)",
        ),
        Hint::Barrier => found(
            WaitKind::Futex,
            Owner::Unknown,
            "barrier: waits for the other threads to arrive",
        ),
        Hint::LibcLock => found(
            WaitKind::Mutex,
            Owner::Unknown,
            "a lock inside the C library (stdio, malloc, loader): it records no owner",
        ),
        Hint::None => {
            // Without a stack to go by, only a live thread's id where a
            // layout puts one counts: a mutex's lock word 1 or 2 with
            // __owner, a robust mutex's word, a join's tid word, a
            // rwlock's writer.
            let lockish = word.is_some_and(|w| w == 1 || w == 2 || w < 0);
            if let Some(found) = robust
                .and_then(|_| mutex())
                .filter(|_| word.is_some_and(|w| w < 0))
            {
                return found;
            }
            if let Some(j) = join() {
                return j;
            }
            if lockish {
                if let Some(m) = mutex() {
                    return m;
                }
            }
            if let Some(r) = rwlock() {
                return r;
            }
            found(
                WaitKind::Futex,
                Owner::Unknown,
                "owner unknown: a condition variable, semaphore or the program's own futex",
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn mem(words: &[(u64, i32)]) -> impl Fn(u64) -> Option<i32> {
        let m: HashMap<u64, i32> = words.iter().copied().collect();
        move |a| Some(*m.get(&a).unwrap_or(&0))
    }

    fn call(op: u64) -> FutexCall {
        FutexCall {
            addr: 0x1000,
            op,
            waiter_tid: 100,
        }
    }

    const LIVE: &[i32] = &[100, 101, 102];

    fn alive(t: i32) -> bool {
        LIVE.contains(&t)
    }

    #[test]
    fn a_mutex_owner_comes_from_owner_at_8() {
        let m = mem(&[(0x1000, 2), (0x1008, 101)]);
        let f = interpret(&call(128), Hint::Mutex, &m, &alive);
        assert_eq!((f.kind, f.owner), (WaitKind::Mutex, Owner::Thread(101)));
        // The same words without a stack hint.
        let f = interpret(&call(128), Hint::None, &m, &alive);
        assert_eq!((f.kind, f.owner), (WaitKind::Mutex, Owner::Thread(101)));
    }

    #[test]
    fn an_owner_that_exited_is_gone() {
        let m = mem(&[(0x1000, 2), (0x1008, 555)]);
        let f = interpret(&call(128), Hint::Mutex, &m, &alive);
        assert_eq!(f.owner, Owner::Gone(555));
    }

    #[test]
    fn pi_and_robust_mutexes_keep_the_tid_in_the_word() {
        let m = mem(&[(0x1000, (0x8000_0000u32 | 102) as i32)]);
        let f = interpret(&call(128 | 6), Hint::None, &m, &alive);
        assert_eq!((f.kind, f.owner), (WaitKind::Mutex, Owner::Thread(102)));
        let f = interpret(&call(128), Hint::Mutex, &m, &alive);
        assert_eq!(f.owner, Owner::Thread(102));
        let f = interpret(&call(128), Hint::None, &m, &alive);
        assert_eq!((f.kind, f.owner), (WaitKind::Mutex, Owner::Thread(102)));
    }

    #[test]
    fn join_waits_on_the_joined_threads_tid() {
        let m = mem(&[(0x1000, 101)]);
        let f = interpret(&call(128 | 9), Hint::Join, &m, &alive);
        assert_eq!((f.kind, f.owner), (WaitKind::Join, Owner::Thread(101)));
        let f = interpret(&call(128 | 9), Hint::None, &m, &alive);
        assert_eq!((f.kind, f.owner), (WaitKind::Join, Owner::Thread(101)));
    }

    #[test]
    fn rwlock_writer_from_either_futex_word() {
        // Waiting on __writers_futex (base+12): __cur_writer at +12.
        let m = mem(&[(0x1000, 3), (0x100c, 102)]);
        let f = interpret(&call(128), Hint::Rwlock, &m, &alive);
        assert_eq!((f.kind, f.owner), (WaitKind::Rwlock, Owner::Thread(102)));
        // Waiting on __wrphase_futex (base+8): __cur_writer at +16.
        let m = mem(&[(0x1000, 3), (0x1010, 101)]);
        let f = interpret(&call(128), Hint::Rwlock, &m, &alive);
        assert_eq!(f.owner, Owner::Thread(101));
        let m = mem(&[(0x1000, 3)]);
        let f = interpret(&call(128), Hint::Rwlock, &m, &alive);
        assert_eq!(f.owner, Owner::Unknown);
    }

    #[test]
    fn condvars_and_semaphores_have_no_owner_even_with_tids_nearby() {
        let m = mem(&[(0x1000, 0), (0x1008, 101)]);
        for hint in [Hint::Condvar, Hint::Semaphore] {
            let f = interpret(&call(128 | 9), hint, &m, &alive);
            assert_eq!(f.owner, Owner::Unknown);
        }
        // Without a hint a word of 0 is no mutex.
        let f = interpret(&call(128 | 9), Hint::None, &m, &alive);
        assert_eq!((f.kind, f.owner), (WaitKind::Futex, Owner::Unknown));
    }
}
