//! An ELF file's symbols, read in place from its mapped bytes: the
//! headers, the loadable segments (to turn file offsets into addresses),
//! the GNU build id, and the symbol table (`.symtab`, else `.dynsym`) with
//! perf's notion of a function symbol and how far each one reaches
//! ([`Table::extent`]). [`Elf::resolve`] names a batch of sorted addresses
//! in one pass over the table (see `scan`).
//!
//! How far a symbol reaches decides whether an address is named at all:
//! an address is named after the nearest function symbol at or below it
//! only if it lies within that symbol's extent. A symbol with a size
//! (`st_size`) reaches `[value, value + size)`, so the code between two
//! exported functions of a stripped library (its static functions) is not
//! named after the one before it. A symbol without a size reaches up to the
//! next function symbol (perf's rule), and not past the end of its section
//! (`_init` in `.init` does not name the start of `.text`), in a full
//! table (`.symtab`: every function has a symbol). In a `.dynsym`-only
//! table (a stripped file: only exported functions) what follows a symbol
//! without a size is as likely a hidden function as its own body, so it
//! names only the address it starts at.
//!
//! It does not sort the table (`index` does, for big tables searched in
//! several rounds) and does no I/O.

use object::elf;
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader, Sym as _};

use super::scan::{Buckets, Cand};
use super::{binding, cstr, Rank};
use crate::PerfError;

/// An ELF file's symbols, read in place from its bytes.
pub struct Elf<'a> {
    pub(super) bytes: &'a [u8],
    /// (file offset, file size, virtual address) of each loadable segment,
    /// to turn a file offset into an address.
    pub(super) segments: Vec<(u64, u64, u64)>,
    /// The file's GNU build id.
    pub build_id: Option<Vec<u8>>,
    /// The names come from `.dynsym` only (the file has no `.symtab`).
    pub dynsym_only: bool,
    /// Whether the table has any function symbol (a fully stripped file
    /// has none).
    pub has_functions: bool,
    /// File offset and size of the symbol table and its string table, to
    /// ask the kernel to read them ahead.
    pub symtab: (u64, u64),
    pub strtab: (u64, u64),
    pub(super) kind: ElfKind<'a>,
}

pub(super) enum ElfKind<'a> {
    E32(Table<'a, elf::FileHeader32<object::Endianness>>),
    E64(Table<'a, elf::FileHeader64<object::Endianness>>),
}

pub(super) struct Table<'a, H: FileHeader> {
    pub(super) endian: H::Endian,
    pub(super) syms: &'a [H::Sym],
    /// File offset and size of the string table of `syms`.
    pub(super) strtab: (u64, u64),
    /// `[address, end)` of each section, by index: how far a symbol
    /// without a size may reach.
    pub(super) sections: Vec<(u64, u64)>,
    /// `syms` is `.dynsym` (the file has no `.symtab`): exported functions
    /// only.
    pub(super) dynsym_only: bool,
}

impl<'a> Elf<'a> {
    /// Reads the headers, segments, build id and symbol table location.
    pub fn parse(bytes: &'a [u8]) -> Result<Elf<'a>, PerfError> {
        match bytes.get(..5) {
            Some([0x7f, b'E', b'L', b'F', 1]) => {
                let (t, info) = table::<elf::FileHeader32<object::Endianness>>(bytes)?;
                Ok(info.with(bytes, ElfKind::E32(t)))
            }
            Some([0x7f, b'E', b'L', b'F', 2]) => {
                let (t, info) = table::<elf::FileHeader64<object::Endianness>>(bytes)?;
                Ok(info.with(bytes, ElfKind::E64(t)))
            }
            _ => Err(PerfError::NotElf),
        }
    }

    /// Converts a file offset into the address the symbols use.
    pub fn offset_to_address(&self, offset: u64) -> Option<u64> {
        if self.segments.is_empty() {
            return Some(offset);
        }
        self.segments
            .iter()
            .find(|(off, size, _)| offset >= *off && offset < off + size)
            .map(|(off, _, addr)| offset - off + addr)
    }

    /// For each of the ascending addresses `queries`, the file offset of
    /// the name of the function containing it. `prefetch` is told (in
    /// ascending order) the few names it must read to choose among symbols
    /// at the same address, before it reads them.
    pub fn resolve(
        &self,
        queries: &[u64],
        prefetch: &mut dyn FnMut(&mut dyn Iterator<Item = u32>),
    ) -> Vec<Option<u32>> {
        match &self.kind {
            ElfKind::E32(t) => t.resolve(self.bytes, queries, prefetch),
            ElfKind::E64(t) => t.resolve(self.bytes, queries, prefetch),
        }
    }

    /// Number of entries of the symbol table in use (functions or not).
    pub fn symbol_count(&self) -> usize {
        match &self.kind {
            ElfKind::E32(t) => t.syms.len(),
            ElfKind::E64(t) => t.syms.len(),
        }
    }

    /// The name at a file offset returned by [`Elf::resolve`].
    pub fn name(&self, off: u32) -> &'a [u8] {
        cstr(self.bytes, off as usize)
    }
}

