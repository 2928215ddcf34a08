//! The data of the exports of the selected samples: folded stacks (the text
//! format of Brendan Gregg's flame graph tools and inferno:
//! `process;outer;…;inner N`) and a pprof profile (`profile.proto`, encoded
//! here by hand: the format is small and stable, and the `prost` machinery
//! would be larger than the encoder), and the classified blocked stretches
//! that the Firefox Profiler export marks on its timeline.
//!
//! Values only: drawing the flame graph, compressing the profile and
//! writing files are `slowlab_report::export`'s.

use std::collections::HashMap;

use slowlab_model::trace::{StackIdx, ThreadIdx, Trace};
use slowlab_model::views::blocked::BlockedStretch;

use crate::select::Selection;
use crate::states::{SpanState, ThreadStates};

/// The blocked spans of the threads `mask` keeps, cut to `[from, to)`,
/// that last at least `min_ns` there: the `max` longest of them, each
/// classified ([`crate::classify::span_kind`]), by thread, then time.
pub fn blocked_stretches(
    trace: &Trace,
    states: &ThreadStates,
    mask: &[bool],
    (from, to): (u64, u64),
    min_ns: u64,
    max: usize,
) -> Vec<BlockedStretch> {
    let mut spans = Vec::new();
    for (i, thread_spans) in states.spans.iter().enumerate() {
        if !mask.get(i).copied().unwrap_or(false) {
            continue;
        }
        for span in thread_spans {
            let SpanState::Blocked(b) = span.state else {
                continue;
            };
            let (start, end) = (span.start_ns.max(from), span.end_ns.min(to));
            if end > start && end - start >= min_ns {
                spans.push((end - start, ThreadIdx(i as u32), start, end, b));
            }
        }
    }
    if spans.len() > max {
        spans.select_nth_unstable_by(max, |a, b| b.0.cmp(&a.0));
        spans.truncate(max);
    }
    spans.sort_by_key(|s| (s.1, s.2));
    spans
        .into_iter()
        .map(|(_, thread, start_ns, end_ns, b)| BlockedStretch {
            thread,
            start_ns,
            end_ns,
            kind: crate::classify::span_kind(trace, &b),
            task_state: b.task_state,
            woken: b.woken,
            waker: b.waker,
            stack: b.stack,
        })
        .collect()
}

/// Folded-stack lines, one per distinct (process name, named stack), sorted.
/// Kernel frames get inferno's `_[k]` suffix so they are coloured apart.
/// Stacks that differ only in addresses of the same functions are one line:
/// a consumer that does not sum repeated lines would count only one of them.
pub fn collapsed_lines(trace: &Trace, sel: &Selection) -> Vec<String> {
    let agg = sel.aggregate(trace);
    let mut counts: HashMap<(u32, Option<StackIdx>), u64> = HashMap::new();
    for &((th, stack), count) in &agg.groups {
        let comm = trace.threads[th.ix()].process;
        *counts
            .entry((trace.processes[comm.ix()].comm.0, stack))
            .or_default() += count;
    }
    let mut frames = Vec::new();
    let mut by_line: HashMap<String, u64> = HashMap::new();
    for ((comm, stack), count) in counts {
        frames.clear();
        frames.extend(trace.stack_frames(stack));
        let mut line = clean(trace.str(slowlab_model::trace::StrIdx(comm)));
        for &f in frames.iter().rev() {
            line.push(';');
            let func = trace.frame_function(f);
            line.push_str(&clean(trace.function_name(func)));
            if trace.frames[f.ix()].kernel {
                line.push_str("_[k]");
            }
        }
        *by_line.entry(line).or_default() += count;
    }
    let mut lines: Vec<String> = by_line
        .into_iter()
        .map(|(line, count)| format!("{line} {count}"))
        .collect();
    lines.sort_unstable();
    lines
}

/// The pprof mapping id of each module (0 for modules no selected sample
/// uses), numbered from 1 with [`main_module`] first: pprof takes the first
/// mapping for the main binary.
fn mapping_order(trace: &Trace, agg: &crate::select::Aggregate) -> Vec<u64> {
    let mut used = vec![false; trace.modules.len()];
    for &((_, stack), _) in &agg.groups {
        for f in trace.stack_frames(stack) {
            used[trace.frames[f.ix()].module.ix()] = true;
        }
    }
    let mut ids = vec![0u64; trace.modules.len()];
    let mut next = 1;
    if let Some(main) = main_module(trace, agg) {
        ids[main] = next;
        next += 1;
    }
    for (m, &u) in used.iter().enumerate() {
        if u && ids[m] == 0 {
            ids[m] = next;
            next += 1;
        }
    }
    ids
}

