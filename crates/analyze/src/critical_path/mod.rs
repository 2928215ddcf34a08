//! The critical path of one process: why its wall time went where it went.
//!
//! Its main thread's time, from its start (fork or exec) to its end, is cut
//! into segments: on a CPU, runnable (ready, not running), or blocked. A
//! blocked stretch that another thread ended (the waker of `sched_waking`)
//! is replaced by what the waker did over the same stretch, recursively —
//! the readying-thread chain of WPA's CPU Usage (Precise), Perfetto's thread
//! critical path, and wPerf's "cascaded re-distribution" of a wait to its
//! waker. The chain ends in CPU work, a runnable stretch, or a wait nobody
//! in the trace ended: one ended by a timer or a device (interrupt context),
//! one still open when the trace ends, or one the walk may not follow:
//! - a waker already on the chain (a cycle: A waits for B waits for A);
//! - the depth bound ([`MAX_DEPTH`] followed waits);
//! - time when the waker's own state is unknown (before its first
//!   scheduler event), or when the waker was itself blocked for a reason
//!   the trace does not explain (`other`: an idle kernel worker that an
//!   interrupt woke), stays with the waiter, as its blocked kind, naming
//!   the waker in `woken_by`.
//!
//! How a wait ended does not decide whom it is credited to when what ended
//! it is not what the thread waited for: a signal from another thread (the
//! sender is named in `woken_by`, `ended_by` `signal`, never followed), the
//! trace's end, or — for a wait for a child — a timer or an unseen wake-up.
//! Such a wait is followed into its owner (`Walker::owner`): the child
//! that ran most (a `wait4`, `waitid`, `sigsuspend` or `pause`), else the
//! thread that ended the thread's last wait on the same stack (a pipe's
//! writer, a lock's holder), else for a lock the busiest other thread of
//! its process, else the busiest child.
//!
//! A poll loop — a timed wait on a lock, a pipe or a poll that times out
//! (a timer ends it, or nothing in the trace: perf misses wake-ups raised
//! on an idle CPU) and waits again on the same stack, until a thread ends
//! one — counts as one wait for that thread, followed over the whole loop;
//! a loop ends at the first wait a thread ended, so each waker keeps its
//! own loop, and a loop that a signal or the trace's end ends is one wait
//! for its owner. A loop (or a lone timed wait) whose last time-out raced
//! with another thread's wake of its futex word — the wake came as the
//! timer fired, too late to wake it, and the thread went on — is one wait
//! for that thread too.
//!
//! Who killed the root or a process it started is `killed.rs`; which
//! process is the root, its tree and its window, `root.rs`.
//!
//! Time of the root thread itself with no scheduler event at all (before
//! its first one) is counted as blocked `other` and reported as
//! `unknown_s`. The segments' durations add up to the wall time exactly.
//! Pure: reads the trace and its replayed states ([`ThreadStates`]).

mod killed;
mod owner;
mod root;
mod summary;

use std::collections::HashMap;

use slowlab_model::critical_path::{
    Breakdown, CriticalPath, Killed, PathRoot, PathThread, Resource, Segment, SegmentState,
    WaitKind,
};
use slowlab_model::trace::{FuncIdx, ProcIdx, StackIdx, ThreadIdx, Trace};

use crate::classify::{self, wake_context, EndedBy};
use crate::locks::Locks;
use crate::resources::{self, wait_on, WaitOn};
use crate::select::BuildFx;
use crate::states::{BlockedSpan, SpanState, ThreadStates};
use crate::unnamed;

use root::{children_by_pid, main_thread};
pub use root::{command_root, default_root, process_by_pid, process_tree, window};
pub use summary::{describe_part, parts, waited_for, while_waited};

/// Followed waits at most, from the root thread.
pub const MAX_DEPTH: u32 = 8;

/// Running time between two timed-out waits of a poll loop, at most.
pub const MAX_POLL_GAP_NS: u64 = 2_000_000;

/// How long before a timer ended a wait another thread's wake of its word
/// may have been entered and still have come too late to wake it (the
/// way from the syscall's entry to the word's wait queue).
pub const RACE_SLACK_NS: u64 = 20_000;

/// Why a path cannot be computed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PathError {
    #[error("no process with pid {0} in the trace; `slowlab analyze FILE --procs` lists them")]
    NoSuchPid(i32),
    #[error("no process started during the trace; give one with --root PID (`slowlab analyze FILE --procs` lists them)")]
    NoRoot,
    #[error("the trace has no scheduler events (sched_switch, or CSwitch on Windows): record it with `slowlab record`, or on Windows with WPR and probes/windows/slowlab.wprp, which add them")]
    NoSchedEvents,
}

