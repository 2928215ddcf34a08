//! The per-event columns of the interactive report: CPU samples, thread
//! state spans, page faults and syscalls, each as parallel arrays of small
//! integers (times in microseconds after the trace start, delta-encoded
//! where they come in order) so that the page can filter them by time and
//! thread itself. Faults are counted per (time bucket, thread, stack): a
//! build takes tens of thousands a second, too many to ship one by one.
//!
//! It does not render anything and keeps only what the selection keeps.

use std::collections::HashMap;

use slowlab_model::bundle::CapturedPath;
use slowlab_model::critical_path::WaitKind;
use slowlab_model::trace::{EventKind, StackIdx, ThreadIdx, Trace};
use slowlab_model::views::report_data::{
    FaultColumns, SampleColumns, SpanColumns, SyscallColumns, WaitNames,
};

use super::tables::Tables;
use crate::classify::{blocked_in, span_kind, EndedBy};
use crate::select::BuildFx;
use crate::states::{SpanState, ThreadStates};
use crate::syscalls::{error_of, fold_numbers, Call};

/// The longest a fault bucket may be, and the most fault rows shipped
/// before the buckets grow (a build faults ~40,000 times a second).
pub const FAULT_BUCKET_US: [i64; 4] = [1_000, 10_000, 100_000, 1_000_000];
pub const MAX_FAULT_ROWS: usize = 100_000;

/// What the converters share: the trace, its start, the time range kept
/// and the report's thread numbering (`None`: the thread is not shown).
pub struct Scope<'t> {
    pub trace: &'t Trace,
    pub start_ns: u64,
    pub from_ns: u64,
    pub to_ns: u64,
    pub thread_ix: Vec<Option<u32>>,
}

impl Scope<'_> {
    pub fn us(&self, ns: u64) -> i64 {
        (ns.saturating_sub(self.start_ns) / 1000) as i64
    }

    fn keep(&self, thread: ThreadIdx, ns: u64) -> Option<u32> {
        if ns < self.from_ns || ns >= self.to_ns {
            return None;
        }
        self.thread_ix.get(thread.ix()).copied().flatten()
    }

    fn process_comm(&self, thread: ThreadIdx) -> slowlab_model::trace::StrIdx {
        self.trace.thread_process(thread).comm
    }
}

pub fn samples(scope: &Scope, tables: &mut Tables) -> SampleColumns {
    let s = &scope.trace.samples;
    let mut out = SampleColumns::default();
    let mut last = 0;
    for i in 0..s.len() {
        let Some(th) = scope.keep(s.thread[i], s.time_ns[i]) else {
            continue;
        };
        let t = scope.us(s.time_ns[i]);
        out.t.push(t - last);
        last = t;
        out.thread.push(th);
        out.stack
            .push(tables.stack(scope.process_comm(s.thread[i]), s.stack[i]));
    }
    out
}

/// The state code of a span (see [`SpanColumns`]).
fn kind_code(kind: WaitKind) -> u8 {
    2 + WaitKind::ALL.iter().position(|&k| k == kind).unwrap_or(5) as u8
}

/// Spans of the shown threads clipped to the range; `order[i]` is the trace
/// thread shown as report thread i.
pub fn spans(
    scope: &Scope,
    states: &ThreadStates,
    order: &[ThreadIdx],
    tables: &mut Tables,
) -> (SpanColumns, WaitNames) {
    let trace = scope.trace;
    let mut out = SpanColumns::default();
    let mut names = WaitNames::default();
    let mut named: HashMap<u32, (), BuildFx> = HashMap::default();
    type KindKey = (Option<StackIdx>, Option<StackIdx>, u64, bool);
    let mut kinds: HashMap<KindKey, (u8, i32), BuildFx> = HashMap::default();
    for &thread in order {
        out.offset.push(out.gap.len() as u32);
        let comm = scope.process_comm(thread);
        let mut last_end = 0;
        for span in states.spans_in(thread, scope.from_ns, scope.to_ns) {
            let from = scope.us(span.start_ns.max(scope.from_ns));
            let to = scope.us(span.end_ns.min(scope.to_ns));
            if to <= from {
                continue;
            }
            let (state, stack, waker) = match span.state {
                SpanState::Running { .. } => (0, -1, -1),
                SpanState::Runnable => (1, -1, -1),
                SpanState::Blocked(b) => {
                    let key = (b.stack, b.waker_stack, b.task_state, b.woken);
                    let (code, interrupt) = *kinds.entry(key).or_insert_with(|| {
                        let wake = crate::classify::wake_context(&crate::classify::names(
                            trace,
                            b.waker_stack,
                        ));
                        let interrupt = match wake.interrupt {
                            Some(EndedBy::Interrupt) => -2,
                            Some(EndedBy::Timer) => -3,
                            Some(EndedBy::Device) => -4,
                            Some(EndedBy::Signal) | None => -1,
                        };
                        (kind_code(span_kind(trace, &b)), interrupt)
                    });
                    let node = tables.stack(comm, b.stack);
                    if named.insert(node, ()).is_none() {
                        let stack_names = crate::classify::names(trace, b.stack);
                        if let Some(f) = blocked_in(&stack_names) {
                            let f = tables.string(f);
                            names.stack.push(node);
                            names.name.push(f);
                        }
                    }
                    let waker = match b.waker {
                        _ if !b.woken => -1,
                        Some(w) => scope
                            .thread_ix
                            .get(w.ix())
                            .copied()
                            .flatten()
                            .map_or(-1, |i| i as i32),
                        None => interrupt,
                    };
                    (code, node as i32, waker)
                }
            };
            // Adjacent spans in one state (running on another CPU) merge.
            let n = out.gap.len();
            if n > out.offset[out.offset.len() - 1] as usize
                && state < 2
                && out.state[n - 1] == state
                && from == last_end
            {
                out.dur[n - 1] += to - from;
                last_end = to;
                continue;
            }
            out.gap.push(from - last_end);
            out.dur.push(to - from);
            out.state.push(state);
            out.stack.push(stack);
            out.waker.push(waker);
            last_end = to;
        }
    }
    out.offset.push(out.gap.len() as u32);
    (out, names)
}

