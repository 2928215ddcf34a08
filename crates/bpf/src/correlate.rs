//! Matching perf's syscall events to captured paths: for a perf `syscalls:sys_enter_*`
//! sample (thread id, time, syscall), the capture event of the same thread and syscall that
//! the same tracepoint hit produced.
//!
//! Pure functions over a [`PathLog`]; it reads no files.
//!
//! # Clocks and order
//!
//! Capture times are CLOCK_MONOTONIC (`bpf_ktime_get_ns`). perf stamps its samples with
//! its own clock unless told otherwise, so `perf record` **must run with `-k monotonic`**
//! (`--clockid monotonic`) for its times to be comparable; without it, perf's default
//! clock was 3.8 ms behind CLOCK_MONOTONIC on the development VM, enough to pair every
//! sample with another call (a reader should check perf.data's clock id, recorded with
//! `-k`, before matching). With it, both observe the same
//! tracepoint hit on the same clock, and the BPF program runs *before* perf takes its time
//! stamp, so a capture event is never later than its perf sample: typically 0.6–3 µs
//! earlier, occasionally tens of µs (perf may fault the name's page in, or the thread may
//! be preempted, in between).
//!
//! So the match of a sample is the *latest* capture event of that thread and syscall at or
//! before the sample's time — not the nearest, which after such a delay can be the thread's
//! next call. [`PathIndex::lookup`] does that within a look-back window. [`PathMatcher`]
//! also uses the order of perf's samples: a thread's call cannot have entered before its
//! previous sample, which excludes a neighbour's path even when a capture event was
//! dropped. Thread ids are the kernel's global ones in both.

use std::collections::HashMap;

use crate::format::{PathEvent, PathLog};
use crate::syscall::Syscall;

/// The default look-back window, 10 ms: far more than the usual few microseconds between
/// a capture event and its perf sample, enough for a page fault or a preemption in
/// between. [`PathMatcher`] narrows it further to the time since the thread's previous
/// sample.
pub const DEFAULT_WINDOW_NS: u64 = 10_000_000;

/// The capture event(s) that match one perf syscall event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathMatch<'a> {
    /// The first path argument.
    pub first: &'a PathEvent,
    /// The second path argument, for the syscalls that have one (rename, link, symlink).
    pub second: Option<&'a PathEvent>,
    /// Capture time minus perf time, in ns: zero or negative.
    pub delta_ns: i64,
}

impl<'a> PathMatch<'a> {
    /// The first path.
    pub fn path(&self) -> &'a str {
        &self.first.path
    }
}

/// An index of a [`PathLog`] by thread, for matching perf's syscall events.
#[derive(Debug, Clone)]
pub struct PathIndex<'a> {
    by_tid: HashMap<u32, Vec<&'a PathEvent>>,
    window_ns: u64,
}

impl<'a> PathIndex<'a> {
    /// Indexes `log` with the [`DEFAULT_WINDOW_NS`] window.
    pub fn new(log: &'a PathLog) -> PathIndex<'a> {
        let mut by_tid: HashMap<u32, Vec<&'a PathEvent>> = HashMap::new();
        for e in &log.events {
            by_tid.entry(e.tid).or_default().push(e);
        }
        for events in by_tid.values_mut() {
            // Already sorted when the log came from `parse_paths`; one built by hand may not be.
            events.sort_by_key(|e| (e.time_ns, e.arg));
        }
        PathIndex {
            by_tid,
            window_ns: DEFAULT_WINDOW_NS,
        }
    }

    /// Sets the look-back window in nanoseconds.
    pub fn with_window(mut self, window_ns: u64) -> PathIndex<'a> {
        self.window_ns = window_ns;
        self
    }

    /// The look-back window in nanoseconds.
    pub fn window_ns(&self) -> u64 {
        self.window_ns
    }

