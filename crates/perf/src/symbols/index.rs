//! The sorted index of a big symbol table ([`SortedSymbols`]): built once
//! when its binary is opened (the function symbols, sorted by address and
//! file order), then searched in each round of queries by galloping from
//! one ascending query to the next, with perf's rule choosing among the
//! symbols at one address.
//!
//! Tables small enough to scan once per round never get one (`scan`).

use object::read::elf::{FileHeader, Sym as _};

use super::symtab::{Elf, ElfKind, Table};
use super::{better, binding, rank_key, Rank};

/// A binary's function symbols sorted by address, for tables too big to
/// scan once per batch of queries: built once (in the background, when the
/// binary is opened), then each lookup is a binary search. Symbols at one
/// address are all kept and chosen among at lookup, by perf's rule, with
/// the first in file order winning a full tie (as [`Elf::resolve`] does).
pub struct SortedSymbols {
    syms: Vec<Sorted>,
}

#[derive(Clone, Copy)]
struct Sorted {
    addr: u64,
    /// Position in the symbol table (ties go to the first).
    order: u32,
    name: u32,
    size: u32,
    rank: Rank,
}

impl SortedSymbols {
    /// The first symbol above `q`, searched from `from` on (every symbol
    /// before `from` is at or below `q`) by doubling steps, then halving.
    fn first_above(&self, from: usize, q: u64) -> usize {
        let syms = &self.syms;
        let (mut lo, mut hi, mut step) = (from, from, 1);
        while hi < syms.len() && syms[hi].addr <= q {
            lo = hi + 1;
            hi = lo + step;
            step <<= 1;
        }
        let hi = hi.min(syms.len());
        lo + syms[lo..hi].partition_point(|s| s.addr <= q)
    }

    /// For each of the ascending addresses `queries`, the file offset of
    /// the name of the function containing it (see [`Elf::resolve`]).
    pub fn resolve(
        &self,
        elf: &Elf<'_>,
        queries: &[u64],
        prefetch: &mut dyn FnMut(&mut dyn Iterator<Item = u32>),
    ) -> Vec<Option<u32>> {
        // The group of symbols at the address below each query. The queries
        // ascend, so each search starts where the last one ended and
        // gallops from there: a few steps through memory just read, rather
        // than a binary search over the whole table per query.
        let mut from = 0;
        let groups: Vec<Option<(usize, usize)>> = queries
            .iter()
            .map(|&q| {
                let end = self.first_above(from, q);
                from = end;
                let last = end.checked_sub(1)?;
                let addr = self.syms[last].addr;
                let mut first = last;
                while first > 0 && self.syms[first - 1].addr == addr {
                    first -= 1;
                }
                Some((first, end))
            })
            .collect();
        // Names decide only among equal ranks at one address.
        let tied = |&(a, b): &(usize, usize)| {
            let top = self.syms[a..b].iter().map(|s| rank_key(s.rank)).max();
            self.syms[a..b]
                .iter()
                .filter(move |s| Some(rank_key(s.rank)) == top)
        };
        let mut need: Vec<u32> = groups
            .iter()
            .flatten()
            .filter(|g| tied(g).count() > 1)
            .flat_map(|g| tied(g).map(|s| s.name))
            .collect();
        if !need.is_empty() {
            need.sort_unstable();
            need.dedup();
            prefetch(&mut need.into_iter());
        }
        queries
            .iter()
            .zip(groups)
            .map(|(&q, g)| {
                let g = g?;
                // In file order: the first stays unless a later one is better.
                let mut best: Option<Sorted> = None;
                for &s in tied(&g) {
                    best = match best {
                        Some(b) if !better(s.rank, elf.name(s.name), b.rank, elf.name(b.name)) => {
                            Some(b)
                        }
                        _ => Some(s),
                    };
                }
                let b = best?;
                (b.size == 0 || q < b.addr.saturating_add(b.size as u64)).then_some(b.name)
            })
            .collect()
    }
}

impl Elf<'_> {
    /// The function symbols sorted by address, for many lookups.
    pub fn sorted(&self) -> SortedSymbols {
        let mut syms = match &self.kind {
            ElfKind::E32(t) => t.sorted(),
            ElfKind::E64(t) => t.sorted(),
        };
        // By address, then file order. The entries are in file order, so
        // where address and position fit one word together (addresses
        // below 2^40 and fewer than 2^24 symbols: every library and
        // executable seen) the words are sorted instead: sorting plain
        // integers is several times faster than sorting the entries.
        let fits = syms.len() < 1 << 24 && syms.iter().all(|s| s.addr < 1 << 40);
        if fits {
            let mut keys: Vec<u64> = syms
                .iter()
                .enumerate()
                .map(|(i, s)| s.addr << 24 | i as u64)
                .collect();
            keys.sort_unstable();
            syms = keys
                .iter()
                .map(|k| syms[(k & 0xff_ffff) as usize])
                .collect();
        } else {
            syms.sort_unstable_by_key(|s| (s.addr, s.order));
        }
        SortedSymbols { syms }
    }
}

impl<H: FileHeader> Table<'_, H> {
    fn sorted(&self) -> Vec<Sorted> {
        self.syms
            .iter()
            .enumerate()
            .filter(|(_, s)| self.is_function(s))
            .filter_map(|(i, s)| {
                let name = self.strtab.0 + u64::from(s.st_name(self.endian));
                let size: u64 = s.st_size(self.endian).into();
                Some(Sorted {
                    addr: s.st_value(self.endian).into(),
                    order: u32::try_from(i).ok()?,
                    name: u32::try_from(name).ok()?,
                    size: u32::try_from(size).unwrap_or(u32::MAX),
                    rank: Rank {
                        sized: size > 0,
                        binding: binding(s.st_bind()),
                    },
                })
            })
            .collect()
    }
}
