//! Everything the interactive `report.html` shows, as one serializable
//! value: the trace's processes and threads, its CPU samples, thread state
//! spans, page faults and syscalls as compact columns (see `events` and
//! `tables`), the critical path with its segments placed on the trace's
//! clock and its threads, the findings each with the time range and
//! threads they are about, and the locks waited on (see `locks`).
//!
//! Times are microseconds after the trace start. The page filters by time
//! range and thread itself, so per-event data is kept here, not views.
//! Pure: reads the trace and what was computed from it (the replay and the
//! paired syscalls of a [`Context`]); renders nothing
//! (`slowlab_report::interactive` does). Commands build the page through
//! [`crate::analysis::Analysis::report_data`], the one builder of it.

mod events;
mod locks;
pub mod tables;

use slowlab_model::critical_path::{CriticalPath, SegmentState};
use slowlab_model::findings::Finding;
use slowlab_model::trace::{ProcIdx, ThreadIdx, Trace};

pub use events::{FAULT_BUCKET_US, MAX_FAULT_ROWS};
pub use slowlab_model::views::report_data::{
    FaultColumns, FindingData, FuncColumns, LockData, LockHolder, LockWaitData, LockWaiter, Meta,
    PathData, ProcessColumns, ReportData, SampleColumns, SpanColumns, StackColumns, SyscallColumns,
    ThreadColumns, WaitNames, FORMAT_VERSION, MAX_LOCKS, MAX_LOCK_WAITS,
};

use crate::detect::Context;
use crate::select::Selection;
use crate::states::TidIndex;
use events::Scope;
use tables::Tables;

/// What the report is made from besides the trace.
pub struct Inputs<'a> {
    pub title: &'a str,
    pub command: &'a [String],
    pub critical_path: Option<&'a CriticalPath>,
    pub findings: &'a [Finding],
    /// The diagnosed command's process tree (shown first); may be empty.
    pub command_processes: &'a [ProcIdx],
    /// Which threads and what time the report covers.
    pub selection: &'a Selection,
    /// Filters as the user gave them, for the page's header.
    pub filter_text: &'a [String],
    pub warnings: &'a [String],
}

/// Assembles the page's data from the context's trace, replay and
/// syscalls.
pub fn report_data(cx: &Context, inputs: &Inputs) -> ReportData {
    let derived = Derived {
        context: || cx,
        critical_path: || Ok(inputs.critical_path),
        findings: || inputs.findings,
    };
    report_data_with(cx.trace, inputs, derived)
}

/// What the page is made from besides the trace, each asked for only where
/// the page reaches it, in this order: the replay (after the samples), the
/// root's critical path (or why there is none: a warning of the page), the
/// findings (last, once every table is made). So the replay, the path and
/// the detectors can be computed on another thread meanwhile
/// ([`crate::analysis::Analysis::report_data`]).
pub struct Derived<C, P, F> {
    pub context: C,
    pub critical_path: P,
    pub findings: F,
}

