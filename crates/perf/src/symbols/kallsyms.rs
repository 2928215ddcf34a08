//! The kernel's text symbols, parsed from a whole kallsyms text (without
//! an allocation per line) into a compact table sorted by address, one
//! symbol per address chosen by perf's rule, with the kernel module of
//! each; and looked up by address, in that table or in place in the bytes
//! the symbol cache kept it as (see `stored`).
//!
//! It does not read the file (`symbolize` does, and decides which copy)
//! nor correct for KASLR.

use super::{better, first_above, Binding, Rank};

/// One kallsyms text symbol.
#[derive(Clone, Copy, Debug)]
pub(super) struct KSym {
    pub(super) addr: u64,
    /// Name: offset and length in [`Kallsyms::names`].
    pub(super) name: u32,
    pub(super) name_len: u16,
    /// 1 + index into [`Kallsyms::modules`]; 0 for the kernel image.
    pub(super) module: u16,
    pub(super) rank: Rank,
}

/// The kernel's text symbols from `/proc/kallsyms`, sorted by address (one
/// per address: the best by perf's rule). Names are kept in one buffer.
/// A table read back from the symbol cache keeps its symbols and names in
/// the cache file's bytes instead (`InPlace`).
#[derive(Debug, Default)]
pub struct Kallsyms {
    syms: Vec<KSym>,
    names: Vec<u8>,
    in_place: Option<InPlace>,
    pub(super) modules: Vec<String>,
    /// Address of `_text`, the kernel's relocation reference.
    pub text: Option<u64>,
    /// Lines that had an address of zero (kernel pointers hidden).
    pub(super) zero: usize,
}

/// The symbols and names of a table read in place from stored bytes
/// (checked when read: see `stored`), not copied.
pub(super) struct InPlace {
    pub(super) bytes: Box<dyn AsRef<[u8]> + Send + Sync>,
    /// Where the symbols ([`KSYM_BYTES`] each) and the names lie.
    pub(super) syms: std::ops::Range<usize>,
    pub(super) names: std::ops::Range<usize>,
}

/// Bytes of one stored symbol: address, name, name length, module, rank.
pub(super) const KSYM_BYTES: usize = 17;

impl std::fmt::Debug for InPlace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "InPlace({} symbols, {} bytes of names)",
            self.syms.len() / KSYM_BYTES,
            self.names.len()
        )
    }
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
    /// Parses kallsyms text (see [`Kallsyms::parse`]).
    pub fn from_text(text: &str) -> Kallsyms {
        Kallsyms::parse(text.as_bytes())
    }

    /// Parses a whole kallsyms file's bytes, its last line with or without
    /// a newline.
    pub fn parse(text: &[u8]) -> Kallsyms {
        let mut k = Kallsyms::default();
        let used = k.push_lines(text);
        k.push_last(&text[used..]);
        k.finish();
        k
    }

    /// Parses whole lines `ADDRESS TYPE NAME [MODULE]`, keeping text
    /// symbols (`t`/`T`/`w`/`W`); returns how many bytes it consumed (up to
    /// the last newline, or everything when `text` ends a file).
    fn push_lines(&mut self, text: &[u8]) -> usize {
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
    fn push_last(&mut self, line: &[u8]) {
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

    /// Sorts by address and keeps the best symbol of each address, as perf
    /// does: perf gives each kallsyms symbol the size up to the next
    /// address, so of aliases at one address (`memcpy`, `__memcpy`,
    /// `__pi_memcpy`) only the last in file order has a size, and a sized
    /// symbol wins before binding and names are compared.
    fn finish(&mut self) {
        // Stable and adaptive: kallsyms is sorted but for module blocks.
        self.syms.sort_by_key(|s| s.addr);
        for i in 0..self.syms.len() {
            let last_alias = self
                .syms
                .get(i + 1)
                .is_none_or(|n| n.addr != self.syms[i].addr);
            self.syms[i].rank.sized = last_alias;
        }
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

    /// A table whose symbols and names lie in `in_place`.
    pub(super) fn read_in_place(
        in_place: InPlace,
        modules: Vec<String>,
        text: Option<u64>,
        zero: usize,
    ) -> Kallsyms {
        Kallsyms {
            in_place: Some(in_place),
            modules,
            text,
            zero,
            ..Kallsyms::default()
        }
    }

    /// How many symbols the table has.
    pub(super) fn len(&self) -> usize {
        match &self.in_place {
            Some(p) => p.syms.len() / KSYM_BYTES,
            None => self.syms.len(),
        }
    }

    /// Symbol `i`, if there is one.
    pub(super) fn ksym(&self, i: usize) -> Option<KSym> {
        match &self.in_place {
            Some(p) => {
                let at = p.syms.start + i.checked_mul(KSYM_BYTES)?;
                let b = (*p.bytes).as_ref().get(at..at + KSYM_BYTES)?;
                (at < p.syms.end).then(|| KSym::read(b))
            }
            None => self.syms.get(i).copied(),
        }
    }

    /// The buffer the symbols' names lie in.
    pub(super) fn name_bytes(&self) -> &[u8] {
        match &self.in_place {
            Some(p) => (*p.bytes).as_ref().get(p.names.clone()).unwrap_or(&[]),
            None => &self.names,
        }
    }

    /// Whether no symbol was read (e.g. kernel pointers are hidden).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether addresses were hidden (all zero) by `kptr_restrict`.
    pub fn hidden(&self) -> bool {
        self.is_empty() && self.zero > 0
    }

    /// Index of the symbol containing `addr` (the nearest at or below it).
    pub fn lookup_index(&self, addr: u64) -> Option<usize> {
        first_above(0, self.len(), |i| {
            self.ksym(i).is_some_and(|s| s.addr <= addr)
        })
        .checked_sub(1)
    }

    /// The symbol at an index from [`Kallsyms::lookup_index`].
    pub fn symbol(&self, i: usize) -> Option<KernelSymbol<'_>> {
        let s = self.ksym(i)?;
        let name = self
            .name_bytes()
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
        // Three global aliases (kernel 6.18's memcpy): perf names the last.
        let t = Kallsyms::from_text(
            "ffffffff82261560 T memcpy\nffffffff82261560 T __memcpy\nffffffff82261560 T __pi_memcpy\nffffffff82261600 T next\n",
        );
        assert_eq!(t.lookup(0xffffffff82261561).unwrap().name, "__pi_memcpy");
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
}
