//! Symbol lookup: address → function name, for an ELF file (from `.symtab`,
//! else `.dynsym`) and for the kernel (from `/proc/kallsyms` text), and
//! demangling of Rust and C++ names.
//!
//! A trace needs the names of a few thousand addresses per binary, while a
//! binary such as `libLLVM.so` holds a quarter of a million symbols. So an
//! ELF symbol table is not copied or sorted to be searched once:
//! [`Elf::resolve`] takes the *sorted queries* and makes one pass over the
//! raw symbol entries in the mapped file, keeping for each gap between
//! queries the best symbol that starts in it; a prefix pass then gives every
//! query its nearest symbol at or below it. A big table searched in several
//! rounds gets a compact sorted index instead ([`SortedSymbols`]). Names stay
//! offsets into the file until they are printed. Kallsyms text is parsed
//! without a per-line allocation into a compact sorted table ([`Kallsyms`]).
//!
//! Everything here works on bytes handed in by the caller and does no I/O,
//! so it is tested in memory. Finding and reading the files is
//! `symbolize`'s job. DWARF (inlined frames, lines) is not read: like
//! `perf report`, a frame is named after the symbol that contains it.

use object::elf;
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader, Sym as _};

/// Symbol binding, for choosing among symbols at the same address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Binding {
    Local,
    Global,
    Weak,
}

fn binding(st_bind: u8) -> Binding {
    match st_bind {
        elf::STB_WEAK => Binding::Weak,
        elf::STB_GLOBAL => Binding::Global,
        _ => Binding::Local,
    }
}

/// The facts perf's `choose_best_symbol` compares, for a symbol whose name
/// is `name`.
#[derive(Clone, Copy, Debug)]
struct Rank {
    sized: bool,
    binding: Binding,
}

/// perf's preference between symbols at one address, before names:
/// one with a size, then non-weak, then global.
fn rank_key(r: Rank) -> (bool, bool, bool) {
    (
        r.sized,
        r.binding != Binding::Weak,
        r.binding == Binding::Global,
    )
}

/// Whether symbol `a` (named `an`) is a better name than `b` (named `bn`)
/// for the same address, by `perf`'s rule: one with a size, then non-weak,
/// then global, then fewer leading underscores, then the longer name.
fn better(a: Rank, an: &[u8], b: Rank, bn: &[u8]) -> bool {
    let key = |r: Rank, n: &[u8]| {
        (
            r.sized,
            r.binding != Binding::Weak,
            r.binding == Binding::Global,
            std::cmp::Reverse(n.iter().take_while(|&&c| c == b'_').count()),
            n.len(),
        )
    };
    key(a, an) > key(b, bn)
}

/// The NUL-terminated string at `off` in `bytes`.
fn cstr(bytes: &[u8], off: usize) -> &[u8] {
    let rest = bytes.get(off..).unwrap_or(&[]);
    let end = memchr0(rest);
    &rest[..end]
}

fn memchr0(b: &[u8]) -> usize {
    b.iter().position(|&c| c == 0).unwrap_or(b.len())
}

/// A symbol chosen for a query.
#[derive(Clone, Copy, Debug)]
struct Cand {
    addr: u64,
    size: u64,
    /// Offset of the NUL-terminated name in the file.
    name: u32,
    rank: Rank,
}

