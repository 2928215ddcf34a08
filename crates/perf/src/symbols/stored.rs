//! The byte forms of what the symbol cache keeps: a big table's sorted
//! index ([`SortedSymbols`]) and the kernel's parsed table
//! ([`Kallsyms`]), with the reading and writing of fields they share with
//! a binary's demangled names (`demangled`); and the key of an ELF symbol
//! table ([`Elf::table_key`]), a hash of everything its index and its
//! names are made from.
//!
//! Reading checks the shape of what it reads (lengths, counts, ranks,
//! ascending addresses, names within their buffer) and gives `None` for
//! anything malformed; it never trusts a file to be well formed. An index
//! and a kallsyms table are then searched in place, in the bytes they were
//! read from. It does no I/O and does not check that bytes are intact
//! (the cache's file frame has a checksum: see `symbolize::cache`).

use object::Endian as _;

use super::index::{Entries, Sorted, STORED_BYTES};
use super::kallsyms::{InPlace, KSym, KSYM_BYTES};
use super::symtab::{Elf, ElfKind};
use super::{Binding, Kallsyms, Rank, SortedSymbols};

/// Little-endian fields appended to a buffer.
#[derive(Default)]
pub(super) struct Writer(pub(super) Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(super) fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(super) fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    /// A length (as u64) and the bytes.
    pub(super) fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
}

/// Little-endian fields read from the front of a buffer; `None` past its
/// end.
pub(super) struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.0.len() {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.take(2)?.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    /// A count of items of at least `item` bytes each, checked against what
    /// is left (so a corrupt count cannot ask for a huge allocation).
    fn count(&mut self, item: usize) -> Option<usize> {
        let n = usize::try_from(self.u64()?).ok()?;
        (n.checked_mul(item)? <= self.0.len()).then_some(n)
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.count(1)?;
        self.take(n)
    }
    pub(super) fn end(&self) -> Option<()> {
        self.0.is_empty().then_some(())
    }
}

/// Where a table stored in place lies in the whole buffer: `count` entries
/// of a fixed size at `entries`, then (a u64 length first) a blob at
/// `blob`, as kallsyms and demangled names are written.
pub(super) struct TableAndBlob<'a> {
    pub(super) count: usize,
    pub(super) entries: std::ops::Range<usize>,
    pub(super) blob: std::ops::Range<usize>,
    /// The bytes after the blob.
    pub(super) rest: Reader<'a>,
}

impl<'a> TableAndBlob<'a> {
    /// Reads one from `all[range]`, entries of `entry_bytes`; `None` if
    /// the counts do not fit.
    pub(super) fn read(
        all: &'a [u8],
        range: std::ops::Range<usize>,
        entry_bytes: usize,
    ) -> Option<Self> {
        let end = range.end;
        let mut r = Reader(all.get(range)?);
        // Where the reader is in `all`.
        let at = |r: &Reader<'_>| end - r.0.len();
        let count = r.count(entry_bytes)?;
        let entries_at = at(&r);
        r.take(count * entry_bytes)?;
        let blob_len = r.count(1)?;
        let blob_at = at(&r);
        r.take(blob_len)?;
        Some(TableAndBlob {
            count,
            entries: entries_at..entries_at + count * entry_bytes,
            blob: blob_at..blob_at + blob_len,
            rest: r,
        })
    }
}

fn rank_byte(r: Rank) -> u8 {
    let binding = match r.binding {
        Binding::Local => 0,
        Binding::Global => 1,
        Binding::Weak => 2,
    };
    binding | u8::from(r.sized) << 2
}

fn rank_from(b: u8) -> Option<Rank> {
    let binding = match b & 3 {
        0 => Binding::Local,
        1 => Binding::Global,
        2 => Binding::Weak,
        _ => return None,
    };
    (b >> 3 == 0).then_some(Rank {
        sized: b & 4 != 0,
        binding,
    })
}

/// The rank of an entry read from bytes that were not checked (never
/// used: entries are read only from bytes checked whole before).
const UNCHECKED: Rank = Rank {
    sized: false,
    binding: Binding::Local,
};

impl Sorted {
    fn write(&self, w: &mut Writer) {
        w.u64(self.addr);
        w.u32(self.order);
        w.u32(self.name);
        w.u32(self.size);
        w.u8(rank_byte(self.rank));
    }

