//! The symbolization driver: names every frame of a trace once. Frames are
//! grouped by module; each binary is memory-mapped and its frames' addresses
//! are resolved in one pass over its symbol table (one task per binary, the
//! biggest first, on a pool wider than the cores because with a cold page
//! cache the tasks mostly wait for the disk), and only the symbols actually
//! hit are demangled. A stripped binary falls back to its separate debug
//! file found by build id (`/usr/lib/debug/.build-id/xx/yyyy.debug`), a
//! rebuilt or deleted one to perf's build-id cache (`~/.debug`). Kernel
//! frames are named from the copy of kallsyms that `perf record` saved in
//! that cache for the trace's kernel, when it was saved in the same boot
//! (a plain file; the kernel spends tens of milliseconds of CPU formatting
//! `/proc/kallsyms`), else from `/proc/kallsyms`, shifted by the KASLR
//! offset between the recording and now.
//!
//! To overlap the record pass: binaries are opened ([`Preload`]) as their
//! first frame is read, and [`Early`] rounds name the user frames read so
//! far while the rest of the records are read; [`symbolize_with`] then
//! names only what is left.
//!
//! This is the only part of the crate that opens files other than the
//! perf.data itself; the lookups are in `symbols`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use rayon::prelude::*;
use slowlab_model::trace::{
    FrameIdx, FuncIdx, Function, Module, ModuleIdx, ModuleKind, StrIdx, Trace,
};

use crate::intern::{FxMap, Strings};
use crate::symbols::{demangle, Elf, Kallsyms, SortedSymbols};
use crate::{ProgressFn, ReadOptions};

const UNKNOWN: &str = "[unknown]";

/// Threads for the per-binary jobs (they mostly wait for the disk).
const IO_THREADS: usize = 8;

/// Reads and parses kallsyms (run it on its own thread while records are
/// read: reading `/proc/kallsyms` costs the kernel ~60 ms of formatting).
pub fn load_kallsyms(path: &Path) -> Result<Kallsyms, String> {
    use std::io::Read;
    let cannot = |e: std::io::Error| {
        format!(
            "cannot read {} ({e}); kernel frames show as [unknown]",
            path.display()
        )
    };
    let mut f = std::fs::File::open(path).map_err(cannot)?;
    let mut k = Kallsyms::default();
    // Parse as it streams in: no copy of the whole text is kept.
    let mut buf = vec![0u8; 1 << 18];
    let mut have = 0;
    loop {
        if have == buf.len() {
            // A line longer than the buffer: grow it.
            buf.resize(buf.len() * 2, 0);
        }
        let n = match f.read(&mut buf[have..]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(cannot(e)),
        };
        if n == 0 {
            k.push_last(&buf[..have]);
            break;
        }
        have += n;
        let used = k.push_lines(&buf[..have]);
        buf.copy_within(used..have, 0);
        have -= used;
    }
    k.finish();
    if k.is_empty() {
        return Err(format!(
            "{} shows no addresses (kernel pointers are hidden); run as root or `sysctl kernel.kptr_restrict=0` to name kernel functions",
            path.display()
        ));
    }
    Ok(k)
}

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
}

enum Slot {
    Opening,
    Open(Arc<Opened>),
}

/// A binary as opened for symbolization: its map (or why not), the map of
/// its separate debug file when it is stripped, for a big symbol table an
/// address-sorted index of it, and the names demangled so far (a binary is
/// named in rounds, [`Early`] and [`symbolize_with`]).
struct Opened {
    map: Result<memmap2::Mmap, String>,
    debug: Option<memmap2::Mmap>,
    index: Option<SortedSymbols>,
    demangled: Mutex<FxMap<u32, String>>,
}

/// Symbol tables at least this big get a sorted index when opened, rather
/// than being scanned in each round (librustc_driver: 350,000 symbols).
const BIG_TABLE: usize = 50_000;

