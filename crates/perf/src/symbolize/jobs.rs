//! The per-binary jobs: the user frames of a trace (or of the part read
//! so far) grouped into one job per binary, the biggest first; the jobs run
//! on a pool wider than the cores (with a cold page cache they mostly wait
//! for the disk) once the records are read; and what one job does: resolve its binary's addresses in
//! one pass (or through the binary's index) and demangle each symbol hit
//! once (or take it from the symbol cache, which keeps the new ones).
//!
//! It opens no file itself: `binaries` hands it each binary, opened.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rayon::prelude::*;
use slowlab_model::trace::{FrameIdx, ModuleIdx, ModuleKind, Trace};

use super::binaries::{will_need_names, Opened, Preload};
use super::cache::SymbolCache;
use super::hint::{no_debug_file, Missing};
use super::vdso;
use super::ModuleResult;
use crate::symbols::{demangle, sort_by_address, DemangledNames, Elf};
use crate::ProgressFn;

/// Threads for the per-binary jobs (they mostly wait for the disk).
const IO_THREADS: usize = 8;

/// One binary's frames to name (owned, so it can run while the trace is
/// still being built).
pub(super) struct UserJob {
    module: ModuleIdx,
    path: String,
    build_id: Option<String>,
    frames: Vec<(u64, FrameIdx)>,
    /// The image to read, when it is not the file at `path` (the running vDSO).
    image: Option<Arc<Opened>>,
}

/// The user frames `from..to` of `trace`, one job per binary, the biggest
/// first; and those of its `[vdso]` when it is the running kernel's ([`vdso`]).
pub(super) fn user_jobs(trace: &Trace, from: usize, to: usize) -> Vec<UserJob> {
    let vdso: Vec<Option<Arc<Opened>>> = trace
        .modules
        .iter()
        .map(|m| vdso::running_for(trace, m))
        .collect();
    let mut by_module: Vec<Vec<(u64, FrameIdx)>> = vec![Vec::new(); trace.modules.len()];
    for (i, f) in trace.frames.iter().enumerate().take(to).skip(from) {
        let m = f.module.ix();
        if trace.modules[m].kind == ModuleKind::User || vdso[m].is_some() {
            by_module[m].push((f.address, FrameIdx(i as u32)));
        }
    }
    let mut jobs: Vec<UserJob> = by_module
        .into_iter()
        .enumerate()
        .filter(|(_, frames)| !frames.is_empty())
        .map(|(m, frames)| {
            let module = &trace.modules[m];
            UserJob {
                module: ModuleIdx(m as u32),
                path: trace.str(module.path).to_owned(),
                build_id: module.build_id.clone(),
                frames,
                image: vdso[m].clone(),
            }
        })
        .collect();
    jobs.sort_by_key(|j| std::cmp::Reverse(j.frames.len()));
    jobs
}

/// Runs user jobs on a pool wider than the cores (they mostly wait for
/// the disk when the page cache is cold), of at most `threads` threads
/// unless 0.
pub(super) fn run_user_jobs(
    jobs: &[UserJob],
    preload: &Preload,
    progress: Option<ProgressFn>,
    threads: usize,
) -> Vec<ModuleResult> {
    let total = jobs.len() as u64;
    let done = AtomicU64::new(0);
    let run = || {
        jobs.par_iter()
            .with_max_len(1)
            .map(|job| {
                let opened = match &job.image {
                    Some(image) => Arc::clone(image),
                    None => preload.open(&job.path, job.build_id.as_deref()),
                };
                let mut r = symbolize_user_module(job.module, &opened, &job.frames, &preload.cache);
                if let Some(p) = progress {
                    p("symbolize", done.fetch_add(1, Ordering::Relaxed) + 1, total);
                }
                if job.image.is_some() {
                    // The vDSO exports its functions, and that is all it has: nothing to say.
                    (r.error, r.missing) = (None, None);
                }
                if let Some(e) = &mut r.error {
                    *e = format!("{}: {e}", job.path);
                }
                r
            })
            .collect()
    };
    let width = match threads {
        0 => IO_THREADS,
        n => n.min(IO_THREADS),
    };
    match rayon::ThreadPoolBuilder::new().num_threads(width).build() {
        Ok(pool) => pool.install(run),
        Err(_) => run(),
    }
}

