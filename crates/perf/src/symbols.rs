//! Symbol lookup: address → function name, for an ELF file (from `.symtab`,
//! else `.dynsym`) and for the kernel (from `/proc/kallsyms` text), and
//! demangling of Rust and C++ names.
//!
//! A trace needs the names of a few thousand addresses per binary, while a
//! binary such as `libLLVM.so` holds a quarter of a million symbols. So an
//! ELF symbol table is not copied or sorted to be searched once:
//! [`Elf::resolve`] takes the *sorted queries* and makes one pass over the
//! raw symbol entries in the mapped file, keeping for each gap between
//! queries the best symbol that starts in it (`scan`); a prefix pass then
//! gives every query its nearest symbol at or below it, if the query lies
//! within what that symbol covers (its size; for a symbol without one, see
//! `symtab`: a stripped library's static functions are not named after the
//! exported function before them). A big table searched
//! in several rounds gets a compact sorted index instead ([`SortedSymbols`],
//! in `index`). Names stay offsets into the file until they are printed.
//! Kallsyms text is parsed without a per-line allocation into a compact
//! sorted table ([`Kallsyms`]).
//!
//! The parts: `symtab` reads an ELF file's headers and symbol table in
//! place; `scan` and `index` are the two ways to search it; `kallsyms`
//! is the kernel's table; `stored` writes and reads back what the symbol
//! cache keeps (an index, a kallsyms table, demangled names) and the key
//! of a symbol table. What they share is here: perf's rule for choosing
//! among symbols at one address, and demangling.
//!
//! Everything here works on bytes handed in by the caller and does no I/O,
//! so it is tested in memory. Finding and reading the files is
//! `symbolize`'s job. DWARF (inlined frames, lines) is not read: like
//! `perf report`, a frame is named after the symbol that contains it.

mod demangled;
mod index;
mod kallsyms;
mod scan;
mod stored;
mod symtab;

use object::elf;

pub use demangled::DemangledNames;
pub use index::SortedSymbols;
pub use kallsyms::{Kallsyms, KernelSymbol};
pub(crate) use stored::TABLE_FORM;
pub use symtab::Elf;

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

/// The first index in `lo..hi` at which `at_or_below(i)` is false, for a
/// predicate true up to some index and false after it (a table sorted by
/// address, asked which symbols lie at or below one): the standard
/// library's `partition_point`, for tables that are not slices (an index
/// or kallsyms read in place from the symbol cache's bytes).
fn first_above(mut lo: usize, mut hi: usize, at_or_below: impl Fn(usize) -> bool) -> usize {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if at_or_below(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Sorts `items` by `address`, keeping the order they came in among equal
/// addresses. Where address and position fit one word together
/// (addresses below 2^40 and fewer than 2^24 items: every library and
/// executable seen) the words are sorted instead: sorting plain integers
/// is several times faster than sorting the items (a stable sort of
/// structs, or a sort by pairs).
pub(crate) fn sort_by_address<T: Copy>(items: &mut Vec<T>, address: impl Fn(&T) -> u64) {
    let fits = items.len() < 1 << 24 && items.iter().all(|s| address(s) < 1 << 40);
    if fits {
        let mut keys: Vec<u64> = items
            .iter()
            .enumerate()
            .map(|(i, s)| address(s) << 24 | i as u64)
            .collect();
        keys.sort_unstable();
        *items = keys
            .iter()
            .map(|k| items[(k & 0xff_ffff) as usize])
            .collect();
    } else {
        items.sort_by_key(&address);
    }
}

/// This test binary's bytes: a real ELF file with a big symbol table, for
/// the tests of what reads one.
#[cfg(test)]
pub(crate) fn test_binary() -> Vec<u8> {
    let exe = std::env::current_exe().expect("the test binary's path");
    std::fs::read(exe).expect("the test binary, to read its symbols")
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
