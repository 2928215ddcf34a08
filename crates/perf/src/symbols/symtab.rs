//! An ELF file's symbols, read in place from its mapped bytes: the
//! headers, the loadable segments (to turn file offsets into addresses),
//! the GNU build id, and the symbol table (`.symtab`, else `.dynsym`) with
//! perf's notion of a function symbol. [`Elf::resolve`] names a batch of
//! sorted addresses in one pass over the table (see `scan`).
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
    let t = Table::<H> {
        endian,
        syms: symtab.symbols(),
        strtab,
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
            let size: u64 = s.st_size(self.endian).into();
            buckets.offer(Cand {
                addr,
                size,
                name,
                rank: Rank {
                    sized: size > 0,
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
                    size,
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