pub fn faults(scope: &Scope, tables: &mut Tables) -> FaultColumns {
    // (thread, stack node, major) per event, then counted per bucket.
    let mut events: Vec<(i64, u32, u32, u8)> = Vec::new();
    for ev in &scope.trace.events {
        let major = match ev.kind {
            EventKind::PageFault { .. } => 0,
            EventKind::MajorFault { .. } => 1,
            _ => continue,
        };
        let Some(th) = scope.keep(ev.thread, ev.time_ns) else {
            continue;
        };
        let node = tables.stack(scope.process_comm(ev.thread), ev.stack);
        events.push((scope.us(ev.time_ns), th, node, major));
    }
    let mut bucket_us = FAULT_BUCKET_US[0];
    let mut rows: Vec<((i64, u32, u32, u8), u32)> = Vec::new();
    for &b in &FAULT_BUCKET_US {
        bucket_us = b;
        let mut index: HashMap<(i64, u32, u32, u8), usize, BuildFx> = HashMap::default();
        rows.clear();
        for &(t, th, node, major) in &events {
            let key = (t - t.rem_euclid(b), th, node, major);
            match index.get(&key) {
                Some(&i) => rows[i].1 += 1,
                None => {
                    index.insert(key, rows.len());
                    rows.push((key, 1));
                }
            }
        }
        if rows.len() <= MAX_FAULT_ROWS {
            break;
        }
    }
    rows.sort_by_key(|r| r.0);
    let mut out = FaultColumns {
        bucket_us,
        ..FaultColumns::default()
    };
    let mut last = 0;
    for ((t, th, node, major), count) in rows {
        out.t.push(t - last);
        last = t;
        out.thread.push(th);
        out.stack.push(node);
        out.count.push(count);
        out.major.push(major);
    }
    out
}

pub fn syscalls(
    scope: &Scope,
    calls: &[Call],
    captured: Option<&[CapturedPath]>,
    tables: &mut Tables,
) -> SyscallColumns {
    let trace = scope.trace;
    let mut calls: Vec<&Call> = calls.iter().collect();
    calls.sort_by_key(|c| c.enter_ns.or(c.exit_ns).unwrap_or(0));
    let mut out = SyscallColumns::default();
    let mut last = 0;
    for call in calls {
        let at = call.enter_ns.or(call.exit_ns).unwrap_or(0);
        let Some(th) = scope.keep(call.thread, at) else {
            continue;
        };
        let t = scope.us(at);
        out.t.push(t - last);
        last = t;
        out.thread.push(th);
        out.name.push(tables.trace_string(call.name));
        out.dur
            .push(call.duration_ns().map_or(-1, |d| (d / 1000) as i64));
        out.error.push(match call.ret.and_then(error_of) {
            Some(errno) => tables.string(&errno) as i32,
            None => -1,
        });
        let path = match (call.path, captured) {
            (Some(i), Some(cap)) => cap
                .get(i)
                .map_or(-1, |c| tables.string(&fold_numbers(&c.path)) as i32),
            _ => {
                if captured.is_some() && crate::syscalls::takes_path(trace.str(call.name)) {
                    out.uncaptured_paths += 1;
                }
                -1
            }
        };
        out.path.push(path);
    }
    out
}