    /// The capture event of thread `tid` and `syscall` that matches a perf sample at
    /// `time_ns` (CLOCK_MONOTONIC ns, i.e. from `perf record -k monotonic`): the latest one
    /// at or before `time_ns` within the window, with its second path if the syscall has
    /// one. `None` when there is none: the syscall was not attached, the event was
    /// dropped, or perf's clock was not CLOCK_MONOTONIC.
    ///
    /// If the right event was dropped, this may return the same thread's previous call of
    /// the syscall; [`PathMatcher`] cannot be fooled that way.
    pub fn lookup(&self, tid: u32, time_ns: u64, syscall: Syscall) -> Option<PathMatch<'a>> {
        self.find(
            tid,
            time_ns,
            syscall,
            time_ns.saturating_sub(self.window_ns),
        )
    }

    /// Like [`PathIndex::lookup`] with the syscall given by name as perf shows it
    /// (`openat`, `sys_enter_openat` or `syscalls:sys_enter_openat`). `None` also for a
    /// syscall the capture does not know.
    pub fn lookup_name(&self, tid: u32, time_ns: u64, name: &str) -> Option<PathMatch<'a>> {
        self.lookup(tid, time_ns, Syscall::from_name(name)?)
    }

    /// A matcher for perf samples fed in time order; see [`PathMatcher`].
    pub fn matcher(&self) -> PathMatcher<'_, 'a> {
        PathMatcher {
            index: self,
            last_sample: HashMap::new(),
        }
    }

    /// The latest first-argument event of `tid` and `syscall` in `[not_before, time_ns]`.
    fn find(
        &self,
        tid: u32,
        time_ns: u64,
        syscall: Syscall,
        not_before: u64,
    ) -> Option<PathMatch<'a>> {
        let events = self.by_tid.get(&tid)?;
        let end = events.partition_point(|e| e.time_ns <= time_ns);
        let i = events[..end]
            .iter()
            .rposition(|e| e.time_ns < not_before || (e.syscall == syscall && e.arg == 0))?;
        let first = events[i];
        if first.time_ns < not_before {
            return None;
        }
        let second = events[i + 1..]
            .iter()
            .take_while(|e| e.time_ns == first.time_ns)
            .find(|e| e.syscall == syscall && e.arg == 1)
            .copied();
        Some(PathMatch {
            first,
            second,
            delta_ns: first.time_ns as i64 - time_ns as i64,
        })
    }
}

/// Matches a stream of perf samples to capture events, using their order: feed each
/// thread's samples in time order (perf.data's order), every sample of the thread, not
/// only the syscalls with paths. A sample's match must then be later than the thread's
/// previous sample, since that call entered after it.
#[derive(Debug, Clone)]
pub struct PathMatcher<'i, 'a> {
    index: &'i PathIndex<'a>,
    last_sample: HashMap<u32, u64>,
}

