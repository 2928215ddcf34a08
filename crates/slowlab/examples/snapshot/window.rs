//! Cutting a bundle to a time window, so that a long recording makes a
//! small snapshot: keeps the samples, events and captured paths of the
//! window, the threads and processes alive in it, and only the stacks,
//! frames, functions and strings these still refer to (every index
//! renumbered). Fork, exec and exit times outside the window become
//! unknown, as in a recording that started and stopped at its edges.
//!
//! It does not touch the read statistics (they describe the whole
//! recording) or the cgroup notes.

use slowlab_model::bundle::TraceBundle;
use slowlab_model::trace::{
    EventKind, FrameIdx, FuncIdx, ProcIdx, StackIdx, StrIdx, ThreadIdx, Trace,
};

/// Keeps `[from_s, to_s)` seconds after the trace's start.
pub fn keep_window(bundle: &mut TraceBundle, from_s: f64, to_s: f64) {
    let start = bundle.trace.meta.start_ns;
    let lo = start.saturating_add((from_s * 1e9) as u64);
    let hi = if to_s.is_finite() {
        start.saturating_add((to_s * 1e9) as u64)
    } else {
        u64::MAX
    };
    let inside = |t: u64| t >= lo && t < hi;
    if let Some(paths) = &mut bundle.paths {
        paths.retain(|p| inside(p.time_ns));
    }
    let t = &mut bundle.trace;
    keep_samples_and_events(t, inside);
    let threads = keep_lifetimes(t, lo, hi);
    renumber_threads(t, &threads);
    compact_stacks(t);
    compact_strings(t);
    t.meta.start_ns = t.meta.start_ns.max(lo);
    t.meta.end_ns = t.meta.end_ns.min(hi).max(t.meta.start_ns);
}

fn keep_samples_and_events(t: &mut Trace, inside: impl Fn(u64) -> bool) {
    let s = std::mem::take(&mut t.samples);
    let kept: Vec<usize> = (0..s.len()).filter(|&i| inside(s.time_ns[i])).collect();
    t.samples.time_ns = kept.iter().map(|&i| s.time_ns[i]).collect();
    t.samples.thread = kept.iter().map(|&i| s.thread[i]).collect();
    t.samples.cpu = kept.iter().map(|&i| s.cpu[i]).collect();
    t.samples.stack = kept.iter().map(|&i| s.stack[i]).collect();
    t.samples.period = kept.iter().map(|&i| s.period[i]).collect();
    t.events.retain(|e| inside(e.time_ns));
}

/// Which threads stay (old index → new), after dropping the processes and
/// threads neither alive in `[lo, hi)` nor named by a kept sample or event.
fn keep_lifetimes(t: &mut Trace, lo: u64, hi: u64) -> Vec<Option<u32>> {
    let alive = |start: Option<u64>, end: Option<u64>| {
        start.unwrap_or(0) < hi && end.unwrap_or(u64::MAX) >= lo
    };
    let mut keep_thread: Vec<bool> = t
        .threads
        .iter()
        .map(|th| alive(th.start_ns, th.end_ns))
        .collect();
    for th in t
        .samples
        .thread
        .iter()
        .chain(t.events.iter().map(|e| &e.thread))
    {
        keep_thread[th.ix()] = true;
    }
    let mut keep_proc: Vec<bool> = t
        .processes
        .iter()
        .map(|p| alive(p.start_ns.or(p.exec_ns), p.end_ns))
        .collect();
    for (th, _) in t.threads.iter().zip(&keep_thread).filter(|(_, k)| **k) {
        keep_proc[th.process.ix()] = true;
    }
    let proc_map = renumbering(&keep_proc);
    let thread_map = renumbering(&keep_thread);
    let before = |v: Option<u64>| v.filter(|&x| x >= lo);
    let after = |v: Option<u64>| v.filter(|&x| x < hi);
    t.processes = std::mem::take(&mut t.processes)
        .into_iter()
        .zip(&keep_proc)
        .filter(|(_, k)| **k)
        .map(|(mut p, _)| {
            p.threads = p
                .threads
                .iter()
                .filter_map(|th| thread_map[th.ix()].map(ThreadIdx))
                .collect();
            p.start_ns = before(p.start_ns);
            p.exec_ns = before(p.exec_ns);
            p.end_ns = after(p.end_ns);
            p
        })
        .collect();
    t.threads = std::mem::take(&mut t.threads)
        .into_iter()
        .zip(&keep_thread)
        .filter(|(_, k)| **k)
        .map(|(mut th, _)| {
            th.process =
                ProcIdx(proc_map[th.process.ix()].expect("a kept thread's process is kept"));
            th.start_ns = before(th.start_ns);
            th.end_ns = after(th.end_ns);
            th
        })
        .collect();
    thread_map
}

