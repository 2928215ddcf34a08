//! The sorted index of a big symbol table ([`SortedSymbols`]): built once
//! when its binary is opened (the function symbols, sorted by address and
//! file order), then searched in each round of queries by galloping from
//! one ascending query to the next, with perf's rule choosing among the
//! symbols at one address.
//!
//! Tables small enough to scan once per round never get one (`scan`).

use object::read::elf::{FileHeader, Sym as _};

use super::symtab::{Elf, ElfKind, Table};
use super::{better, binding, first_above, rank_key, sort_by_address, Rank};

/// A binary's function symbols sorted by address, for tables too big to
/// scan once per batch of queries: built once (in the background, when the
/// binary is opened), then each lookup is a binary search. Symbols at one
/// address are all kept and chosen among at lookup, by perf's rule, with
/// the first in file order winning a full tie (as [`Elf::resolve`] does).
pub struct SortedSymbols {
    pub(super) syms: Entries,
}

/// The entries of an index: made here, or read in place from a stored
/// index's bytes (a mapped cache file: megabytes not copied).
pub(super) enum Entries {
    Made(Vec<Sorted>),
    /// `count` entries of [`STORED_BYTES`] each, from `start` in `bytes`
    /// (checked when read: see `stored`).
    Stored {
        bytes: Box<dyn AsRef<[u8]> + Send + Sync>,
        start: usize,
        count: usize,
    },
}

/// Bytes of one stored entry: address, order, name, size, rank.
pub(super) const STORED_BYTES: usize = 21;

impl Entries {
    /// The entries as slices, to search (the stored bytes are found once,
    /// not at each entry).
    pub(super) fn view(&self) -> View<'_> {
        match self {
            Entries::Made(v) => View::Made(v),
            Entries::Stored {
                bytes,
                start,
                count,
            } => {
                let all: &[u8] = (**bytes).as_ref();
                View::Stored(&all[*start..*start + count * STORED_BYTES])
            }
        }
    }

    pub(super) fn len(&self) -> usize {
        self.view().len()
    }

    pub(super) fn get(&self, i: usize) -> Sorted {
        self.view().get(i)
    }
}

/// [`Entries`], borrowed.
#[derive(Clone, Copy)]
pub(super) enum View<'a> {
    Made(&'a [Sorted]),
    Stored(&'a [u8]),
}

impl View<'_> {
    fn len(self) -> usize {
        match self {
            View::Made(v) => v.len(),
            View::Stored(b) => b.len() / STORED_BYTES,
        }
    }

    /// Entry `i` (below [`View::len`]).
    #[inline]
    fn get(self, i: usize) -> Sorted {
        match self {
            View::Made(v) => v[i],
            View::Stored(b) => Sorted::read(&b[i * STORED_BYTES..(i + 1) * STORED_BYTES]),
        }
    }

    #[inline]
    fn addr(self, i: usize) -> u64 {
        match self {
            View::Made(v) => v[i].addr,
            View::Stored(b) => {
                let at = i * STORED_BYTES;
                u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default())
            }
        }
    }
}

#[derive(Clone, Copy)]
pub(super) struct Sorted {
    pub(super) addr: u64,
    /// Position in the symbol table (ties go to the first).
    pub(super) order: u32,
    pub(super) name: u32,
    pub(super) size: u32,
    pub(super) rank: Rank,
}

impl SortedSymbols {
    /// The first symbol above `q`, searched from `from` on (every symbol
    /// before `from` is at or below `q`) by doubling steps, then halving.
    fn first_above_from(syms: View<'_>, from: usize, q: u64) -> usize {
        let (mut lo, mut hi, mut step) = (from, from, 1);
        while hi < syms.len() && syms.addr(hi) <= q {
            lo = hi + 1;
            hi = lo + step;
            step <<= 1;
        }
        // The first above `q` in `lo..hi`, by halving.
        first_above(lo, hi.min(syms.len()), |i| syms.addr(i) <= q)
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
        // than a binary search over the whole table per query. Neighbouring
        // queries are mostly in one function (a build trace's 106 thousand
        // frames in libLLVM are in 6.7 thousand): a group is found, and its
        // best symbol chosen, once for the queries in a row that share it.
        let syms = self.syms.view();
        let mut from = 0;
        let mut last: Option<(usize, Option<(usize, usize)>)> = None;
        let groups: Vec<Option<(usize, usize)>> = queries
            .iter()
            .map(|&q| {
                let end = Self::first_above_from(syms, from, q);
                from = end;
                if let Some((_, group)) = last.filter(|&(e, _)| e == end) {
                    return group;
                }
                let group = end.checked_sub(1).map(|top| {
                    let addr = syms.addr(top);
                    let mut first = top;
                    while first > 0 && syms.addr(first - 1) == addr {
                        first -= 1;
                    }
                    (first, end)
                });
                last = Some((end, group));
                group
            })
            .collect();
        // Names decide only among equal ranks at one address.
        let tied = |&(a, b): &(usize, usize)| {
            let group = move || (a..b).map(move |i| syms.get(i));
            let top = group().map(|s| rank_key(s.rank)).max();
            group().filter(move |s| Some(rank_key(s.rank)) == top)
        };
        let mut distinct: Vec<(usize, usize)> = groups.iter().flatten().copied().collect();
        distinct.dedup();
        let mut need: Vec<u32> = distinct
            .iter()
            .filter(|g| tied(g).count() > 1)
            .flat_map(|g| tied(g).map(|s| s.name))
            .collect();
        drop(distinct);
        if !need.is_empty() {
            need.sort_unstable();
            need.dedup();
            prefetch(&mut need.into_iter());
        }
        let mut chosen: Option<((usize, usize), Option<Sorted>)> = None;
        queries
            .iter()
            .zip(groups)
            .map(|(&q, g)| {
                let g = g?;
                let best = match chosen {
                    Some((at, best)) if at == g => best,
                    _ => {
                        // In file order: the first stays unless a later one
                        // is better.
                        let mut best: Option<Sorted> = None;
                        for s in tied(&g) {
                            best = match best {
                                Some(b)
                                    if !better(
                                        s.rank,
                                        elf.name(s.name),
                                        b.rank,
                                        elf.name(b.name),
                                    ) =>
                                {
                                    Some(b)
                                }
                                _ => Some(s),
                            };
                        }
                        chosen = Some((g, best));
                        best
                    }
                };
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
        // By address, then file order (the order the entries are in).
        sort_by_address(&mut syms, |s| s.addr);
        SortedSymbols {
            syms: Entries::Made(syms),
        }
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
