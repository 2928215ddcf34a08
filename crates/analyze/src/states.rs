//! Every thread's states over time, replayed from the scheduler's events
//! (`sched_switch`, `sched_waking`): spans of running, runnable and blocked
//! time per thread, each blocked span with its blocking stack, its task state
//! and the thread that woke it; and per CPU, which thread ran from when.
//! This is the one replay of the scheduler: the critical path walks its
//! spans, and [`Schedule`] sums them up for the `--waits` view, the timeline,
//! the off-CPU flame graph and the detectors, so that every view tells the
//! same story about a thread's time.
//!
//! The rules:
//! - a `Switch` away from a thread whose reported state is runnable
//!   (`prev_state & 0xff == 0`: 0, or the kernel's "preempted" marker
//!   `TASK_REPORT_MAX`) makes it runnable; any other state blocks it;
//! - a `Waking` of a blocked thread ends its wait (the event's thread is the
//!   waker, with its stack) and makes it runnable;
//! - a `Switch` to a thread makes it running.
//!
//! perf drops many of the switches and wake-ups raised on an idle CPU (an
//! idle CPU woken by a timer runs the sleeper without either event in the
//! trace), so a thread seen on a CPU — a sample, a syscall, a wake-up it
//! sends, its own switch away — while blocked or runnable is taken to have
//! been switched in: its wait ends there, by an unknown waker.
//!
//! A wake-up recorded with tid -1 (an exiting task after it left its pid
//! namespace) is credited to the thread last switched in on that CPU.
//!
//! Before a thread's first event its state is unknown, except what the
//! first event implies: a thread switched *out* was running since its CPU
//! last switched (or since it started); a thread switched *in* or woken that
//! started during the trace was runnable since it started. Pure: reads the
//! trace, prints nothing.

use std::collections::HashMap;

use slowlab_model::trace::{EventKind, StackIdx, ThreadIdx, Trace};

use crate::select::BuildFx;
use crate::wait_calls::{CallIdx, Names, WaitCall};

/// Resolves a tid from an event payload to the thread lifetime alive at a
/// time (a reused tid has several).
pub struct TidIndex<'a> {
    trace: &'a Trace,
    latest: HashMap<i32, ThreadIdx, BuildFx>,
}

impl<'a> TidIndex<'a> {
    pub fn new(trace: &'a Trace) -> Self {
        let mut latest: HashMap<i32, ThreadIdx, BuildFx> = HashMap::default();
        for (i, th) in trace.threads.iter().enumerate() {
            latest.insert(th.tid, ThreadIdx(i as u32));
        }
        TidIndex { trace, latest }
    }

    /// The lifetime of `tid` alive at `time`; `None` for the idle task
    /// (tid 0) and unknown tids.
    pub fn lookup(&self, tid: i32, time: u64) -> Option<ThreadIdx> {
        if tid <= 0 {
            return None;
        }
        let &last = self.latest.get(&tid)?;
        let th = &self.trace.threads[last.ix()];
        if th.start_ns.is_none_or(|s| s <= time) {
            return Some(last);
        }
        self.trace
            .threads
            .iter()
            .enumerate()
            .rev()
            .find(|(_, t)| t.tid == tid && t.start_ns.is_none_or(|s| s <= time))
            .map(|(i, _)| ThreadIdx(i as u32))
    }
}

/// Whether a `sched_switch` `prev_state` means the thread stays runnable
/// (preempted or yielding) rather than going to sleep.
pub fn is_runnable_state(prev_state: u64) -> bool {
    prev_state & 0xff == 0
}

/// Why a thread was blocked and who ended it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockedSpan {
    /// Where it blocked (the stack of the switch away from it).
    pub stack: Option<StackIdx>,
    /// The task state it blocked in (1 interruptible, 2 uninterruptible…).
    pub task_state: u64,
    /// Whether the wait ended (false: the trace ended first). A thread seen
    /// running again without a recorded wake-up was woken too, by nobody
    /// the trace shows (`waker` and `waker_stack` both `None`).
    pub woken: bool,
    /// The thread the wake-up was recorded on; `None` for the idle task
    /// or an unseen wake-up. From an interrupt this is whichever thread the
    /// interrupt hit: look at `waker_stack`.
    pub waker: Option<ThreadIdx>,
    pub waker_stack: Option<StackIdx>,
    /// The waiting syscall the thread was in (a futex word, a child, a
    /// file lock: [`ThreadStates::calls`]), when the trace records it.
    pub call: Option<CallIdx>,
    /// The waiting syscall the waker was in when it woke the thread (a
    /// mutex's unlock, a condition variable's signal).
    pub waker_call: Option<CallIdx>,
}

