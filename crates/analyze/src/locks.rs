//! The locks of a trace: every wait on a mutex or rwlock word, grouped by
//! lock, with the holder that released each wait, the intervals the
//! holders held it, and what they did meanwhile.
//!
//! A lock is a futex word, keyed by its process and address. A process-
//! shared word has another address in each process: a wait on one that a
//! thread of another process ended, in a wake on its own address, makes
//! the two one lock.
//!
//! The holder of a wait is the thread that woke it (the release). Its hold
//! started at its last contended acquisition of the word (the end of its
//! own futex wait on it) after its previous release (its previous wake on
//! the word); an uncontended acquisition makes no syscall, so without one
//! the hold is known only from when the waiter began waiting (or the
//! holder's previous release, if later): a lower bound, marked as such. A
//! release that ended several waits (an rwlock's readers, a broadcast) is
//! one hold.
//!
//! Needs the futex calls that `slowlab record` records (since the lock
//! issue); a trace without them has no locks here. Pure.

use std::collections::HashMap;

use slowlab_model::critical_path::ResourceKind;
use slowlab_model::trace::{StackIdx, ThreadIdx, Trace};

use crate::resources::wait_on;
use crate::select::BuildFx;
use crate::states::{SpanState, ThreadStates};
use crate::wait_calls::{futex_op, WaitSyscall};

/// A futex word: the process whose address it is, and the address.
pub type WordKey = (i32, u64);

/// One wait on a lock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LockWait {
    pub waiter: ThreadIdx,
    pub from_ns: u64,
    pub to_ns: u64,
    /// The thread whose release ended it; `None` when it timed out, or
    /// the trace ended or lost the wake-up.
    pub holder: Option<ThreadIdx>,
    /// Where the waiter blocked.
    pub stack: Option<StackIdx>,
}

/// One holding of a lock by a thread, up to its release.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hold {
    pub holder: ThreadIdx,
    pub from_ns: u64,
    pub to_ns: u64,
    /// `from_ns` is the holder's acquisition (a contended one); false: the
    /// acquisition is not in the trace, and `from_ns` is a lower bound.
    pub start_known: bool,
}

/// A lock and everything the trace shows of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Lock {
    pub kind: ResourceKind,
    /// The word as its first waiter's process sees it.
    pub key: WordKey,
    pub waits: Vec<LockWait>,
    /// In release order.
    pub holds: Vec<Hold>,
}

impl Lock {
    /// The address as the README and JSON write it.
    pub fn address(&self) -> String {
        format!("{:#x}", self.key.1)
    }
}

/// Every lock of a trace, most waited-on first.
#[derive(Debug, Clone, Default)]
pub struct Locks {
    pub locks: Vec<Lock>,
}

/// Union-find over futex words: a shared word's addresses in each process.
#[derive(Default)]
struct Words {
    parent: HashMap<WordKey, WordKey, BuildFx>,
}

impl Words {
    fn find(&mut self, k: WordKey) -> WordKey {
        let mut root = k;
        while let Some(&p) = self.parent.get(&root) {
            if p == root {
                break;
            }
            root = p;
        }
        // Path compression: point every step at the root.
        let mut at = k;
        while at != root {
            let next = self.parent.get(&at).copied().unwrap_or(root);
            self.parent.insert(at, root);
            at = next;
        }
        root
    }

    fn union(&mut self, a: WordKey, b: WordKey) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra != rb {
            self.parent.insert(rb, ra);
        }
    }
}

