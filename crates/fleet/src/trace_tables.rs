//! The per-trace tables `samples`, `processes` and `waits`, aggregated
//! from a trace with the analysis slowlab already has: CPU samples counted
//! as `slowlab analyze` counts them (every sample, by thread and stack),
//! blocked time and waits from the replay of thread states
//! (`slowlab_analyze::states`, the spans of the critical path; waits
//! classified by `critical_path::classify`), faults from the fault events.
//! Does not write files; frames and stacks are `code_tables.rs`.

use std::collections::HashMap;

use arrow_array::RecordBatch;
use slowlab_analyze::classify::span_kind;
use slowlab_analyze::states::{SpanState, ThreadStates};
use slowlab_model::trace::{EventKind, ThreadIdx, Trace};

use crate::columns::{
    count, floats_opt, int32s, int64s, opt_int32s, opt_int64s, opt_strings, strings, timestamps,
};
use crate::schema::Table;
use crate::FleetError;

/// The value of `samples.kind` for CPU samples (weight: samples).
pub const KIND_CPU: &str = "cpu";
/// `samples.kind` of blocked time ended by a wake-up (weight: ns).
pub const KIND_OFFCPU: &str = "offcpu";
/// `samples.kind` of page faults (weight: faults).
pub const KIND_FAULT: &str = "fault";
/// `samples.kind` of the `major-faults` software event (weight: faults).
pub const KIND_MAJOR_FAULT: &str = "major_fault";

/// Rows of `samples`, `processes` and `waits` of the traces added so far.
#[derive(Default)]
pub struct TraceTables {
    samples: SampleRows,
    processes: ProcessRows,
    waits: WaitRows,
}

#[derive(Default)]
struct SampleRows {
    trace: Vec<String>,
    pid: Vec<i32>,
    tid: Vec<i32>,
    comm: Vec<String>,
    stack_id: Vec<Option<i64>>,
    kind: Vec<String>,
    weight: Vec<i64>,
    events: Vec<i64>,
}

#[derive(Default)]
struct ProcessRows {
    trace: Vec<String>,
    pid: Vec<i32>,
    ppid: Vec<Option<i32>>,
    comm: Vec<String>,
    start_time: Vec<Option<i64>>,
    exec_time: Vec<Option<i64>>,
    end_time: Vec<Option<i64>>,
    start_s: Vec<Option<f64>>,
    end_s: Vec<Option<f64>>,
    threads: Vec<i32>,
    cpu_samples: Vec<i64>,
}

#[derive(Default)]
struct WaitRows {
    trace: Vec<String>,
    pid: Vec<i32>,
    tid: Vec<i32>,
    comm: Vec<String>,
    waker_pid: Vec<Option<i32>>,
    waker_tid: Vec<Option<i32>>,
    waker_comm: Vec<Option<String>>,
    kind: Vec<String>,
    waits: Vec<i64>,
    total_ns: Vec<i64>,
    max_ns: Vec<i64>,
}

/// Weight and event count of one group of samples.
#[derive(Default, Clone, Copy)]
struct Weight {
    weight: u64,
    events: u64,
}

/// Total, count and longest of one group of waits.
#[derive(Default, Clone, Copy)]
struct WaitTotals {
    count: u64,
    total_ns: u64,
    max_ns: u64,
}