/// What a thread was doing during a span.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SpanState {
    Running { cpu: u32 },
    Runnable,
    Blocked(BlockedSpan),
}

/// One stretch of one thread in one state, `[start_ns, end_ns)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    pub start_ns: u64,
    pub end_ns: u64,
    pub state: SpanState,
}

/// Per thread its spans in time order (gaps where unknown); per CPU who
/// ran from when.
#[derive(Debug, Clone, Default)]
pub struct ThreadStates {
    pub spans: Vec<Vec<Span>>,
    /// Per CPU: (time, thread switched in; `None` for idle), in time order.
    pub cpu_runs: Vec<Vec<(u64, Option<ThreadIdx>)>>,
    pub end_ns: u64,
    /// Every waiting syscall (futex, `wait4`, `waitid`, `flock`) in the
    /// order of their entries.
    pub calls: Vec<WaitCall>,
}

#[derive(Clone, Copy)]
enum Open {
    Unknown,
    Running(u64, u32),
    Runnable(u64),
    Blocked(u64, Option<StackIdx>, u64),
}

/// The replay's working state.
struct Replay {
    open: Vec<Open>,
    spans: Vec<Vec<Span>>,
    cpu_runs: Vec<Vec<(u64, Option<ThreadIdx>)>>,
    /// Per CPU: the time of its last recorded switch.
    cpu_last: Vec<u64>,
    /// Per CPU: the thread last seen running there (`None`: idle).
    current: Vec<Option<ThreadIdx>>,
    /// Per thread: the waiting syscall it is in.
    in_call: Vec<Option<CallIdx>>,
    calls: Vec<WaitCall>,
}

impl Replay {
    fn push(&mut self, i: usize, start: u64, end: u64, state: SpanState) {
        if end > start {
            self.spans[i].push(Span {
                start_ns: start,
                end_ns: end,
                state,
            });
        }
    }

    /// Closes thread `i`'s open state at `now`.
    fn close(&mut self, i: usize, o: Open, now: u64) {
        match o {
            Open::Running(since, cpu) => self.push(i, since, now, SpanState::Running { cpu }),
            Open::Runnable(since) => self.push(i, since, now, SpanState::Runnable),
            Open::Blocked(since, stack, task_state) => self.push(
                i,
                since,
                now,
                SpanState::Blocked(BlockedSpan {
                    stack,
                    task_state,
                    woken: false,
                    waker: None,
                    waker_stack: None,
                    call: self.in_call[i],
                    waker_call: None,
                }),
            ),
            Open::Unknown => {}
        }
    }

    /// Ends thread `i`'s open wait at `now`, woken by `waker` (on the
    /// stack `waker_stack`); `None` and `None`: by nobody the trace shows
    /// (its wake-up came from an interrupt on an idle CPU).
    fn woken(
        &mut self,
        i: usize,
        now: u64,
        waker: Option<ThreadIdx>,
        waker_stack: Option<StackIdx>,
    ) {
        if let Open::Blocked(since, stack, task_state) = self.open[i] {
            let waker_call = waker.and_then(|w| self.in_call[w.ix()]);
            self.push(
                i,
                since,
                now,
                SpanState::Blocked(BlockedSpan {
                    stack,
                    task_state,
                    woken: true,
                    waker,
                    waker_stack,
                    call: self.in_call[i],
                    waker_call,
                }),
            );
        }
    }

    /// The thread did something on `cpu` at `now` (a sample, a syscall, a
    /// wake-up it sent, or its own switch away). If it was blocked or
    /// runnable, the switch to it was not recorded — perf drops many of the
    /// `sched_switch` and `sched_waking` events raised on an idle CPU — so
    /// it is running from `since` (now, or the CPU's last switch): a wait
    /// ended this way is ended by an unknown waker, as from an interrupt.
    fn seen_running(&mut self, thread: ThreadIdx, cpu: u32, now: u64, since: u64) {
        let i = thread.ix();
        let from = match self.open[i] {
            Open::Blocked(b, _, _) | Open::Runnable(b) => since.max(b).min(now),
            _ => return,
        };
        match self.open[i] {
            Open::Blocked(..) => self.woken(i, from, None, None),
            o => self.close(i, o, from),
        }
        self.open[i] = Open::Running(from, cpu);
        if let Some(c) = self.current.get_mut(cpu as usize) {
            *c = Some(thread);
        }
        if let Some(runs) = self.cpu_runs.get_mut(cpu as usize) {
            if runs.last().is_none_or(|r| r.0 <= from) {
                runs.push((from, Some(thread)));
            }
        }
    }
}