impl<'a> PathMatcher<'_, 'a> {
    /// Matches a `sys_enter` sample of `syscall` by `tid` at `time_ns`, and records the
    /// sample as the thread's latest.
    pub fn match_sample(
        &mut self,
        tid: u32,
        time_ns: u64,
        syscall: Syscall,
    ) -> Option<PathMatch<'a>> {
        let window_start = time_ns.saturating_sub(self.index.window_ns);
        let after_previous = self
            .last_sample
            .get(&tid)
            .map_or(0, |&t| t.saturating_add(1));
        self.observe(tid, time_ns);
        self.index
            .find(tid, time_ns, syscall, window_start.max(after_previous))
    }

    /// Like [`PathMatcher::match_sample`] with the syscall by name; a name the capture does
    /// not know matches nothing but is still recorded.
    pub fn match_name(&mut self, tid: u32, time_ns: u64, name: &str) -> Option<PathMatch<'a>> {
        match Syscall::from_name(name) {
            Some(s) => self.match_sample(tid, time_ns, s),
            None => {
                self.observe(tid, time_ns);
                None
            }
        }
    }

    /// Records any other sample of thread `tid` at `time_ns` (a `read`, a `sys_exit`, a
    /// context switch): it bounds where the thread's next path can be.
    pub fn observe(&mut self, tid: u32, time_ns: u64) {
        let last = self.last_sample.entry(tid).or_insert(0);
        *last = (*last).max(time_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(time_ns: u64, tid: u32, syscall: Syscall, arg: u8, path: &str) -> PathEvent {
        PathEvent {
            time_ns,
            pid: tid,
            tid,
            syscall,
            arg,
            path: path.into(),
            truncated: false,
            unreadable: false,
        }
    }

    fn log(events: Vec<PathEvent>) -> PathLog {
        PathLog {
            start_monotonic_ns: 0,
            start_realtime_ns: 0,
            attached: Syscall::ALL.to_vec(),
            events,
            end: None,
            truncated_records: 0,
            unknown_records: 0,
            warnings: Vec::new(),
        }
    }

    #[test]
    fn picks_the_latest_earlier_event_of_the_same_thread_and_syscall() {
        let l = log(vec![
            ev(1_000, 1, Syscall::Newfstatat, 0, "a"),
            ev(2_500, 1, Syscall::Newfstatat, 0, "b"),
            ev(2_600, 2, Syscall::Newfstatat, 0, "other thread"),
            ev(2_700, 1, Syscall::Openat, 0, "other syscall"),
            ev(4_000, 1, Syscall::Newfstatat, 0, "c"),
        ]);
        let idx = PathIndex::new(&l);
        let m = idx.lookup(1, 2_700, Syscall::Newfstatat).expect("match");
        assert_eq!(m.path(), "b");
        assert_eq!(m.delta_ns, -200);
        // A perf stamp delayed past the thread's next call still gets its own call's path,
        // not the nearer next one.
        assert_eq!(
            idx.lookup_name(1, 3_900, "syscalls:sys_enter_newfstatat")
                .map(|m| m.path()),
            Some("b")
        );
        assert_eq!(
            idx.lookup(1, 4_000, Syscall::Newfstatat).map(|m| m.path()),
            Some("c")
        );
        assert_eq!(
            idx.lookup(2, 2_601, Syscall::Newfstatat).map(|m| m.path()),
            Some("other thread")
        );
    }

    #[test]
    fn nothing_outside_the_window_or_for_unknown_threads() {
        let l = log(vec![ev(1_000_000, 1, Syscall::Openat, 0, "a")]);
        let idx = PathIndex::new(&l).with_window(10_000);
        assert!(idx.lookup(1, 1_020_000, Syscall::Openat).is_none());
        assert!(idx.lookup(1, 1_009_000, Syscall::Openat).is_some());
        assert!(
            idx.lookup(1, 999_999, Syscall::Openat).is_none(),
            "never a later event"
        );
        assert!(idx.lookup(3, 1_000_000, Syscall::Openat).is_none());
        assert!(idx.lookup_name(1, 1_000_000, "read").is_none());
    }

    #[test]
    fn the_matcher_never_reaches_back_past_the_previous_sample() {
        // Thread 1 stats a, b, c; the capture event of b was dropped.
        let l = log(vec![
            ev(1_000, 1, Syscall::Newfstatat, 0, "a"),
            ev(3_000, 1, Syscall::Newfstatat, 0, "c"),
        ]);
        let idx = PathIndex::new(&l);
        assert_eq!(
            idx.lookup(1, 2_001, Syscall::Newfstatat).map(|m| m.path()),
            Some("a")
        );
        let mut m = idx.matcher();
        assert_eq!(
            m.match_sample(1, 1_001, Syscall::Newfstatat)
                .map(|m| m.path()),
            Some("a")
        );
        assert_eq!(
            m.match_sample(1, 2_001, Syscall::Newfstatat),
            None,
            "b was dropped"
        );
        assert_eq!(
            m.match_sample(1, 3_001, Syscall::Newfstatat)
                .map(|m| m.path()),
            Some("c")
        );
        // Other threads are independent; other samples bound too.
        let mut m = idx.matcher();
        m.observe(1, 1_500);
        assert_eq!(m.match_name(1, 2_001, "newfstatat"), None);
        assert_eq!(m.match_name(1, 2_500, "read"), None);
    }

    #[test]
    fn rename_gets_both_paths() {
        let l = log(vec![
            ev(500, 4, Syscall::Renameat2, 0, "old"),
            ev(500, 4, Syscall::Renameat2, 1, "new"),
        ]);
        let idx = PathIndex::new(&l);
        let m = idx.lookup(4, 510, Syscall::Renameat2).expect("match");
        assert_eq!(m.path(), "old");
        assert_eq!(m.second.map(|e| e.path.as_str()), Some("new"));
    }
}