impl TraceTables {
    /// Adds the rows of `trace`, named `name` in the `trace` columns;
    /// `stack_ids` are the content ids of its stack nodes
    /// (`CodeTables::add_trace`). Returns the trace's CPU sample count.
    pub fn add_trace(
        &mut self,
        name: &str,
        trace: &Trace,
        states: &ThreadStates,
        stack_ids: &[i64],
    ) -> u64 {
        let stack = |s: Option<slowlab_model::trace::StackIdx>| {
            s.and_then(|s| stack_ids.get(s.ix()).copied())
        };
        let nthreads = trace.threads.len();
        // CPU: every sample, as `analyze`'s summary counts them.
        let mut cpu: HashMap<(u32, Option<i64>), Weight> = HashMap::new();
        let mut thread_samples = vec![0u64; nthreads];
        let s = &trace.samples;
        for i in 0..s.len() {
            let th = s.thread[i];
            if th.ix() >= nthreads {
                continue;
            }
            thread_samples[th.ix()] += 1;
            let w = cpu.entry((th.0, stack(s.stack[i]))).or_default();
            w.weight += 1;
            w.events += 1;
        }
        self.push_samples(name, trace, KIND_CPU, cpu);

        // Faults, by kind of event.
        let mut faults: HashMap<(u32, Option<i64>), Weight> = HashMap::new();
        let mut major: HashMap<(u32, Option<i64>), Weight> = HashMap::new();
        for ev in trace.events.iter().filter(|e| e.thread.ix() < nthreads) {
            let map = match ev.kind {
                EventKind::PageFault { .. } => &mut faults,
                EventKind::MajorFault { .. } => &mut major,
                _ => continue,
            };
            let w = map.entry((ev.thread.0, stack(ev.stack))).or_default();
            w.weight += 1;
            w.events += 1;
        }
        self.push_samples(name, trace, KIND_FAULT, faults);
        self.push_samples(name, trace, KIND_MAJOR_FAULT, major);

        // Blocked time and waits: the woken blocked spans of the replay.
        let has_switches = trace
            .events
            .iter()
            .any(|e| matches!(e.kind, EventKind::Switch { .. }));
        if has_switches {
            let mut offcpu: HashMap<(u32, Option<i64>), Weight> = HashMap::new();
            let mut waits: HashMap<(u32, Option<u32>, &'static str), WaitTotals> = HashMap::new();
            for (th, spans) in states.spans.iter().enumerate() {
                for span in spans {
                    let SpanState::Blocked(b) = span.state else {
                        continue;
                    };
                    if !b.woken {
                        continue;
                    }
                    let ns = span.end_ns.saturating_sub(span.start_ns);
                    let w = offcpu.entry((th as u32, stack(b.stack))).or_default();
                    w.weight += ns;
                    w.events += 1;
                    let waker = b.waker.filter(|w| w.ix() < nthreads).map(|w| w.0);
                    let kind = span_kind(trace, &b).as_str();
                    let t = waits.entry((th as u32, waker, kind)).or_default();
                    t.count += 1;
                    t.total_ns += ns;
                    t.max_ns = t.max_ns.max(ns);
                }
            }
            self.push_samples(name, trace, KIND_OFFCPU, offcpu);
            self.push_waits(name, trace, waits);
        }
        self.push_processes(name, trace, &thread_samples);
        s.len() as u64
    }

    fn push_samples(
        &mut self,
        name: &str,
        trace: &Trace,
        kind: &str,
        groups: HashMap<(u32, Option<i64>), Weight>,
    ) {
        let mut groups: Vec<_> = groups.into_iter().collect();
        // Sorted, so a trace exports to the same files every time.
        groups.sort_unstable_by_key(|&((th, stack), _)| (th, stack));
        let r = &mut self.samples;
        for ((th, stack), w) in groups {
            let thread = &trace.threads[th as usize];
            r.trace.push(name.to_owned());
            r.pid.push(process_pid(trace, ThreadIdx(th)));
            r.tid.push(thread.tid);
            r.comm.push(trace.str(thread.comm).to_owned());
            r.stack_id.push(stack);
            r.kind.push(kind.to_owned());
            r.weight.push(count(w.weight));
            r.events.push(count(w.events));
        }
    }

    fn push_waits(
        &mut self,
        name: &str,
        trace: &Trace,
        groups: HashMap<(u32, Option<u32>, &'static str), WaitTotals>,
    ) {
        let mut groups: Vec<_> = groups.into_iter().collect();
        groups.sort_unstable_by_key(|&(key, _)| key);
        let r = &mut self.waits;
        for ((th, waker, kind), t) in groups {
            let thread = &trace.threads[th as usize];
            r.trace.push(name.to_owned());
            r.pid.push(process_pid(trace, ThreadIdx(th)));
            r.tid.push(thread.tid);
            r.comm.push(trace.str(thread.comm).to_owned());
            let waker_thread = waker.map(|w| &trace.threads[w as usize]);
            r.waker_pid
                .push(waker.map(|w| process_pid(trace, ThreadIdx(w))));
            r.waker_tid.push(waker_thread.map(|t| t.tid));
            r.waker_comm
                .push(waker_thread.map(|t| trace.str(t.comm).to_owned()));
            r.kind.push(kind.to_owned());
            r.waits.push(count(t.count));
            r.total_ns.push(count(t.total_ns));
            r.max_ns.push(count(t.max_ns));
        }
    }

    fn push_processes(&mut self, name: &str, trace: &Trace, thread_samples: &[u64]) {
        let meta = &trace.meta;
        let wall_us = |t: Option<u64>| t.and_then(|t| meta.unix_ns(t)).map(|ns| count(ns / 1000));
        let offset_s = |t: Option<u64>| t.map(|t| t.saturating_sub(meta.start_ns) as f64 / 1e9);
        let r = &mut self.processes;
        for p in &trace.processes {
            let samples: u64 = p
                .threads
                .iter()
                .filter_map(|t| thread_samples.get(t.ix()))
                .sum();
            r.trace.push(name.to_owned());
            r.pid.push(p.pid);
            r.ppid.push(p.ppid);
            r.comm.push(trace.str(p.comm).to_owned());
            r.start_time.push(wall_us(p.start_ns));
            r.exec_time.push(wall_us(p.exec_ns));
            r.end_time.push(wall_us(p.end_ns));
            r.start_s.push(offset_s(p.start_ns));
            r.end_s.push(offset_s(p.end_ns));
            r.threads
                .push(i32::try_from(p.threads.len()).unwrap_or(i32::MAX));
            r.cpu_samples.push(count(samples));
        }
    }

    /// The `samples`, `processes` and `waits` tables.
    pub fn into_batches(self) -> Result<[RecordBatch; 3], FleetError> {
        let s = self.samples;
        let samples = RecordBatch::try_new(
            Table::Samples.schema(),
            vec![
                strings(s.trace),
                int32s(s.pid),
                int32s(s.tid),
                strings(s.comm),
                opt_int64s(s.stack_id),
                strings(s.kind),
                int64s(s.weight),
                int64s(s.events),
            ],
        )?;
        let p = self.processes;
        let processes = RecordBatch::try_new(
            Table::Processes.schema(),
            vec![
                strings(p.trace),
                int32s(p.pid),
                opt_int32s(p.ppid),
                strings(p.comm),
                timestamps(p.start_time),
                timestamps(p.exec_time),
                timestamps(p.end_time),
                floats_opt(p.start_s),
                floats_opt(p.end_s),
                int32s(p.threads),
                int64s(p.cpu_samples),
            ],
        )?;
        let w = self.waits;
        let waits = RecordBatch::try_new(
            Table::Waits.schema(),
            vec![
                strings(w.trace),
                int32s(w.pid),
                int32s(w.tid),
                strings(w.comm),
                opt_int32s(w.waker_pid),
                opt_int32s(w.waker_tid),
                opt_strings(w.waker_comm),
                strings(w.kind),
                int64s(w.waits),
                int64s(w.total_ns),
                int64s(w.max_ns),
            ],
        )?;
        Ok([samples, processes, waits])
    }
}

/// The pid of a thread's process (the thread's tid if the process row is
/// missing).
fn process_pid(trace: &Trace, thread: ThreadIdx) -> i32 {
    let th = &trace.threads[thread.ix()];
    trace
        .processes
        .get(th.process.ix())
        .map_or(th.tid, |p| p.pid)
}
