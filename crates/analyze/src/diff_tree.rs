//! The merged call tree of two traces' sampled CPU, which the interactive
//! diff page draws as a differential flame graph: one node per distinct
//! call path (process; outermost; …; innermost, as in the folded stacks of
//! [`differential_lines`](crate::diff::differential_lines)) with A's and B's self samples, A scaled to B's
//! total so that a path whose share did not change has equal weights.
//!
//! Columnar (names interned once, parents before children) so that the
//! page can embed it compactly. Pure: no I/O, no drawing.

use std::collections::HashMap;

pub use slowlab_model::views::diff::DiffTree;

/// The merged tree of two traces' folded stacks, as
/// [`differential_lines`](crate::diff::differential_lines) gives them.
pub fn diff_tree(lines: &[String]) -> DiffTree {
    let mut tree = DiffTree::default();
    let mut name_ix: HashMap<String, u32> = HashMap::new();
    let mut node_ix: HashMap<(i32, u32), usize> = HashMap::new();
    for line in lines {
        let mut fields = line.rsplitn(3, ' ');
        let (Some(nb), Some(na), Some(path)) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        let (Ok(na), Ok(nb)) = (na.parse::<u64>(), nb.parse::<u64>()) else {
            continue;
        };
        let mut parent = -1i32;
        let mut node = None;
        for frame in path.split(';') {
            let next_name = name_ix.len() as u32;
            let n = *name_ix.entry(frame.to_owned()).or_insert_with(|| {
                tree.names.push(frame.to_owned());
                next_name
            });
            let ix = *node_ix.entry((parent, n)).or_insert_with(|| {
                tree.name.push(n);
                tree.parent.push(parent);
                tree.a.push(0);
                tree.b.push(0);
                tree.name.len() - 1
            });
            parent = ix as i32;
            node = Some(ix);
        }
        if let Some(ix) = node {
            tree.a[ix] += na;
            tree.b[ix] += nb;
        }
    }
    tree
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::differential_lines;
    use crate::select::Selection;
    use crate::testutil::{grown_trace, small_trace};

    fn path(t: &DiffTree, mut ix: usize) -> String {
        let mut names = vec![t.names[t.name[ix] as usize].clone()];
        while t.parent[ix] >= 0 {
            ix = t.parent[ix] as usize;
            names.push(t.names[t.name[ix] as usize].clone());
        }
        names.reverse();
        names.join(";")
    }

    #[test]
    fn paths_merge_into_one_tree_with_both_weights() {
        let a = small_trace();
        let b = grown_trace(6, 10);
        let t = diff_tree(&differential_lines(&a, &b, &Selection::default()));
        assert!(t.parent.iter().enumerate().all(|(i, &p)| p < i as i32));
        // Each path once, shared prefixes shared.
        let paths: Vec<String> = (0..t.name.len()).map(|i| path(&t, i)).collect();
        let mut unique = paths.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), paths.len(), "{paths:?}");
        let at = |p: &str| paths.iter().position(|x| x == p).unwrap();
        // A: 6 samples scaled to B's 12; work's 2 became memset's in B.
        let work = at("app;main;work");
        assert_eq!((t.a[work], t.b[work]), (4, 0));
        let memset = at("app;main;work;memset_[k]");
        assert_eq!((t.a[memset], t.b[memset]), (6, 11));
        assert_eq!(t.a.iter().sum::<u64>(), t.b.iter().sum::<u64>());
        assert_eq!(t.parent[at("app")], -1);
    }
}
