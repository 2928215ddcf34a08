//! Symbol tables: address → function name for one ELF file (from `.symtab`,
//! else `.dynsym`) or for the kernel (from `/proc/kallsyms` text), and
//! demangling of Rust and C++ names.
//!
//! Everything here works on bytes handed in by the caller and does no I/O,
//! so it is tested in memory. Finding the files (and their separate debug
//! files) is `symbolize`'s job. DWARF (inlined frames, lines) is not read:
//! like `perf report`, a frame is named after the symbol that contains it.

use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

/// A sorted table of function symbols. Names are stored as byte ranges of
/// the data the table was made from (the ELF file or the kallsyms text), so
/// the table is small and owns nothing; lookups take that data again.
#[derive(Debug, Default)]
pub struct SymbolTable {
    syms: Vec<Sym>,
    /// For ELF files: (file offset, file size, virtual address) of each
    /// loadable segment, to turn a file offset into an address.
    segments: Vec<(u64, u64, u64)>,
    /// The names came from `.dynsym` only (the file has no `.symtab`).
    pub dynsym_only: bool,
    /// Symbols at the same address were kept; pick the best at lookup.
    lazy_aliases: bool,
}

/// One symbol.
#[derive(Clone, Copy, Debug)]
struct Sym {
    addr: u64,
    size: u64,
    name: (u32, u32),
    /// Kernel module name range (len 0: none).
    module: (u32, u32),
    binding: Binding,
}

fn range_of(base: &[u8], part: &[u8]) -> (u32, u32) {
    let off = (part.as_ptr() as usize).wrapping_sub(base.as_ptr() as usize);
    if off > base.len() || part.len() > base.len() - off || off + part.len() > u32::MAX as usize {
        return (0, 0);
    }
    (off as u32, part.len() as u32)
}

/// Name length meaning "up to the NUL" (ELF string tables).
const NUL_TERMINATED: u32 = u32::MAX;

fn slice(base: &[u8], r: (u32, u32)) -> &[u8] {
    if r.1 == NUL_TERMINATED {
        let rest = base.get(r.0 as usize..).unwrap_or(&[]);
        let end = rest.iter().position(|&c| c == 0).unwrap_or(rest.len());
        return &rest[..end];
    }
    base.get(r.0 as usize..(r.0 as usize + r.1 as usize))
        .unwrap_or(&[])
}

/// Reads a 64-bit ELF file's function symbols straight from `.symtab`
/// (else `.dynsym`) without touching the string table: names are found at
/// lookup. Keeps what `perf` keeps: STT_FUNC and STT_GNU_IFUNC symbols
/// defined in a section. `None` for anything else (32-bit, malformed).
fn elf64_fast(bytes: &[u8]) -> Option<SymbolTable> {
    use object::elf;
    use object::read::elf::{FileHeader, ProgramHeader, SectionHeader, Sym as _};
    let header = elf::FileHeader64::<object::Endianness>::parse(bytes).ok()?;
    let endian = header.endian().ok()?;
    let mut table = SymbolTable::default();
    for ph in header.program_headers(endian, bytes).ok()? {
        if ph.p_type(endian) == elf::PT_LOAD && ph.p_filesz(endian) > 0 {
            table
                .segments
                .push((ph.p_offset(endian), ph.p_filesz(endian), ph.p_vaddr(endian)));
        }
    }
    let sections = header.sections(endian, bytes).ok()?;
    let mut symtab = sections.symbols(endian, bytes, elf::SHT_SYMTAB).ok()?;
    if symtab.is_empty() {
        table.dynsym_only = true;
        symtab = sections.symbols(endian, bytes, elf::SHT_DYNSYM).ok()?;
    }
    let strsec = sections.section(symtab.string_section()).ok()?;
    let stroff = strsec.sh_offset(endian);
    let strsize = strsec.sh_size(endian);
    for sym in symtab.symbols() {
        let ty = sym.st_type();
        if ty != elf::STT_FUNC && ty != elf::STT_GNU_IFUNC {
            continue;
        }
        if sym.st_shndx(endian) == elf::SHN_UNDEF || sym.st_value(endian) == 0 {
            continue;
        }
        let name = sym.st_name(endian) as u64;
        if name == 0 || name >= strsize {
            continue;
        }
        let off = stroff + name;
        if off > u32::MAX as u64 {
            continue;
        }
        let binding = match sym.st_bind() {
            elf::STB_WEAK => Binding::Weak,
            elf::STB_GLOBAL => Binding::Global,
            _ => Binding::Local,
        };
        table.syms.push(Sym {
            addr: sym.st_value(endian),
            size: sym.st_size(endian),
            name: (off as u32, NUL_TERMINATED),
            module: (0, 0),
            binding,
        });
    }
    table.finish_lazy();
    Some(table)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Binding {
    Local,
    Global,
    Weak,
}

/// Orders two symbols at the same address best first, by `perf`'s rule
/// (`choose_best_symbol`): one with a size, then non-weak, then global,
/// then fewer leading underscores, then the longer name.
fn better(base: &[u8], a: &Sym, b: &Sym) -> std::cmp::Ordering {
    let key = |s: &Sym| {
        let name = slice(base, s.name);
        (
            s.size > 0,
            s.binding != Binding::Weak,
            s.binding == Binding::Global,
            std::cmp::Reverse(name.iter().take_while(|&&c| c == b'_').count()),
            name.len(),
        )
    };
    key(b).cmp(&key(a))
}

/// A symbol found for an address.
#[derive(Debug, PartialEq, Eq)]
pub struct Found<'a> {
    pub name: std::borrow::Cow<'a, str>,
    /// Kernel module (`ext4`) for kallsyms symbols of modules.
    pub module: Option<&'a str>,
}

