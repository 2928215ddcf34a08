//! The per-binary cache: each binary a trace needs is opened once, by a
//! preload thread while the records are read or by the first job that
//! needs it: memory-mapped (perf's build-id cache copy when the file is
//! gone or was rebuilt), its separate debug file found when it is
//! stripped, its symbol table and names requested from the disk ahead
//! (`MADV_WILLNEED`) unless the symbol cache knows the file (then what the
//! names need is in the cache), and a big table given a sorted index
//! (made, or read from the symbol cache, with the names the cache keeps
//! demangled for it). When nothing on the machine has a stripped binary's
//! symbols (or the binary itself), they are fetched by build id from the
//! debuginfod servers, if any are given (`debuginfod`).
//!
//! It names no frame (`jobs` does, with what is opened here).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use super::cache::{FileIdentity, FileKey, SymbolCache};
use super::debuginfod::{Artifact, DebuginfodOptions, Fetcher};
use crate::intern::FxMap;
use crate::symbols::{DemangledNames, Elf, SortedSymbols};
use crate::{PerfError, PAGE};

/// Binaries opened ahead of symbolization, while the records are read:
/// each is mapped, its headers parsed and its symbol table requested from
/// the disk (`MADV_WILLNEED`), so that with a cold page cache the reads
/// overlap the record pass instead of following it. A binary is opened
/// once: by a preload thread, or by the first job that needs it (a job
/// waits for a preload already under way).
#[derive(Default)]
pub struct Preload {
    files: Mutex<FxMap<String, Slot>>,
    ready: Condvar,
    /// Where sorted indexes and demangled names are kept between runs.
    pub(super) cache: SymbolCache,
    /// Fetches what nothing local has, from debuginfod servers.
    fetcher: Option<Fetcher>,
}

enum Slot {
    Opening,
    Open(Arc<Opened>),
}

/// A binary as opened for symbolization: its map (or why not), the map of
/// its separate debug file when it is stripped, for a big symbol table an
/// address-sorted index of it, and what the symbol cache needs: the
/// identity of the file its names come from, (once asked for) its
/// table's key, and for a big table the names the cache keeps demangled.
pub(super) struct Opened {
    pub(super) map: Result<memmap2::Mmap, PerfError>,
    pub(super) debug: Option<memmap2::Mmap>,
    pub(super) index: Option<SortedSymbols>,
    identity: Option<FileIdentity>,
    table_key: OnceLock<Option<u128>>,
    /// Read from the cache with the index, while the records are read
    /// (with a cold page cache, a big binary's names are MBs the disk
    /// would otherwise serve after the record pass); taken by the job.
    kept_names: Mutex<Option<DemangledNames>>,
}

impl Opened {
    /// An image in memory (the running vDSO), read as a binary's file is: no file
    /// behind it, so nothing of it is kept in the symbol cache.
    pub(super) fn image(map: memmap2::Mmap) -> Opened {
        Opened {
            map: Ok(map),
            debug: None,
            index: None,
            identity: None,
            table_key: OnceLock::new(),
            kept_names: Mutex::new(None),
        }
    }

    /// The [`Elf::table_key`] of `symbols` (the table of this binary the
    /// names come from), `None` when the cache is off: see [`table_key`].
    pub(super) fn table_key(&self, symbols: &Elf<'_>, cache: &SymbolCache) -> Option<u128> {
        table_key(self.identity.as_ref(), &self.table_key, symbols, cache)
    }

    /// The names the cache keeps for this binary's table, if read when it
    /// was opened (once: later calls give `None`).
    pub(super) fn take_kept_names(&self) -> Option<DemangledNames> {
        self.kept_names.lock().ok()?.take()
    }
}

/// The [`Elf::table_key`] of `symbols`, from the file whose identity is
/// `identity`, found once (into `cell`, which [`open_binary`] fills first
/// with the key `cache` kept for the file as it is, when there is one), or
/// computed (reading the whole table and its names) and kept by identity;
/// `None` when the cache is off.
fn table_key(
    identity: Option<&FileIdentity>,
    cell: &OnceLock<Option<u128>>,
    symbols: &Elf<'_>,
    cache: &SymbolCache,
) -> Option<u128> {
    *cell.get_or_init(|| {
        if !cache.is_on() || !symbols.has_functions {
            return None;
        }
        let key = symbols.table_key();
        if let Some(id) = identity {
            cache.keep_key_of_file(id, FileKey::Table, key);
        }
        Some(key)
    })
}