/// A stretch of the walk before merging and naming.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Raw {
    from: u64,
    to: u64,
    thread: ThreadIdx,
    state: SegmentState,
    kind: Option<WaitKind>,
    woken_by: Option<ThreadIdx>,
    ended_by: Option<EndedBy>,
    blocked_stack: Option<StackIdx>,
    depth: u32,
    via: Option<Via>,
    unknown: bool,
    /// For blocked stretches: what the thread waited for.
    resource: Option<WaitOn>,
}

/// The wait followed into a thread: its kind, the thread that waited, and
/// what it waited for.
type Via = (WaitKind, ThreadIdx, Option<WaitOn>);

/// A wait judged once: its kind, whether the walk may follow its waker,
/// and what ended it.
struct Judged {
    kind: WaitKind,
    follow: Option<ThreadIdx>,
    ended_by: Option<EndedBy>,
    /// The thread the wake-up was recorded on, followed or not (a signal's
    /// sender is named, not followed).
    waker: Option<ThreadIdx>,
}

type JudgeKey = (Option<StackIdx>, Option<StackIdx>, u64, bool);

/// Spans looked back through for the thread that ended an earlier wait on
/// the same stack (the writer of a pipe, the holder of a lock).
const OWNER_LOOKBACK: usize = 512;

struct Walker<'a> {
    trace: &'a Trace,
    states: &'a ThreadStates,
    out: Vec<Raw>,
    chain: Vec<ThreadIdx>,
    /// (blocking stack, waker stack, task state, woken) → (kind, interrupt
    /// that woke it): most waits repeat, so each is judged once.
    judged: HashMap<JudgeKey, (WaitKind, Option<EndedBy>), BuildFx>,
    /// Per process (by pid): its children's processes, in start order.
    children: HashMap<i32, Vec<ProcIdx>, BuildFx>,
    /// The trace's futex wakes by word, when first needed
    /// ([`Walker::raced_waker`]).
    futex_wakes: Option<FutexWakes>,
}

/// Futex wakes by word (process, address): when each was entered and by
/// which thread, in time order.
type FutexWakes = HashMap<crate::locks::WordKey, Vec<(u64, ThreadIdx)>, BuildFx>;