thread_local! {
    /// How many times this thread replayed a trace's scheduler events: the
    /// benchmark and the tests check that one command does it once.
    static REPLAYS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The number of replays ([`ThreadStates::build`]) run on this thread (a
/// command analyzes on its main thread), and those credited to it.
pub fn replays() -> usize {
    REPLAYS.with(std::cell::Cell::get)
}

/// Counts on this thread the `n` replays of a thread it joined (the
/// detectors' thread of the page), so that none goes uncounted.
pub fn credit_replays(n: usize) {
    REPLAYS.with(|r| r.set(r.get() + n));
}

/// The CPUs the replay keeps state for: more than any kernel has (`NR_CPUS` is at most
/// 8,192), as many as an eBPF recording's 16 bits name. A CPU number past them is a
/// damaged record's (a perf.data record's is 32 bits), and its events are left out of
/// the replay, where one would have sized its per-CPU state in tens of gigabytes.
const MAX_CPUS: usize = 1 << 16;

impl ThreadStates {
    /// Replays the scheduler events of the trace.
    pub fn build(trace: &Trace) -> ThreadStates {
        REPLAYS.with(|r| r.set(r.get() + 1));
        let tids = TidIndex::new(trace);
        let n = trace.threads.len();
        let cpus = trace
            .events
            .iter()
            .map(|e| e.cpu as usize + 1)
            .chain(trace.samples.cpu.iter().map(|&c| c as usize + 1))
            .filter(|&n| n <= MAX_CPUS)
            .max()
            .unwrap_or(0);
        let mut r = Replay {
            open: vec![Open::Unknown; n],
            spans: vec![Vec::new(); n],
            cpu_runs: vec![Vec::new(); cpus],
            cpu_last: vec![trace.meta.start_ns; cpus],
            current: vec![None; cpus],
            in_call: vec![None; n],
            calls: Vec::new(),
        };
        let mut wait_names = Names::default();
        let thread_start = |t: ThreadIdx| trace.threads[t.ix()].start_ns;
        let real = |t: ThreadIdx| trace.threads.get(t.ix()).is_some_and(|th| th.tid > 0);
        let samples = &trace.samples;
        let mut next_sample = 0;

        for ev in &trace.events {
            let now = ev.time_ns;
            // Samples up to this event: their threads were on a CPU.
            while next_sample < samples.len() && samples.time_ns[next_sample] <= now {
                let (t, cpu) = (samples.thread[next_sample], samples.cpu[next_sample]);
                let at = samples.time_ns[next_sample];
                if real(t) {
                    r.seen_running(t, cpu, at, at);
                }
                next_sample += 1;
            }
            let c = ev.cpu as usize;
            if c >= cpus {
                continue; // a damaged record's CPU (past MAX_CPUS)
            }
            match ev.kind {
                EventKind::Switch {
                    prev_tid,
                    prev_state,
                    next_tid,
                    ..
                } => {
                    if let Some(prev) = tids.lookup(prev_tid, now) {
                        let i = prev.ix();
                        // Switched away, so it ran: since its CPU last
                        // switched (or since it started).
                        let since = r.cpu_last[c].max(thread_start(prev).unwrap_or(0));
                        match r.open[i] {
                            Open::Unknown => r.open[i] = Open::Running(since.min(now), ev.cpu),
                            Open::Running(..) => {}
                            // Woken, then switched in unseen: it ran from
                            // when its CPU last switched or it was woken.
                            Open::Runnable(_) => r.seen_running(prev, ev.cpu, now, since),
                            // Its wake-up unseen too (a timer on an idle
                            // CPU): the CPU's last switch was to another
                            // thread or idle, and the wait ended at some
                            // time after it; had the thread run for longer
                            // than a sampling period, a sample would have
                            // shown it. So the wait ends here.
                            Open::Blocked(..) => r.seen_running(prev, ev.cpu, now, now),
                        }
                        let o = r.open[i];
                        r.close(i, o, now);
                        r.open[i] = if is_runnable_state(prev_state) {
                            Open::Runnable(now)
                        } else {
                            Open::Blocked(now, ev.stack, prev_state)
                        };
                    }
                    let next = tids.lookup(next_tid, now);
                    if let Some(next) = next {
                        let i = next.ix();
                        match (r.open[i], thread_start(next)) {
                            // Switched in with its wake-up unseen.
                            (Open::Blocked(..), _) => r.woken(i, now, None, None),
                            (Open::Unknown, Some(s)) if s <= now => {
                                r.close(i, Open::Runnable(s), now)
                            }
                            (o, _) => r.close(i, o, now),
                        }
                        r.open[i] = Open::Running(now, ev.cpu);
                    }
                    r.cpu_runs[c].push((now, next));
                    r.cpu_last[c] = now;
                    r.current[c] = next;
                }
                EventKind::Waking { tid, .. } => {
                    if real(ev.thread) {
                        r.seen_running(ev.thread, ev.cpu, now, now);
                    }
                    let Some(target) = tids.lookup(tid, now) else {
                        continue;
                    };
                    let i = target.ix();
                    match r.open[i] {
                        Open::Blocked(..) => {
                            // An exiting task's last wake-ups (its parent,
                            // its joiners) carry tid -1: the waker is the
                            // thread on that CPU.
                            let waker = if real(ev.thread) {
                                Some(ev.thread)
                            } else if trace.threads.get(ev.thread.ix()).is_some_and(|t| t.tid < 0) {
                                r.current[c]
                            } else {
                                None
                            };
                            r.woken(i, now, waker, ev.stack);
                            r.open[i] = Open::Runnable(now);
                        }
                        Open::Unknown => r.open[i] = Open::Runnable(now),
                        _ => {}
                    }
                }
                EventKind::SyscallEnter { name, ref args, .. } => {
                    if real(ev.thread) {
                        r.seen_running(ev.thread, ev.cpu, now, now);
                        if let Some(call) = wait_names.call(trace, name, args) {
                            r.in_call[ev.thread.ix()] = Some(CallIdx(r.calls.len() as u32));
                            r.calls.push(WaitCall {
                                thread: ev.thread,
                                enter_ns: now,
                                exit_ns: u64::MAX,
                                call,
                            });
                        }
                    }
                }
                EventKind::SyscallExit { name, .. } => {
                    if real(ev.thread) {
                        r.seen_running(ev.thread, ev.cpu, now, now);
                        if wait_names.is_wait(trace, name) {
                            if let Some(c) = r.in_call[ev.thread.ix()].take() {
                                r.calls[c.ix()].exit_ns = now;
                            }
                        }
                    }
                }
                _ => {
                    if real(ev.thread) {
                        r.seen_running(ev.thread, ev.cpu, now, now);
                    }
                }
            }
        }
        let end = trace.meta.end_ns;
        for i in 0..n {
            let o = r.open[i];
            let since = match o {
                Open::Running(s, _) | Open::Runnable(s) | Open::Blocked(s, _, _) => s,
                Open::Unknown => continue,
            };
            // A thread that exited stops there (its last switch-out, in
            // the exit state, opens nothing that lasts).
            let stop = trace.threads[i].end_ns.unwrap_or(end).min(end).max(since);
            r.close(i, o, stop);
        }
        ThreadStates {
            spans: r.spans,
            cpu_runs: r.cpu_runs,
            end_ns: end,
            calls: r.calls,
        }
    }

    /// The spans of a thread that overlap `[from, to)`, in time order.
    pub fn spans_in(&self, thread: ThreadIdx, from: u64, to: u64) -> &[Span] {
        let spans = &self.spans[thread.ix()];
        let first = spans.partition_point(|s| s.end_ns <= from);
        let last = first + spans[first..].partition_point(|s| s.start_ns < to);
        &spans[first..last]
    }

    /// Nanoseconds each thread other than `except` ran on any CPU during
    /// `[from, to)`, largest first (the idle task left out).
    pub fn ran_during(&self, from: u64, to: u64, except: ThreadIdx) -> Vec<(ThreadIdx, u64)> {
        let mut by: HashMap<ThreadIdx, u64, BuildFx> = HashMap::default();
        for runs in &self.cpu_runs {
            let first = runs.partition_point(|r| r.0 <= from).saturating_sub(1);
            for (k, &(start, thread)) in runs.iter().enumerate().skip(first) {
                if start >= to {
                    break;
                }
                let end = runs.get(k + 1).map_or(self.end_ns, |r| r.0);
                let overlap = end.min(to).saturating_sub(start.max(from));
                if let Some(t) = thread.filter(|&t| t != except) {
                    if overlap > 0 {
                        *by.entry(t).or_default() += overlap;
                    }
                }
            }
        }
        let mut out: Vec<(ThreadIdx, u64)> = by.into_iter().collect();
        out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        out
    }
}

/// A blocked interval that ended (woken, by a recorded wake-up or an unseen
/// one), as the views and detectors count waits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Wait {
    pub thread: ThreadIdx,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Where the thread blocked.
    pub stack: Option<StackIdx>,
    /// The thread that woke it; `None` when the waker was not a known
    /// thread (an interrupt on an idle CPU, or a wake-up the trace lost).
    pub waker: Option<ThreadIdx>,
    pub waker_stack: Option<StackIdx>,
}

/// Running, blocked and runnable time of one thread.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThreadTimes {
    pub running_ns: u64,
    pub blocked_ns: u64,
    pub runnable_ns: u64,
}

