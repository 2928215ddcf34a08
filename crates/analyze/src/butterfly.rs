//! The butterfly view of one function: the merged stacks that lead to it
//! (callers, nearest caller first) and the merged stacks it leads to
//! (callees), each with inclusive sample counts. A sample is counted once,
//! at the function's outermost occurrence on its stack.
//!
//! Function names match exactly, or else as a unique substring; the same
//! name in several modules is one function here. No rendering.

use std::collections::HashMap;

use slowlab_model::trace::{FrameIdx, FuncIdx, Trace};

use crate::cpu::pct;
use crate::select::Selection;
use crate::AnalyzeError;
pub use slowlab_model::views::butterfly::{BNode, Butterfly};

/// Finds the functions named `pattern`.
pub fn find_functions(trace: &Trace, pattern: &str) -> Result<Vec<FuncIdx>, AnalyzeError> {
    let all = || (0..trace.functions.len()).map(|i| FuncIdx(i as u32));
    let exact: Vec<FuncIdx> = all()
        .filter(|&f| trace.function_name(f) == pattern)
        .collect();
    if !exact.is_empty() {
        return Ok(exact);
    }
    let sub: Vec<FuncIdx> = all()
        .filter(|&f| trace.function_name(f).contains(pattern))
        .collect();
    let mut names: Vec<&str> = sub.iter().map(|&f| trace.function_name(f)).collect();
    names.sort_unstable();
    names.dedup();
    match names.len() {
        0 => Err(AnalyzeError::NoSuchFunction(pattern.to_owned())),
        1 => Ok(sub),
        n => Err(AnalyzeError::AmbiguousFunction {
            pattern: pattern.to_owned(),
            count: n,
            examples: names.iter().take(5).copied().collect::<Vec<_>>().join(", "),
        }),
    }
}

#[derive(Default)]
struct Tree {
    /// (function, samples, children by function)
    nodes: Vec<(FuncIdx, u64, HashMap<FuncIdx, usize>)>,
}

impl Tree {
    fn new() -> Self {
        Tree {
            nodes: vec![(FuncIdx(u32::MAX), 0, HashMap::new())],
        }
    }
    fn add(&mut self, path: impl Iterator<Item = FuncIdx>, count: u64, max_depth: usize) {
        let mut cur = 0;
        for f in path.take(max_depth) {
            let next = match self.nodes[cur].2.get(&f) {
                Some(&n) => n,
                None => {
                    let n = self.nodes.len();
                    self.nodes.push((f, 0, HashMap::new()));
                    self.nodes[cur].2.insert(f, n);
                    n
                }
            };
            cur = next;
            self.nodes[cur].1 += count;
        }
    }
    fn finish(&self, trace: &Trace, n: usize, total: u64) -> Vec<BNode> {
        let mut kids: Vec<usize> = self.nodes[n].2.values().copied().collect();
        // Most samples first; ties by name and module, not by the order
        // the nodes were made in (it follows a hash map's iteration, which
        // differs from run to run).
        let key = |c: usize| {
            let f = self.nodes[c].0;
            (trace.function_name(f), trace.function_module(f))
        };
        kids.sort_by(|&a, &b| {
            self.nodes[b]
                .1
                .cmp(&self.nodes[a].1)
                .then_with(|| key(a).cmp(&key(b)))
                .then(a.cmp(&b))
        });
        kids.into_iter()
            .map(|c| {
                let (f, samples, _) = &self.nodes[c];
                BNode {
                    name: crate::unnamed::label(trace, *f).into_owned(),
                    module: trace.function_module(*f).to_owned(),
                    samples: *samples,
                    percent: pct(*samples, total),
                    children: self.finish(trace, c, total),
                }
            })
            .collect()
    }
}

