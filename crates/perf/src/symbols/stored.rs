//! The byte forms of what the symbol cache keeps: a big table's sorted
//! index ([`SortedSymbols`]), the kernel's parsed table ([`Kallsyms`]),
//! and a binary's demangled names ([`DemangledNames`]); and the key of an
//! ELF symbol table ([`Elf::table_key`]), a hash of everything its index
//! and its names are made from.
//!
//! Reading checks the shape of what it reads (lengths, counts, ranks,
//! ascending addresses, names within their buffer) and gives `None` for
//! anything malformed; it never trusts a file to be well formed. An index,
//! a kallsyms table and demangled names are then searched in place, in
//! the bytes they were read from. It does no I/O and does not check
//! that bytes are intact (the cache's file frame has a checksum: see
//! `symbolize::cache`).

use object::Endian as _;

use super::index::{Entries, Sorted, STORED_BYTES};
use super::kallsyms::{InPlace, KSym, KSYM_BYTES};
use super::symtab::{Elf, ElfKind};
use super::{Binding, Kallsyms, Rank, SortedSymbols};
use crate::intern::FxMap;

/// Little-endian fields appended to a buffer.
#[derive(Default)]
struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    /// A length (as u64) and the bytes.
    fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
}

/// Little-endian fields read from the front of a buffer; `None` past its
/// end.
struct Reader<'a>(&'a [u8]);

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
    fn end(&self) -> Option<()> {
        self.0.is_empty().then_some(())
    }
}

/// Where a table stored in place lies in the whole buffer: `count` entries
/// of a fixed size at `entries`, then (a u64 length first) a blob at
/// `blob`, as kallsyms and demangled names are written.
struct TableAndBlob<'a> {
    count: usize,
    entries: std::ops::Range<usize>,
    blob: std::ops::Range<usize>,
    /// The bytes after the blob.
    rest: Reader<'a>,
}

impl<'a> TableAndBlob<'a> {
    /// Reads one from `all[range]`, entries of `entry_bytes`; `None` if
    /// the counts do not fit.
    fn read(all: &'a [u8], range: std::ops::Range<usize>, entry_bytes: usize) -> Option<Self> {
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

impl Elf<'_> {
    /// A key for this file's symbol table: a 128-bit hash of the table's
    /// bytes, of its string table's bytes and where it lies, and of the
    /// file's class and byte order: everything [`Elf::sorted`] and
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
        // The form of what is kept: names by offset, tied symbols chosen.
        w.u8(2);
        w.u64(self.symtab.0);
        w.u64(self.symtab.1);
        w.u64(self.strtab.0);
        w.u64(self.strtab.1);
        w.u64(self.symbol_count() as u64);
        w.u8(class);
        w.u8(u8::from(little));
        w.u8(u8::from(self.dynsym_only));
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

/// A binary's names as demangled before, by the file offset of the
/// mangled name (the names the traces analyzed so far hit: tens of
/// thousands for a big binary after a few traces). Kept under the key of
/// the table the offsets are in ([`Elf::table_key`], which covers the
/// names' bytes), so a name found here is read from no file.
///
/// Those read from the cache are searched in place, in the bytes they
/// were read from: a run looks up a few thousand of them, and making a map
/// of all (one string each) took longer than the whole lookup as the
/// cache grew. Names added by this run are kept beside them.
#[derive(Default)]
pub struct DemangledNames {
    kept: Option<KeptNames>,
    added: FxMap<u32, String>,
}

/// Names read from the cache: `count` entries (the name's offset and the
/// end of its demangled form in the text, both u32, ascending) at
/// `entries`, then the demangled forms one after the other at `text`.
struct KeptNames {
    bytes: Box<dyn AsRef<[u8]> + Send + Sync>,
    entries: usize,
    count: usize,
    text: usize,
}

/// Bytes of one stored entry: the name's offset and its text's end.
const NAME_ENTRY_BYTES: usize = 8;

impl KeptNames {
    fn all(&self) -> &[u8] {
        (*self.bytes).as_ref()
    }

    /// Entry `i`: the name's offset and its text's end.
    fn entry(&self, i: usize) -> (u32, u32) {
        let at = self.entries + i * NAME_ENTRY_BYTES;
        let e = &self.all()[at..at + NAME_ENTRY_BYTES];
        (
            u32::from_le_bytes(e[..4].try_into().expect("4 bytes")),
            u32::from_le_bytes(e[4..].try_into().expect("4 bytes")),
        )
    }

    /// The bytes of entry `i`'s demangled form.
    fn text(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.entry(i - 1).1 };
        let end = self.entry(i).1;
        &self.all()[self.text + start as usize..self.text + end as usize]
    }

    fn find(&self, name: u32) -> Option<usize> {
        let i = super::first_above(0, self.count, |i| self.entry(i).0 < name);
        (i < self.count && self.entry(i).0 == name).then_some(i)
    }

    /// The demangled form of `name`; `None` if not kept or not UTF-8
    /// (then demangled again).
    fn get(&self, name: u32) -> Option<&str> {
        std::str::from_utf8(self.text(self.find(name)?)).ok()
    }
}

impl DemangledNames {
    /// The demangled form of the name at file offset `name`, if kept.
    pub fn get(&self, name: u32) -> Option<&str> {
        self.kept
            .as_ref()
            .and_then(|k| k.get(name))
            .or_else(|| self.added.get(&name).map(String::as_str))
    }

