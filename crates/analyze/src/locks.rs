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

/// Where a wait took its lock: the innermost function of its user stack
/// outside the lock's own code (glibc's `__lll_lock_wait`,
/// `pthread_mutex_lock`, the futex wrapper) and the thread's start
/// (`start_thread`, `clone3`); none when the stack has none (glibc has no
/// frame pointers: the caller of `pthread_mutex_lock` is often lost).
pub fn taken_in(trace: &Trace, stack: Option<StackIdx>) -> Option<String> {
    const LOCK_CODE: [&str; 8] = [
        "lll_",
        "mutex",
        "rwlock",
        "futex",
        "syscall",
        "[unknown]",
        "start_thread",
        "clone",
    ];
    trace
        .stack_frames(stack)
        .map(|f| trace.frame_function(f))
        .filter(|&f| !trace.functions[f.ix()].kernel)
        .map(|f| trace.function_name(f))
        .find(|n| {
            let l = n.to_ascii_lowercase();
            !LOCK_CODE.iter().any(|p| l.contains(p))
        })
        .map(str::to_string)
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
    use crate::testutil::TraceBuilder;

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

    /// Futex waits and releases in an in-memory trace: process 10 with
    /// threads 11 (the holder, `h`), 12 and 13 (waiters) and 14.
    struct Futexes {
        b: TraceBuilder,
        blocked: Option<StackIdx>,
        wake: Option<StackIdx>,
        t: [ThreadIdx; 5],
    }

    const PRIVATE_WAIT: u64 = 0x80;
    const PRIVATE_WAKE: u64 = 0x81;

    impl Futexes {
        fn new() -> Futexes {
            let mut b = TraceBuilder::default();
            let main = b.process(10, "app");
            let t = [
                main,
                b.thread(main, 11, "h"),
                b.thread(main, 12, "w1"),
                b.thread(main, 13, "w2"),
                b.thread(main, 14, "x"),
            ];
            let blocked = b.stack(&["do_futex", "futex_wait", "schedule"]);
            let wake = b.stack(&["do_futex", "futex_wake"]);
            Futexes {
                b,
                blocked,
                wake,
                t,
            }
        }

        /// Thread `tid` calls futex(`addr`, `op`, `val`) at `at` and blocks.
        fn wait_op(&mut self, at: u64, tid: i32, addr: u64, op: u64, val: u64) {
            let t = self.t[(tid - 10) as usize];
            self.b
                .syscall_enter(at, t, None, "futex", [addr, op, val, 0, 0, 0]);
            self.b.switch(at + 1, 0, tid, 1, 0, self.blocked);
        }

        /// A mutex wait (glibc's: a private wait expecting 2).
        fn wait(&mut self, at: u64, tid: i32, addr: u64) {
            self.wait_op(at, tid, addr, PRIVATE_WAIT, 2);
        }

        /// Thread `tid` releases `addr` at `at` (a wake), waking `woken`.
        fn release(&mut self, at: u64, tid: i32, addr: u64, woken: Option<i32>) {
            let t = self.t[(tid - 10) as usize];
            self.b
                .syscall_enter(at, t, None, "futex", [addr, PRIVATE_WAKE, 1, 0, 0, 0]);
            if let Some(w) = woken {
                self.b.waking(at + 1, 0, t, w, self.wake);
            }
            self.b
                .syscall_exit(at + 2, t, "futex", i64::from(woken.is_some()));
        }

        /// Thread `tid`, woken, runs at `at` and returns from its wait.
        fn acquired(&mut self, at: u64, tid: i32) {
            let t = self.t[(tid - 10) as usize];
            self.b.switch(at, 1, 0, 0, tid, None);
            self.b.syscall_exit(at + 1, t, "futex", 0);
        }

        fn locks(mut self, end: u64) -> (Trace, Locks) {
            self.b.end(end);
            let trace = self.b.build();
            let states = ThreadStates::build(&trace);
            let locks = Locks::build(&trace, &states);
            (trace, locks)
        }
    }

    fn lock_at(locks: &Locks, addr: u64) -> &Lock {
        locks
            .locks
            .iter()
            .find(|l| l.key.1 == addr)
            .unwrap_or_else(|| panic!("no lock at {addr:#x}: {locks:?}"))
    }

    #[test]
    fn nested_locks_are_two_locks_with_their_own_holds() {
        let mut f = Futexes::new();
        f.wait(10, 12, 0xa0);
        f.wait(20, 13, 0xb0);
        f.release(40, 11, 0xb0, Some(13)); // h lets go of B first
        f.acquired(45, 13);
        f.release(50, 11, 0xa0, Some(12)); // then of A
        f.acquired(55, 12);
        let (trace, locks) = f.locks(100);
        assert_eq!(locks.locks.len(), 2);
        let (a, b) = (lock_at(&locks, 0xa0), lock_at(&locks, 0xb0));
        assert_eq!(a.kind, ResourceKind::Mutex);
        let h = ThreadIdx(1);
        assert_eq!(trace.threads[h.ix()].tid, 11);
        // Held at least since each waiter began waiting, to the release.
        assert_eq!(
            (a.holds[0].holder, a.holds[0].from_ns, a.holds[0].to_ns),
            (h, 11, 51)
        );
        assert_eq!((b.holds[0].from_ns, b.holds[0].to_ns), (21, 41));
        assert!(!a.holds[0].start_known);
        // Between the two releases h holds only A.
        assert_eq!(locks.held_by(h, 42, 50).map(|l| l.key.1), Some(0xa0));
        assert!(locks.held_by(ThreadIdx(2), 0, 100).is_none());
    }

    /// h takes A contended (x releases it to h at 8), and, with
    /// `bare_release`, lets it go at 20 with nobody waiting; then thread
    /// 12 waits on it from 30 until h releases it at 60.
    fn contended_then(bare_release: bool) -> Hold {
        let mut f = Futexes::new();
        f.wait(5, 11, 0xa0);
        f.release(8, 14, 0xa0, Some(11));
        f.acquired(9, 11); // h's wait returns at 10: acquired
        if bare_release {
            f.release(20, 11, 0xa0, None);
        }
        f.wait(30, 12, 0xa0);
        f.release(60, 11, 0xa0, Some(12));
        f.acquired(65, 12);
        let (_, locks) = f.locks(100);
        let lock = lock_at(&locks, 0xa0);
        *lock.holds.iter().find(|h| h.to_ns == 61).unwrap()
    }

    #[test]
    fn a_hold_after_a_contended_acquisition_starts_there() {
        let hold = contended_then(false);
        assert_eq!((hold.from_ns, hold.start_known), (10, true));
    }

    #[test]
    fn a_release_without_waiters_ends_the_known_hold() {
        // After the bare release at 20, h took A again without a syscall:
        // held at least since thread 12 began waiting (31).
        let hold = contended_then(true);
        assert_eq!((hold.from_ns, hold.start_known), (31, false));
    }

    #[test]
    fn a_holder_that_exits_holding_or_a_trace_that_ends_mid_hold_makes_no_hold() {
        let mut f = Futexes::new();
        f.wait(10, 12, 0xa0);
        // h exits without letting go; nobody wakes thread 12.
        f.b.switch(30, 1, 11, 16, 0, None);
        let (_, locks) = f.locks(100);
        let lock = lock_at(&locks, 0xa0);
        assert_eq!(lock.waits.len(), 1);
        assert_eq!(lock.waits[0].holder, None);
        assert!(lock.holds.is_empty());
    }

    #[test]
    fn a_trace_that_starts_mid_wait_has_no_lock_for_it() {
        let mut f = Futexes::new();
        // Thread 12's wait began before the trace: only its end is seen.
        f.release(20, 11, 0xa0, Some(12));
        f.acquired(25, 12);
        let (_, locks) = f.locks(100);
        assert!(locks.locks.is_empty(), "{locks:?}");
    }

    #[test]
    fn a_requeued_wait_keeps_its_word_and_names_who_woke_it() {
        let mut f = Futexes::new();
        // A wait on a condition word (wait-bitset, expecting 0)…
        f.wait_op(10, 12, 0xc0, 0x89, 0);
        // … requeued onto 0xd0 by h (no wake-up), then woken by a release
        // of 0xd0.
        let h = f.t[1];
        f.b.syscall_enter(20, h, None, "futex", [0xc0, 0x84, 0, 1, 0xd0, 0]);
        f.b.syscall_exit(21, h, "futex", 1);
        f.release(30, 11, 0xd0, Some(12));
        f.acquired(35, 12);
        let (trace, locks) = f.locks(100);
        // Not a mutex by its own wait: no lock, but the resource says it.
        assert!(locks.locks.is_empty(), "{locks:?}");
        let states = ThreadStates::build(&trace);
        let w = ThreadIdx(2);
        let span = states.spans[w.ix()]
            .iter()
            .find(|s| matches!(s.state, SpanState::Blocked(_)))
            .unwrap();
        let SpanState::Blocked(b) = span.state else {
            unreachable!()
        };
        let on = wait_on(&trace, &states, w, &b, span.start_ns);
        assert_eq!(on.kind, ResourceKind::Futex);
        assert_eq!(on.address, Some(0xc0));
        assert_eq!(on.holder, Some(h));
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