/// The butterfly of the function named `pattern`; trees are cut at
/// `max_depth` levels.
pub fn butterfly(
    trace: &Trace,
    pattern: &str,
    sel: &Selection,
    max_depth: usize,
) -> Result<Butterfly, AnalyzeError> {
    let targets = find_functions(trace, pattern)?;
    let is_target = {
        let mut v = vec![false; trace.functions.len()];
        for f in &targets {
            v[f.ix()] = true;
        }
        v
    };
    let agg = sel.aggregate(trace);
    let mut by_stack: HashMap<Option<slowlab_model::trace::StackIdx>, u64> = HashMap::new();
    for &((_, stack), count) in &agg.groups {
        *by_stack.entry(stack).or_default() += count;
    }
    let mut callers = Tree::new();
    let mut callees = Tree::new();
    let (mut selfc, mut incl) = (0, 0);
    let mut frames: Vec<FrameIdx> = Vec::new();
    for (&stack, &count) in &by_stack {
        frames.clear();
        frames.extend(trace.stack_frames(stack));
        frames.reverse(); // root first
        let funcs: Vec<FuncIdx> = frames.iter().map(|&f| trace.frame_function(f)).collect();
        let Some(i) = funcs.iter().position(|f| is_target[f.ix()]) else {
            continue;
        };
        incl += count;
        if funcs.last().is_some_and(|f| is_target[f.ix()]) {
            selfc += count;
        }
        callers.add(funcs[..i].iter().rev().copied(), count, max_depth);
        callees.add(funcs[i + 1..].iter().copied(), count, max_depth);
    }
    let mut modules: Vec<String> = targets
        .iter()
        .map(|&f| trace.function_module(f).to_owned())
        .collect();
    modules.sort();
    modules.dedup();
    Ok(Butterfly {
        function: trace.function_name(targets[0]).to_owned(),
        modules,
        total: agg.total,
        self_samples: selfc,
        inclusive: incl,
        callers: callers.finish(trace, 0, agg.total),
        callees: callees.finish(trace, 0, agg.total),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::small_trace;

    #[test]
    fn callers_and_callees_of_work() {
        let t = small_trace();
        let b = butterfly(&t, "work", &Selection::default(), 64).unwrap();
        assert_eq!((b.self_samples, b.inclusive), (2, 5));
        assert_eq!(b.callers.len(), 1);
        assert_eq!(b.callers[0].name, "main");
        assert_eq!(b.callers[0].samples, 5);
        assert_eq!(b.callees[0].name, "memset");
        assert_eq!(b.callees[0].samples, 3);
    }

    #[test]
    fn callees_tied_in_samples_come_in_name_order() {
        // Eight callees of `main` with one sample each, one with two: the
        // order the tree meets them follows a hash map (random per run).
        let names = [
            "zeta", "eta", "alpha", "theta", "beta", "iota", "delta", "gamma",
        ];
        let stacks: Vec<[&str; 2]> = names.iter().map(|&n| ["main", n]).collect();
        let mut spec: Vec<(&[&str], usize)> = stacks.iter().map(|s| (&s[..], 1)).collect();
        spec.push((&["main", "kappa"], 2));
        let t = crate::testutil::stacks_trace(&spec);
        let b = butterfly(&t, "main", &Selection::default(), 8).unwrap();
        let got: Vec<&str> = b.callees.iter().map(|c| c.name.as_str()).collect();
        let mut tied = names.to_vec();
        tied.sort_unstable();
        let want: Vec<&str> = std::iter::once("kappa").chain(tied).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn unknown_and_ambiguous_names() {
        let t = small_trace();
        assert!(matches!(
            butterfly(&t, "nothing", &Selection::default(), 8),
            Err(AnalyzeError::NoSuchFunction(_))
        ));
        // "m" is in main and memset.
        assert!(matches!(
            butterfly(&t, "m", &Selection::default(), 8),
            Err(AnalyzeError::AmbiguousFunction { .. })
        ));
        // A unique substring works.
        assert_eq!(
            butterfly(&t, "mems", &Selection::default(), 8)
                .unwrap()
                .function,
            "memset"
        );
    }
}