/// [`report_data`] with the replay, the path and the findings (not those of
/// `inputs`) asked of `derived`.
pub fn report_data_with<'x, 'c: 'x>(
    trace: &Trace,
    inputs: &Inputs,
    derived: Derived<
        impl FnOnce() -> &'x Context<'c>,
        impl FnOnce() -> Result<Option<&'x CriticalPath>, String>,
        impl FnOnce() -> &'x [Finding],
    >,
) -> ReportData {
    let start_ns = trace.meta.start_ns;
    let (from_ns, to_ns) = inputs.selection.time_range_ns(trace);
    let mask = inputs.selection.thread_mask(trace);
    let mut tables = Tables::new(trace);

    // Processes: those with a kept thread; threads: the kept ones.
    let in_tree = |p: ProcIdx| inputs.command_processes.contains(&p);
    let mut processes = ProcessColumns::default();
    let mut threads = ThreadColumns::default();
    let mut thread_ix: Vec<Option<u32>> = vec![None; trace.threads.len()];
    let mut order: Vec<ThreadIdx> = Vec::new();
    let us = |ns: u64| (ns.saturating_sub(start_ns) / 1000) as i64;
    let opt_us = |ns: Option<u64>| ns.map_or(-1, us);
    for (pi, p) in trace.processes.iter().enumerate() {
        let kept: Vec<ThreadIdx> = p
            .threads
            .iter()
            .copied()
            .filter(|t| mask.get(t.ix()).copied().unwrap_or(false))
            .collect();
        if kept.is_empty() || !overlaps(p.start_ns.or(p.exec_ns), p.end_ns, from_ns, to_ns) {
            continue;
        }
        let proc_ix = processes.pid.len() as u32;
        processes.pid.push(p.pid);
        processes.ppid.push(p.ppid.unwrap_or(-1));
        processes.comm.push(tables.trace_string(p.comm));
        processes.start.push(opt_us(p.start_ns));
        processes.exec.push(opt_us(p.exec_ns));
        processes.end.push(opt_us(p.end_ns));
        processes.tree.push(u8::from(in_tree(ProcIdx(pi as u32))));
        for t in kept {
            let th = &trace.threads[t.ix()];
            thread_ix[t.ix()] = Some(threads.tid.len() as u32);
            order.push(t);
            threads.tid.push(th.tid);
            threads.process.push(proc_ix);
            threads.comm.push(tables.trace_string(th.comm));
            threads.start.push(opt_us(th.start_ns));
            threads.end.push(opt_us(th.end_ns));
        }
    }
    let scope = Scope {
        trace,
        start_ns,
        from_ns,
        to_ns,
        thread_ix,
    };
    let samples = events::samples(&scope, &mut tables);
    let cx = (derived.context)();
    let states = &cx.states;
    let (spans, wait_names) = events::spans(&scope, states, &order, &mut tables);
    let faults = events::faults(&scope, &mut tables);
    let syscalls = events::syscalls(&scope, cx.calls(), cx.captured, &mut tables);
    let (critical_path, no_path) = match (derived.critical_path)() {
        Ok(cp) => (cp.map(|cp| path_data(trace, &scope, cp, &mut tables)), None),
        Err(why) => (None, Some(format!("no critical path: {why}"))),
    };
    let locks = locks::locks(&scope, cx.locks());
    let findings = (derived.findings)()
        .iter()
        .map(|f| finding_data(trace, &scope, f, inputs.command_processes))
        .collect();

    let sample_us = match trace.samples.period.mean() {
        Some(ns) => ns / 1000.0,
        None => trace
            .meta
            .sample_freq
            .map_or(1000.0, |f| 1e6 / f.max(1) as f64),
    };
    // First, when the hottest code the page shows has no symbols: once,
    // with what to install.
    let mut warnings: Vec<String> =
        crate::unnamed::hottest_code_warning_in(trace, inputs.selection)
            .into_iter()
            .collect();
    warnings.extend(trace.stats.warnings.iter().cloned());
    for w in inputs.warnings.iter().chain(&no_path) {
        if !warnings.contains(w) {
            warnings.push(w.clone());
        }
    }
    let duration_us = us(trace.meta.end_ns);
    ReportData {
        version: FORMAT_VERSION,
        meta: Meta {
            title: inputs.title.to_owned(),
            command: inputs.command.to_vec(),
            hostname: trace.meta.hostname.clone(),
            os_release: trace.meta.os_release.clone(),
            nr_cpus: trace.meta.nr_cpus,
            duration_us,
            from_us: us(from_ns.max(start_ns)).min(duration_us),
            to_us: us(to_ns.min(trace.meta.end_ns)).max(0),
            sample_event: trace.meta.sample_event.clone(),
            sample_us,
            filters: inputs.filter_text.to_vec(),
            warnings,
            has_sched_events: states.cpu_runs.iter().any(|r| !r.is_empty()),
        },
        strings: tables.strings,
        funcs: tables.funcs,
        stacks: tables.stacks,
        processes,
        threads,
        samples,
        spans,
        wait_names,
        faults,
        syscalls,
        critical_path,
        findings,
        locks,
    }
}