impl SymbolTable {
    /// Reads the function symbols of an ELF file. Returns the table and the
    /// file's GNU build id when it has one.
    pub fn from_elf(bytes: &[u8]) -> Result<(Self, Option<Vec<u8>>), object::Error> {
        let file = object::File::parse(bytes)?;
        let build_id = file.build_id().ok().flatten().map(<[u8]>::to_vec);
        if let Some(table) = elf64_fast(bytes) {
            return Ok((table, build_id));
        }
        let mut table = SymbolTable::default();
        for seg in file.segments() {
            let (off, size) = seg.file_range();
            if size > 0 {
                table.segments.push((off, size, seg.address()));
            }
        }
        let mut add = |sym: object::Symbol<'_, '_>| {
            if sym.kind() == SymbolKind::Text && sym.address() != 0 {
                if let Ok(name) = sym.name_bytes() {
                    if !name.is_empty() {
                        let binding = if sym.is_weak() {
                            Binding::Weak
                        } else if sym.is_global() {
                            Binding::Global
                        } else {
                            Binding::Local
                        };
                        table.syms.push(Sym {
                            addr: sym.address(),
                            size: sym.size(),
                            name: range_of(bytes, name),
                            module: (0, 0),
                            binding,
                        });
                    }
                }
            }
        };
        let mut any = false;
        for sym in file.symbols() {
            any = true;
            add(sym);
        }
        if !any {
            table.dynsym_only = true;
            for sym in file.dynamic_symbols() {
                add(sym);
            }
        }
        table.finish(bytes);
        Ok((table, build_id))
    }

    /// Whether the table has any symbol (a stripped file has none).
    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// Number of symbols.
    pub fn len(&self) -> usize {
        self.syms.len()
    }

    fn finish(&mut self, base: &[u8]) {
        self.syms
            .sort_unstable_by(|a, b| a.addr.cmp(&b.addr).then_with(|| better(base, a, b)));
        // Keep one symbol per address: the best by perf's rule.
        self.syms.dedup_by(|b, a| a.addr == b.addr);
    }

    /// Sorts by address only; aliases are resolved at lookup (so building
    /// the table never reads the names).
    fn finish_lazy(&mut self) {
        self.syms.sort_unstable_by_key(|s| s.addr);
        self.lazy_aliases = true;
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

    /// The symbol containing `address`, if any. A symbol with size 0 extends
    /// to the next symbol.
    /// `base` must be the bytes the table was made from.
    pub fn lookup<'b>(&self, base: &'b [u8], address: u64) -> Option<Found<'b>> {
        self.lookup_index(base, address)
            .map(|i| self.found(base, i))
    }

    /// Index of the symbol containing `address` (stable for this table).
    pub fn lookup_index(&self, base: &[u8], address: u64) -> Option<usize> {
        let i = self.syms.partition_point(|s| s.addr <= address);
        let mut best = i.checked_sub(1)?;
        if self.lazy_aliases {
            // Aliases at the same address: perf's choice among them.
            let addr = self.syms[best].addr;
            let mut j = best;
            while j > 0 && self.syms[j - 1].addr == addr {
                j -= 1;
                if better(base, &self.syms[j], &self.syms[best]).is_lt() {
                    best = j;
                }
            }
        }
        let s = self.syms.get(best)?;
        if s.size != 0 && address >= s.addr.saturating_add(s.size) {
            return None;
        }
        Some(best)
    }

    /// The symbol at `index` (from [`SymbolTable::lookup_index`]).
    pub fn found<'b>(&self, base: &'b [u8], index: usize) -> Found<'b> {
        let Some(s) = self.syms.get(index) else {
            return Found {
                name: "".into(),
                module: None,
            };
        };
        let module = (s.module.1 > 0)
            .then(|| std::str::from_utf8(slice(base, s.module)).ok())
            .flatten();
        Found {
            name: String::from_utf8_lossy(slice(base, s.name)),
            module,
        }
    }

    /// Parses `/proc/kallsyms` text: `ADDRESS TYPE NAME [MODULE]` per line;
    /// keeps text symbols (`t`/`T`/`w`/`W`). Returns an empty table when every address is
    /// zero (kernel pointers hidden by `kptr_restrict`).
    pub fn from_kallsyms(text: &str) -> Self {
        let base = text.as_bytes();
        let mut table = SymbolTable::default();
        for line in text.lines() {
            // `ffffffff81000000 T _text`: the type is at a fixed place
            // after the 16 hex digits; skip data symbols without splitting.
            if let Some(&t) = line.as_bytes().get(17) {
                if !matches!(t, b't' | b'T' | b'w' | b'W') {
                    continue;
                }
            }
            let mut it = line.split_ascii_whitespace();
            let (Some(addr), Some(kind), Some(name)) = (it.next(), it.next(), it.next()) else {
                continue;
            };
            if !matches!(kind, "t" | "T" | "w" | "W") {
                continue;
            }
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            if addr == 0 {
                continue;
            }
            let module = it.next().map(|m| m.trim_matches(|c| c == '[' || c == ']'));
            let binding = match kind {
                "T" => Binding::Global,
                "w" | "W" => Binding::Weak,
                _ => Binding::Local,
            };
            table.syms.push(Sym {
                addr,
                size: 0,
                name: range_of(base, name.as_bytes()),
                module: module.map_or((0, 0), |m| range_of(base, m.as_bytes())),
                binding,
            });
        }
        table.finish(base);
        table
    }

    /// Address of a symbol by exact name (linear; used once for `_text`).
    pub fn address_of(&self, base: &[u8], name: &str) -> Option<u64> {
        let _ = self.lazy_aliases;
        self.syms
            .iter()
            .find(|s| slice(base, s.name) == name.as_bytes())
            .map(|s| s.addr)
    }
}

