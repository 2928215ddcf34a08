//! The one-pass search of an ELF symbol table: for ascending queries, each
//! symbol met in file order is kept if it is the best so far of the gap
//! between queries it starts in (ties on address and rank settled by name,
//! by perf's rule, at the end); a prefix pass then gives each query the
//! nearest symbol at or below it.
//!
//! It reads no symbol table itself: `symtab` offers it the entries.

use super::{better, rank_key, Rank};

/// A symbol chosen for a query.
#[derive(Clone, Copy, Debug)]
pub(super) struct Cand {
    pub(super) addr: u64,
    /// How many bytes from `addr` it names (`Table::extent`; 0: up to the
    /// next symbol).
    pub(super) size: u64,
    /// Offset of the NUL-terminated name in the file.
    pub(super) name: u32,
    pub(super) rank: Rank,
}

/// For sorted `queries`, the best candidate at or below each one, given
/// the candidates as they come (any order), by the gap-bucket method
/// described in the module doc. `name_of` reads a candidate's name (only
/// needed to break ties between symbols at the same address).
pub(super) struct Buckets<'q> {
    queries: &'q [u64],
    best: Vec<Option<Cand>>,
    /// Symbols that tie with the best of their gap on address and rank:
    /// only their names can decide, and names are read at the end, all at
    /// once (reading them during the scan would wait for the disk once per
    /// tie when the page cache is cold).
    ties: Vec<(u32, Cand)>,
    /// `jump[k]`: the first query at or above `lo + (k << shift)`, so a
    /// symbol's gap is found by a search over a few queries only.
    jump: Vec<u32>,
    lo: u64,
    shift: u32,
}

impl<'q> Buckets<'q> {
    pub(super) fn new(queries: &'q [u64]) -> Self {
        let (lo, hi) = match (queries.first(), queries.last()) {
            (Some(&lo), Some(&hi)) => (lo, hi),
            _ => (0, 0),
        };
        let slots = queries.len().next_power_of_two().max(1) as u64;
        let span = hi - lo;
        let mut shift = 0;
        while (span >> shift) >= slots {
            shift += 1;
        }
        let n = (span >> shift) as usize + 2;
        let mut jump = Vec::with_capacity(n);
        let mut i = 0usize;
        for k in 0..n as u64 {
            let at = lo.saturating_add(k << shift);
            while i < queries.len() && queries[i] < at {
                i += 1;
            }
            jump.push(i as u32);
        }
        Buckets {
            queries,
            best: vec![None; queries.len()],
            ties: Vec::new(),
            jump,
            lo,
            shift,
        }
    }

    /// Index of the first query at or above `addr`.
    #[inline]
    fn gap(&self, addr: u64) -> usize {
        if addr <= self.lo {
            return 0;
        }
        let k = ((addr - self.lo) >> self.shift) as usize;
        let (Some(&a), Some(&b)) = (self.jump.get(k), self.jump.get(k + 1)) else {
            return self.queries.len();
        };
        let (a, b) = (a as usize, b as usize);
        a + self.queries[a..b].partition_point(|&q| q < addr)
    }

    /// A symbol, in file order. It is the best so far for the queries of
    /// the gap it starts in if it starts highest in that gap.
    #[inline]
    pub(super) fn offer(&mut self, c: Cand) {
        let i = self.gap(c.addr);
        let Some(slot) = self.best.get_mut(i) else {
            return;
        };
        match slot {
            None => *slot = Some(c),
            Some(old) if c.addr > old.addr => *slot = Some(c),
            Some(old) if c.addr == old.addr => match rank_key(c.rank).cmp(&rank_key(old.rank)) {
                std::cmp::Ordering::Greater => *slot = Some(c),
                std::cmp::Ordering::Equal => self.ties.push((i as u32, c)),
                std::cmp::Ordering::Less => {}
            },
            Some(_) => {}
        }
    }

    /// For each query: the name offset of the nearest symbol at or below
    /// it, unless that symbol has a size and ends before the query.
    /// `prefetch` is told the names that ties need before `name_of` reads
    /// them.
    pub(super) fn finish(
        mut self,
        name_of: &dyn Fn(u32) -> &'q [u8],
        prefetch: &mut dyn FnMut(&mut dyn Iterator<Item = u32>),
    ) -> Vec<Option<u32>> {
        // Ties still standing: same address and rank as their gap's best.
        let best = &self.best;
        self.ties.retain(|&(i, c)| {
            best[i as usize]
                .is_some_and(|b| b.addr == c.addr && rank_key(b.rank) == rank_key(c.rank))
        });
        if !self.ties.is_empty() {
            let mut offs: Vec<u32> = self.ties.iter().map(|t| t.1.name).collect();
            offs.extend(
                self.ties
                    .iter()
                    .filter_map(|t| Some(best[t.0 as usize]?.name)),
            );
            offs.sort_unstable();
            prefetch(&mut offs.into_iter());
            // In file order: on a full tie the first one stays, as in perf.
            for &(i, c) in &self.ties {
                if let Some(b) = &mut self.best[i as usize] {
                    if better(c.rank, name_of(c.name), b.rank, name_of(b.name)) {
                        *b = c;
                    }
                }
            }
        }
        let mut cur: Option<Cand> = None;
        self.queries
            .iter()
            .zip(self.best)
            .map(|(&q, b)| {
                if b.is_some() {
                    cur = b;
                }
                let c = cur?;
                (c.size == 0 || q < c.addr.saturating_add(c.size)).then_some(c.name)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::symbols::{cstr, Binding};

    #[test]
    fn buckets_pick_nearest_symbol_below_each_query() {
        let queries = [5, 10, 15, 40, 100];
        let names: &[u8] = b"\0a\0b\0_c\0d\0";
        let name_of = |off: u32| cstr(names, off as usize);
        let mut b = Buckets::new(&queries);
        let mut asked = Vec::new();
        let cand = |addr, size, name| Cand {
            addr,
            size,
            name,
            rank: Rank {
                sized: size > 0,
                binding: Binding::Global,
            },
        };
        // Offered out of order; `d` is sized and ends before 100.
        b.offer(cand(30, 20, 7));
        b.offer(cand(10, 0, 5)); // `_c`, then its alias `a`: fewer underscores wins
        b.offer(cand(10, 0, 1));
        b.offer(cand(12, 0, 3));
        let got = b.finish(&name_of, &mut |offs| asked.extend(offs));
        assert_eq!(got, vec![None, Some(1), Some(3), Some(7), None]);
        assert_eq!(asked, vec![1, 5]);
    }
}