    /// An entry from its [`STORED_BYTES`] bytes; `None` for a bad rank.
    fn checked(b: &[u8]) -> Option<Sorted> {
        let mut r = Reader(b);
        Some(Sorted {
            addr: r.u64()?,
            order: r.u32()?,
            name: r.u32()?,
            size: r.u32()?,
            rank: rank_from(r.u8()?)?,
        })
    }

    /// An entry from bytes [`SortedSymbols::in_place`] checked.
    pub(super) fn read(b: &[u8]) -> Sorted {
        Sorted::checked(b).unwrap_or(Sorted {
            addr: 0,
            order: 0,
            name: 0,
            size: 0,
            rank: UNCHECKED,
        })
    }
}

impl SortedSymbols {
    /// The index as bytes, for [`SortedSymbols::in_place`].
    pub fn to_bytes(&self) -> Vec<u8> {
        let n = self.syms.len();
        let mut w = Writer(Vec::with_capacity(8 + n * STORED_BYTES));
        w.u64(n as u64);
        for i in 0..n {
            self.syms.get(i).write(&mut w);
        }
        w.0
    }

    /// The index whose [`SortedSymbols::to_bytes`] are `bytes[range]`,
    /// searched in place (not copied); `None` if they are not one (wrong
    /// length, a bad rank, addresses out of order).
    pub fn in_place(
        bytes: Box<dyn AsRef<[u8]> + Send + Sync>,
        range: std::ops::Range<usize>,
    ) -> Option<SortedSymbols> {
        let all = bytes.as_ref().as_ref().get(range.clone())?;
        let mut r = Reader(all);
        let count = r.count(STORED_BYTES)?;
        let entries = r.take(count * STORED_BYTES)?;
        r.end()?;
        let mut last = 0;
        for e in entries.chunks_exact(STORED_BYTES) {
            let s = Sorted::checked(e)?;
            if s.addr < last {
                return None;
            }
            last = s.addr;
        }
        Some(SortedSymbols {
            syms: Entries::Stored {
                bytes,
                start: range.start + 8,
                count,
            },
        })
    }
}

/// The form of what is kept under an [`Elf::table_key`]: names by offset,
/// tied symbols chosen, sizes as extents (3: symbols without a size
/// bounded by their section, or by their start in a `.dynsym`-only
/// table). A cache that maps a file to the key of its table must mix it in
/// too, so that what an older form kept is not found.
pub(crate) const TABLE_FORM: u8 = 3;

impl Elf<'_> {
    /// A key for this file's symbol table: a 128-bit hash of the table's
    /// bytes, of its string table's bytes and where it lies, of where its
    /// sections lie, and of the file's class and byte order: everything [`Elf::sorted`] and
    /// [`SortedSymbols::winners`] read, and every name a lookup can give.
    /// So what is kept under it (an index holding names' offsets, names
    /// demangled by offset) is right for any file with this key. Works for
    /// files without a build id (rustup's `librustc_driver` and `libLLVM`
    /// have none), and tells a stripped binary from its debug file (one
    /// build id, two tables).
    pub fn table_key(&self) -> u128 {
        let section = |(off, len): (u64, u64)| {
            usize::try_from(off)
                .ok()
                .zip(usize::try_from(len).ok())
                .and_then(|(o, l)| self.bytes.get(o..o.checked_add(l)?))
                .unwrap_or(&[])
        };
        let (class, little) = match &self.kind {
            ElfKind::E32(t) => (32u8, t.endian.is_little_endian()),
            ElfKind::E64(t) => (64u8, t.endian.is_little_endian()),
        };
        let mut h = twox_hash::XxHash3_128::new();
        h.write(section(self.symtab));
        h.write(section(self.strtab));
        let mut w = Writer::default();
        w.u8(TABLE_FORM);
        w.u64(self.symtab.0);
        w.u64(self.symtab.1);
        w.u64(self.strtab.0);
        w.u64(self.strtab.1);
        w.u64(self.symbol_count() as u64);
        w.u8(class);
        w.u8(u8::from(little));
        w.u8(u8::from(self.dynsym_only));
        // The sections, which bound the symbols without a size.
        let sections = match &self.kind {
            ElfKind::E32(t) => &t.sections,
            ElfKind::E64(t) => &t.sections,
        };
        w.u64(sections.len() as u64);
        for &(start, end) in sections {
            w.u64(start);
            w.u64(end);
        }
        h.write(&w.0);
        h.finish_128()
    }
}