/// The replay summed up: every thread's times and every wait that ended, in
/// the order of their ends. Derived from [`ThreadStates`], never replayed
/// again, so `--waits` and the critical path agree on every thread.
#[derive(Debug, Clone, Default)]
pub struct Schedule {
    pub times: Vec<ThreadTimes>,
    pub waits: Vec<Wait>,
}

impl Schedule {
    /// Sums up the spans of a replay.
    pub fn from_states(states: &ThreadStates) -> Schedule {
        Schedule::within(states, 0, u64::MAX)
    }

    /// Sums up the parts of a replay's spans in `[from, to)` (`--from`/`--to`): a wait
    /// that overlaps the range counts with the part of it inside.
    pub fn within(states: &ThreadStates, from: u64, to: u64) -> Schedule {
        let mut times = vec![ThreadTimes::default(); states.spans.len()];
        let mut waits = Vec::new();
        for (i, spans) in states.spans.iter().enumerate() {
            let t = &mut times[i];
            let first = spans.partition_point(|s| s.end_ns <= from);
            for span in spans[first..].iter().take_while(|s| s.start_ns < to) {
                let (start_ns, end_ns) = (span.start_ns.max(from), span.end_ns.min(to));
                let len = end_ns.saturating_sub(start_ns);
                match span.state {
                    SpanState::Running { .. } => t.running_ns += len,
                    SpanState::Runnable => t.runnable_ns += len,
                    SpanState::Blocked(b) => {
                        t.blocked_ns += len;
                        if b.woken {
                            waits.push(Wait {
                                thread: ThreadIdx(i as u32),
                                start_ns,
                                end_ns,
                                stack: b.stack,
                                waker: b.waker,
                                waker_stack: b.waker_stack,
                            });
                        }
                    }
                }
            }
        }
        waits.sort_by_key(|w| (w.end_ns, w.thread));
        Schedule { times, waits }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TraceBuilder;

    #[test]
    fn preempted_is_runnable_and_sleeping_is_blocked() {
        assert!(is_runnable_state(0));
        assert!(is_runnable_state(0x100)); // TASK_REPORT_MAX: preempted
        assert!(!is_runnable_state(1));
        assert!(!is_runnable_state(2));
    }

    #[test]
    fn spans_follow_switches_and_wakeups() {
        let mut b = TraceBuilder::default();
        let a = b.process(10, "a");
        let w = b.process(20, "w");
        let blk = b.stack(&["schedule", "futex_wait"]);
        let wk = b.stack(&["futex_wake"]);
        b.switch(ms(1), 0, 20, 0, 10, None); // a in
        b.switch(ms(5), 0, 10, 1, 20, blk); // a blocks, w in
        b.waking(ms(9), 0, w, 10, wk);
        b.switch(ms(12), 0, 20, 0, 10, None); // w preempted, a in
        b.end(ms(20));
        let t = b.build();
        let s = ThreadStates::build(&t);
        let spans = &s.spans[a.ix()];
        assert_eq!(spans.len(), 4, "{spans:?}");
        assert_eq!(spans[0].state, SpanState::Running { cpu: 0 });
        match spans[1].state {
            SpanState::Blocked(bs) => {
                assert!(bs.woken);
                assert_eq!(bs.waker, Some(w));
                assert_eq!(bs.stack, blk);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!((spans[1].start_ns, spans[1].end_ns), (ms(5), ms(9)));
        assert_eq!(spans[2].state, SpanState::Runnable);
        assert_eq!((spans[3].start_ns, spans[3].end_ns), (ms(12), ms(20)));
        // w was running from its switch-in until preempted, then runnable.
        let ws = &s.spans[w.ix()];
        assert_eq!(ws[0].state, SpanState::Running { cpu: 0 });
        assert_eq!(ws[1].state, SpanState::Runnable);
        assert_eq!(s.ran_during(ms(5), ms(12), a), vec![(w, ms(7))]);
        assert_eq!(s.spans_in(a, ms(6), ms(10)).len(), 2);
    }

    #[test]
    fn a_wait_whose_wake_up_and_switch_in_were_unseen_ends_at_its_switch_away() {
        // perf records nothing of CPU 1's idle task here: a timeout there
        // leaves no wake-up and no switch in, only the thread's switch away
        // after it ran briefly. Counting from the CPU's last switch (to
        // idle) made the whole 500 ms timeout look like CPU time.
        let mut b = TraceBuilder::default();
        let a = b.process(10, "a");
        let futex = b.stack(&["schedule", "futex_wait"]);
        b.switch(ms(1), 1, 0, 0, 10, None); // a in
        b.switch(ms(5), 1, 10, 1, 0, futex); // a blocks, CPU 1 idle
        b.switch(ms(505), 1, 10, 1, 0, futex); // after its unseen timeout
        b.end(ms(600));
        let t = b.build();
        let s = ThreadStates::build(&t);
        let spans = &s.spans[a.ix()];
        match spans[1].state {
            SpanState::Blocked(bs) => assert!(bs.woken && bs.waker.is_none()),
            other => panic!("{other:?}"),
        }
        assert_eq!((spans[1].start_ns, spans[1].end_ns), (ms(5), ms(505)));
        let running: u64 = spans
            .iter()
            .filter(|sp| matches!(sp.state, SpanState::Running { .. }))
            .map(|sp| sp.end_ns - sp.start_ns)
            .sum();
        assert_eq!(running, ms(4));
    }

    #[test]
    fn a_damaged_records_cpu_of_billions_is_left_out_of_the_replay() {
        // A perf.data record's CPU is 32 bits; one damaged to 4 billions sized the
        // per-CPU state in tens of gigabytes, and the allocation aborted.
        let mut b = TraceBuilder::default();
        let a = b.process(10, "a");
        let futex = b.stack(&["schedule", "futex_wait"]);
        b.switch(ms(1), 1, 0, 0, 10, None); // a in
        b.switch(ms(3), u32::MAX - 1, 10, 1, 0, futex); // damaged
        b.switch(ms(5), 1, 10, 1, 0, futex); // a blocks
        b.end(ms(10));
        let t = b.build();
        let s = ThreadStates::build(&t);
        assert_eq!(s.cpu_runs.len(), 2, "CPUs 0 and 1");
        let spans = &s.spans[a.ix()];
        assert!(matches!(spans[0].state, SpanState::Running { .. }));
        assert_eq!((spans[0].start_ns, spans[0].end_ns), (ms(1), ms(5)));
    }

    #[test]
    fn a_wait_switched_in_without_a_wake_up_was_woken_by_nobody_seen() {
        // A timeout on an idle CPU, then the switch to the sleeper seen
        // (from another thread, not idle): the wait ended, unlike one the
        // trace's end cut, and the critical path treats it like a timeout.
        let mut b = TraceBuilder::default();
        let a = b.process(10, "a");
        b.process(20, "b");
        let futex = b.stack(&["schedule", "futex_wait"]);
        b.switch(ms(1), 1, 0, 0, 10, None);
        b.switch(ms(5), 1, 10, 1, 20, futex); // a blocks
        b.switch(ms(300), 1, 20, 1, 10, None); // a in, no wake-up seen
        b.switch(ms(301), 1, 10, 1, 0, futex); // a blocks again
        b.end(ms(600));
        let t = b.build();
        let s = ThreadStates::build(&t);
        let waits: Vec<BlockedSpan> = s.spans[a.ix()]
            .iter()
            .filter_map(|sp| match sp.state {
                SpanState::Blocked(bs) => Some(bs),
                _ => None,
            })
            .collect();
        assert_eq!(waits.len(), 2);
        assert!(waits[0].woken && waits[0].waker.is_none() && waits[0].waker_stack.is_none());
        assert!(!waits[1].woken, "cut by the trace's end");
    }

    fn ms(v: u64) -> u64 {
        v * 1_000_000
    }
}