/// Symbol tables at least this big get a sorted index when opened, rather
/// than being scanned (librustc_driver: 350,000 symbols).
const BIG_TABLE: usize = 50_000;

impl Preload {
    /// No binary opened yet; work on big symbol tables is kept in `cache`.
    pub fn new(cache: SymbolCache) -> Preload {
        Preload {
            cache,
            ..Preload::default()
        }
    }

    /// The same, fetching debug files (and binaries that are gone) by
    /// build id from the servers in `opts` when nothing local has them,
    /// keeping them in the symbol cache's directory.
    pub fn with_debuginfod(mut self, opts: &DebuginfodOptions) -> Preload {
        self.fetcher = Fetcher::new(opts, self.cache.dir());
        self
    }

    /// One line per file fetched from a debuginfod server (or failure to).
    pub fn notes(&self) -> Vec<String> {
        self.fetcher
            .as_ref()
            .map(Fetcher::notes)
            .unwrap_or_default()
    }

    /// Opens `path` and requests its symbol table, unless that is done or
    /// under way (call from a background thread: it may wait for the disk).
    pub fn prepare(&self, path: &str, build_id: Option<&str>) {
        {
            let Ok(mut files) = self.files.lock() else {
                return;
            };
            if files.contains_key(path) {
                return;
            }
            files.insert(path.to_owned(), Slot::Opening);
        }
        let opened = Arc::new(open_binary(
            path,
            build_id,
            &self.cache,
            self.fetcher.as_ref(),
        ));
        if let Ok(mut files) = self.files.lock() {
            files.insert(path.to_owned(), Slot::Open(opened));
        }
        self.ready.notify_all();
    }

    /// The binary at `path`: prepared, or opened now.
    pub(super) fn open(&self, path: &str, build_id: Option<&str>) -> Arc<Opened> {
        let Ok(mut files) = self.files.lock() else {
            return Arc::new(open_binary(
                path,
                build_id,
                &self.cache,
                self.fetcher.as_ref(),
            ));
        };
        loop {
            match files.get(path) {
                Some(Slot::Open(o)) => return o.clone(),
                Some(Slot::Opening) => match self.ready.wait(files) {
                    Ok(f) => files = f,
                    Err(_) => {
                        return Arc::new(open_binary(
                            path,
                            build_id,
                            &self.cache,
                            self.fetcher.as_ref(),
                        ))
                    }
                },
                None => {
                    files.insert(path.to_owned(), Slot::Opening);
                    drop(files);
                    let opened = Arc::new(open_binary(
                        path,
                        build_id,
                        &self.cache,
                        self.fetcher.as_ref(),
                    ));
                    if let Ok(mut files) = self.files.lock() {
                        files.insert(path.to_owned(), Slot::Open(opened.clone()));
                    }
                    self.ready.notify_all();
                    return opened;
                }
            }
        }
    }

    /// Closes every binary (their symbols are no longer needed), on
    /// another thread.
    pub(super) fn clear(&self) {
        if let Ok(mut files) = self.files.lock() {
            crate::drop_later(std::mem::take(&mut *files));
        }
    }
}