impl KSym {
    fn write(&self, w: &mut Writer) {
        w.u64(self.addr);
        w.u32(self.name);
        w.u16(self.name_len);
        w.u16(self.module);
        w.u8(rank_byte(self.rank));
    }

    /// A symbol from its [`KSYM_BYTES`] bytes; `None` for a bad rank.
    fn checked(b: &[u8]) -> Option<KSym> {
        let mut r = Reader(b);
        Some(KSym {
            addr: r.u64()?,
            name: r.u32()?,
            name_len: r.u16()?,
            module: r.u16()?,
            rank: rank_from(r.u8()?)?,
        })
    }

    /// A symbol from bytes [`Kallsyms::in_place`] checked.
    pub(super) fn read(b: &[u8]) -> KSym {
        KSym::checked(b).unwrap_or(KSym {
            addr: 0,
            name: 0,
            name_len: 0,
            module: 0,
            rank: UNCHECKED,
        })
    }
}

impl Kallsyms {
    /// The parsed table as bytes, for [`Kallsyms::in_place`].
    pub fn to_bytes(&self) -> Vec<u8> {
        let names = self.name_bytes();
        let n = self.len();
        let mut w = Writer(Vec::with_capacity(64 + n * KSYM_BYTES + names.len()));
        w.u64(n as u64);
        for s in (0..n).filter_map(|i| self.ksym(i)) {
            s.write(&mut w);
        }
        w.bytes(names);
        w.u64(self.modules.len() as u64);
        for m in &self.modules {
            w.bytes(m.as_bytes());
        }
        w.u8(u8::from(self.text.is_some()));
        w.u64(self.text.unwrap_or(0));
        w.u64(self.zero as u64);
        w.0
    }