/// The main binary of the selection: the executable (a user module whose
/// file name starts with the process name, as `comm` is cut to 15 bytes)
/// of the process with the most selected samples; else the user module
/// that is not a shared library with the most samples.
pub fn main_module(trace: &Trace, agg: &crate::select::Aggregate) -> Option<usize> {
    use slowlab_model::trace::ModuleKind;
    let mut per_process: HashMap<usize, u64> = HashMap::new();
    let mut per_module: HashMap<usize, u64> = HashMap::new();
    for &((th, stack), count) in &agg.groups {
        *per_process
            .entry(trace.threads[th.ix()].process.ix())
            .or_default() += count;
        let mut seen = Vec::new();
        for f in trace.stack_frames(stack) {
            let m = trace.frames[f.ix()].module.ix();
            if !seen.contains(&m) {
                seen.push(m);
                *per_module.entry(m).or_default() += count;
            }
        }
    }
    let is_exe = |m: usize| {
        let module = &trace.modules[m];
        module.kind == ModuleKind::User && !trace.str(module.name).contains(".so")
    };
    // Ties broken by index so the choice does not depend on hash order.
    let top_process = per_process
        .iter()
        .max_by_key(|(&p, &n)| (n, std::cmp::Reverse(p)))
        .map(|(&p, _)| p);
    if let Some(p) = top_process {
        let comm = trace.str(trace.processes[p].comm);
        let exe = per_module
            .iter()
            .filter(|(&m, _)| is_exe(m) && !comm.is_empty())
            .filter(|(&m, _)| trace.str(trace.modules[m].name).starts_with(comm))
            .max_by_key(|(&m, &n)| (n, std::cmp::Reverse(m)));
        if let Some((&m, _)) = exe {
            return Some(m);
        }
    }
    per_module
        .iter()
        .filter(|(&m, _)| is_exe(m))
        .max_by_key(|(&m, &n)| (n, std::cmp::Reverse(m)))
        .map(|(&m, _)| m)
}

/// Folded format reserves `;` and the final space.
fn clean(s: &str) -> String {
    s.replace(';', ":").replace('\n', " ")
}

/// Minimal protobuf writer.
#[derive(Default)]
struct Pb(Vec<u8>);

impl Pb {
    fn varint(&mut self, mut v: u64) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.0.push(b);
                break;
            }
            self.0.push(b | 0x80);
        }
    }
    fn key(&mut self, field: u32, wire: u8) {
        self.varint(((field as u64) << 3) | wire as u64);
    }
    fn uint(&mut self, field: u32, v: u64) {
        if v != 0 {
            self.key(field, 0);
            self.varint(v);
        }
    }
    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    fn msg(&mut self, field: u32, m: Pb) {
        self.bytes(field, &m.0);
    }
    fn packed(&mut self, field: u32, vals: &[u64]) {
        let mut p = Pb::default();
        for &v in vals {
            p.varint(v);
        }
        self.bytes(field, &p.0);
    }
}