impl Preload {
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
        let opened = Arc::new(open_binary(path, build_id));
        if let Ok(mut files) = self.files.lock() {
            files.insert(path.to_owned(), Slot::Open(opened));
        }
        self.ready.notify_all();
    }

    /// The binary at `path`: prepared, or opened now.
    fn open(&self, path: &str, build_id: Option<&str>) -> Arc<Opened> {
        let Ok(mut files) = self.files.lock() else {
            return Arc::new(open_binary(path, build_id));
        };
        loop {
            match files.get(path) {
                Some(Slot::Open(o)) => return o.clone(),
                Some(Slot::Opening) => match self.ready.wait(files) {
                    Ok(f) => files = f,
                    Err(_) => return Arc::new(open_binary(path, build_id)),
                },
                None => {
                    files.insert(path.to_owned(), Slot::Opening);
                    drop(files);
                    let opened = Arc::new(open_binary(path, build_id));
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
    fn clear(&self) {
        if let Ok(mut files) = self.files.lock() {
            crate::drop_later(std::mem::take(&mut *files));
        }
    }
}

/// Maps a binary and, if it has no `.symtab`, its debug file; asks the
/// kernel to read their symbol tables ahead.
fn open_binary(path: &str, build_id: Option<&str>) -> Opened {
    let map = map_binary(Path::new(path)).map_err(|e| format!("cannot open ({e})"));
    // The file as it is now; perf's cached copy if it is gone or rebuilt.
    let now = map
        .as_ref()
        .ok()
        .and_then(|m| Elf::parse(m).ok()?.build_id.map(|b| hex(&b)));
    let map = match (map, build_id, now) {
        (Ok(_), Some(recorded), Some(now)) if recorded != now => cached_copy(Some(recorded))
            .ok_or_else(|| "the file changed since the recording (build id differs); analyze on the machine and build that recorded it".to_string()),
        (Ok(m), _, _) => Ok(m),
        (Err(e), _, _) => cached_copy(build_id).ok_or(e),
    };
    let mut debug = None;
    let mut index = None;
    if let Ok(m) = &map {
        if let Ok(elf) = Elf::parse(m) {
            will_need(m, elf.symtab);
            // The names too, all of them (up to a size): those of the
            // frames are scattered through the table, and one long read
            // ahead costs the disk less than thousands of page reads.
            if elf.strtab.1 <= PREFETCH_NAMES {
                will_need(m, elf.strtab);
            }
            if elf.dynsym_only {
                let id = elf.build_id.as_deref().map(hex);
                debug = debug_file_candidates(id.as_deref(), path)
                    .into_iter()
                    .filter_map(|p| map_binary(&p).ok())
                    .find(|m| {
                        Elf::parse(m).is_ok_and(|e| {
                            will_need(m, e.symtab);
                            e.has_functions
                        })
                    });
            }
            let symbols = debug.as_ref().and_then(|d| Elf::parse(d).ok());
            let symbols = symbols.as_ref().unwrap_or(&elf);
            if symbols.symbol_count() >= BIG_TABLE {
                index = Some(symbols.sorted());
            }
        }
    }
    Opened {
        map,
        debug,
        index,
        demangled: Mutex::default(),
    }
}

/// Asks the kernel to start reading `range` of a mapped file.
fn will_need(map: &memmap2::Mmap, (off, len): (u64, u64)) {
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

const PAGE: usize = 4096;

/// Symbol name tables up to this size are read ahead whole.
const PREFETCH_NAMES: u64 = 64 << 20;

/// Asks the kernel to read the pages that hold the names at `offsets`
/// (ascending), adjacent pages in one request, all at once (not the pages
/// between: a string table is megabytes, the names a trace needs are
/// scattered through it).
fn will_need_names(map: &memmap2::Mmap, offsets: &mut dyn Iterator<Item = u32>) {
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

/// Names found for one module's frames.
struct ModuleResult {
    module: ModuleIdx,
    /// Unique names (demangled) and, per frame, an index into them.
    names: Vec<String>,
    /// Kernel module name of each name (kallsyms), if any.
    kmods: Vec<Option<String>>,
    frames: Vec<(FrameIdx, Option<u32>)>,
    error: Option<String>,
}

impl ModuleResult {
    fn unnamed(module: ModuleIdx, frames: &[(u64, FrameIdx)], error: String) -> Self {
        ModuleResult {
            module,
            names: Vec::new(),
            kmods: Vec::new(),
            frames: frames.iter().map(|&(_, f)| (f, None)).collect(),
            error: Some(error),
        }
    }
}

/// One binary's frames to name (owned, so it can run while the trace is
/// still being built).
struct UserJob {
    module: ModuleIdx,
    path: String,
    build_id: Option<String>,
    frames: Vec<(u64, FrameIdx)>,
}

/// The user frames `from..to` of `trace`, one job per binary, the biggest
/// first.
fn user_jobs(trace: &Trace, from: usize, to: usize) -> Vec<UserJob> {
    let mut by_module: Vec<Vec<(u64, FrameIdx)>> = vec![Vec::new(); trace.modules.len()];
    for (i, f) in trace.frames.iter().enumerate().take(to).skip(from) {
        if trace.modules[f.module.ix()].kind == ModuleKind::User {
            by_module[f.module.ix()].push((f.address, FrameIdx(i as u32)));
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
            }
        })
        .collect();
    jobs.sort_by_key(|j| std::cmp::Reverse(j.frames.len()));
    jobs
}

/// Runs user jobs on a pool wider than the cores (they mostly wait for
/// the disk when the page cache is cold).
fn run_user_jobs(
    jobs: &[UserJob],
    preload: &Preload,
    progress: Option<ProgressFn>,
) -> Vec<ModuleResult> {
    let total = jobs.len() as u64;
    let done = AtomicU64::new(0);
    let run = || {
        jobs.par_iter()
            .with_max_len(1)
            .map(|job| {
                let opened = preload.open(&job.path, job.build_id.as_deref());
                let mut r = symbolize_user_module(job.module, &opened, &job.frames);
                if let Some(p) = progress {
                    p("symbolize", done.fetch_add(1, Ordering::Relaxed) + 1, total);
                }
                if let Some(e) = &mut r.error {
                    *e = format!("{}: {e}", job.path);
                }
                r
            })
            .collect()
    };
    match rayon::ThreadPoolBuilder::new()
        .num_threads(IO_THREADS)
        .build()
    {
        Ok(pool) => pool.install(run),
        Err(_) => run(),
    }
}

/// User frames being named while the rest of the records are read, in
/// rounds (each round the frames that came since the one before).
#[derive(Default)]
pub struct Early {
    /// Frames before this index were handed over.
    until: usize,
    rounds: Vec<std::thread::JoinHandle<Vec<ModuleResult>>>,
}

impl Early {
    /// Starts naming the user frames `trace` got since the last round, on
    /// other threads.
    pub fn round(&mut self, trace: &Trace, preload: Arc<Preload>) {
        let jobs = user_jobs(trace, self.until, trace.frames.len());
        self.until = trace.frames.len();
        self.rounds.push(std::thread::spawn(move || {
            run_user_jobs(&jobs, &preload, None)
        }));
    }
}

struct Interner<'t> {
    trace: &'t mut Trace,
    strings: Strings,
    funcs: FxMap<(u32, StrIdx), FuncIdx>,
    module_by_name: FxMap<String, ModuleIdx>,
    /// `[unknown]` of each (module, kernel), the most common name by far.
    unknown: FxMap<(u32, bool), FuncIdx>,
}

impl Interner<'_> {
    fn unknown(&mut self, module: ModuleIdx, kernel: bool) -> FuncIdx {
        if let Some(&f) = self.unknown.get(&(module.0, kernel)) {
            return f;
        }
        let f = self.func(module, UNKNOWN, kernel);
        self.unknown.insert((module.0, kernel), f);
        f
    }

    fn func(&mut self, module: ModuleIdx, name: &str, kernel: bool) -> FuncIdx {
        let name = self.strings.intern(&mut self.trace.strings, name);
        *self.funcs.entry((module.0, name)).or_insert_with(|| {
            let f = FuncIdx(self.trace.functions.len() as u32);
            self.trace.functions.push(Function {
                name,
                module,
                kernel,
            });
            f
        })
    }

    /// The module for a kernel module name from kallsyms (`ext4`).
    fn kernel_module(&mut self, name: &str) -> ModuleIdx {
        let display = format!("[{name}]");
        if let Some(&m) = self.module_by_name.get(&display) {
            return m;
        }
        let s = self.strings.intern(&mut self.trace.strings, &display);
        let m = ModuleIdx(self.trace.modules.len() as u32);
        self.trace.modules.push(Module {
            name: s,
            path: s,
            kind: ModuleKind::KernelModule,
            build_id: None,
            symbol_error: None,
        });
        self.module_by_name.insert(display, m);
        m
    }
}

fn interner(trace: &mut Trace) -> Interner<'_> {
    let mut strings = Strings::default();
    let mut table = std::mem::take(&mut trace.strings);
    // Re-intern the existing table so new names are deduplicated against it.
    let existing = std::mem::take(&mut table);
    for s in &existing {
        strings.intern(&mut table, s);
    }
    trace.strings = table;
    let module_by_name = trace
        .modules
        .iter()
        .enumerate()
        .map(|(i, m)| (trace.strings[m.name.ix()].clone(), ModuleIdx(i as u32)))
        .collect();
    Interner {
        trace,
        strings,
        funcs: FxMap::default(),
        module_by_name,
        unknown: FxMap::default(),
    }
}

/// Names every frame `[unknown]` (no symbolization).
pub fn leave_unsymbolized(trace: &mut Trace) {
    let mut it = interner(trace);
    for i in 0..it.trace.frames.len() {
        let (module, kernel) = (it.trace.frames[i].module, it.trace.frames[i].kernel);
        let f = it.unknown(module, kernel);
        it.trace.frames[i].function = f;
    }
}

/// Symbolizes every frame of `trace` in place, reading kallsyms now.
pub fn symbolize(trace: &mut Trace, opts: &ReadOptions, progress: ProgressFn) {
    let path = kallsyms_path(opts);
    symbolize_with(
        trace,
        move |_| load_kallsyms(&path),
        &Preload::default(),
        None,
        progress,
    );
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
    cached: Result<Kallsyms, String>,
    text_then: Option<u64>,
) -> Result<Kallsyms, String> {
    match cached {
        Ok(k) if text_then.is_some() && k.text == text_then => Ok(k),
        _ => load_kallsyms(Path::new("/proc/kallsyms")),
    }
}

/// Symbolizes every frame of `trace` in place. `kernel` gives the kallsyms
/// table for a kernel whose `_text` was at the given address when the trace
/// was recorded (e.g. by joining the thread that loads it) and is called
/// only if there are kernel frames; `preload` has the binaries opened so far;
/// `early` names the user frames it was started with.
pub fn symbolize_with(
    trace: &mut Trace,
    kernel: impl FnOnce(Option<u64>) -> Result<Kallsyms, String> + Send,
    preload: &Preload,
    early: Option<Early>,
    progress: ProgressFn,
) {
    let foreign = trace.modules.iter().any(|m| m.symbol_error.is_some());
    if foreign {
        leave_unsymbolized(trace);
        return;
    }
    let from = early.as_ref().map_or(0, |e| e.until);
    let early_rounds = early.map(|e| e.rounds).unwrap_or_default();
    let jobs = user_jobs(trace, from, trace.frames.len());
    let kernel_frames: Vec<(u64, FrameIdx)> = trace
        .frames
        .iter()
        .enumerate()
        .filter(|(_, f)| {
            matches!(
                trace.modules[f.module.ix()].kind,
                ModuleKind::Kernel | ModuleKind::KernelModule
            )
        })
        .map(|(i, f)| (f.address, FrameIdx(i as u32)))
        .collect();
    let kernel_text = trace.meta.kernel_text;
    let kern = || {
        (!kernel_frames.is_empty())
            .then(|| symbolize_kernel(kernel(kernel_text), kernel_text, &kernel_frames))
    };
    let mut warnings = Vec::new();
    // Each frame's function, in a compact array first (results come by
    // binary, frames in address order: scattered across the frame table),
    // then set in one pass over the frames.
    let mut func_of = vec![crate::reader::NO_FUNC; trace.frames.len()];
    let mut it = interner(trace);
    std::thread::scope(|s| {
        // The last round and the kernel's frames (owned data, no borrow of
        // the trace) while the early rounds' results are interned here.
        let last = s.spawn(|| rayon::join(kern, || run_user_jobs(&jobs, preload, Some(progress))));
        // Early results first: frames in the order they were read.
        let mut failed = false;
        for round in early_rounds {
            match round.join() {
                Ok(results) => {
                    for r in results {
                        intern_result(&mut it, &mut func_of, &mut warnings, r);
                    }
                }
                Err(_) => failed = true,
            }
        }
        if failed {
            // An early round failed (a bug): name those frames again, now.
            for r in run_user_jobs(&user_jobs(it.trace, 0, from), preload, None) {
                intern_result(&mut it, &mut func_of, &mut warnings, r);
            }
        }
        // (A panicked kernel job is a bug: those frames stay `[unknown]`.)
        let (kernel_result, later) = last.join().unwrap_or_default();
        for r in later {
            intern_result(&mut it, &mut func_of, &mut warnings, r);
        }
        if let Some((r, w)) = kernel_result {
            intern_result(&mut it, &mut func_of, &mut warnings, r);
            warnings.extend(w);
        }
    });
    preload.clear();
    drop(jobs);
    // Frames of modules that were not symbolized (anonymous memory, vdso,
    // unmapped) and any frame left over: `[unknown]`.
    for (i, func) in func_of.into_iter().enumerate() {
        let f = if func == crate::reader::NO_FUNC {
            let (module, kernel) = (it.trace.frames[i].module, it.trace.frames[i].kernel);
            it.unknown(module, kernel)
        } else {
            func
        };
        it.trace.frames[i].function = f;
    }
    let unreadable: Vec<String> = it
        .trace
        .modules
        .iter()
        .filter_map(|m| m.symbol_error.clone())
        .collect();
    if !unreadable.is_empty() {
        let n = unreadable.len();
        let first = &unreadable[0];
        warnings.push(format!(
            "{n} binar{} could not be symbolized (first: {first}); their frames show as [unknown]",
            if n == 1 { "y" } else { "ies" }
        ));
    }
    it.trace.stats.warnings.extend(warnings);
}

/// Points the frames of one module's result at their functions (in
/// `func_of`), interning the names; notes its error.
fn intern_result(
    it: &mut Interner<'_>,
    func_of: &mut [FuncIdx],
    warnings: &mut Vec<String>,
    r: ModuleResult,
) {
    if let Some(e) = r.error {
        match it.trace.modules.get_mut(r.module.ix()) {
            Some(m) if m.kind == ModuleKind::User => m.symbol_error = Some(e),
            _ => warnings.push(e),
        }
    }
    // A user binary's frames are all its own; kernel frames may be in
    // modules.
    let user = it
        .trace
        .modules
        .get(r.module.ix())
        .is_some_and(|m| m.kind == ModuleKind::User);
    // Intern each name once, then point the frames at it.
    let mut by_name: Vec<Option<FuncIdx>> = vec![None; r.names.len()];
    for (frame, name) in r.frames {
        let (mut module, kernel) = if user {
            (r.module, false)
        } else {
            let f = &it.trace.frames[frame.ix()];
            (f.module, f.kernel)
        };
        let func = match name {
            Some(n) => {
                let n = n as usize;
                if let Some(Some(km)) = r.kmods.get(n) {
                    module = it.kernel_module(km);
                }
                match by_name.get(n).copied().flatten() {
                    Some(func) if it.trace.functions[func.ix()].module == module => func,
                    _ => {
                        let func = it.func(module, &r.names[n], kernel);
                        if let Some(slot) = by_name.get_mut(n) {
                            *slot = Some(func);
                        }
                        func
                    }
                }
            }
            None => it.unknown(module, kernel),
        };
        if let Some(slot) = func_of.get_mut(frame.ix()) {
            *slot = func;
        }
    }
}

/// Names kernel frames from kallsyms; returns the result and warnings.
fn symbolize_kernel(
    kernel: Result<Kallsyms, String>,
    text_then: Option<u64>,
    frames: &[(u64, FrameIdx)],
) -> (ModuleResult, Vec<String>) {
    // All kernel frames count as one "module" for reporting; the real
    // module of each is set from kallsyms.
    let module = ModuleIdx(u32::MAX);
    let k = match kernel {
        Ok(k) => k,
        Err(e) => {
            let mut r = ModuleResult::unnamed(module, frames, e);
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
        },
        warnings,
    )
}

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
/// for explicitly with [`will_need`]).
fn map_binary(path: &Path) -> std::io::Result<memmap2::Mmap> {
    let f = std::fs::File::open(path)?;
    // SAFETY: read-only private map; see `read_file`.
    let map = unsafe { memmap2::Mmap::map(&f) }?;
    // Only a hint.
    let _ = map.advise(memmap2::Advice::Random);
    Ok(map)
}

/// A build id as perf writes it: lowercase hex.
pub(crate) fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// perf's build-id cache, where `perf record` keeps copies of the binaries
/// and kallsyms it saw: `$PERF_BUILDID_DIR`, else `~/.debug`.
fn perf_buildid_dir() -> Option<PathBuf> {
    std::env::var_os("PERF_BUILDID_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".debug")))
}

/// perf record's copy of a binary in its build-id cache.
fn cached_copy(build_id: Option<&str>) -> Option<memmap2::Mmap> {
    let id = build_id?;
    let p = perf_buildid_dir()?
        .join(".build-id")
        .join(id.get(..2)?)
        .join(id.get(2..)?)
        .join("elf");
    map_binary(&p).ok()
}

fn symbolize_user_module(
    idx: ModuleIdx,
    opened: &Opened,
    frames: &[(u64, FrameIdx)],
) -> ModuleResult {
    let map = match &opened.map {
        Ok(m) => m,
        Err(e) => return ModuleResult::unnamed(idx, frames, e.clone()),
    };
    let elf = match Elf::parse(map) {
        Ok(e) => e,
        Err(e) => {
            return ModuleResult::unnamed(idx, frames, format!("not a readable ELF file ({e})"))
        }
    };
    let debug = opened.debug.as_ref().and_then(|m| Elf::parse(m).ok());
    if debug.is_none() && !elf.has_functions {
        return ModuleResult::unnamed(
            idx,
            frames,
            "stripped, and no debug file found (install its -dbgsym package)".into(),
        );
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
    queries.sort_unstable();
    let addrs: Vec<u64> = queries.iter().map(|q| q.0).collect();
    let mut prefetch = |offs: &mut dyn Iterator<Item = u32>| will_need_names(names_map, offs);
    let found = match &opened.index {
        Some(index) => index.resolve(symbols, &addrs, &mut prefetch),
        None => symbols.resolve(&addrs, &mut prefetch),
    };
    drop(addrs);
    // The symbols hit, read in file order (their pages requested from the
    // disk at once first) and demangled once each.
    let mut hits: Vec<(u32, u32)> = queries
        .iter()
        .zip(&found)
        .filter_map(|(&(_, i), name)| Some(((*name)?, i)))
        .collect();
    hits.sort_unstable();
    will_need_names(names_map, &mut hits.iter().map(|h| h.0));
    let mut unique: Vec<u32> = Vec::new();
    let mut out: Vec<(FrameIdx, Option<u32>)> = frames.iter().map(|&(_, f)| (f, None)).collect();
    for (off, i) in hits {
        if unique.last() != Some(&off) {
            unique.push(off);
        }
        out[i as usize].1 = Some(unique.len() as u32 - 1);
    }
    // Demangling long Rust and C++ names is most of the work here: each
    // once per binary, in parallel.
    let mut names: Vec<Option<String>> = match opened.demangled.lock() {
        Ok(d) => unique.iter().map(|o| d.get(o).cloned()).collect(),
        Err(_) => vec![None; unique.len()],
    };
    let missing: Vec<usize> = (0..unique.len()).filter(|&i| names[i].is_none()).collect();
    let fresh: Vec<String> = missing
        .par_iter()
        .with_min_len(256)
        .map(|&i| demangle(&String::from_utf8_lossy(symbols.name(unique[i]))))
        .collect();
    if let Ok(mut d) = opened.demangled.lock() {
        for (&i, name) in missing.iter().zip(&fresh) {
            d.insert(unique[i], name.clone());
        }
    }
    for (i, name) in missing.into_iter().zip(fresh) {
        names[i] = Some(name);
    }
    let names: Vec<String> = names.into_iter().map(Option::unwrap_or_default).collect();
    let kmods = vec![None; names.len()];
    ModuleResult {
        module: idx,
        names,
        kmods,
        frames: out,
        error: None,
    }
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
        let same = same_boot_or_running(cached(), Some(0xffff_ffff_8100_0000)).unwrap();
        assert_eq!(
            same.lookup(0xffff_ffff_8100_0180).map(|s| s.name),
            Some("only_in_the_copy")
        );
        // Another `_text` (another boot), or none known: the running
        // kernel's table instead (or its error, where kallsyms is hidden).
        for text in [Some(0xffff_ffff_9a00_0000), None] {
            if let Ok(running) = same_boot_or_running(cached(), text) {
                assert!(running
                    .lookup(0xffff_ffff_8100_0180)
                    .is_none_or(|s| s.name != "only_in_the_copy"));
            }
        }
    }
}
