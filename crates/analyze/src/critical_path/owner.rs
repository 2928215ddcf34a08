//! Who owns a wait that what ended it does not explain (a signal, a
//! time-out, the trace's end): the child waited for, the thread that ended
//! the thread's last wait on the same stack, the busiest sibling or child;
//! and poll loops, which count as one wait for the thread that ended the
//! last, or whose wake raced with the last time-out. Part of the
//! [`super::Walker`]; pure.

use slowlab_model::critical_path::WaitKind;
use slowlab_model::trace::ThreadIdx;

use super::{
    main_thread, window, EndedBy, FutexWakes, Walker, MAX_POLL_GAP_NS, OWNER_LOOKBACK,
    RACE_SLACK_NS,
};
use crate::classify;
use crate::states::{BlockedSpan, Span, SpanState};
use crate::wait_calls::WaitSyscall;

impl Walker<'_> {
    /// Who owns what `thread` waited for over `[from, to)` (`k` is the
    /// wait's index in the thread's spans), when what ended the wait does
    /// not say: a child it waits for (`wait4`, `waitid`, `sigsuspend`; the
    /// child that ran most in the interval, else the last to exit), else
    /// the thread that ended its last wait on the same stack (a pipe's
    /// writer, a lock's holder) while that thread lives, else for a lock
    /// the other thread of its process that ran most (rustc's main thread
    /// joins its compiler thread), else a child that ran most in the
    /// interval (cargo waits for its jobs on a futex while rustc runs). `None` for sleeps,
    /// storage and faults, which have no owner.
    ///
    /// A lone wait that timed out (`timed_out`) was a sleep unless it
    /// waited for a child: a time-out is what most timed waits are for,
    /// and a poll loop is judged as a whole ([`Self::poll_loop`]).
    pub(super) fn owner(
        &mut self,
        thread: ThreadIdx,
        k: usize,
        b: &BlockedSpan,
        (from, to): (u64, u64),
        timed_out: bool,
    ) -> Option<(ThreadIdx, WaitKind)> {
        let own = self.own_kind(b);
        if !matches!(own, WaitKind::Lock | WaitKind::Ipc) {
            return None;
        }
        let trace = self.trace;
        let names = classify::names(trace, b.stack);
        if classify::is_child_wait(&names) {
            return self.busiest_child(thread, from, to).map(|c| (c, own));
        }
        if timed_out {
            return None;
        }
        let spans = &self.states.spans[thread.ix()];
        for span in spans[..k].iter().rev().take(OWNER_LOOKBACK) {
            let SpanState::Blocked(prev) = span.state else {
                continue;
            };
            if !self.same_wait(&prev, b) {
                continue;
            }
            let j = self.judge(&prev);
            if let Some(w) = j.follow {
                let alive = trace.threads[w.ix()].end_ns.is_none_or(|e| e > from);
                if alive && w != thread && !self.chain.contains(&w) {
                    return Some((w, own));
                }
                break;
            }
        }
        if own == WaitKind::Lock {
            if let Some(t) = self.busiest_sibling(thread, from, to) {
                return Some((t, own));
            }
        }
        self.busiest_child(thread, from, to).map(|c| (c, own))
    }

    /// Nanoseconds `threads` ran during `[from, to)`.
    fn ran(&self, threads: &[ThreadIdx], from: u64, to: u64) -> u64 {
        threads
            .iter()
            .flat_map(|&t| self.states.spans_in(t, from, to))
            .filter(|sp| matches!(sp.state, SpanState::Running { .. }))
            .map(|sp| sp.end_ns.min(to).saturating_sub(sp.start_ns.max(from)))
            .sum()
    }

    /// The other thread of `thread`'s process that ran most during
    /// `[from, to)`, if any ran (a lock's holder, a joined thread, when no
    /// wake-up names it).
    fn busiest_sibling(&self, thread: ThreadIdx, from: u64, to: u64) -> Option<ThreadIdx> {
        let p = self.trace.thread_process(thread);
        p.threads
            .iter()
            .copied()
            .filter(|&t| t != thread && !self.chain.contains(&t))
            .map(|t| (self.ran(&[t], from, to), t))
            .filter(|&(ran, _)| ran > 0)
            .max_by_key(|&(ran, t)| (ran, std::cmp::Reverse(t)))
            .map(|(_, t)| t)
    }

    /// The main thread of the child process of `thread`'s process that ran
    /// most during `[from, to)` (ties: the last to exit), among those alive
    /// then.
    fn busiest_child(&mut self, thread: ThreadIdx, from: u64, to: u64) -> Option<ThreadIdx> {
        let trace = self.trace;
        let pid = trace.thread_process(thread).pid;
        let children = self.children.get(&pid)?;
        let mut best: Option<(u64, u64, ThreadIdx)> = None;
        for &c in children {
            let (s, e) = window(trace, c);
            if s >= to || e <= from {
                continue;
            }
            let Some(main) = main_thread(trace, c) else {
                continue;
            };
            let ran = self.ran(&trace.processes[c.ix()].threads, from, to);
            if best.is_none_or(|(r, end, _)| (ran, e) > (r, end)) {
                best = Some((ran, e, main));
            }
        }
        best.map(|b| b.2)
    }

    /// A poll loop starting at `spans[k]` (of `thread`): a wait on a lock
    /// or for another thread (futex, poll, pipe) that a timer (or no
    /// wake-up in the trace) ended, waited again on the same stack after at
    /// most [`MAX_POLL_GAP_NS`] on a CPU each time, until a thread ended
    /// one, or until a thread's wake raced with its last time-out
    /// ([`Self::raced_waker`]). Returns the index of that last wait, its
    /// waker and its kind; a lone timed-out wait is a loop of one when a
    /// wake raced with it. (Cargo waits for its jobs this way, with a
    /// 500 ms timeout: the timeouts are not what it waited for.) A loop that
    /// a signal or the trace's end (or the window's) ends instead has no
    /// waker (`None`): the walker asks who owns what it waited for.
    pub(super) fn poll_loop(
        &mut self,
        thread: ThreadIdx,
        spans: &[Span],
        k: usize,
    ) -> Option<(usize, Option<ThreadIdx>, WaitKind)> {
        let SpanState::Blocked(first) = spans[k].state else {
            return None;
        };
        if !self.timed_out_waiting_for_others(&first) {
            return None;
        }
        let kind = self.own_kind(&first);
        let mut busy = 0;
        let mut last = k;
        let mut left_call = self.left_call(&spans[k], &first);
        // Whether the thread went on after the loop (ran, or waited for
        // something else), rather than the window ending inside it.
        let mut went_on = false;
        for (m, span) in spans.iter().enumerate().skip(k + 1) {
            match span.state {
                SpanState::Runnable => {}
                SpanState::Running { .. } => {
                    busy += span.end_ns.saturating_sub(span.start_ns.max(left_call));
                    if busy > MAX_POLL_GAP_NS {
                        went_on = true;
                        break;
                    }
                }
                SpanState::Blocked(b) if self.same_wait(&b, &first) => {
                    busy = 0;
                    last = m;
                    left_call = self.left_call(span, &b);
                    if self.timed_out_waiting_for_others(&b) {
                        continue;
                    }
                    let j = self.judge(&b);
                    if j.follow.is_some() {
                        return Some((m, j.follow, j.kind));
                    }
                    if Self::not_ended_by_its_resource(&j, &b) {
                        return Some((m, None, self.own_kind(&b)));
                    }
                    return None;
                }
                SpanState::Blocked(_) => {
                    went_on = true;
                    break;
                }
            }
        }
        if let Some(w) = self.raced_waker(thread, spans, last) {
            return Some((last, Some(w), kind));
        }
        // The window ended inside the loop.
        (!went_on && last > k).then_some((last, None, kind))
    }

    /// Another thread of `thread`'s process whose wake of the futex word
    /// of the timed-out wait `spans[last]` raced with the time-out: entered
    /// from just before the timer ended the wait ([`RACE_SLACK_NS`]) until
    /// the thread went on (ran [`MAX_POLL_GAP_NS`] after its call returned,
    /// or waited for anything but a lock; it may first wait for the mutex
    /// its condition variable takes back). Its wake came too late to wake
    /// the thread (no wake-up is recorded), but it made what the thread
    /// waited for happen, and the thread found it done. Rust's condition variable makes the call
    /// whether anyone waits or not, and cargo's job queue is one: a job
    /// that ends as cargo's 500 ms time-out fires left cargo's build "87%
    /// waiting on futex" on a loaded machine. Needs the futex calls.
    fn raced_waker(&mut self, thread: ThreadIdx, spans: &[Span], last: usize) -> Option<ThreadIdx> {
        let SpanState::Blocked(b) = spans[last].state else {
            return None;
        };
        let word = self.futex_word(&b)?;
        // The wait ended at its call's return when that came first: perf
        // records no wake-up or switch in of an idle CPU's thread here, and
        // the span then lasts until the thread's next switch away.
        let returned = b
            .call
            .map(|c| self.states.calls[c.ix()].exit_ns)
            .filter(|&at| at > spans[last].start_ns);
        let ended = returned.map_or(spans[last].end_ns, |at| at.min(spans[last].end_ns));
        let from = ended.saturating_sub(RACE_SLACK_NS);
        let left_call = self.left_call(&spans[last], &b);
        let mut until = spans[last].end_ns;
        let mut busy = 0;
        for span in &spans[last + 1..] {
            match span.state {
                SpanState::Running { .. } => {
                    let went_on = span.start_ns.max(left_call);
                    let ran = span.end_ns.saturating_sub(went_on);
                    if busy + ran > MAX_POLL_GAP_NS {
                        until = went_on.saturating_add(MAX_POLL_GAP_NS - busy);
                        break;
                    }
                    busy += ran;
                }
                SpanState::Blocked(next)
                    if self.own_kind(&next) != WaitKind::Lock || self.same_wait(&next, &b) =>
                {
                    break;
                }
                SpanState::Runnable | SpanState::Blocked(_) => {}
            }
            until = span.end_ns;
        }
        let pid = self.trace.thread_process(thread).pid;
        let wakes = self.futex_wakes().get(&(pid, word))?;
        let first = wakes.partition_point(|&(at, _)| at < from);
        wakes[first..]
            .iter()
            .take_while(|&&(at, _)| at <= until)
            .map(|&(_, w)| w)
            .find(|&w| w != thread)
    }

    /// When the thread left the call of its wait `span` (`b`): the call's return, or the
    /// span's end when that came later or the call is not recorded. The running between
    /// the two is still the wait's call: the way out of a timed-out wait cancels its
    /// timer, which waits for the timer's callback on another CPU (under the eBPF
    /// recorder in CI, a boss ran 14.6 ms in its call after its switch in, its timer's
    /// CPU stalled), and a poll loop's gap or a race's end is measured from the return.
    /// A call whose return was not recorded (lost, or the trace ended) is left at the
    /// span's end.
    fn left_call(&self, span: &Span, b: &BlockedSpan) -> u64 {
        b.call
            .map(|c| self.states.calls[c.ix()].exit_ns)
            .filter(|&at| at != u64::MAX)
            .map_or(span.end_ns, |at| at.max(span.end_ns))
    }

    /// The futex word a wait waited on, when the trace records the call.
    fn futex_word(&self, b: &BlockedSpan) -> Option<u64> {
        b.call.and_then(|c| match self.states.calls[c.ix()].call {
            WaitSyscall::Futex { uaddr, .. } => Some(uaddr),
            _ => None,
        })
    }

    /// Every futex wake of the trace by word (process, address): when it
    /// was entered and by whom, in time order. Built on first use.
    fn futex_wakes(&mut self) -> &FutexWakes {
        let (trace, states) = (self.trace, self.states);
        self.futex_wakes.get_or_insert_with(|| {
            let mut by_word = FutexWakes::default();
            for c in &states.calls {
                if let WaitSyscall::Futex { uaddr, .. } = c.call {
                    if c.call.futex_wakes() {
                        let pid = trace.thread_process(c.thread).pid;
                        by_word
                            .entry((pid, uaddr))
                            .or_default()
                            .push((c.enter_ns, c.thread));
                    }
                }
            }
            for v in by_word.values_mut() {
                v.sort_unstable_by_key(|&(at, _)| at);
            }
            by_word
        })
    }

    /// A wait on a lock or another thread's action that a timer ended, or
    /// that ended without a wake-up in the trace. perf drops events raised
    /// in an idle CPU's interrupts (on this 2-core VM, all of CPU 1's), so
    /// a timeout that fires there leaves no `sched_waking`: the thread is
    /// just seen running again. A thread's wake-up is always recorded (it
    /// runs in that thread's context), so an unseen one came from an
    /// interrupt, and for a futex or poll wait that is its timer.
    fn timed_out_waiting_for_others(&mut self, b: &BlockedSpan) -> bool {
        let j = self.judge(b);
        let unseen_wake_up = b.woken && b.waker.is_none() && b.waker_stack.is_none();
        if j.ended_by != Some(EndedBy::Timer) && !unseen_wake_up {
            return false;
        }
        let own = classify::wait_kind(
            &classify::names(self.trace, b.stack),
            b.task_state,
            classify::NO_WAKE,
        );
        matches!(own, WaitKind::Lock | WaitKind::Ipc)
    }

    /// Whether two waits of one thread wait on the same thing: the same
    /// futex word when the trace records the calls, else the same blocking
    /// site — the kernel frames and the innermost user frame. (A whole
    /// stack is not compared: frame-pointer stacks through code built
    /// without frame pointers, such as Rust's std, pick up stale frames
    /// that differ from one iteration of a loop to the next.)
    pub(super) fn same_wait(&self, a: &BlockedSpan, b: &BlockedSpan) -> bool {
        if let (Some(x), Some(y)) = (self.futex_word(a), self.futex_word(b)) {
            return x == y;
        }
        if a.stack == b.stack {
            return true;
        }
        let trace = self.trace;
        let site = |stack| {
            let mut frames = Vec::new();
            for f in trace.stack_frames(stack) {
                let func = trace.frame_function(f);
                frames.push(func);
                if !trace.functions[func.ix()].kernel {
                    break;
                }
            }
            frames
        };
        site(a.stack) == site(b.stack)
    }
}