/// Maps a binary and, if it has no `.symtab`, its debug file; asks the
/// kernel to read their symbol tables ahead, unless the symbol cache
/// knows the table (then a big table's index, names already demangled
/// and the table's key are all in the cache, and the table is read only
/// for what is not).
fn open_binary(
    path: &str,
    build_id: Option<&str>,
    cache: &SymbolCache,
    fetcher: Option<&Fetcher>,
) -> Opened {
    let map = map_binary(Path::new(path)).map_err(PerfError::BinaryOpen);
    // What perf did not keep, from a debuginfod server.
    let fetched = |id: Option<&str>, artifact| fetch_map(fetcher, id?, artifact, path);
    // The file as it is now; perf's cached copy if it is gone or rebuilt.
    let now = map
        .as_ref()
        .ok()
        .and_then(|(m, _)| Elf::parse(m).ok()?.build_id.map(|b| hex(&b)));
    let map = match (map, build_id, now) {
        (Ok(_), Some(recorded), Some(now)) if recorded != now => cached_copy(Some(recorded))
            .or_else(|| fetched(Some(recorded), Artifact::Executable))
            .ok_or(PerfError::BinaryChanged),
        (Ok(m), _, _) => Ok(m),
        (Err(e), _, _) => cached_copy(build_id)
            .or_else(|| fetched(build_id, Artifact::Executable))
            .ok_or(e),
    };
    let (map, mut identity) = match map {
        Ok((m, id)) => (Ok(m), id),
        Err(e) => (Err(e), None),
    };
    let mut debug = None;
    let mut index = None;
    let mut kept_names = None;
    let table_key = OnceLock::new();
    if let Ok(m) = &map {
        if let Ok(elf) = Elf::parse(m) {
            if elf.dynsym_only {
                let id = elf.build_id.as_deref().map(hex);
                let has_functions =
                    |d: &memmap2::Mmap| Elf::parse(d).is_ok_and(|e| e.has_functions);
                let local = debug_file_candidates(id.as_deref(), path)
                    .into_iter()
                    .filter_map(|p| map_binary(&p).ok())
                    .find(|(d, _)| has_functions(d));
                // `.dynsym`'s exported functions are not enough: the
                // functions between them would take their names.
                let remote = || {
                    fetched(id.as_deref(), Artifact::DebugInfo).filter(|(d, _)| has_functions(d))
                };
                if let Some((d, id)) = local.or_else(remote) {
                    debug = Some(d);
                    identity = id;
                }
            }
            let parsed = debug.as_ref().and_then(|d| Elf::parse(d).ok());
            let symbols = parsed.as_ref().unwrap_or(&elf);
            let names_map = debug.as_ref().unwrap_or(m);
            let known = identity
                .as_ref()
                .filter(|_| cache.is_on() && symbols.has_functions)
                .and_then(|id| cache.key_of_file(id, FileKey::Table));
            if let Some(key) = known {
                let _ = table_key.set(Some(key));
            }
            let big = symbols.symbol_count() >= BIG_TABLE;
            let read_ahead = || {
                will_need(names_map, symbols.symtab);
                // The names too, all of them (up to a size): those of the
                // frames are scattered through the table, and one long read
                // ahead costs the disk less than thousands of page reads.
                if symbols.strtab.1 <= PREFETCH_NAMES {
                    will_need(names_map, symbols.strtab);
                }
            };
            if known.is_none() {
                read_ahead();
            } else if !big {
                // A small table is scanned whole at each lookup.
                will_need(names_map, symbols.symtab);
            }
            if big {
                let key = self::table_key(identity.as_ref(), &table_key, symbols, cache);
                index = Some(match key.and_then(|k| cache.kept_index(k)) {
                    Some(kept) => {
                        kept_names = key.map(|k| cache.demangled(k));
                        kept
                    }
                    None => {
                        if known.is_some() {
                            read_ahead();
                        }
                        let made = symbols.sorted();
                        match key {
                            Some(k) => {
                                let winners = made.winners(symbols);
                                cache.keep_index(k, &winners);
                                winners
                            }
                            None => made,
                        }
                    }
                });
            }
        }
    }
    Opened {
        map,
        debug,
        index,
        identity,
        table_key,
        kept_names: Mutex::new(kept_names),
    }
}

/// Asks the kernel to start reading `range` of a mapped file.
pub(crate) fn will_need(map: &memmap2::Mmap, (off, len): (u64, u64)) {
    let (Ok(off), Ok(len)) = (usize::try_from(off), usize::try_from(len)) else {
        return;
    };
    // Whole pages: the kernel wants an aligned start.
    let start = off & !(PAGE - 1);
    let len = len + (off - start);
    if len > 0 && start.checked_add(len).is_some_and(|e| e <= map.len()) {
        // Only a hint: failure changes nothing but speed.
        let _ = map.advise_range(memmap2::Advice::WillNeed, start, len);
    }
}