/// What `table` found besides the symbols.
struct Info {
    segments: Vec<(u64, u64, u64)>,
    build_id: Option<Vec<u8>>,
    dynsym_only: bool,
    has_functions: bool,
    symtab: (u64, u64),
    strtab: (u64, u64),
}

impl Info {
    fn with<'a>(self, bytes: &'a [u8], kind: ElfKind<'a>) -> Elf<'a> {
        Elf {
            bytes,
            segments: self.segments,
            build_id: self.build_id,
            dynsym_only: self.dynsym_only,
            has_functions: self.has_functions,
            symtab: self.symtab,
            strtab: self.strtab,
            kind,
        }
    }
}

fn table<H: FileHeader<Endian = object::Endianness>>(
    bytes: &[u8],
) -> Result<(Table<'_, H>, Info), PerfError> {
    let header = H::parse(bytes).map_err(PerfError::Elf)?;
    let endian = header.endian().map_err(PerfError::Elf)?;
    let mut segments = Vec::new();
    for ph in header
        .program_headers(endian, bytes)
        .map_err(PerfError::Elf)?
    {
        if ph.p_type(endian) == elf::PT_LOAD && ph.p_filesz(endian).into() > 0 {
            segments.push((
                ph.p_offset(endian).into(),
                ph.p_filesz(endian).into(),
                ph.p_vaddr(endian).into(),
            ));
        }
    }
    let sections = header.sections(endian, bytes).map_err(PerfError::Elf)?;
    let mut build_id = None;
    for s in sections.iter() {
        if let Ok(Some(mut notes)) = s.notes(endian, bytes) {
            while let Ok(Some(n)) = notes.next() {
                if n.name() == elf::ELF_NOTE_GNU && n.n_type(endian) == elf::NT_GNU_BUILD_ID {
                    build_id = Some(n.desc().to_vec());
                }
            }
        }
    }
    let mut symtab = sections
        .symbols(endian, bytes, elf::SHT_SYMTAB)
        .map_err(PerfError::Elf)?;
    let mut dynsym_only = false;
    if symtab.is_empty() {
        dynsym_only = true;
        symtab = sections
            .symbols(endian, bytes, elf::SHT_DYNSYM)
            .map_err(PerfError::Elf)?;
    }
    let strtab = match sections.section(symtab.string_section()) {
        Ok(s) => (s.sh_offset(endian).into(), s.sh_size(endian).into()),
        Err(_) => (0, 0),
    };
    let symtab_range = match sections.section(symtab.section()) {
        Ok(s) if !symtab.is_empty() => (s.sh_offset(endian).into(), s.sh_size(endian).into()),
        _ => (0, 0),
    };
    let bounds = sections
        .iter()
        .map(|s| {
            let (addr, size): (u64, u64) = (s.sh_addr(endian).into(), s.sh_size(endian).into());
            (addr, addr.saturating_add(size))
        })
        .collect();
    let t = Table::<H> {
        endian,
        syms: symtab.symbols(),
        strtab,
        sections: bounds,
        dynsym_only,
    };
    let has_functions = t.syms.iter().any(|s| t.is_function(s));
    Ok((
        t,
        Info {
            segments,
            build_id,
            dynsym_only,
            has_functions,
            symtab: symtab_range,
            strtab,
        },
    ))
}