fn renumber_threads(t: &mut Trace, map: &[Option<u32>]) {
    let new = |th: ThreadIdx| ThreadIdx(map[th.ix()].expect("a used thread is kept"));
    for th in &mut t.samples.thread {
        *th = new(*th);
    }
    for e in &mut t.events {
        e.thread = new(e.thread);
    }
}

/// Keeps the stacks the samples and events use (with their callers), the
/// frames of those, and the functions of those frames.
fn compact_stacks(t: &mut Trace) {
    let mut keep = vec![false; t.stacks.len()];
    let used = t
        .samples
        .stack
        .iter()
        .chain(t.events.iter().map(|e| &e.stack));
    for mut s in used.copied() {
        while let Some(ix) = s {
            if keep[ix.ix()] {
                break;
            }
            keep[ix.ix()] = true;
            s = t.stacks[ix.ix()].parent();
        }
    }
    let stack_map = renumbering(&keep);
    let mut keep_frame = vec![false; t.frames.len()];
    for (node, _) in t.stacks.iter().zip(&keep).filter(|(_, k)| **k) {
        keep_frame[node.frame.ix()] = true;
    }
    let frame_map = renumbering(&keep_frame);
    let mut keep_func = vec![false; t.functions.len()];
    for (f, _) in t.frames.iter().zip(&keep_frame).filter(|(_, k)| **k) {
        keep_func[f.function.ix()] = true;
    }
    let func_map = renumbering(&keep_func);
    let stack = |s: StackIdx| StackIdx(stack_map[s.ix()].expect("a used stack is kept"));
    t.stacks = retain_by(std::mem::take(&mut t.stacks), &keep)
        .map(|mut n| {
            n.set_parent(n.parent().map(stack));
            n.frame = FrameIdx(frame_map[n.frame.ix()].expect("a kept stack's frame is kept"));
            n
        })
        .collect();
    t.frames = retain_by(std::mem::take(&mut t.frames), &keep_frame)
        .map(|mut f| {
            f.function =
                FuncIdx(func_map[f.function.ix()].expect("a kept frame's function is kept"));
            f
        })
        .collect();
    t.functions = retain_by(std::mem::take(&mut t.functions), &keep_func).collect();
    for s in &mut t.samples.stack {
        *s = s.map(stack);
    }
    for e in &mut t.events {
        e.stack = e.stack.map(stack);
    }
}

/// Keeps the strings something still refers to.
fn compact_strings(t: &mut Trace) {
    let mut keep = vec![false; t.strings.len()];
    for_each_string(t, &mut |s| keep[s.ix()] = true);
    let map = renumbering(&keep);
    for_each_string(t, &mut |s| {
        *s = StrIdx(map[s.ix()].expect("a used string is kept"))
    });
    t.strings = retain_by(std::mem::take(&mut t.strings), &keep).collect();
}

/// Calls `f` on every string index of the trace's tables and events.
fn for_each_string(t: &mut Trace, f: &mut dyn FnMut(&mut StrIdx)) {
    t.processes.iter_mut().for_each(|p| f(&mut p.comm));
    t.threads.iter_mut().for_each(|th| f(&mut th.comm));
    for m in &mut t.modules {
        f(&mut m.name);
        f(&mut m.path);
    }
    t.functions.iter_mut().for_each(|func| f(&mut func.name));
    for e in &mut t.events {
        match &mut e.kind {
            EventKind::SyscallEnter { name, .. }
            | EventKind::SyscallExit { name, .. }
            | EventKind::Other { name } => f(name),
            EventKind::Switch { .. }
            | EventKind::Waking { .. }
            | EventKind::PageFault { .. }
            | EventKind::MajorFault { .. }
            | EventKind::BlockRequest { .. } => {}
        }
    }
}

/// Old index → new index of the kept rows.
fn renumbering(keep: &[bool]) -> Vec<Option<u32>> {
    let mut next = 0u32;
    keep.iter()
        .map(|&k| {
            k.then(|| {
                next += 1;
                next - 1
            })
        })
        .collect()
}

fn retain_by<'a, T: 'a>(rows: Vec<T>, keep: &'a [bool]) -> impl Iterator<Item = T> + 'a {
    rows.into_iter()
        .zip(keep)
        .filter(|(_, k)| **k)
        .map(|(r, _)| r)
}