impl Locks {
    /// Finds the locks of the trace from its replayed `states`.
    pub fn build(trace: &Trace, states: &ThreadStates) -> Locks {
        if states.calls.is_empty() {
            return Locks::default();
        }
        let pid_of = |t: ThreadIdx| trace.thread_process(t).pid;
        let futex = |c: Option<crate::wait_calls::CallIdx>| {
            c.and_then(|c| match states.calls[c.ix()].call {
                WaitSyscall::Futex { uaddr, op, .. } => Some((uaddr, op)),
                _ => None,
            })
        };
        let mut words = Words::default();
        // A word inside a lock object (a glibc rwlock's futex words) →
        // the object, per process.
        let mut object_of: HashMap<WordKey, u64, BuildFx> = HashMap::default();
        // The lock waits, with their word.
        let mut found: Vec<(WordKey, ResourceKind, LockWait)> = Vec::new();
        for (i, spans) in states.spans.iter().enumerate() {
            let waiter = ThreadIdx(i as u32);
            for span in spans {
                let SpanState::Blocked(b) = span.state else {
                    continue;
                };
                let Some((uaddr, op)) = futex(b.call) else {
                    continue;
                };
                let on = wait_on(trace, states, waiter, &b, span.start_ns);
                if !matches!(on.kind, ResourceKind::Mutex | ResourceKind::Rwlock) {
                    continue;
                }
                let key = (pid_of(waiter), on.address.unwrap_or(uaddr));
                object_of.insert((key.0, uaddr), key.1);
                if op & futex_op::PRIVATE == 0 {
                    if let (Some(h), Some((waddr, _))) = (on.holder, futex(b.waker_call)) {
                        let wkey = (pid_of(h), waddr);
                        let wobj = (wkey.0, object_of.get(&wkey).copied().unwrap_or(waddr));
                        words.union(key, wobj);
                    }
                }
                found.push((
                    key,
                    on.kind,
                    LockWait {
                        waiter,
                        from_ns: span.start_ns,
                        to_ns: span.end_ns,
                        holder: on.holder,
                        stack: b.stack,
                    },
                ));
            }
        }
        // Each thread's futex calls per word: (time, wake?) — the wake's
        // entry (a release), the wait's exit (an acquisition).
        let mut calls: HashMap<(ThreadIdx, WordKey), Vec<(u64, bool)>, BuildFx> =
            HashMap::default();
        for c in &states.calls {
            let WaitSyscall::Futex { uaddr, .. } = c.call else {
                continue;
            };
            let pid = pid_of(c.thread);
            let key = words.find((pid, object_of.get(&(pid, uaddr)).copied().unwrap_or(uaddr)));
            let entry = calls.entry((c.thread, key)).or_default();
            if c.call.futex_wakes() {
                entry.push((c.enter_ns, true));
            } else if c.call.futex_waits() && c.exit_ns != u64::MAX {
                entry.push((c.exit_ns, false));
            }
        }
        for v in calls.values_mut() {
            v.sort_unstable();
        }
        let mut by_lock: HashMap<WordKey, Lock, BuildFx> = HashMap::default();
        for (key, kind, wait) in found {
            let root = words.find(key);
            let lock = by_lock.entry(root).or_insert_with(|| Lock {
                kind,
                key,
                waits: Vec::new(),
                holds: Vec::new(),
            });
            if kind == ResourceKind::Rwlock {
                lock.kind = kind;
            }
            lock.waits.push(wait);
        }
        let mut locks: Vec<Lock> = by_lock
            .into_iter()
            .map(|(root, mut lock)| {
                lock.holds = holds(&lock.waits, |h| calls.get(&(h, root)).map(Vec::as_slice));
                lock
            })
            .collect();
        let waited = |l: &Lock| l.waits.iter().map(|w| w.to_ns - w.from_ns).sum::<u64>();
        locks.sort_by_key(|l| (std::cmp::Reverse(waited(l)), l.key));
        Locks { locks }
    }

    /// The lock `thread` held over part of `[from, to)`, if any (the one
    /// held longest in it).
    pub fn held_by(&self, thread: ThreadIdx, from: u64, to: u64) -> Option<&Lock> {
        self.locks
            .iter()
            .map(|l| {
                let held: u64 = l
                    .holds
                    .iter()
                    .filter(|h| h.holder == thread)
                    .map(|h| h.to_ns.min(to).saturating_sub(h.from_ns.max(from)))
                    .sum();
                (held, l)
            })
            .filter(|&(held, _)| held > 0)
            .max_by_key(|&(held, l)| (held, std::cmp::Reverse(l.key)))
            .map(|(_, l)| l)
    }
}