impl<H: FileHeader> Table<'_, H> {
    /// What `perf` keeps: STT_FUNC and STT_GNU_IFUNC symbols defined in a
    /// section, with an address and a name.
    #[inline]
    pub(super) fn is_function(&self, s: &H::Sym) -> bool {
        let ty = s.st_type();
        (ty == elf::STT_FUNC || ty == elf::STT_GNU_IFUNC)
            && s.st_shndx(self.endian) != elf::SHN_UNDEF
            && s.st_value(self.endian).into() != 0
            && s.st_name(self.endian) != 0
            && u64::from(s.st_name(self.endian)) < self.strtab.1
    }

    /// How many bytes from its address function symbol `s` names (see the
    /// module doc): its size if it has one; else, in a `.dynsym`-only
    /// table, 1 (its first address only); else up to the end of its
    /// section, or 0 (no bound but the next symbol) when its section is
    /// not known or does not hold it.
    pub(super) fn extent(&self, s: &H::Sym) -> u64 {
        let size: u64 = s.st_size(self.endian).into();
        if size > 0 {
            return size;
        }
        if self.dynsym_only {
            return 1;
        }
        let addr: u64 = s.st_value(self.endian).into();
        match self.sections.get(usize::from(s.st_shndx(self.endian))) {
            Some(&(start, end)) if start <= addr && addr < end => end - addr,
            _ => 0,
        }
    }

    fn resolve<'q>(
        &self,
        bytes: &'q [u8],
        queries: &'q [u64],
        prefetch: &mut dyn FnMut(&mut dyn Iterator<Item = u32>),
    ) -> Vec<Option<u32>> {
        let mut buckets = Buckets::new(queries);
        let Some(&hi) = queries.last() else {
            return Vec::new();
        };
        let name_of = |off: u32| -> &'q [u8] { cstr(bytes, off as usize) };
        for s in self.syms {
            let addr: u64 = s.st_value(self.endian).into();
            if addr > hi || !self.is_function(s) {
                continue;
            }
            let off = self.strtab.0 + u64::from(s.st_name(self.endian));
            let Ok(name) = u32::try_from(off) else {
                continue;
            };
            let binding = binding(s.st_bind());
            buckets.offer(Cand {
                addr,
                size: self.extent(s),
                name,
                rank: Rank {
                    sized: s.st_size(self.endian).into() > 0,
                    binding,
                },
            });
        }
        buckets.finish(&name_of, prefetch)
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    use crate::symbols::{better, Binding};

    #[test]
    fn not_elf_is_an_error() {
        assert!(Elf::parse(b"not an elf file").is_err());
        assert!(Elf::parse(b"\x7fELF\x02garbage").is_err());
    }

    /// The straightforward lookup the scan must agree with: sort every
    /// function symbol by address (file order among equals), keep the best
    /// of each address by perf's rule, take the nearest at or below.
    fn reference(elf: &Elf<'_>, queries: &[u64]) -> Vec<Option<u32>> {
        let ElfKind::E64(t) = &elf.kind else {
            panic!("64-bit test files expected");
        };
        let mut syms: Vec<Cand> = t
            .syms
            .iter()
            .filter(|s| t.is_function(s))
            .map(|s| {
                let size = s.st_size(t.endian);
                Cand {
                    addr: s.st_value(t.endian),
                    size: t.extent(s),
                    name: (t.strtab.0 + u64::from(s.st_name(t.endian))) as u32,
                    rank: Rank {
                        sized: size > 0,
                        binding: match s.st_bind() {
                            elf::STB_WEAK => Binding::Weak,
                            elf::STB_GLOBAL => Binding::Global,
                            _ => Binding::Local,
                        },
                    },
                }
            })
            .collect();
        syms.sort_by_key(|c| c.addr);
        let mut best: Vec<Cand> = Vec::new();
        for c in syms {
            match best.last_mut() {
                Some(b) if b.addr == c.addr => {
                    if better(c.rank, elf.name(c.name), b.rank, elf.name(b.name)) {
                        *b = c;
                    }
                }
                _ => best.push(c),
            }
        }
        queries
            .iter()
            .map(|&q| {
                let i = best.partition_point(|c| c.addr <= q).checked_sub(1)?;
                let c = best[i];
                (c.size == 0 || q < c.addr + c.size).then_some(c.name)
            })
            .collect()
    }

    /// A little-endian ELF64 file with no segments, sections `.init`
    /// (0x800..0x810) and `.text` (0x1000..0x1100), and one symbol table
    /// (`.symtab`, or `.dynsym` when `dynamic`) of the function symbols
    /// `(name, address, size, section)`.
    fn synthetic(dynamic: bool, funcs: &[(&str, u64, u64, u16)]) -> Vec<u8> {
        let mut names = vec![0u8];
        let mut syms = vec![0u8; 24]; // the null symbol
        for &(name, addr, size, shndx) in funcs {
            let at = names.len() as u32;
            names.extend_from_slice(name.as_bytes());
            names.push(0);
            syms.extend_from_slice(&at.to_le_bytes());
            syms.push(elf::STB_GLOBAL << 4 | elf::STT_FUNC);
            syms.push(0);
            syms.extend_from_slice(&shndx.to_le_bytes());
            syms.extend_from_slice(&addr.to_le_bytes());
            syms.extend_from_slice(&size.to_le_bytes());
        }
        let (syms_at, names_at) = (64u64, 64 + syms.len() as u64);
        let shoff = (names_at + names.len() as u64).next_multiple_of(8);
        let mut f = Vec::new();
        f.extend_from_slice(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
        f.extend_from_slice(&elf::ET_DYN.to_le_bytes());
        f.extend_from_slice(&elf::EM_X86_64.to_le_bytes());
        f.extend_from_slice(&1u32.to_le_bytes()); // version
        f.extend_from_slice(&0u64.to_le_bytes()); // entry
        f.extend_from_slice(&0u64.to_le_bytes()); // no program headers
        f.extend_from_slice(&shoff.to_le_bytes());
        f.extend_from_slice(&0u32.to_le_bytes()); // flags
        for half in [64u16, 56, 0, 64, 5, 4] {
            // header size, program header size and count, section header
            // size and count, section name table (the string table: every
            // section's name is its empty first string)
            f.extend_from_slice(&half.to_le_bytes());
        }
        f.extend_from_slice(&syms);
        f.extend_from_slice(&names);
        f.resize(shoff as usize, 0);
        let table = if dynamic {
            elf::SHT_DYNSYM
        } else {
            elf::SHT_SYMTAB
        };
        let exec = u64::from(elf::SHF_ALLOC | elf::SHF_EXECINSTR);
        // (type, flags, address, offset, size, link, info, entry size)
        type Header = (u32, u64, u64, u64, u64, u32, u32, u64);
        let sections: [Header; 5] = [
            (elf::SHT_NULL, 0, 0, 0, 0, 0, 0, 0),
            (elf::SHT_PROGBITS, exec, 0x800, 0x800, 0x10, 0, 0, 0),
            (elf::SHT_PROGBITS, exec, 0x1000, 0x1000, 0x100, 0, 0, 0),
            (table, 0, 0, syms_at, syms.len() as u64, 4, 1, 24),
            (elf::SHT_STRTAB, 0, 0, names_at, names.len() as u64, 0, 0, 0),
        ];
        for (ty, flags, addr, off, size, link, info, entsize) in sections {
            f.extend_from_slice(&0u32.to_le_bytes()); // name
            f.extend_from_slice(&ty.to_le_bytes());
            f.extend_from_slice(&flags.to_le_bytes());
            f.extend_from_slice(&addr.to_le_bytes());
            f.extend_from_slice(&off.to_le_bytes());
            f.extend_from_slice(&size.to_le_bytes());
            f.extend_from_slice(&link.to_le_bytes());
            f.extend_from_slice(&info.to_le_bytes());
            f.extend_from_slice(&8u64.to_le_bytes()); // alignment
            f.extend_from_slice(&entsize.to_le_bytes());
        }
        f
    }

    /// The names the scan and the sorted index give `queries` (ascending),
    /// checked to agree.
    fn names_of(bytes: &[u8], queries: &[u64]) -> Vec<Option<String>> {
        let elf = Elf::parse(bytes).unwrap();
        let text = |r: Vec<Option<u32>>| -> Vec<Option<String>> {
            r.into_iter()
                .map(|o| o.map(|o| String::from_utf8_lossy(elf.name(o)).into_owned()))
                .collect()
        };
        let scanned = text(elf.resolve(queries, &mut |_| {}));
        let sorted = text(elf.sorted().resolve(&elf, queries, &mut |_| {}));
        let winners = text(
            elf.sorted()
                .winners(&elf)
                .resolve(&elf, queries, &mut |_| {}),
        );
        assert_eq!(scanned, sorted);
        assert_eq!(scanned, winners);
        scanned
    }

    /// A stripped library's table: `exported` (0x1000, 0x20 bytes) then a
    /// static function with no symbol, and `bare` (0x1080, no size) then
    /// another. Only the addresses the symbols really cover are named.
    #[test]
    fn dynsym_names_only_what_its_symbols_cover() {
        let funcs = [("exported", 0x1000, 0x20, 2), ("bare", 0x1080, 0, 2)];
        let bytes = synthetic(true, &funcs);
        assert!(Elf::parse(&bytes).unwrap().dynsym_only);
        let queries = [
            0xfff, 0x1000, 0x101f, 0x1020, 0x1050, 0x1080, 0x1081, 0x10c0,
        ];
        let some = |n: &str| Some(n.to_string());
        assert_eq!(
            names_of(&bytes, &queries),
            [
                None,
                some("exported"),
                some("exported"),
                None, // past its size: the static function after it
                None,
                some("bare"),
                None, // no size, and the functions after it have no symbol
                None,
            ]
        );
    }

    /// A full table (`.symtab`): a symbol without a size reaches the next
    /// symbol, and not past the end of its section: `_init` (in `.init`,
    /// no size) does not name the start of `.text`, and the last function
    /// (no size) not the addresses past `.text`.
    #[test]
    fn symtab_symbols_without_size_reach_the_next_one_within_their_section() {
        let funcs = [
            ("_init", 0x800, 0, 1),
            ("asm_entry", 0x1000, 0, 2),
            ("sized", 0x1040, 0x10, 2),
            ("last", 0x1080, 0, 2),
        ];
        let bytes = synthetic(false, &funcs);
        assert!(!Elf::parse(&bytes).unwrap().dynsym_only);
        let queries = [
            0x800, 0x80f, 0x810, 0xfff, 0x1000, 0x103f, 0x1048, 0x1050, 0x1080, 0x10ff, 0x1100,
            0x2000,
        ];
        let some = |n: &str| Some(n.to_string());
        assert_eq!(
            names_of(&bytes, &queries),
            [
                some("_init"),
                some("_init"),
                None,
                None,
                some("asm_entry"),
                some("asm_entry"),
                some("sized"),
                None,
                some("last"),
                some("last"),
                None,
                None,
            ]
        );
    }

    #[test]
    fn scan_agrees_with_sorted_lookup_on_real_binaries() {
        let Ok(exe) = std::env::current_exe() else {
            return;
        };
        for p in [
            exe.to_string_lossy().into_owned(),
            "/lib/x86_64-linux-gnu/libc.so.6".into(),
        ] {
            let Ok(bytes) = std::fs::read(&p) else {
                continue;
            };
            let elf = Elf::parse(&bytes).unwrap();
            assert!(elf.has_functions, "{p}");
            // Every function start, inside and just past it, and a stride
            // through the address range.
            let ElfKind::E64(t) = &elf.kind else {
                panic!("64-bit test files expected");
            };
            let mut queries: Vec<u64> = Vec::new();
            for s in t.syms.iter().filter(|s| t.is_function(s)) {
                let (a, z) = (s.st_value(t.endian), s.st_size(t.endian));
                queries.extend([a, a + z / 2, a + z, a.saturating_sub(1)]);
            }
            let hi = queries.iter().copied().max().unwrap_or(0);
            queries.extend((0..hi).step_by(4093));
            queries.sort_unstable();
            let want = reference(&elf, &queries);
            let got = elf.resolve(&queries, &mut |_| {});
            let sorted = elf.sorted().resolve(&elf, &queries, &mut |_| {});
            for (i, (s, w)) in sorted.iter().zip(&want).enumerate() {
                assert_eq!(
                    s.map(|o| elf.name(o)),
                    w.map(|o| elf.name(o)),
                    "{p}: sorted index, address {:#x}",
                    queries[i]
                );
            }
            let hits = got.iter().filter(|g| g.is_some()).count();
            assert!(hits > queries.len() / 4, "{p}: {hits} of {}", queries.len());
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(
                    g.map(|o| elf.name(o)),
                    w.map(|o| elf.name(o)),
                    "{p}: address {:#x}",
                    queries[i]
                );
            }
        }
    }
}
