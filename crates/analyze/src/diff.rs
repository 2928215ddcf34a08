//! `slowlab diff A B`: the sampled CPU of two traces side by side, rows
//! (functions, modules, processes or threads, matched by name across the
//! traces) ranked by the change of their cost, the most grown first and the
//! most shrunk last. A cost is normalised before comparing: as a share of
//! each trace's selected samples (`total`, the default: what grew relative
//! to the rest) or as samples per second of each trace's selected time
//! (`duration`: what grew in absolute terms when the two traces did the
//! same work at different speeds). Rows found in one trace only are flagged
//! `new` or `vanished`.
//!
//! Also the differential folded stacks (`stack a b` lines, as inferno's
//! `differential` module writes) for a flame graph coloured by change. Values only;
//! rendering is `slowlab_report::diff`'s.

use std::collections::{BTreeMap, HashMap};

use slowlab_model::trace::Trace;

use crate::cpu::{function_counts, Key};
use crate::select::Selection;
pub use slowlab_model::views::diff::{DiffRow, DiffView, Metric, Normalize, Side};

/// What to compare.
#[derive(Clone, Copy, Debug)]
pub struct DiffOptions {
    pub key: Key,
    pub normalize: Normalize,
    pub metric: Metric,
    pub top: Option<usize>,
}

/// Compares the selections of two traces (the same filters and time range apply to both).
pub fn diff_view(a: &Trace, b: &Trace, sel: &Selection, opts: DiffOptions) -> DiffView {
    let (counts_a, side_a) = counts(a, sel, opts);
    let (counts_b, side_b) = counts(b, sel, opts);
    let norm = |n: u64, side: &Side| match opts.normalize {
        Normalize::Total if side.samples > 0 => n as f64 * 100.0 / side.samples as f64,
        Normalize::Duration if side.duration_s > 0.0 => n as f64 / side.duration_s,
        _ => 0.0,
    };
    let mut keys: Vec<&(String, String)> = counts_a.keys().chain(counts_b.keys()).collect();
    keys.sort_unstable();
    keys.dedup();
    let mut rows: Vec<DiffRow> = keys
        .into_iter()
        .map(|k| {
            let na = counts_a.get(k).copied().unwrap_or(0);
            let nb = counts_b.get(k).copied().unwrap_or(0);
            let (va, vb) = (norm(na, &side_a), norm(nb, &side_b));
            DiffRow {
                name: k.0.clone(),
                module: k.1.clone(),
                a: va,
                b: vb,
                delta: vb - va,
                ratio: (va > 0.0).then(|| vb / va),
                a_samples: na,
                b_samples: nb,
                status: match (na, nb) {
                    (0, _) => Some("new"),
                    (_, 0) => Some("vanished"),
                    _ => None,
                },
            }
        })
        .filter(|r| r.a_samples + r.b_samples > 0)
        .collect();
    // Biggest growth first, biggest shrink last; ties by name so the order
    // never depends on hashing.
    rows.sort_by(|x, y| {
        y.delta
            .total_cmp(&x.delta)
            .then_with(|| (&x.name, &x.module).cmp(&(&y.name, &y.module)))
    });
    DiffView {
        key: opts.key,
        normalize: opts.normalize,
        metric: opts.metric,
        a: side_a,
        b: side_b,
        omitted_rows: 0,
        functions: rows,
    }
    .keep_top(opts.top)
}

/// The selection's samples counted by row name (and module, for functions).
fn counts(
    trace: &Trace,
    sel: &Selection,
    opts: DiffOptions,
) -> (HashMap<(String, String), u64>, Side) {
    let agg = sel.aggregate(trace);
    let (from, to) = sel.time_range_ns(trace);
    let start = from.max(trace.meta.start_ns);
    let end = to.min(trace.meta.end_ns);
    let side = Side {
        samples: agg.total,
        duration_s: end.saturating_sub(start) as f64 / 1e9,
    };
    let mut out: HashMap<(String, String), u64> = HashMap::new();
    match opts.key {
        Key::Function => {
            for (f, self_n, incl) in function_counts(trace, &agg) {
                let func = &trace.functions[f.ix()];
                let module = trace.str(trace.modules[func.module.ix()].name);
                let n = match opts.metric {
                    Metric::SelfSamples => self_n,
                    Metric::Inclusive => incl,
                };
                let name = crate::unnamed::label(trace, f).into_owned();
                *out.entry((name, module.to_owned())).or_default() += n;
            }
        }
        Key::Module => {
            for &((_, stack), count) in &agg.groups {
                let modules: Vec<usize> = match opts.metric {
                    Metric::SelfSamples => trace
                        .stack_frames(stack)
                        .next()
                        .map(|f| trace.frames[f.ix()].module.ix())
                        .into_iter()
                        .collect(),
                    Metric::Inclusive => {
                        let mut m: Vec<usize> = trace
                            .stack_frames(stack)
                            .map(|f| trace.frames[f.ix()].module.ix())
                            .collect();
                        m.sort_unstable();
                        m.dedup();
                        m
                    }
                };
                for m in modules {
                    let name = trace.str(trace.modules[m].name).to_owned();
                    *out.entry((name, String::new())).or_default() += count;
                }
            }
        }
        Key::Process | Key::Thread => {
            // Matched by name: pids and tids differ from one run to the next.
            for &((th, _), count) in &agg.groups {
                let t = &trace.threads[th.ix()];
                let comm = match opts.key {
                    Key::Process => trace.processes[t.process.ix()].comm,
                    _ => t.comm,
                };
                *out.entry((trace.str(comm).to_owned(), String::new()))
                    .or_default() += count;
            }
        }
    }
    (out, side)
}