/// The holds that ended `waits`, one per release, from each holder's
/// futex calls on the word (`calls_of(holder)`: (time, wake?) sorted).
fn holds<'c>(
    waits: &[LockWait],
    calls_of: impl Fn(ThreadIdx) -> Option<&'c [(u64, bool)]>,
) -> Vec<Hold> {
    let mut by_release: HashMap<(ThreadIdx, u64), Hold, BuildFx> = HashMap::default();
    for w in waits {
        let Some(h) = w.holder.filter(|&h| h != w.waiter) else {
            continue;
        };
        let release = w.to_ns;
        let calls = calls_of(h).unwrap_or(&[]);
        // The holder's calls on the word before this release: the wake
        // that is the release itself starts at or just before `release`.
        let before = &calls[..calls.partition_point(|&(t, _)| t <= release)];
        // Skip the release's own wake (the last wake before it).
        let mut rest = before;
        if let Some((&(_, true), head)) = rest.split_last() {
            rest = head;
        }
        let previous_release = rest.iter().rev().find(|c| c.1).map(|c| c.0);
        let acquired = rest.iter().rev().take_while(|c| !c.1).map(|c| c.0).next();
        let (from, known) = match acquired {
            Some(t) => (t, true),
            None => (w.from_ns.max(previous_release.unwrap_or(0)), false),
        };
        let hold = by_release.entry((h, release)).or_insert(Hold {
            holder: h,
            from_ns: from,
            to_ns: release,
            start_known: known,
        });
        if !hold.start_known && !known {
            hold.from_ns = hold.from_ns.min(from);
        }
    }
    let mut out: Vec<Hold> = by_release.into_values().collect();
    out.sort_by_key(|h| (h.to_ns, h.holder));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(waiter: u32, from: u64, to: u64, holder: Option<u32>) -> LockWait {
        LockWait {
            waiter: ThreadIdx(waiter),
            from_ns: from,
            to_ns: to,
            holder: holder.map(ThreadIdx),
            stack: None,
        }
    }

    #[test]
    fn a_hold_starts_at_the_holders_contended_acquisition() {
        // Thread 1 acquired the word after a wait (exit at 100), released
        // at 500, waking thread 2, which had waited since 200.
        let calls = [(100u64, false), (500, true)];
        let h = holds(&[wait(2, 200, 500, Some(1))], |_| Some(&calls[..]));
        assert_eq!(
            h,
            vec![Hold {
                holder: ThreadIdx(1),
                from_ns: 100,
                to_ns: 500,
                start_known: true
            }]
        );
    }

    #[test]
    fn an_uncontended_acquisition_bounds_the_hold_by_the_wait() {
        // Released at 50 (a wake), took it again without a syscall, released
        // at 500: held at least since thread 2 began waiting (200).
        let calls = [(50u64, true), (500, true)];
        let h = holds(&[wait(2, 200, 500, Some(1))], |_| Some(&calls[..]));
        assert_eq!((h[0].from_ns, h[0].start_known), (200, false));
        // A wait older than the holder's previous release: bounded by it.
        let h = holds(&[wait(2, 10, 500, Some(1))], |_| Some(&calls[..]));
        assert_eq!((h[0].from_ns, h[0].start_known), (50, false));
    }

    #[test]
    fn one_release_that_woke_several_waiters_is_one_hold() {
        let calls = [(500u64, true)];
        let h = holds(
            &[wait(2, 200, 500, Some(1)), wait(3, 300, 500, Some(1))],
            |_| Some(&calls[..]),
        );
        assert_eq!(h.len(), 1);
        assert_eq!(h[0].from_ns, 200);
    }

    #[test]
    fn waits_without_a_holder_make_no_hold() {
        // A time-out, or a holder that exited holding it (nobody released).
        let h = holds(&[wait(2, 200, 500, None)], |_| None);
        assert!(h.is_empty());
    }

    #[test]
    fn shared_words_in_two_processes_are_one_lock() {
        let mut w = Words::default();
        w.union((10, 0x1000), (20, 0x7000));
        w.union((20, 0x7000), (30, 0x9000));
        assert_eq!(w.find((30, 0x9000)), w.find((10, 0x1000)));
        assert_ne!(w.find((10, 0x2000)), w.find((10, 0x1000)));
    }
}