/// Builds the (uncompressed) pprof protobuf for the selected samples:
/// sample types `samples/count` and `cpu/nanoseconds`, one location per
/// frame, one function per function, one mapping per module (the main
/// binary first, see [`main_module`]), a `thread` and `process` label, and
/// the wall-clock time of the trace's start when the file recorded it
/// (without it `time_nanos` is left out: the trace clock counts from boot,
/// which pprof would show as 1970).
pub fn pprof_bytes(trace: &Trace, sel: &Selection) -> Vec<u8> {
    let agg = sel.aggregate(trace);
    let mapping_ids = mapping_order(trace, &agg);
    let mut strings: Vec<String> = vec![String::new()];
    let mut sidx: HashMap<String, u64> = HashMap::new();
    let mut s = |x: &str| -> u64 {
        if let Some(&i) = sidx.get(x) {
            return i;
        }
        strings.push(x.to_owned());
        sidx.insert(x.to_owned(), (strings.len() - 1) as u64);
        (strings.len() - 1) as u64
    };
    let mut p = Pb::default();
    let period_ns = trace
        .meta
        .sample_freq
        .filter(|&f| f > 0)
        .map_or(1_000_000, |f| 1_000_000_000 / f);
    for (ty, unit) in [("samples", "count"), ("cpu", "nanoseconds")] {
        let mut vt = Pb::default();
        vt.uint(1, s(ty));
        vt.uint(2, s(unit));
        p.msg(1, vt);
    }
    let mut used_frames = vec![false; trace.frames.len()];
    let mut locs = Vec::new();
    for &((th, stack), count) in &agg.groups {
        locs.clear();
        for f in trace.stack_frames(stack) {
            used_frames[f.ix()] = true;
            locs.push(f.0 as u64 + 1);
        }
        let mut m = Pb::default();
        m.packed(1, &locs);
        m.packed(2, &[count, count * period_ns]);
        let thread = &trace.threads[th.ix()];
        let proc_ = &trace.processes[thread.process.ix()];
        for (k, v) in [
            (
                "thread",
                format!("{} ({})", trace.str(thread.comm), thread.tid),
            ),
            (
                "process",
                format!("{} ({})", trace.str(proc_.comm), proc_.pid),
            ),
        ] {
            let mut l = Pb::default();
            l.uint(1, s(k));
            l.uint(2, s(&v));
            m.msg(3, l);
        }
        p.msg(2, m);
    }
    let mut used_funcs = vec![false; trace.functions.len()];
    for (i, f) in trace.frames.iter().enumerate() {
        if !used_frames[i] {
            continue;
        }
        used_funcs[f.function.ix()] = true;
        let mut l = Pb::default();
        l.uint(1, i as u64 + 1);
        l.uint(2, mapping_ids[f.module.ix()]);
        l.uint(3, f.address);
        let mut line = Pb::default();
        line.uint(1, f.function.0 as u64 + 1);
        l.msg(4, line);
        p.msg(4, l);
    }
    for (i, f) in trace.functions.iter().enumerate() {
        if !used_funcs[i] {
            continue;
        }
        let mut m = Pb::default();
        m.uint(1, i as u64 + 1);
        let name = s(trace.str(f.name));
        m.uint(2, name);
        m.uint(3, name);
        m.uint(4, s(trace.str(trace.modules[f.module.ix()].path)));
        p.msg(5, m);
    }
    let mut mappings: Vec<(u64, usize)> = mapping_ids
        .iter()
        .enumerate()
        .filter(|(_, &id)| id != 0)
        .map(|(m, &id)| (id, m))
        .collect();
    mappings.sort_unstable();
    for (id, m) in mappings {
        let module = &trace.modules[m];
        let mut mp = Pb::default();
        mp.uint(1, id);
        mp.uint(5, s(trace.str(module.path)));
        if let Some(build_id) = &module.build_id {
            mp.uint(6, s(build_id));
        }
        let named = trace
            .functions
            .iter()
            .any(|f| f.module.ix() == m && trace.str(f.name) != "[unknown]");
        mp.uint(7, named as u64);
        p.msg(3, mp);
    }
    let strings_owned = std::mem::take(&mut strings);
    for st in &strings_owned {
        p.bytes(6, st.as_bytes());
    }
    p.uint(9, trace.meta.unix_ns(trace.meta.start_ns).unwrap_or(0));
    p.uint(10, trace.meta.end_ns.saturating_sub(trace.meta.start_ns));
    let mut pt = Pb::default();
    pt.uint(1, sidx.get("cpu").copied().unwrap_or(0));
    pt.uint(2, sidx.get("nanoseconds").copied().unwrap_or(0));
    p.msg(11, pt);
    p.uint(12, period_ns);
    p.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::small_trace;

    #[test]
    fn folded_lines_are_root_first_with_counts() {
        let t = small_trace();
        let lines = collapsed_lines(&t, &Selection::default());
        assert!(
            lines.contains(&"app;main;work;memset_[k] 3".to_string()),
            "{lines:?}"
        );
        assert!(lines.contains(&"app;main;work 2".to_string()));
        let total: u64 = lines
            .iter()
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum();
        assert_eq!(total, 6);
    }

    #[test]
    fn stacks_of_the_same_functions_at_other_addresses_are_one_folded_line() {
        let mut b = crate::testutil::TraceBuilder::default();
        let app = b.process(10, "app");
        let (one, other) = (b.stack(&["main", "work"]), b.stack(&["main", "work"]));
        assert_ne!(one, other, "two stacks of the same names");
        for (ms, stack) in [(1, one), (2, other), (3, other)] {
            b.sample(ms * 1_000_000, app, 0, stack);
        }
        b.end(4_000_000);
        let lines = collapsed_lines(&b.build(), &Selection::default());
        assert_eq!(lines, ["app;main_[k];work_[k] 3"]);
    }

    #[test]
    fn pprof_has_the_strings() {
        let t = small_trace();
        let raw = pprof_bytes(&t, &Selection::default());
        let text = String::from_utf8_lossy(&raw);
        assert!(text.contains("memset") && text.contains("nanoseconds"));
    }

    /// A decoded field's value: a varint, or the bytes of a nested message
    /// or string.
    type Value = Result<u64, Vec<u8>>;

    /// Top-level fields of a protobuf message: (field, value).
    fn fields(mut b: &[u8]) -> Vec<(u64, Value)> {
        fn varint(b: &mut &[u8]) -> u64 {
            let (mut v, mut shift) = (0u64, 0);
            loop {
                let byte = b[0];
                *b = &b[1..];
                v |= ((byte & 0x7f) as u64) << shift;
                shift += 7;
                if byte & 0x80 == 0 {
                    return v;
                }
            }
        }
        let mut out = Vec::new();
        while !b.is_empty() {
            let key = varint(&mut b);
            if key & 7 == 0 {
                out.push((key >> 3, Ok(varint(&mut b))));
            } else {
                let len = varint(&mut b) as usize;
                out.push((key >> 3, Err(b[..len].to_vec())));
                b = &b[len..];
            }
        }
        out
    }

    #[test]
    fn pprof_dates_the_profile_by_the_wall_clock_and_leaves_it_out_without_one() {
        let mut t = small_trace();
        let time = |t: &Trace| {
            fields(&pprof_bytes(t, &Selection::default()))
                .into_iter()
                .find(|(f, _)| *f == 9)
                .map(|(_, v)| v.unwrap())
        };
        assert_eq!(time(&t), None, "no clock data: no date");
        t.meta.wall_clock = Some(slowlab_model::trace::WallClock {
            clock_ns: 500_000,
            unix_ns: 1_700_000_000_000_000_000,
        });
        // start_ns is 1 ms, half a millisecond after the clock data's instant.
        assert_eq!(time(&t), Some(1_700_000_000_000_500_000));
    }

    #[test]
    fn pprof_names_the_main_binary_first_and_links_locations_to_mappings() {
        let t = small_trace();
        let top = fields(&pprof_bytes(&t, &Selection::default()));
        let strings: Vec<String> = top
            .iter()
            .filter(|(f, _)| *f == 6)
            .map(|(_, v)| String::from_utf8(v.clone().unwrap_err()).unwrap())
            .collect();
        let mappings: Vec<Vec<(u64, Value)>> = top
            .iter()
            .filter(|(f, _)| *f == 3)
            .map(|(_, v)| fields(v.as_ref().unwrap_err()))
            .collect();
        assert_eq!(mappings.len(), 2, "app.bin and the kernel");
        let file = |m: &[(u64, Value)]| {
            let i = m.iter().find(|(f, _)| *f == 5).unwrap().1.clone().unwrap();
            strings[i as usize].clone()
        };
        let id = |m: &[(u64, Value)]| m.iter().find(|(f, _)| *f == 1).unwrap().1.clone().unwrap();
        assert_eq!(
            (id(&mappings[0]), file(&mappings[0]).as_str()),
            (1, "app.bin")
        );
        assert_eq!(file(&mappings[1]), "[kernel.kallsyms]");
        // memset's location (the kernel frame) points at the kernel's mapping.
        let kernel_id = id(&mappings[1]);
        let locations: Vec<_> = top
            .iter()
            .filter(|(f, _)| *f == 4)
            .map(|(_, v)| fields(v.as_ref().unwrap_err()))
            .collect();
        let memset = locations
            .iter()
            .find(|l| l.iter().any(|(f, v)| *f == 3 && *v == Ok(0x400)))
            .expect("memset's location");
        assert!(memset.iter().any(|(f, v)| *f == 2 && *v == Ok(kernel_id)));
    }

    #[test]
    fn varint_encoding() {
        let mut p = Pb::default();
        p.varint(300);
        assert_eq!(p.0, vec![0xac, 0x02]);
    }
}