fn symbolize_user_module(
    idx: ModuleIdx,
    opened: &Opened,
    frames: &[(u64, FrameIdx)],
    cache: &SymbolCache,
) -> ModuleResult {
    let map = match &opened.map {
        Ok(m) => m,
        Err(e) => return ModuleResult::unnamed(idx, frames, e.to_string()),
    };
    let elf = match Elf::parse(map) {
        Ok(e) => e,
        Err(e) => {
            return ModuleResult::unnamed(idx, frames, format!("not a readable ELF file ({e})"))
        }
    };
    let debug = opened.debug.as_ref().and_then(|m| Elf::parse(m).ok());
    if debug.is_none() && !elf.has_functions {
        let mut r = ModuleResult::unnamed(idx, frames, no_debug_file(Missing::All, None));
        r.missing = Some(Missing::All);
        return r;
    }
    let symbols = debug.as_ref().unwrap_or(&elf);
    let names_map = opened
        .debug
        .as_ref()
        .filter(|_| debug.is_some())
        .unwrap_or(map);
    // Queries: the addresses (from file offsets, by the file's segments),
    // sorted.
    let mut queries: Vec<(u64, u32)> = frames
        .iter()
        .enumerate()
        .filter_map(|(i, &(off, _))| Some((elf.offset_to_address(off)?, i as u32)))
        .collect();
    sort_by_address(&mut queries, |q| q.0);
    let addrs: Vec<u64> = queries.iter().map(|q| q.0).collect();
    let mut prefetch = |offs: &mut dyn Iterator<Item = u32>| will_need_names(names_map, offs);
    let found = match &opened.index {
        Some(index) => index.resolve(symbols, &addrs, &mut prefetch),
        None => symbols.resolve(&addrs, &mut prefetch),
    };
    drop(addrs);
    // The symbols hit, read in file order (their pages requested from the
    // disk at once first) and demangled once each. Each hit is one word,
    // name << 32 | frame: sorting plain integers is several times faster
    // than sorting pairs.
    let mut hits: Vec<u64> = queries
        .iter()
        .zip(&found)
        .filter_map(|(&(_, i), name)| Some(((*name)? as u64) << 32 | i as u64))
        .collect();
    hits.sort_unstable();
    let name_and_frame = |h: &u64| ((h >> 32) as u32, *h as u32);
    let mut unique: Vec<u32> = Vec::new();
    let mut out: Vec<(FrameIdx, Option<u32>)> = frames.iter().map(|&(_, f)| (f, None)).collect();
    for (off, i) in hits.iter().map(name_and_frame) {
        if unique.last() != Some(&off) {
            unique.push(off);
        }
        out[i as usize].1 = Some(unique.len() as u32 - 1);
    }
    let key = || opened.table_key(symbols, cache);
    let kept = opened.take_kept_names();
    let names = demangle_all(&unique, symbols, &mut prefetch, key, kept, cache);
    let kmods = vec![None; names.len()];
    // Only `.dynsym`'s exported functions, and frames outside them: say
    // why those have no name, and what to do.
    // (The package to install is found for all binaries at once, later.)
    let partial = debug.is_none() && elf.dynsym_only && out.iter().any(|(_, n)| n.is_none());
    let missing = partial.then_some(Missing::AllButExported);
    ModuleResult {
        module: idx,
        names,
        kmods,
        frames: out,
        error: missing.map(|m| no_debug_file(m, None)),
        missing,
    }
}

/// Binaries with fewer names to demangle than this demangle them all
/// again rather than read those kept in the cache.
const KEPT_NAMES: usize = 256;