    /// Keeps a name; whether it was new.
    pub fn insert(&mut self, name: u32, demangled: &str) -> bool {
        if self.get(name).is_some() {
            return false;
        }
        self.added.insert(name, demangled.to_owned());
        true
    }

    pub fn len(&self) -> usize {
        self.all().count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every name, ascending by offset: those kept and those added (an
    /// added name replaces a kept one that was not UTF-8).
    fn all(&self) -> impl Iterator<Item = (u32, &[u8])> {
        let kept = self.kept.iter().flat_map(|k| {
            (0..k.count)
                .map(move |i| (k.entry(i).0, k.text(i)))
                .filter(|&(_, text)| std::str::from_utf8(text).is_ok())
        });
        let mut added: Vec<(u32, &[u8])> = self
            .added
            .iter()
            .map(|(&name, d)| (name, d.as_bytes()))
            .collect();
        added.sort_unstable_by_key(|&(name, _)| name);
        let mut kept = kept.peekable();
        let mut added = added.into_iter().peekable();
        std::iter::from_fn(move || match (kept.peek(), added.peek()) {
            (Some(k), Some(a)) if k.0 == a.0 => {
                kept.next();
                added.next()
            }
            (Some(k), Some(a)) if a.0 < k.0 => added.next(),
            (Some(_), _) => kept.next(),
            (None, _) => added.next(),
        })
    }

    /// The names as bytes, for [`DemangledNames::in_place`].
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut entries = Writer::default();
        let mut text = Vec::new();
        let mut count = 0u64;
        for (name, demangled) in self.all() {
            // Ends are u32: a text past 4 GB (a binary's names are tens
            // of MB at most) keeps the names that fit.
            let Ok(end) = u32::try_from(text.len() + demangled.len()) else {
                break;
            };
            entries.u32(name);
            entries.u32(end);
            text.extend_from_slice(demangled);
            count += 1;
        }
        let mut w = Writer::default();
        w.u64(count);
        w.0.extend_from_slice(&entries.0);
        w.bytes(&text);
        w.0
    }

    /// The names whose [`DemangledNames::to_bytes`] are `bytes[range]`,
    /// searched in place (not copied); `None` if they are not such names
    /// (wrong length, offsets not ascending, a text outside the texts).
    pub fn in_place(
        bytes: Box<dyn AsRef<[u8]> + Send + Sync>,
        range: std::ops::Range<usize>,
    ) -> Option<DemangledNames> {
        let all: &[u8] = (*bytes).as_ref();
        let TableAndBlob {
            count,
            entries,
            blob: text,
            rest,
        } = TableAndBlob::read(all, range, NAME_ENTRY_BYTES)?;
        rest.end()?;
        let (mut last_name, mut last_end) = (None, 0);
        for e in all[entries.clone()].chunks_exact(NAME_ENTRY_BYTES) {
            let name = u32::from_le_bytes(e[..4].try_into().ok()?);
            let text_end = u32::from_le_bytes(e[4..].try_into().ok()?);
            if last_name.is_some_and(|last| name <= last) || text_end < last_end {
                return None;
            }
            (last_name, last_end) = (Some(name), text_end);
        }
        if last_end as usize != text.len() {
            return None;
        }
        Some(DemangledNames {
            kept: Some(KeptNames {
                bytes,
                entries: entries.start,
                count,
                text: text.start,
            }),
            added: FxMap::default(),
        })
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
        let mut names = DemangledNames::default();
        names.insert(4096, "foo::bar");
        let names = names.to_bytes();
        for (what, bytes) in [("kallsyms", &k), ("index", &index), ("names", &names)] {
            let read = |b: &[u8]| match what {
                "kallsyms" => Kallsyms::in_place(Box::new(b.to_vec()), 0..b.len()).is_some(),
                "index" => SortedSymbols::in_place(Box::new(b.to_vec()), 0..b.len()).is_some(),
                _ => DemangledNames::in_place(Box::new(b.to_vec()), 0..b.len()).is_some(),
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
    fn demangled_names_read_back() {
        let mut names = DemangledNames::default();
        assert!(names.insert(4096, "foo::bar"));
        assert!(!names.insert(4096, "other"));
        assert!(names.insert(0, "memset"));
        let bytes = names.to_bytes();
        let len = bytes.len();
        let back = DemangledNames::in_place(Box::new(bytes), 0..len).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back.get(4096), Some("foo::bar"));
        assert_eq!(back.get(0), Some("memset"));
        assert_eq!(back.get(4097), None);
        // Names added to those read: all kept, in one file, ascending.
        let mut more = back;
        assert!(!more.insert(0, "other"));
        assert!(more.insert(2048, "between"));
        assert!(more.insert(9000, "after"));
        assert_eq!(more.len(), 4);
        let bytes = more.to_bytes();
        let len = bytes.len();
        let again = DemangledNames::in_place(Box::new(bytes), 0..len).unwrap();
        let all: Vec<(u32, &[u8])> = again.all().collect();
        assert_eq!(
            all,
            [
                (0, &b"memset"[..]),
                (2048, b"between"),
                (4096, b"foo::bar"),
                (9000, b"after")
            ]
        );
        // Damaged: offsets out of order, a text end past the texts.
        let good = again.to_bytes();
        let mut swapped = good.clone();
        swapped[8..12].copy_from_slice(&5000u32.to_le_bytes());
        let mut past = good.clone();
        past[8 + 4..8 + 8].copy_from_slice(&u32::MAX.to_le_bytes());
        for bad in [swapped, past] {
            let len = bad.len();
            assert!(DemangledNames::in_place(Box::new(bad), 0..len).is_none());
        }
        // A kept text that is not UTF-8 is not given, and is replaced by
        // a name inserted for it.
        let mut broken = good;
        let text_at = 8 + 4 * 8 + 8;
        broken[text_at] = 0xff;
        let len = broken.len();
        let mut broken = DemangledNames::in_place(Box::new(broken), 0..len).unwrap();
        assert_eq!(broken.get(0), None);
        assert!(broken.insert(0, "memset"));
        let bytes = broken.to_bytes();
        let len = bytes.len();
        let fixed = DemangledNames::in_place(Box::new(bytes), 0..len).unwrap();
        assert_eq!(fixed.get(0), Some("memset"));
        assert_eq!(fixed.len(), 4);
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