/// For sorted `queries`, the best candidate at or below each one, given
/// the candidates as they come (any order), by the gap-bucket method
/// described in the module doc. `name_of` reads a candidate's name (only
/// needed to break ties between symbols at the same address).
struct Buckets<'q> {
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
    fn new(queries: &'q [u64]) -> Self {
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
    fn offer(&mut self, c: Cand) {
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
    fn finish(
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

/// An ELF file's symbols, read in place from its bytes.
pub struct Elf<'a> {
    bytes: &'a [u8],
    /// (file offset, file size, virtual address) of each loadable segment,
    /// to turn a file offset into an address.
    segments: Vec<(u64, u64, u64)>,
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
    kind: ElfKind<'a>,
}

enum ElfKind<'a> {
    E32(Table<'a, elf::FileHeader32<object::Endianness>>),
    E64(Table<'a, elf::FileHeader64<object::Endianness>>),
}

struct Table<'a, H: FileHeader> {
    endian: H::Endian,
    syms: &'a [H::Sym],
    /// File offset and size of the string table of `syms`.
    strtab: (u64, u64),
}

impl<'a> Elf<'a> {
    /// Reads the headers, segments, build id and symbol table location.
    pub fn parse(bytes: &'a [u8]) -> Result<Elf<'a>, String> {
        match bytes.get(..5) {
            Some([0x7f, b'E', b'L', b'F', 1]) => {
                let (t, info) = table::<elf::FileHeader32<object::Endianness>>(bytes)?;
                Ok(info.with(bytes, ElfKind::E32(t)))
            }
            Some([0x7f, b'E', b'L', b'F', 2]) => {
                let (t, info) = table::<elf::FileHeader64<object::Endianness>>(bytes)?;
                Ok(info.with(bytes, ElfKind::E64(t)))
            }
            _ => Err("not an ELF file".into()),
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
) -> Result<(Table<'_, H>, Info), String> {
    let header = H::parse(bytes).map_err(|e| e.to_string())?;
    let endian = header.endian().map_err(|e| e.to_string())?;
    let mut segments = Vec::new();
    for ph in header
        .program_headers(endian, bytes)
        .map_err(|e| e.to_string())?
    {
        if ph.p_type(endian) == elf::PT_LOAD && ph.p_filesz(endian).into() > 0 {
            segments.push((
                ph.p_offset(endian).into(),
                ph.p_filesz(endian).into(),
                ph.p_vaddr(endian).into(),
            ));
        }
    }
    let sections = header.sections(endian, bytes).map_err(|e| e.to_string())?;
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
        .map_err(|e| e.to_string())?;
    let mut dynsym_only = false;
    if symtab.is_empty() {
        dynsym_only = true;
        symtab = sections
            .symbols(endian, bytes, elf::SHT_DYNSYM)
            .map_err(|e| e.to_string())?;
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
    fn is_function(&self, s: &H::Sym) -> bool {
        let ty = s.st_type();
        (ty == elf::STT_FUNC || ty == elf::STT_GNU_IFUNC)
            && s.st_shndx(self.endian) != elf::SHN_UNDEF
            && s.st_value(self.endian).into() != 0
            && s.st_name(self.endian) != 0
            && u64::from(s.st_name(self.endian)) < self.strtab.1
    }

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

/// One kallsyms text symbol.
#[derive(Clone, Copy, Debug)]
struct KSym {
    addr: u64,
    /// Name: offset and length in [`Kallsyms::names`].
    name: u32,
    name_len: u16,
    /// 1 + index into [`Kallsyms::modules`]; 0 for the kernel image.
    module: u16,
    rank: Rank,
}

/// The kernel's text symbols from `/proc/kallsyms`, sorted by address (one
/// per address: the best by perf's rule). Names are kept in one buffer.
#[derive(Debug, Default)]
pub struct Kallsyms {
    syms: Vec<KSym>,
    names: Vec<u8>,
    modules: Vec<String>,
    /// Address of `_text`, the kernel's relocation reference.
    pub text: Option<u64>,
    /// Lines that had an address of zero (kernel pointers hidden).
    zero: usize,
}

/// A kernel function found for an address.
#[derive(Debug, PartialEq, Eq)]
pub struct KernelSymbol<'a> {
    pub name: &'a str,
    /// Kernel module (`ext4`) when not in the kernel image.
    pub module: Option<&'a str>,
}

fn hex(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 16 || !b.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    // Digits are 0x30..0x39, letters 0x41.. or 0x61..: the low nibble, plus
    // 9 for letters (bit 6).
    Some(b.iter().fold(0u64, |v, &c| {
        (v << 4) | ((c as u64 & 0xf) + 9 * (c as u64 >> 6))
    }))
}

impl Kallsyms {
    /// Parses kallsyms text at once (see [`Kallsyms::push_lines`]).
    pub fn from_text(text: &str) -> Kallsyms {
        let mut k = Kallsyms::default();
        k.push_lines(text.as_bytes());
        k.finish();
        k
    }

    /// Parses whole lines `ADDRESS TYPE NAME [MODULE]`, keeping text
    /// symbols (`t`/`T`/`w`/`W`); returns how many bytes it consumed (up to
    /// the last newline, or everything when `text` ends a file).
    pub fn push_lines(&mut self, text: &[u8]) -> usize {
        if self.syms.capacity() == 0 {
            // About one text symbol per 45 bytes of a whole kallsyms.
            self.syms.reserve(1 << 17);
            self.names.reserve(1 << 22);
        }
        let mut used = 0;
        for end in memchr::memchr_iter(b'\n', text) {
            self.push_line(&text[used..end]);
            used = end + 1;
        }
        used
    }

    /// Parses a last line without a newline.
    pub fn push_last(&mut self, line: &[u8]) {
        if !line.is_empty() {
            self.push_line(line);
        }
    }

    fn push_line(&mut self, line: &[u8]) {
        // The usual shape, `ffffffff81000000 T name\t[module]`, by position.
        if line.len() > 19 && line[16] == b' ' && line[18] == b' ' {
            if !matches!(line[17], b't' | b'T' | b'w' | b'W') {
                return;
            }
            let rest = &line[19..];
            let (name, module) = match memchr::memchr(b'\t', rest) {
                Some(t) => (&rest[..t], Some(&rest[t + 1..])),
                None => (rest, None),
            };
            if memchr::memchr(b' ', name).is_none() {
                self.push_symbol(&line[..16], line[17], name, module);
                return;
            }
        }
        let mut it = line
            .split(|&c| c == b' ' || c == b'\t')
            .filter(|f| !f.is_empty());
        let (Some(addr), Some(&[kind]), Some(name)) = (it.next(), it.next(), it.next()) else {
            return;
        };
        self.push_symbol(addr, kind, name, it.next());
    }

    fn push_symbol(&mut self, addr: &[u8], kind: u8, name: &[u8], module: Option<&[u8]>) {
        let binding = match kind {
            b'T' => Binding::Global,
            b't' => Binding::Local,
            b'w' | b'W' => Binding::Weak,
            _ => return,
        };
        let Some(addr) = hex(addr) else { return };
        if addr == 0 {
            self.zero += 1;
            return;
        }
        if name == b"_text" {
            self.text = Some(addr);
        }
        let module = match module {
            Some(m) => {
                let m = m.strip_prefix(b"[").unwrap_or(m);
                let m = m.strip_suffix(b"]").unwrap_or(m);
                // Module symbols come grouped by module: compare with the last.
                match self.modules.last() {
                    Some(last) if last.as_bytes() == m => self.modules.len(),
                    _ => match self.modules.iter().position(|x| x.as_bytes() == m) {
                        Some(i) => i + 1,
                        None => {
                            self.modules.push(String::from_utf8_lossy(m).into_owned());
                            self.modules.len()
                        }
                    },
                }
            }
            None => 0,
        };
        let (Ok(off), Ok(len), Ok(module)) = (
            u32::try_from(self.names.len()),
            u16::try_from(name.len()),
            u16::try_from(module),
        ) else {
            return;
        };
        self.names.extend_from_slice(name);
        self.syms.push(KSym {
            addr,
            name: off,
            name_len: len,
            module,
            rank: Rank {
                sized: false,
                binding,
            },
        });
    }

    /// Sorts by address and keeps the best symbol of each address (the
    /// first in file order on a full tie).
    pub fn finish(&mut self) {
        // Stable and adaptive: kallsyms is sorted but for module blocks.
        self.syms.sort_by_key(|s| s.addr);
        let names = &self.names;
        let name = |s: &KSym| {
            names
                .get(s.name as usize..s.name as usize + s.name_len as usize)
                .unwrap_or(&[])
        };
        let mut out = 0;
        for i in 0..self.syms.len() {
            let s = self.syms[i];
            if out > 0 && self.syms[out - 1].addr == s.addr {
                let kept = self.syms[out - 1];
                if better(s.rank, name(&s), kept.rank, name(&kept)) {
                    self.syms[out - 1] = s;
                }
            } else {
                self.syms[out] = s;
                out += 1;
            }
        }
        self.syms.truncate(out);
    }

    /// Whether no symbol was read (e.g. kernel pointers are hidden).
    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// Whether addresses were hidden (all zero) by `kptr_restrict`.
    pub fn hidden(&self) -> bool {
        self.syms.is_empty() && self.zero > 0
    }

    /// Index of the symbol containing `addr` (the nearest at or below it).
    pub fn lookup_index(&self, addr: u64) -> Option<usize> {
        self.syms.partition_point(|s| s.addr <= addr).checked_sub(1)
    }

    /// The symbol at an index from [`Kallsyms::lookup_index`].
    pub fn symbol(&self, i: usize) -> Option<KernelSymbol<'_>> {
        let s = self.syms.get(i)?;
        let name = self
            .names
            .get(s.name as usize..s.name as usize + s.name_len as usize)?;
        Some(KernelSymbol {
            name: std::str::from_utf8(name).unwrap_or("[invalid name]"),
            module: match s.module {
                0 => None,
                m => self.modules.get(m as usize - 1).map(String::as_str),
            },
        })
    }

    /// The symbol containing `addr`.
    pub fn lookup(&self, addr: u64) -> Option<KernelSymbol<'_>> {
        self.symbol(self.lookup_index(addr)?)
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
                // As perf (libiberty's demangler) prints: `A<B<C> >` →
                // `A<B<C>>`, and an empty parameter pack leaves no `, `
                // (`AnalysisManager<llvm::Function, >`).
                let mut s = s;
                while s.contains("> >") {
                    s = s.replace("> >", ">>");
                }
                if s.contains(", >") {
                    s = s.replace(", >", ">");
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
ffffffffc0000000 t ext4_read\t[ext4]
";
        let t = Kallsyms::from_text(text);
        assert_eq!(t.lookup(0xffffffff81000150).unwrap().name, "do_thing");
        // Data symbols are skipped: do_thing extends to `later`.
        assert_eq!(t.lookup(0xffffffff81000250).unwrap().name, "do_thing");
        let f = t.lookup(0xffffffffc0000010).unwrap();
        assert_eq!((f.name, f.module), ("ext4_read", Some("ext4")));
        assert!(t.lookup(0x10).is_none());
        assert_eq!(t.text, Some(0xffffffff81000000));
    }

    #[test]
    fn kallsyms_parses_in_chunks() {
        let text = b"ffffffff81000000 T _text\nffffffff81000100 t do_thing\nffffffff810002";
        let mut k = Kallsyms::default();
        let used = k.push_lines(text);
        assert_eq!(&text[used..], b"ffffffff810002");
        k.push_last(b"ffffffff81000200 t last");
        k.finish();
        assert_eq!(k.lookup(0xffffffff81000201).unwrap().name, "last");
    }

    #[test]
    fn aliases_resolve_like_perf() {
        let text = "\
ffffffff81000100 t __memcpy_avx_unaligned_erms
ffffffff81000100 t __memmove_avx_unaligned_erms
ffffffff81000200 t __libc_malloc
ffffffff81000200 T malloc
";
        let t = Kallsyms::from_text(text);
        assert_eq!(
            t.lookup(0xffffffff81000101).unwrap().name,
            "__memmove_avx_unaligned_erms"
        );
        assert_eq!(t.lookup(0xffffffff81000201).unwrap().name, "malloc");
    }

    #[test]
    fn hex_addresses_parse_in_either_case() {
        assert_eq!(hex(b"ffffffff81000000"), Some(0xffff_ffff_8100_0000));
        assert_eq!(hex(b"FfA09"), Some(0xffa09));
        assert_eq!(hex(b"0"), Some(0));
        assert_eq!(hex(b"12g4"), None);
        assert_eq!(hex(b""), None);
        assert_eq!(hex(b"11112222333344445"), None);
    }

    #[test]
    fn hidden_kallsyms_gives_empty_table() {
        let t = Kallsyms::from_text("0000000000000000 T _text\n0000000000000000 t x\n");
        assert!(t.is_empty() && t.hidden());
    }

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

    #[test]
    fn demangles_rust_and_cpp() {
        assert_eq!(demangle("_ZN3foo3bar17h05af221e174051e9E"), "foo::bar");
        assert_eq!(demangle("_ZN5space3fooEii"), "space::foo");
        assert_eq!(
            demangle(
                "_ZN4llvm15AnalysisManagerINS_8FunctionEJEE13getResultImplEPNS_11AnalysisKeyERS1_"
            ),
            "llvm::AnalysisManager<llvm::Function>::getResultImpl"
        );
        assert_eq!(demangle("memset"), "memset");
        assert_eq!(demangle("_Zgarbage"), "_Zgarbage");
    }

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