/// The demangled names at the file offsets `unique` (ascending) of
/// `symbols`. Long Rust and C++ names are most of a binary's work: each is
/// demangled once per binary, in parallel, and where there are many, those
/// demangled by an earlier run are taken from `cache` (under the table's
/// key, `table_key()`; `kept` when already read from it) and the new ones
/// added to it. Only the names not kept are read, `prefetch` told of them
/// (ascending) first.
fn demangle_all(
    unique: &[u32],
    symbols: &Elf<'_>,
    prefetch: &mut dyn FnMut(&mut dyn Iterator<Item = u32>),
    table_key: impl FnOnce() -> Option<u128>,
    kept: Option<DemangledNames>,
    cache: &SymbolCache,
) -> Vec<String> {
    let key = if unique.len() >= KEPT_NAMES {
        table_key()
    } else {
        None
    };
    let mut kept = match key {
        Some(k) => kept.unwrap_or_else(|| cache.demangled(k)),
        None => DemangledNames::default(),
    };
    prefetch(&mut unique.iter().copied().filter(|&o| kept.get(o).is_none()));
    let (names, new): (Vec<String>, Vec<bool>) = unique
        .par_iter()
        .with_min_len(256)
        .map(|&o| match kept.get(o) {
            Some(d) => (d.to_owned(), false),
            None => (demangle(&String::from_utf8_lossy(symbols.name(o))), true),
        })
        .unzip();
    if let Some(key) = key.filter(|_| new.contains(&true)) {
        for ((&o, name), _) in unique.iter().zip(&names).zip(&new).filter(|(_, &n)| n) {
            kept.insert(o, name);
        }
        cache.keep_demangled(key, &kept);
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_demangled_before_are_taken_from_the_cache() {
        let bytes = crate::symbols::test_binary();
        let elf = Elf::parse(&bytes).unwrap();
        // The names of the functions at every 64th byte of the file.
        let addrs: Vec<u64> = (0..bytes.len() as u64)
            .step_by(64)
            .filter_map(|o| elf.offset_to_address(o))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut unique: Vec<u32> = elf
            .resolve(&addrs, &mut |_| {})
            .into_iter()
            .flatten()
            .collect();
        unique.sort_unstable();
        unique.dedup();
        assert!(unique.len() >= KEPT_NAMES, "{} names", unique.len());
        let plain: Vec<String> = unique
            .iter()
            .map(|&o| demangle(&String::from_utf8_lossy(elf.name(o))))
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let cache = SymbolCache::in_dir(dir.path().to_owned());
        let key = elf.table_key();
        let run = |unique: &[u32], key: Option<u128>, cache: &SymbolCache| {
            let mut read = Vec::new();
            let names = demangle_all(unique, &elf, &mut |n| read.extend(n), || key, None, cache);
            (names, read)
        };
        // No key, the cache off, or too few names: nothing kept, every name
        // read.
        assert_eq!(run(&unique, None, &cache), (plain.clone(), unique.clone()));
        assert_eq!(run(&unique, Some(key), &SymbolCache::off()).0, plain);
        assert_eq!(run(&unique[..10], Some(key), &cache).0, plain[..10]);
        assert!(cache.demangled(key).is_empty());
        // Kept by the first run, all of them; the next reads none.
        assert_eq!(run(&unique, Some(key), &cache).0, plain);
        assert_eq!(cache.demangled(key).len(), unique.len());
        assert_eq!(run(&unique, Some(key), &cache), (plain.clone(), vec![]));
        // A name kept with another text comes back so; the others, not
        // kept, are read and demangled.
        let mut marked = DemangledNames::default();
        marked.insert(unique[0], "kept::by::an::earlier::run");
        cache.keep_demangled(key, &marked);
        let (again, read) = run(&unique, Some(key), &cache);
        assert_eq!(again[0], "kept::by::an::earlier::run");
        assert_eq!(again[1..], plain[1..]);
        assert_eq!(read, unique[1..]);
        // And the ones it lacked are added.
        assert!(cache.demangled(key).len() > 1);
    }
}