impl Walker<'_> {
    fn judge(&mut self, b: &BlockedSpan) -> Judged {
        let trace = self.trace;
        let (kind, wake_interrupt) = *self
            .judged
            .entry((b.stack, b.waker_stack, b.task_state, b.woken))
            .or_insert_with(|| {
                let wake = wake_context(&classify::names(trace, b.waker_stack));
                let ended = match wake.interrupt {
                    Some(e) => Some(e),
                    None if wake.signal => Some(EndedBy::Signal),
                    None => None,
                };
                (classify::span_kind(trace, b), ended)
            });
        let interrupt = if b.woken { wake_interrupt } else { None };
        let follow = match (b.woken, interrupt, b.waker) {
            (true, None, Some(w)) => Some(w),
            _ => None,
        };
        let ended_by = match (b.woken, interrupt, b.waker) {
            (true, Some(e), _) => Some(e),
            // Woken from the idle task: an interrupt on an idle CPU.
            (true, None, None) => Some(EndedBy::Interrupt),
            _ => None,
        };
        Judged {
            kind,
            follow,
            ended_by,
            waker: if b.woken { b.waker } else { None },
        }
    }

    /// The kind of a wait from its blocking stack alone (not from what
    /// ended it).
    fn own_kind(&self, b: &BlockedSpan) -> WaitKind {
        classify::wait_kind(
            &classify::names(self.trace, b.stack),
            b.task_state,
            classify::NO_WAKE,
        )
    }

    /// Whether a wait ended by something other than what it waited for:
    /// a signal from another thread, a timer or an unknown interrupt (a
    /// time-out, or a wake-up perf lost), or the trace's end.
    fn not_ended_by_its_resource(j: &Judged, b: &BlockedSpan) -> bool {
        !b.woken
            || matches!(
                j.ended_by,
                Some(EndedBy::Signal | EndedBy::Timer | EndedBy::Interrupt)
            )
    }

    /// Cuts `thread`'s `[from, to)` into raw segments, following waits.
    fn walk(&mut self, thread: ThreadIdx, from: u64, to: u64, depth: u32, via: Option<Via>) {
        let states = self.states;
        let spans = states.spans_in(thread, from, to);
        let first_span = states.spans[thread.ix()].partition_point(|s| s.end_ns <= from);
        let mut t = from;
        let mut k = 0;
        while k < spans.len() {
            let span = &spans[k];
            let a = span.start_ns.max(from);
            let mut b = span.end_ns.min(to);
            if a > t {
                self.gap(thread, t, a, depth, via);
            }
            let base = Raw {
                from: a,
                to: b,
                thread,
                state: SegmentState::Cpu,
                kind: None,
                woken_by: None,
                ended_by: None,
                blocked_stack: None,
                depth,
                via,
                unknown: false,
                resource: None,
            };
            let may_follow = |w: &ThreadIdx, chain: &[ThreadIdx]| {
                *w != thread && depth < MAX_DEPTH && !chain.contains(w)
            };
            match span.state {
                SpanState::Running { .. } => self.out.push(base),
                SpanState::Runnable => self.out.push(Raw {
                    state: SegmentState::Runnable,
                    ..base
                }),
                SpanState::Blocked(blocked) => {
                    let j = self.judge(&blocked);
                    // The span's index in all the thread's spans.
                    let at = first_span + k;
                    let polled = match self.poll_loop(thread, spans, k) {
                        Some((last, Some(w), kind)) => Some((last, w, kind)),
                        Some((last, None, _)) => {
                            let end = spans[last].end_ns.min(to);
                            self.owner(thread, at, &blocked, (a, end), false)
                                .map(|(w, kind)| (last, w, kind))
                        }
                        None => None,
                    }
                    .filter(|(_, w, _)| may_follow(w, &self.chain));
                    let unexplained = Self::not_ended_by_its_resource(&j, &blocked);
                    let on = |span: &crate::states::Span, holder: Option<ThreadIdx>| {
                        let SpanState::Blocked(bs) = span.state else {
                            return None;
                        };
                        let mut r = wait_on(self.trace, states, thread, &bs, span.start_ns);
                        if holder.is_some() {
                            r.holder = holder;
                        }
                        Some(r)
                    };
                    if let Some((last, w, kind)) = polled {
                        // A timed wait that timed out and waited again until
                        // a thread ended it (or a signal, or the end): one
                        // wait for that thread, or for what it waited for.
                        b = spans[last].end_ns.min(to);
                        let res = on(&spans[last], Some(w));
                        k = last;
                        self.chain.push(thread);
                        self.walk(w, a, b, depth + 1, Some((kind, thread, res)));
                        self.chain.pop();
                    } else if let Some(w) = j.follow.filter(|w| may_follow(w, &self.chain)) {
                        let res = on(span, Some(w));
                        self.chain.push(thread);
                        self.walk(w, a, b, depth + 1, Some((j.kind, thread, res)));
                        self.chain.pop();
                    } else if let Some((w, kind)) = unexplained
                        .then(|| {
                            let timed_out = blocked.woken && j.ended_by != Some(EndedBy::Signal);
                            self.owner(thread, at, &blocked, (a, b), timed_out)
                        })
                        .flatten()
                        .filter(|(w, _)| may_follow(w, &self.chain))
                    {
                        // Ended by a signal, a time-out or the trace's end:
                        // the path follows what the thread waited for.
                        let res = on(span, Some(w));
                        self.chain.push(thread);
                        self.walk(w, a, b, depth + 1, Some((kind, thread, res)));
                        self.chain.pop();
                    } else if let (Some((via_kind, waiter, via_res)), WaitKind::Other) =
                        (via, j.kind)
                    {
                        // The waker was itself waiting for nothing the trace
                        // explains (an idle kernel worker woken by an
                        // interrupt): the waiter's own kind says more.
                        self.out.push(Raw {
                            thread: waiter,
                            state: SegmentState::Blocked,
                            kind: Some(via_kind),
                            woken_by: Some(thread),
                            depth: depth - 1,
                            via: None,
                            resource: via_res,
                            ..base
                        });
                    } else {
                        self.out.push(Raw {
                            state: SegmentState::Blocked,
                            kind: Some(j.kind),
                            woken_by: j
                                .follow
                                .or(j.waker.filter(|_| j.ended_by == Some(EndedBy::Signal))),
                            ended_by: j.ended_by,
                            blocked_stack: blocked.stack,
                            resource: on(span, None),
                            ..base
                        });
                    }
                }
            }
            t = t.max(b);
            k += 1;
        }
        if t < to {
            self.gap(thread, t, to, depth, via);
        }
    }

    /// Time with no known state: the waiter's wait (when following), else
    /// unknown blocked time of the root.
    fn gap(&mut self, thread: ThreadIdx, from: u64, to: u64, depth: u32, via: Option<Via>) {
        let raw = match via {
            Some((kind, waiter, resource)) => Raw {
                from,
                to,
                thread: waiter,
                state: SegmentState::Blocked,
                kind: Some(kind),
                woken_by: Some(thread),
                ended_by: None,
                blocked_stack: None,
                depth: depth - 1,
                via: None,
                unknown: false,
                resource,
            },
            None => Raw {
                from,
                to,
                thread,
                state: SegmentState::Blocked,
                kind: Some(WaitKind::Other),
                woken_by: None,
                ended_by: None,
                blocked_stack: None,
                depth,
                via: None,
                unknown: true,
                resource: None,
            },
        };
        self.out.push(raw);
    }
}