/// Whether a lifetime (`None`: before or after the trace) meets `[from, to)`.
fn overlaps(start: Option<u64>, end: Option<u64>, from: u64, to: u64) -> bool {
    start.is_none_or(|s| s < to) && end.is_none_or(|e| e >= from)
}

fn path_data(trace: &Trace, scope: &Scope, cp: &CriticalPath, tables: &mut Tables) -> PathData {
    let tids = TidIndex::new(trace);
    // Saturating: a damaged trace's times of centuries must not overflow.
    let root_ns = scope
        .start_ns
        .saturating_add((cp.root.start_s.max(0.0) * 1e9) as u64);
    let mut d = PathData {
        summary: cp.summary.clone(),
        wall_s: cp.wall_s,
        root: cp.root.clone(),
        breakdown: cp.breakdown.clone(),
        parts: cp.parts.clone(),
        unknown_s: cp.unknown_s,
        from: Vec::new(),
        to: Vec::new(),
        thread: Vec::new(),
        state: Vec::new(),
        label: Vec::new(),
        depth: Vec::new(),
    };
    for s in &cp.segments {
        let from_ns = root_ns.saturating_add((s.from_s.max(0.0) * 1e9) as u64);
        let to_ns = root_ns.saturating_add((s.to_s.max(0.0) * 1e9) as u64);
        d.from.push(scope.us(from_ns));
        d.to.push(scope.us(to_ns));
        let thread = tids
            .lookup(s.tid, from_ns)
            .and_then(|t| scope.thread_ix.get(t.ix()).copied().flatten());
        d.thread.push(thread.map_or(-1, |t| t as i32));
        d.state.push(match s.state {
            SegmentState::Cpu => 0,
            SegmentState::Runnable => 1,
            SegmentState::Blocked => {
                let k = s
                    .kind
                    .unwrap_or(slowlab_model::critical_path::WaitKind::Other);
                2 + slowlab_model::critical_path::WaitKind::ALL
                    .iter()
                    .position(|&x| x == k)
                    .unwrap_or(5) as u8
            }
        });
        let label = s.top_function.as_deref().or(s.blocked_in.as_deref()).or(s
            .unknown
            .then_some("not known: no scheduler event of it tells"));
        d.label.push(label.map_or(-1, |l| tables.string(l) as i32));
        d.depth.push(s.depth);
    }
    d
}

fn finding_data(
    trace: &Trace,
    scope: &Scope,
    f: &Finding,
    command_processes: &[ProcIdx],
) -> FindingData {
    let procs: Vec<ProcIdx> = match f.culprit.pid {
        Some(pid) => trace
            .processes
            .iter()
            .enumerate()
            .filter(|(_, p)| p.pid == pid)
            .map(|(i, _)| ProcIdx(i as u32))
            .collect(),
        None => command_processes.to_vec(),
    };
    let mut threads = Vec::new();
    let (mut from, mut to) = (u64::MAX, 0);
    for &p in &procs {
        let (s, e) = crate::critical_path::window(trace, p);
        from = from.min(s);
        to = to.max(e);
        for t in &trace.processes[p.ix()].threads {
            if let Some(i) = scope.thread_ix.get(t.ix()).copied().flatten() {
                threads.push(i);
            }
        }
    }
    if from > to {
        (from, to) = (trace.meta.start_ns, trace.meta.end_ns);
    }
    FindingData {
        finding: f.clone(),
        threads,
        from_us: scope.us(from.max(scope.from_ns)),
        to_us: scope.us(to.min(scope.to_ns)),
    }
}

#[cfg(test)]
mod tests;