    /// The table whose [`Kallsyms::to_bytes`] are `bytes[range]`, its
    /// symbols and names read in place (not copied); `None` if they are not
    /// one (wrong length, a bad rank, a name outside the names, an unknown
    /// module, addresses out of order).
    pub fn in_place(
        bytes: Box<dyn AsRef<[u8]> + Send + Sync>,
        range: std::ops::Range<usize>,
    ) -> Option<Kallsyms> {
        let all: &[u8] = (*bytes).as_ref();
        let TableAndBlob {
            entries: syms,
            blob: names_at,
            rest: mut r,
            ..
        } = TableAndBlob::read(all, range, KSYM_BYTES)?;
        let (entries, names) = (&all[syms.clone()], &all[names_at.clone()]);
        let module_count = r.count(8)?;
        let modules = (0..module_count)
            .map(|_| Some(std::str::from_utf8(r.bytes()?).ok()?.to_owned()))
            .collect::<Option<Vec<String>>>()?;
        let text = match (r.u8()?, r.u64()?) {
            (0, _) => None,
            (1, t) => Some(t),
            _ => return None,
        };
        let zero = usize::try_from(r.u64()?).ok()?;
        r.end()?;
        let mut last = None;
        for e in entries.chunks_exact(KSYM_BYTES) {
            let s = KSym::checked(e)?;
            let sound = last.is_none_or(|l| l < s.addr)
                && s.name as usize + s.name_len as usize <= names.len()
                && s.module as usize <= modules.len();
            if !sound {
                return None;
            }
            last = Some(s.addr);
        }
        let in_place = InPlace {
            bytes,
            syms,
            names: names_at,
        };
        Some(Kallsyms::read_in_place(in_place, modules, text, zero))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbols::test_binary;

    fn kallsyms() -> Kallsyms {
        Kallsyms::from_text(
            "ffffffff81000000 T _text\n\
             ffffffff81000100 t do_thing\n\
             ffffffff81000100 T do_thing_alias\n\
             ffffffff81000300 W later\n\
             ffffffffc0000000 t ext4_read\t[ext4]\n\
             ffffffffc0001000 t xfs_read\t[xfs]\n",
        )
    }

    #[test]
    fn kallsyms_read_back_look_up_the_same() {
        let k = kallsyms();
        let bytes = k.to_bytes();
        let len = bytes.len();
        // In place, at an offset in a bigger buffer (as in a cache file).
        let mut framed = vec![1u8; 3];
        framed.extend_from_slice(&bytes);
        framed.extend_from_slice(&[9u8; 5]);
        let back = Kallsyms::in_place(Box::new(framed), 3..3 + len).unwrap();
        for addr in [
            0x10,
            0xffff_ffff_8100_0000,
            0xffff_ffff_8100_0150,
            0xffff_ffff_8100_0400,
            0xffff_ffff_c000_0010,
            0xffff_ffff_c000_1010,
        ] {
            assert_eq!(back.lookup(addr), k.lookup(addr), "{addr:#x}");
        }
        assert_eq!(back.text, k.text);
        assert_eq!(back.to_bytes(), k.to_bytes());
    }

    #[test]
    fn a_sorted_index_reads_back_the_same() {
        let bytes = test_binary();
        let elf = Elf::parse(&bytes).unwrap();
        let index = elf.sorted();
        let stored = index.to_bytes();
        let len = stored.len();
        // In place, at an offset in a bigger buffer (as in a cache file).
        let mut framed = vec![7u8; 5];
        framed.extend_from_slice(&stored);
        framed.extend_from_slice(&[9u8; 3]);
        let back = SortedSymbols::in_place(Box::new(framed), 5..5 + len).unwrap();
        assert_eq!(back.to_bytes(), stored);
        assert!(back.syms.len() > 100, "{} symbols", back.syms.len());
        // It finds what the index it was made from finds.
        let mut queries: Vec<u64> = (0..index.syms.len())
            .flat_map(|i| {
                let a = index.syms.get(i).addr;
                [a.saturating_sub(1), a, a + 3]
            })
            .collect();
        queries.sort_unstable();
        assert_eq!(
            back.resolve(&elf, &queries, &mut |_| {}),
            index.resolve(&elf, &queries, &mut |_| {})
        );
    }

    #[test]
    fn damaged_bytes_are_refused_not_trusted() {
        let k = kallsyms().to_bytes();
        let index = Elf::parse(&test_binary()).unwrap().sorted().to_bytes();
        let mut names = crate::symbols::DemangledNames::default();
        names.insert(4096, "foo::bar");
        let names = names.to_bytes();
        for (what, bytes) in [("kallsyms", &k), ("index", &index), ("names", &names)] {
            let read = |b: &[u8]| match what {
                "kallsyms" => Kallsyms::in_place(Box::new(b.to_vec()), 0..b.len()).is_some(),
                "index" => SortedSymbols::in_place(Box::new(b.to_vec()), 0..b.len()).is_some(),
                _ => crate::symbols::DemangledNames::in_place(Box::new(b.to_vec()), 0..b.len())
                    .is_some(),
            };
            assert!(read(bytes), "{what}");
            // Cut short anywhere, or one byte too long: refused.
            for cut in [0, 1, 7, 8, 9, bytes.len() / 2, bytes.len() - 1] {
                assert!(!read(&bytes[..cut]), "{what} cut at {cut}");
            }
            let mut longer = bytes.clone();
            longer.push(0);
            assert!(!read(&longer), "{what} with a byte more");
            // A count that would ask for terabytes.
            let mut huge = bytes.clone();
            huge[..8].copy_from_slice(&(u64::MAX / 2).to_le_bytes());
            assert!(!read(&huge), "{what} with a huge count");
        }
        // A kallsyms name pointing past the names.
        let mut bad = k.clone();
        bad[8 + 8..8 + 12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(Kallsyms::in_place(Box::new(bad), 0..k.len()).is_none());
        // Index addresses out of order.
        let mut bad = index.clone();
        bad[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        let len = bad.len();
        assert!(SortedSymbols::in_place(Box::new(bad), 0..len).is_none());
    }

    #[test]
    fn the_table_key_follows_the_table_not_the_rest_of_the_file() {
        let bytes = test_binary();
        let key = Elf::parse(&bytes).unwrap().table_key();
        // Code changed, table not: the same key.
        let mut code = bytes.clone();
        let segments = Elf::parse(&bytes).unwrap().segments;
        let (off, len, _) = segments.iter().max_by_key(|s| s.1).unwrap();
        code[(off + len / 2) as usize] ^= 0xff;
        assert_eq!(Elf::parse(&code).unwrap().table_key(), key);
        // One byte of the table, or of one of its names, changed: another
        // key.
        let elf = Elf::parse(&bytes).unwrap();
        for (off, len) in [elf.symtab, elf.strtab] {
            let mut table = bytes.clone();
            table[(off + len / 2) as usize] ^= 1;
            assert_ne!(Elf::parse(&table).unwrap().table_key(), key);
        }
    }
}