/// Symbol name tables up to this size are read ahead whole.
const PREFETCH_NAMES: u64 = 64 << 20;

/// Asks the kernel to read the pages that hold the names at `offsets`
/// (ascending), adjacent pages in one request, all at once (not the pages
/// between: a string table is megabytes, the names a trace needs are
/// scattered through it).
pub(super) fn will_need_names(map: &memmap2::Mmap, offsets: &mut dyn Iterator<Item = u32>) {
    let mut run: Option<(usize, usize)> = None;
    for off in offsets {
        let off = off as usize;
        // A long name may cross into the next page.
        let (first, last) = (off / PAGE, (off + LONG_NAME) / PAGE);
        run = match run {
            Some((a, b)) if first <= b + 1 => Some((a, last.max(b))),
            Some((a, b)) => {
                will_need(map, ((a * PAGE) as u64, ((b + 1 - a) * PAGE) as u64));
                Some((first, last))
            }
            None => Some((first, last)),
        };
    }
    if let Some((a, b)) = run {
        will_need(map, ((a * PAGE) as u64, ((b + 1 - a) * PAGE) as u64));
    }
}

/// Bytes after a name's start that are requested with it.
const LONG_NAME: usize = 256;

/// Candidate separate debug files for a binary, by build id.
fn debug_file_candidates(build_id: Option<&str>, path: &str) -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(id) = build_id {
        if id.len() > 2 {
            v.push(PathBuf::from(format!(
                "/usr/lib/debug/.build-id/{}/{}.debug",
                &id[..2],
                &id[2..]
            )));
        }
    }
    v.push(PathBuf::from(format!("/usr/lib/debug{path}.debug")));
    v.push(PathBuf::from(format!("/usr/lib/debug{path}")));
    v
}

/// Maps a binary for scattered reads: no read-around on a page fault (the
/// disk's read-ahead window may be megabytes; the parts needed are asked
/// for explicitly with [`will_need`]). With the file's identity, for the
/// symbol cache.
fn map_binary(path: &Path) -> std::io::Result<(memmap2::Mmap, Option<FileIdentity>)> {
    let f = std::fs::File::open(path)?;
    let identity = f.metadata().ok().and_then(|m| FileIdentity::of(&m));
    // SAFETY: read-only private map; see `read_file`.
    let map = unsafe { memmap2::Mmap::map(&f) }?;
    // Only a hint.
    let _ = map.advise(memmap2::Advice::Random);
    Ok((map, identity))
}

/// A build id as perf writes it: lowercase hex.
pub(crate) fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// perf's build-id cache, where `perf record` keeps copies of the binaries
/// and kallsyms it saw: `$PERF_BUILDID_DIR`, else `~/.debug`.
pub(super) fn perf_buildid_dir() -> Option<PathBuf> {
    std::env::var_os("PERF_BUILDID_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".debug")))
}

/// The file fetched (or fetched before) for the binary at `path`, mapped;
/// a temporary file is removed once mapped.
fn fetch_map(
    fetcher: Option<&Fetcher>,
    build_id: &str,
    artifact: Artifact,
    path: &str,
) -> Option<(memmap2::Mmap, Option<FileIdentity>)> {
    let (file, temporary) = fetcher?.fetch(build_id, artifact, path)?;
    let mapped = map_binary(&file).ok();
    if temporary {
        let _ = std::fs::remove_file(&file);
        // An unlinked file's identity names nothing later runs could find.
        return mapped.map(|(m, _)| (m, None));
    }
    mapped
}

/// perf record's copy of a binary in its build-id cache.
fn cached_copy(build_id: Option<&str>) -> Option<(memmap2::Mmap, Option<FileIdentity>)> {
    let id = build_id?;
    let p = perf_buildid_dir()?
        .join(".build-id")
        .join(id.get(..2)?)
        .join(id.get(2..)?)
        .join("elf");
    map_binary(&p).ok()
}