use resources::path_thread;

/// Merges neighbours that say the same thing.
fn merge(raws: Vec<Raw>) -> Vec<Raw> {
    let mut out: Vec<Raw> = Vec::with_capacity(raws.len());
    for r in raws {
        if r.to <= r.from {
            continue;
        }
        if let Some(last) = out.last_mut() {
            let same = last.to == r.from
                && Raw {
                    from: 0,
                    to: 0,
                    ..*last
                } == Raw {
                    from: 0,
                    to: 0,
                    ..r
                };
            if same {
                last.to = r.to;
                continue;
            }
        }
        out.push(r);
    }
    out
}

/// Samples of `thread` in `[from, to)` by leaf function, most first. A
/// leaf without a symbol in a binary is named by its binary
/// ("liblzma.so.5 (no symbols)", see [`crate::unnamed`]), so that the
/// answer does not name the first function that has one instead; one in no
/// binary (anonymous memory) is left out.
fn leaf_functions(
    trace: &Trace,
    samples_of: &[Vec<u32>],
    thread: ThreadIdx,
    from: u64,
    to: u64,
) -> Vec<(String, u32)> {
    let idx = &samples_of[thread.ix()];
    let times = &trace.samples.time_ns;
    let first = idx.partition_point(|&i| times[i as usize] < from);
    let mut counts: HashMap<u32, u32, BuildFx> = HashMap::default();
    for &i in &idx[first..] {
        if times[i as usize] >= to {
            break;
        }
        let Some(frame) = trace.stack_frames(trace.samples.stack[i as usize]).next() else {
            continue;
        };
        *counts.entry(trace.frame_function(frame).0).or_default() += 1;
    }
    let mut by_label: HashMap<String, u32, BuildFx> = HashMap::default();
    for (f, n) in counts {
        let f = FuncIdx(f);
        if trace.function_name(f) == unnamed::UNKNOWN && unnamed::unnamed_binary(trace, f).is_none()
        {
            continue;
        }
        *by_label
            .entry(unnamed::label(trace, f).into_owned())
            .or_default() += n;
    }
    let mut out: Vec<(String, u32)> = by_label.into_iter().collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

/// The critical path of `root` over its wall time.
pub fn critical_path(
    trace: &Trace,
    states: &ThreadStates,
    root: ProcIdx,
) -> Result<CriticalPath, PathError> {
    critical_path_with(trace, states, &Locks::build(trace, states), root)
}

/// [`critical_path`] with the trace's [`Locks`] already found (segments
/// say which lock their thread held).
pub fn critical_path_with(
    trace: &Trace,
    states: &ThreadStates,
    locks: &Locks,
    root: ProcIdx,
) -> Result<CriticalPath, PathError> {
    if states.cpu_runs.iter().all(Vec::is_empty) {
        return Err(PathError::NoSchedEvents);
    }
    let root_proc = root;
    let thread = main_thread(trace, root).ok_or(PathError::NoRoot)?;
    let (start, end) = window(trace, root);
    let mut w = Walker {
        trace,
        states,
        out: Vec::new(),
        chain: Vec::new(),
        judged: HashMap::default(),
        children: children_by_pid(trace),
        futex_wakes: None,
    };
    w.walk(thread, start, end, 0, None);
    let raws = merge(w.out);

    let mut samples_of: Vec<Vec<u32>> = vec![Vec::new(); trace.threads.len()];
    for (i, t) in trace.samples.thread.iter().enumerate() {
        if let Some(v) = samples_of.get_mut(t.ix()) {
            v.push(i as u32);
        }
    }
    let secs = |ns: u64| (ns.saturating_sub(start)) as f64 / 1e9;
    let mut breakdown = Breakdown::default();
    let mut unknown_ns = 0;
    let mut segments = Vec::with_capacity(raws.len());
    let mut weighted: Vec<(usize, Option<String>, f64)> = Vec::new();
    for r in &raws {
        let len = (r.to - r.from) as f64 / 1e9;
        match r.state {
            SegmentState::Cpu => breakdown.cpu += len,
            SegmentState::Runnable => breakdown.runnable += len,
            SegmentState::Blocked => breakdown
                .blocked
                .add(r.kind.unwrap_or(WaitKind::Other), len),
        }
        if r.unknown {
            unknown_ns += r.to - r.from;
        }
        let th = path_thread(trace, r.thread);
        let functions = if r.state == SegmentState::Cpu {
            leaf_functions(trace, &samples_of, r.thread, r.from, r.to)
        } else {
            Vec::new()
        };
        // For the groups: the segment's time shared among its functions.
        let total: u32 = functions.iter().map(|f| f.1).sum();
        if total == 0 {
            weighted.push((segments.len(), None, 1.0));
        }
        for (name, n) in &functions {
            weighted.push((segments.len(), Some(name.clone()), *n as f64 / total as f64));
        }
        segments.push(Segment {
            from_s: secs(r.from),
            to_s: secs(r.to),
            pid: th.pid,
            tid: th.tid,
            comm: th.comm,
            state: r.state,
            kind: r.kind,
            top_function: functions.first().map(|f| f.0.clone()),
            woken_by: r.woken_by.map(|t| path_thread(trace, t)),
            ended_by: r.ended_by.map(|e| e.as_str().to_string()),
            ran_instead: (r.state == SegmentState::Runnable)
                .then(|| states.ran_during(r.from, r.to, r.thread).first().copied())
                .flatten()
                .map(|(t, _)| path_thread(trace, t)),
            blocked_in: (r.state == SegmentState::Blocked)
                .then(|| {
                    classify::blocked_in(&classify::names(trace, r.blocked_stack))
                        .map(str::to_string)
                })
                .flatten(),
            depth: r.depth,
            via: r.via.map(|v| v.0),
            waiter: r.via.map(|v| path_thread(trace, v.1)),
            resource: r.resource.map(|w| resources::resource(trace, &w)),
            via_resource: r
                .via
                .and_then(|v| v.2)
                .map(|w| resources::resource(trace, &w)),
            holding: locks.held_by(r.thread, r.from, r.to).map(|l| Resource {
                kind: l.kind,
                address: Some(l.address()),
                name: None,
                holder: Some(path_thread(trace, r.thread)),
            }),
            unknown: r.unknown,
        });
    }
    let wall_s = (end - start) as f64 / 1e9;
    let root_th = &trace.threads[thread.ix()];
    let root = PathRoot {
        pid: trace.processes[root.ix()].pid,
        tid: root_th.tid,
        comm: trace.str(trace.processes[root.ix()].comm).to_string(),
        start_s: start.saturating_sub(trace.meta.start_ns) as f64 / 1e9,
    };
    // Each segment's share per function, up to `until_s` (seconds after
    // the start).
    let shares = |until_s: f64| -> Vec<Segment> {
        weighted
            .iter()
            .map(|(i, function, share)| {
                let s = &segments[*i];
                Segment {
                    from_s: 0.0,
                    to_s: (s.to_s.min(until_s) - s.from_s).max(0.0) * share,
                    top_function: function.clone(),
                    ..s.clone()
                }
            })
            .collect()
    };
    let parts = parts(&shares(f64::INFINITY), wall_s);
    let tree = process_tree(trace, root_proc);
    let killed = killed::find(trace, &tree, start, end).map(|k| Killed {
        process: main_thread(trace, k.process)
            .map(|t| path_thread(trace, t))
            .unwrap_or_else(|| PathThread {
                pid: trace.processes[k.process.ix()].pid,
                tid: trace.processes[k.process.ix()].pid,
                comm: trace.str(trace.processes[k.process.ix()].comm).to_string(),
            }),
        by: path_thread(trace, k.by),
        signal: k.signal.map(slowlab_model::signals::name),
        at_s: secs(k.at_ns),
    });
    let summary = match &killed {
        Some(k) if k.at_s > 0.0 => {
            let before = summary::parts(&shares(k.at_s), k.at_s);
            summary::sentence(&root, wall_s, &before, Some(k))
        }
        _ => summary::sentence(&root, wall_s, &parts, None),
    };
    Ok(CriticalPath {
        wall_s,
        root,
        breakdown,
        segments,
        parts,
        summary,
        unknown_s: unknown_ns as f64 / 1e9,
        killed,
    })
}

#[cfg(test)]
mod signal_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod time_out_tests;
