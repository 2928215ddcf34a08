//! The sorted index of a big symbol table ([`SortedSymbols`]): built once
//! when its binary is opened (the function symbols, sorted by address and
//! file order), then searched in each round of queries by galloping from
//! one ascending query to the next, with perf's rule choosing among the
//! symbols at one address. The symbol cache keeps an index with that
//! choice made ([`SortedSymbols::winners`]), so that its lookups read no
//! name.
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
    /// How many bytes from `addr` it names (`Table::extent`; 0: up to the
    /// next symbol).
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
        let mut distinct: Vec<(usize, usize)> = groups.iter().flatten().copied().collect();
        distinct.dedup();
        let mut need: Vec<u32> = distinct
            .iter()
            .filter(|&&g| tied(syms, g).count() > 1)
            .flat_map(|&g| tied(syms, g).map(|s| s.name))
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
                        let best = best_of(syms, g, elf);
                        chosen = Some((g, best));
                        best
                    }
                };
                let b = best?;
                (b.size == 0 || q < b.addr.saturating_add(b.size as u64)).then_some(b.name)
            })
            .collect()
    }

    /// The same index with one symbol per address: the one
    /// [`SortedSymbols::resolve`] would choose there (which depends on the
    /// symbols at the address alone, not on the query). Lookups in it give
    /// the same names and read none: this is the form the symbol cache
    /// keeps, so that a run that finds it there never reads the binary's
    /// symbol or string tables (choosing among tied symbols reads names).
    pub fn winners(&self, elf: &Elf<'_>) -> SortedSymbols {
        let syms = self.syms.view();
        let mut out = Vec::with_capacity(syms.len());
        let mut first = 0;
        while first < syms.len() {
            let addr = syms.addr(first);
            let mut end = first + 1;
            while end < syms.len() && syms.addr(end) == addr {
                end += 1;
            }
            out.extend(best_of(syms, (first, end), elf));
            first = end;
        }
        SortedSymbols {
            syms: Entries::Made(out),
        }
    }
}

/// The symbols of the group `a..b` (all at one address, in file order) of
/// the group's top rank: names decide only among those.
fn tied(syms: View<'_>, (a, b): (usize, usize)) -> impl Iterator<Item = Sorted> + '_ {
    let group = move || (a..b).map(move |i| syms.get(i));
    let top = group().map(|s| rank_key(s.rank)).max();
    group().filter(move |s| Some(rank_key(s.rank)) == top)
}

/// The symbol perf names for an address whose symbols are the group
/// `g`: of the tied ones, in file order, the first stays unless a later
/// one is better.
fn best_of(syms: View<'_>, g: (usize, usize), elf: &Elf<'_>) -> Option<Sorted> {
    let mut best: Option<Sorted> = None;
    for s in tied(syms, g) {
        best = match best {
            Some(b) if !better(s.rank, elf.name(s.name), b.rank, elf.name(b.name)) => Some(b),
            _ => Some(s),
        };
    }
    best
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
                    size: u32::try_from(self.extent(s)).unwrap_or(u32::MAX),
                    rank: Rank {
                        sized: size > 0,
                        binding: binding(s.st_bind()),
                    },
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbols::{test_binary, Binding};

    /// Lookups in the winners give what lookups in the whole index give,
    /// and read no name: on groups of tied symbols made from the test
    /// binary's own names (shorter and longer names, more leading
    /// underscores, weak and global, sized or not), and on its real table.
    #[test]
    fn the_winners_name_every_address_as_the_whole_index_does() {
        let bytes = test_binary();
        let elf = Elf::parse(&bytes).unwrap();
        let index = elf.sorted();
        let mut names: Vec<u32> = (0..index.syms.len())
            .map(|i| index.syms.get(i).name)
            .collect();
        names.sort_by_key(|&n| (elf.name(n).len(), n));
        names.dedup();
        let underscored = names
            .iter()
            .copied()
            .find(|&n| elf.name(n).starts_with(b"__"))
            .expect("a name with leading underscores");
        // Two with one leading underscore each (Rust's `_ZN`), the shortest
        // and the longest.
        names.retain(|&n| elf.name(n).starts_with(b"_ZN"));
        let (short, long) = (names[0], names[names.len() - 1]);
        assert!(elf.name(short).len() < elf.name(long).len());
        let rank = |sized, binding| Rank { sized, binding };
        let (g, w, l) = (Binding::Global, Binding::Weak, Binding::Local);
        // (symbols at one address, in file order): name, rank, size.
        let groups: Vec<Vec<(u32, Rank, u32)>> = vec![
            vec![(short, rank(true, g), 16), (long, rank(true, g), 8)],
            vec![(long, rank(true, w), 16), (short, rank(true, g), 8)],
            vec![(short, rank(false, g), 0), (long, rank(true, l), 4)],
            vec![(underscored, rank(true, g), 16), (short, rank(true, g), 16)],
            vec![(short, rank(true, g), 16), (short, rank(true, g), 32)],
            vec![(long, rank(true, l), 2)],
        ];
        let mut syms = Vec::new();
        for (i, group) in groups.iter().enumerate() {
            for (order, &(name, rank, size)) in group.iter().enumerate() {
                syms.push(Sorted {
                    addr: 0x1000 * (i as u64 + 1),
                    order: order as u32,
                    name,
                    size,
                    rank,
                });
            }
        }
        let made = SortedSymbols {
            syms: Entries::Made(syms),
        };
        let winners = made.winners(&elf);
        assert_eq!(winners.syms.len(), groups.len());
        let queries: Vec<u64> = (0..=groups.len() as u64 + 1)
            .flat_map(|i| [0x1000 * i, 0x1000 * i + 3, 0x1000 * i + 12, 0x1000 * i + 20])
            .collect();
        let mut read_names = 0;
        let all = made.resolve(&elf, &queries, &mut |n| read_names += n.count());
        assert!(read_names > 0, "the tied groups read names");
        let mut read_names = 0;
        let won = winners.resolve(&elf, &queries, &mut |n| read_names += n.count());
        assert_eq!(won, all);
        assert_eq!(read_names, 0);
        // What perf's rule chose: the longer name, the global one, the sized
        // one (too small for +12), the one with fewer underscores, the first
        // of a full tie (its size, 16, not the second's 32).
        let at = |i: usize, off: u64| {
            let q = queries
                .iter()
                .position(|&q| q == 0x1000 * (i as u64 + 1) + off);
            all[q.unwrap()]
        };
        assert_eq!(at(0, 3), Some(long));
        assert_eq!(at(1, 3), Some(short));
        assert_eq!((at(2, 3), at(2, 12)), (Some(long), None));
        assert_eq!(at(3, 3), Some(short));
        assert_eq!((at(4, 12), at(4, 20)), (Some(short), None));
        // The real table: every symbol's address, and just past it.
        let mut real: Vec<u64> = (0..index.syms.len())
            .flat_map(|i| {
                let a = index.syms.get(i).addr;
                [a, a + 1]
            })
            .collect();
        real.sort_unstable();
        let whole = index.resolve(&elf, &real, &mut |_| {});
        assert_eq!(index.winners(&elf).resolve(&elf, &real, &mut |_| {}), whole);
        assert_eq!(whole, elf.resolve(&real, &mut |_| {}));
    }
}