/// Folded stacks of both selections merged as `process;outer;…;inner A B` lines
/// (inferno's differential input, counts normalised to B's total so that a share
/// that did not change draws neutral), sorted.
pub fn differential_lines(a: &Trace, b: &Trace, sel: &Selection) -> Vec<String> {
    let la = crate::export::collapsed_lines(a, sel);
    let lb = crate::export::collapsed_lines(b, sel);
    let parse = |lines: &[String]| -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for l in lines {
            if let Some((stack, n)) = l.rsplit_once(' ') {
                *m.entry(stack.to_owned()).or_default() += n.parse::<u64>().unwrap_or(0);
            }
        }
        m
    };
    let (ma, mb) = (parse(&la), parse(&lb));
    let (ta, tb) = (ma.values().sum::<u64>(), mb.values().sum::<u64>());
    let scale = if ta > 0 { tb as f64 / ta as f64 } else { 1.0 };
    let mut stacks: Vec<&String> = ma.keys().chain(mb.keys()).collect();
    stacks.sort_unstable();
    stacks.dedup();
    stacks
        .into_iter()
        .map(|s| {
            let na = ma.get(s).map_or(0, |&n| (n as f64 * scale).round() as u64);
            let nb = mb.get(s).copied().unwrap_or(0);
            format!("{s} {na} {nb}")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{grown_trace, small_trace};

    fn opts(key: Key, normalize: Normalize) -> DiffOptions {
        DiffOptions {
            key,
            normalize,
            metric: Metric::SelfSamples,
            top: None,
        }
    }

    #[test]
    fn the_function_that_grew_ranks_first() {
        let a = small_trace();
        let b = grown_trace(6, 10);
        let v = diff_view(
            &a,
            &b,
            &Selection::default(),
            opts(Key::Function, Normalize::Total),
        );
        let first = &v.functions[0];
        assert_eq!(
            (first.name.as_str(), first.module.as_str()),
            ("memset", "[kernel.kallsyms]")
        );
        // A: 3 of 6 samples (50%); B: 11 of 12 (91.7%).
        assert!((first.a - 50.0).abs() < 1e-9 && (first.b - 1100.0 / 12.0).abs() < 1e-9);
        assert_eq!((first.a_samples, first.b_samples), (3, 11));
        assert!(first.ratio.unwrap() > 1.8);
        // work lost its self samples in B: vanished.
        let work = v.functions.iter().find(|r| r.name == "work").unwrap();
        assert_eq!(work.status, Some("vanished"));
        assert_eq!(work.ratio, Some(0.0));
        // The order is by the change, most grown first; work shrank most.
        for w in v.functions.windows(2) {
            assert!(w[0].delta >= w[1].delta);
        }
        assert_eq!(v.functions.last().unwrap().name, "work");
    }

    #[test]
    fn a_function_only_in_b_is_new_without_a_ratio() {
        let a = grown_trace(0, 5);
        let b = small_trace();
        let v = diff_view(
            &a,
            &b,
            &Selection::default(),
            opts(Key::Function, Normalize::Total),
        );
        let work = v.functions.iter().find(|r| r.name == "work").unwrap();
        assert_eq!(
            (work.status, work.ratio, work.a_samples),
            (Some("new"), None, 0)
        );
    }

    #[test]
    fn duration_normalisation_compares_rates_of_traces_of_different_lengths() {
        // The same 6 samples over 5 ms and over 10 ms: shares are equal, rates halve.
        let a = small_trace();
        let mut b = small_trace();
        b.meta.end_ns = b.meta.start_ns + 10_000_000;
        let by_total = diff_view(
            &a,
            &b,
            &Selection::default(),
            opts(Key::Function, Normalize::Total),
        );
        assert!(by_total.functions.iter().all(|r| r.delta.abs() < 1e-9));
        let by_time = diff_view(
            &a,
            &b,
            &Selection::default(),
            opts(Key::Function, Normalize::Duration),
        );
        let memset = by_time
            .functions
            .iter()
            .find(|r| r.name == "memset")
            .unwrap();
        assert!(
            (memset.a - 600.0).abs() < 1e-6,
            "3 samples in 5 ms: {}",
            memset.a
        );
        assert!(
            (memset.b - 300.0).abs() < 1e-6,
            "3 samples in 10 ms: {}",
            memset.b
        );
        assert_eq!((by_time.a.duration_s, by_time.b.duration_s), (0.005, 0.01));
    }

    #[test]
    fn processes_are_matched_by_name_and_top_limits_the_rows() {
        let a = small_trace();
        let b = grown_trace(6, 5);
        let mut o = opts(Key::Process, Normalize::Total);
        let v = diff_view(&a, &b, &Selection::default(), o);
        assert_eq!(v.functions.len(), 2);
        assert_eq!(v.functions[0].name, "app", "app grew from 5/6 to 11/12");
        o.top = Some(1);
        let v = diff_view(&a, &b, &Selection::default(), o);
        assert_eq!((v.functions.len(), v.omitted_rows), (1, 1));
    }

    #[test]
    fn differential_lines_scale_a_to_bs_total() {
        let a = small_trace();
        let b = grown_trace(6, 10);
        let lines = differential_lines(&a, &b, &Selection::default());
        // A has 6 samples, B 12: A's counts are doubled.
        assert!(
            lines.contains(&"app;main;work;memset_[k] 6 11".to_owned()),
            "{lines:?}"
        );
        assert!(lines.contains(&"app;main;work 4 0".to_owned()), "{lines:?}");
    }
}
