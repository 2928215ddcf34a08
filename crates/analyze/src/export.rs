//! The data of the exports of the selected samples: folded stacks (the text
//! format of Brendan Gregg's flame graph tools and inferno:
//! `process;outer;…;inner N`) and a pprof profile (`profile.proto`, encoded
//! here by hand: the format is small and stable, and the `prost` machinery
//! would be larger than the encoder).
//!
//! Values only: drawing the flame graph, compressing the profile and
//! writing files are `slowlab_report::export`'s.

use std::collections::HashMap;

use slowlab_model::trace::{StackIdx, Trace};

use crate::select::Selection;

/// Folded-stack lines, one per distinct (process name, stack), sorted.
/// Kernel frames get inferno's `_[k]` suffix so they are coloured apart.
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
    let mut lines: Vec<String> = counts
        .into_iter()
        .map(|((comm, stack), count)| {
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
            line.push(' ');
            line.push_str(&count.to_string());
            line
        })
        .collect();
    lines.sort_unstable();
    lines
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
/// frame, one function per function, a `thread` and `process` label.
pub fn pprof_bytes(trace: &Trace, sel: &Selection) -> Vec<u8> {
    let agg = sel.aggregate(trace);
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
    let strings_owned = std::mem::take(&mut strings);
    for st in &strings_owned {
        p.bytes(6, st.as_bytes());
    }
    p.uint(9, trace.meta.start_ns);
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
    fn pprof_has_the_strings() {
        let t = small_trace();
        let raw = pprof_bytes(&t, &Selection::default());
        let text = String::from_utf8_lossy(&raw);
        assert!(text.contains("memset") && text.contains("nanoseconds"));
    }

    #[test]
    fn varint_encoding() {
        let mut p = Pb::default();
        p.varint(300);
        assert_eq!(p.0, vec![0xac, 0x02]);
    }
}
