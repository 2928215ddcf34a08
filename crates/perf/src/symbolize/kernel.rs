//! The kernel's symbols: which copy of kallsyms to read (perf's build-id
//! cache copy for the trace's kernel when it is from the same boot, else
//! `/proc/kallsyms`), reading it whole and parsing it (or taking the table
//! the symbol cache kept for the same text), and naming the kernel's
//! frames from it, corrected for KASLR.
//!
//! The parsing and lookups themselves are `symbols`'.

use std::path::{Path, PathBuf};

use slowlab_model::trace::{FrameIdx, ModuleIdx};

use super::binaries::perf_buildid_dir;
use super::cache::SymbolCache;
use super::ModuleResult;
use crate::intern::FxMap;
use crate::symbols::Kallsyms;
use crate::{PerfError, ReadOptions};

/// Reads and parses kallsyms (run it on its own thread while records are
/// read: reading `/proc/kallsyms` costs the kernel ~60 ms of formatting),
/// or takes the table `cache` kept for the same text.
pub fn load_kallsyms(path: &Path, cache: &SymbolCache) -> Result<Kallsyms, PerfError> {
    // A file (perf's copy) is mapped (and read whole, 5 MB, only if the
    // cache does not know its key yet); `/proc/kallsyms` cannot be, and is
    // read.
    let k = match cache.kallsyms_file(path) {
        Some(k) => k,
        None => {
            let text = std::fs::read(path).map_err(|source| PerfError::KallsymsUnreadable {
                path: path.to_owned(),
                source,
            })?;
            cache.kallsyms(&text)
        }
    };
    if k.is_empty() {
        return Err(PerfError::KallsymsEmpty {
            path: path.to_owned(),
        });
    }
    Ok(k)
}

pub(crate) fn kallsyms_path(opts: &ReadOptions) -> PathBuf {
    opts.kallsyms
        .clone()
        .unwrap_or_else(|| PathBuf::from("/proc/kallsyms"))
}

/// The copy of kallsyms that `perf record` keeps in its build-id cache for
/// the kernel with `build_id` (`[kernel.kallsyms]/BUILD-ID/kallsyms`), if
/// it is there.
pub(crate) fn cached_kallsyms(build_id: &str) -> Option<PathBuf> {
    cached_kallsyms_in(&perf_buildid_dir()?, build_id)
}

/// [`cached_kallsyms`] in the build-id cache `dir`.
fn cached_kallsyms_in(dir: &Path, build_id: &str) -> Option<PathBuf> {
    // A build id is hex: nothing else may name a directory.
    if build_id.is_empty() || !build_id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let file = dir
        .join("[kernel.kallsyms]")
        .join(build_id)
        .join("kallsyms");
    file.is_file().then_some(file)
}

/// The kernel symbols for a trace whose kernel sat at `text_then` (its
/// `_text`): `cached` (loaded from perf's build-id cache) when it was saved
/// in the same boot — the same `_text`, so the modules' addresses hold too —
/// else the running kernel's from `/proc/kallsyms`.
pub(crate) fn same_boot_or_running(
    cached: Result<Kallsyms, PerfError>,
    text_then: Option<u64>,
    cache: &SymbolCache,
) -> Result<Kallsyms, PerfError> {
    match cached {
        Ok(k) if text_then.is_some() && k.text == text_then => Ok(k),
        _ => load_kallsyms(Path::new("/proc/kallsyms"), cache),
    }
}

/// Names kernel frames from kallsyms; returns the result and warnings.
pub(super) fn symbolize_kernel(
    kernel: Result<Kallsyms, PerfError>,
    text_then: Option<u64>,
    frames: &[(u64, FrameIdx)],
) -> (ModuleResult, Vec<String>) {
    // All kernel frames count as one "module" for reporting; the real
    // module of each is set from kallsyms.
    let module = ModuleIdx(u32::MAX);
    let k = match kernel {
        Ok(k) => k,
        Err(e) => {
            let mut r = ModuleResult::unnamed(module, frames, e.to_string());
            let e = r.error.take().unwrap_or_default();
            return (r, vec![e]);
        }
    };
    let mut warnings = Vec::new();
    // KASLR: the kernel may sit elsewhere than when the trace was recorded.
    let shift = match (text_then, k.text) {
        (Some(then), Some(now)) if then != now => {
            warnings.push(
                "the kernel was relocated since the recording (a reboot?); kernel functions are named from the running kernel, module functions may be wrong".to_string(),
            );
            now.wrapping_sub(then)
        }
        _ => 0,
    };
    let mut index: FxMap<usize, u32> = FxMap::default();
    let mut names = Vec::new();
    let mut kmods = Vec::new();
    let out = frames
        .iter()
        .map(|&(addr, f)| {
            let name = k.lookup_index(addr.wrapping_add(shift)).and_then(|i| {
                if let Some(&n) = index.get(&i) {
                    return Some(n);
                }
                let s = k.symbol(i)?;
                let n = names.len() as u32;
                names.push(s.name.to_owned());
                kmods.push(s.module.map(str::to_owned));
                index.insert(i, n);
                Some(n)
            });
            (f, name)
        })
        .collect();
    (
        ModuleResult {
            module,
            names,
            kmods,
            frames: out,
            error: None,
            missing: None,
        },
        warnings,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kallsyms_perf_record_cached_is_found_by_build_id() {
        let dir = tempfile::tempdir().unwrap();
        let id = "48dc540c8b76393804ca8088dbfa7d42911a9444";
        assert_eq!(cached_kallsyms_in(dir.path(), id), None);
        let entry = dir.path().join("[kernel.kallsyms]").join(id);
        std::fs::create_dir_all(&entry).unwrap();
        std::fs::write(entry.join("kallsyms"), "ffffffff81000000 T _text\n").unwrap();
        assert_eq!(
            cached_kallsyms_in(dir.path(), id),
            Some(entry.join("kallsyms"))
        );
        assert_eq!(cached_kallsyms_in(dir.path(), "../../etc"), None);
        assert_eq!(cached_kallsyms_in(dir.path(), ""), None);
    }

    #[test]
    fn a_cached_kallsyms_is_used_only_for_the_boot_it_was_saved_in() {
        let cached = || {
            Ok(Kallsyms::from_text(
                "ffffffff81000000 T _text\nffffffff81000100 T only_in_the_copy\n",
            ))
        };
        let same = same_boot_or_running(cached(), Some(0xffff_ffff_8100_0000), &SymbolCache::off())
            .unwrap();
        assert_eq!(
            same.lookup(0xffff_ffff_8100_0180).map(|s| s.name),
            Some("only_in_the_copy")
        );
        // Another `_text` (another boot), or none known: the running
        // kernel's table instead (or its error, where kallsyms is hidden).
        for text in [Some(0xffff_ffff_9a00_0000), None] {
            if let Ok(running) = same_boot_or_running(cached(), text, &SymbolCache::off()) {
                assert!(running
                    .lookup(0xffff_ffff_8100_0180)
                    .is_none_or(|s| s.name != "only_in_the_copy"));
            }
        }
    }
}