/// Demangles a Rust (legacy or v0) or C++ symbol; other names come back as
/// they are. Rust hashes are dropped, as `perf report` does.
pub fn demangle(name: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return format!("{d:#}");
    }
    if name.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(name) {
            // Without parameters, as `perf report` shows C++ names.
            let opts = cpp_demangle::DemangleOptions::new()
                .no_params()
                .no_return_type();
            if let Ok(s) = sym.demangle(&opts) {
                // `A<B<C> >` → `A<B<C>>`, as perf (libstdc++'s demangler) prints.
                let mut s = s;
                while s.contains("> >") {
                    s = s.replace("> >", ">>");
                }
                return s;
            }
        }
    }
    name.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kallsyms_lookup_and_modules() {
        let text = "\
ffffffff81000000 T _text
ffffffff81000100 t do_thing
ffffffff81000200 D some_data
ffffffff81000300 T later
ffffffffc0000000 t ext4_read [ext4]
";
        let t = SymbolTable::from_kallsyms(text);
        let b = text.as_bytes();
        assert_eq!(t.lookup(b, 0xffffffff81000150).unwrap().name, "do_thing");
        // Data symbols are skipped: do_thing extends to `later`.
        assert_eq!(t.lookup(b, 0xffffffff81000250).unwrap().name, "do_thing");
        let f = t.lookup(b, 0xffffffffc0000010).unwrap();
        assert_eq!((&*f.name, f.module), ("ext4_read", Some("ext4")));
        assert!(t.lookup(b, 0x10).is_none());
        assert_eq!(t.address_of(b, "_text"), Some(0xffffffff81000000));
    }

    #[test]
    fn aliases_resolve_like_perf() {
        let text = "\
ffffffff81000100 t __memcpy_avx_unaligned_erms
ffffffff81000100 t __memmove_avx_unaligned_erms
ffffffff81000200 t __libc_malloc
ffffffff81000200 T malloc
";
        let t = SymbolTable::from_kallsyms(text);
        let b = text.as_bytes();
        assert_eq!(
            t.lookup(b, 0xffffffff81000101).unwrap().name,
            "__memmove_avx_unaligned_erms"
        );
        assert_eq!(t.lookup(b, 0xffffffff81000201).unwrap().name, "malloc");
    }

    #[test]
    fn hidden_kallsyms_gives_empty_table() {
        let t = SymbolTable::from_kallsyms("0000000000000000 T _text\n0000000000000000 t x\n");
        assert!(t.is_empty());
    }

    #[test]
    fn demangles_rust_and_cpp() {
        assert_eq!(demangle("_ZN3foo3bar17h05af221e174051e9E"), "foo::bar");
        assert_eq!(demangle("_ZN5space3fooEii"), "space::foo");
        assert_eq!(demangle("memset"), "memset");
        assert_eq!(demangle("_Zgarbage"), "_Zgarbage");
    }

    #[test]
    fn not_elf_is_an_error() {
        assert!(SymbolTable::from_elf(b"not an elf file").is_err());
    }

    #[test]
    fn reads_own_test_binary() {
        // The test binary itself is an ELF file with a symbol table.
        let Ok(exe) = std::env::current_exe() else {
            return;
        };
        let Ok(bytes) = std::fs::read(exe) else {
            return;
        };
        let (t, _) = SymbolTable::from_elf(&bytes).unwrap();
        assert!(!t.is_empty());
    }
}

#[cfg(test)]
mod fast_tests {
    #[test]
    fn fast_path_reads_system_libraries() {
        for p in ["/lib/x86_64-linux-gnu/libc.so.6", "/usr/bin/perf"] {
            let Ok(bytes) = std::fs::read(p) else {
                continue;
            };
            let t = super::elf64_fast(&bytes);
            assert!(t.is_some(), "{p}");
            assert!(!t.unwrap().is_empty(), "{p}");
        }
    }
}
