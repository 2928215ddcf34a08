//! Reads a perf.data file into slowlab's trace model ([`slowlab_model::trace`])
//! and symbolizes it.
//!
//! The pipeline is: [`file`] maps the file and repairs an unfinished header;
//! [`records`] indexes the data section in place and puts it in time order;
//! [`reader`] turns the records into the model, keeping per-process memory
//! maps and interning every frame and stack; then [`symbolize`] names each
//! unique frame once, one binary per task in parallel, from ELF symbol
//! tables ([`symbols`]) and the kernel's kallsyms (read on its own thread
//! while the records are read), keeping its work on big tables between runs
//! when asked to ([`SymbolCache`]).
//!
//! This crate never prints. Problems that still allow an analysis (lost
//! events, a truncated file, a binary that cannot be read) become counts and
//! warnings in [`slowlab_model::trace::ReadStats`]; problems that do not are
//! a [`PerfError`].

mod file;
mod intern;
mod reader;
mod records;
pub mod symbolize;
pub mod symbols;
pub mod tracepoint;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use reader::FramePass;
pub use reader::{kernel_build_id, read_bytes};
use slowlab_model::trace::Trace;
pub use symbolize::SymbolCache;

/// What went wrong, the crate's one error type. [`read_file`] and
/// [`read_bytes`] fail only when the perf.data file cannot be read at all
/// (the first four variants). The others say why symbols could not be
/// read (kallsyms, a binary); symbolization goes on without them, and
/// their message becomes a warning or the module's `symbol_error`.
#[derive(Debug, thiserror::Error)]
pub enum PerfError {
    #[error("cannot open {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the file is empty (0 bytes), so it holds no trace; was the recording stopped before it started?")]
    Empty,
    #[error("not a perf.data file: {0}")]
    NotPerfData(String),
    #[error("cannot parse the perf.data header: {0}")]
    Header(String),
    #[error("cannot read {} ({source}); kernel frames show as [unknown]", path.display())]
    KallsymsUnreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} shows no addresses (kernel pointers are hidden); run as root or `sysctl kernel.kptr_restrict=0` to name kernel functions", path.display())]
    KallsymsEmpty { path: PathBuf },
    /// The thread reading kallsyms panicked (a bug).
    #[error("reading kallsyms failed")]
    KallsymsFailed,
    /// The thread interning stacks panicked (a bug).
    #[error(
        "interning the stacks failed (a bug); SLOWLAB_THREADS=1 interns them on the reading thread"
    )]
    Interning,
    /// A pass stopped because the trace it was making would not fit the
    /// memory budget (the reader then reads by function; never shown).
    #[error("the trace would not fit the memory budget in one pass")]
    OverBudget,
    /// The records could not be read as they were walked (out of time
    /// order, or compressed): they are read again, indexed first (never
    /// shown).
    #[error("the records cannot be streamed in time order")]
    Unstreamed,
    /// The two passes of a read by function saw different records (a bug).
    #[error("the two passes over the records disagree (a bug); set SLOWLAB_MEMORY above the trace's size in MB to read it in one pass")]
    PassesDiffer,
    #[error("cannot open ({0})")]
    BinaryOpen(std::io::Error),
    #[error("the file changed since the recording (build id differs); analyze on the machine and build that recorded it")]
    BinaryChanged,
    #[error("not an ELF file")]
    NotElf,
    #[error("{0}")]
    Elf(object::read::Error),
}

/// What to do while reading.
#[derive(Clone, Debug)]
pub struct ReadOptions {
    /// Name frames with function names (otherwise every frame is
    /// `[unknown]` in its module).
    pub symbolize: bool,
    /// Where to read kernel symbols; `/proc/kallsyms` by default.
    pub kallsyms: Option<PathBuf>,
    /// At most this many threads read and symbolize at once; 0: as many
    /// as help (binaries are opened and named beside the reading, on pools
    /// wider than the cores). With 1 everything happens in turn on one
    /// thread: the result is the same, only slower.
    pub threads: usize,
    /// Bytes the trace model may take. A trace whose every address would
    /// not fit is read in two passes, its frames merged by function (see
    /// [`read_file`]); `None`: no limit.
    pub memory_budget: Option<u64>,
    /// Where work on symbols is kept between runs (sorted indexes of big
    /// symbol tables, parsed kallsyms, demangled names: see
    /// [`SymbolCache`]); `None`: nothing is kept.
    pub symbol_cache: Option<PathBuf>,
    /// Debuginfod servers to fetch the debug files (and gone binaries)
    /// that nothing on the machine has, by build id.
    pub debuginfod: symbolize::DebuginfodOptions,
}

impl ReadOptions {
    /// The cache in [`ReadOptions::symbol_cache`].
    pub fn symbol_cache(&self) -> SymbolCache {
        match &self.symbol_cache {
            Some(dir) => SymbolCache::in_dir(dir.clone()),
            None => SymbolCache::off(),
        }
    }
}

/// The default [`ReadOptions::memory_budget`]: 1 GiB.
pub const DEFAULT_MEMORY_BUDGET: u64 = 1 << 30;

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            symbolize: true,
            kallsyms: None,
            threads: 0,
            memory_budget: Some(DEFAULT_MEMORY_BUDGET),
            symbol_cache: None,
            debuginfod: symbolize::DebuginfodOptions::default(),
        }
    }
}

/// Whether a perf.data file of `file_bytes` might not fit `budget` in one
/// pass: then that pass projects its memory as it goes, and the file is read
/// by function (two passes) if the projection passes the budget. A pass
/// that keeps every address takes up to about one byte of memory per byte
/// of trace at its peak when stacks share few callers (each frame a new
/// stack node: 1.04 on a 1.2 GB build trace while its unmapped frames were
/// each their own), and less when they share many: 0.35 at 1.23 GB and
/// 0.27 at 2.28 GB on build traces since (sample columns, the record index,
/// and stack nodes; bench/analyze/README.md).
pub fn reads_by_function(file_bytes: u64, budget: Option<u64>) -> bool {
    budget.is_some_and(|b| file_bytes > b)
}

/// Progress of a long read: `(stage, done, total)`; stages are `"read"`
/// (records; `"read (pass 1 of 2)"` and `"read (pass 2 of 2)"` for a trace
/// over the memory budget) and `"symbolize"` (binaries).
pub type ProgressFn<'a> = &'a (dyn Fn(&str, u64, u64) + Sync);

/// Bytes at the end of a perf.data file asked of the disk before the rest.
const TAIL_FIRST: usize = 1 << 20;

/// Bytes of a page.
pub(crate) const PAGE: usize = 4096;

/// Threads that open binaries while the records are read.
const PRELOAD_THREADS: usize = 6;

/// Reads and symbolizes the perf.data file at `path`: in one pass, or, when
/// the file is bigger than `opts.memory_budget` and the memory the pass is
/// heading for passes it (projected at a quarter, half and three quarters
/// of the records: see `reader::read_bytes_with`), in two, with the frames
/// of each function merged into one (see `second_pass`).
pub fn read_file(
    path: &Path,
    opts: &ReadOptions,
    progress: ProgressFn,
) -> Result<Trace, PerfError> {
    let open_err = |source| PerfError::Open {
        path: path.to_owned(),
        source,
    };
    let f = std::fs::File::open(path).map_err(open_err)?;
    let len = f.metadata().map_err(open_err)?.len();
    if len == 0 {
        return Err(PerfError::Empty);
    }
    // SAFETY: the map is read-only and private to this process. If another
    // process truncates the file while we read, we may get SIGBUS — the
    // same contract every mmap-based reader (perf included) accepts.
    // Not populated: the pages of records already read are given back as
    // the reading moves on (`release` below), so that the memory the file
    // takes stays a window of it, however big it is.
    let map = unsafe { memmap2::MmapOptions::new().map(&f) }.map_err(open_err)?;
    // The disk is asked for the end of the file first: the header's
    // feature sections are there (the kernel's build id, read next), and
    // the disk serves requests in turn (behind megabytes of records, the
    // small reads that find the cached kallsyms would wait too).
    let tail = len.saturating_sub(TAIL_FIRST as u64);
    symbolize::will_need(&map, (tail, len - tail));
    // Kallsyms first, on its own thread, read while the records are: the
    // copy `perf record` saved for the trace's kernel if it is there (a
    // file), else /proc/kallsyms (the kernel needs tens of milliseconds of
    // CPU to format it).
    let one_thread = opts.threads == 1;
    let cache = opts.symbol_cache();
    let kallsyms = opts.symbolize.then(|| {
        let cached = match opts.kallsyms {
            Some(_) => None,
            None => reader::kernel_build_id(&map)
                .as_deref()
                .and_then(symbolize::cached_kallsyms),
        };
        let from_cache = cached.is_some();
        let path = cached.unwrap_or_else(|| symbolize::kallsyms_path(opts));
        let loading = (!one_thread).then(|| {
            let (path, cache) = (path.clone(), cache.clone());
            std::thread::spawn(move || symbolize::load_kallsyms(&path, &cache))
        });
        (path, loading, from_cache)
    });
    // Then the records, from the start (of a `WillNeed` the kernel reads
    // up to the disk's read-ahead window, 8 MB on the benchmark machine;
    // the walk's page faults ask for the rest). On a thread of its own: the
    // kernel takes milliseconds to make room for those pages in its cache,
    // time the header's parsing need not wait.
    let map = Arc::new(map);
    let request_records = {
        let map = map.clone();
        move || drop(map.advise(memmap2::Advice::WillNeed))
    };
    if one_thread {
        request_records();
    } else {
        std::thread::spawn(request_records);
    }
    // Over the budget, one pass is tried with its memory projected as it
    // goes; when the projection passes the budget, two (see `second_pass`),
    // each showing its progress as such.
    let limit = opts
        .memory_budget
        .filter(|_| reads_by_function(len, opts.memory_budget));
    let first_progress = in_pass(progress, "read (pass 1 of 2)");
    let read = |on_binary: &mut dyn FnMut(&str, Option<&str>),
                release: &(dyn Fn(usize, usize) + Sync)| {
        let pass = FramePass::Addresses;
        match reader::read_bytes_with(
            &map,
            progress,
            opts.threads,
            pass,
            on_binary,
            limit,
            release,
        ) {
            Err(PerfError::OverBudget) => {
                let pass = FramePass::FramesOnly;
                let first = &first_progress;
                reader::read_bytes_with(&map, first, opts.threads, pass, on_binary, None, release)
            }
            read => read,
        }
    };
    let Some((kallsyms_path, loading, from_cache)) = kallsyms else {
        let release = &|from, to| release(&map, from, to);
        let (mut trace, first) = read(&mut |_, _| {}, release)?;
        symbolize::leave_unsymbolized(&mut trace);
        if let Some(first) = first {
            second_pass(&mut trace, first, &map, opts, progress, release)?;
        }
        return Ok(trace);
    };
    // Binaries are opened as their first frame is read, by a few threads
    // that mostly wait for the disk; symbolization starts without waiting
    // for them to finish.
    let preload = std::sync::Arc::new(
        symbolize::Preload::new(cache.clone()).with_debuginfod(&opts.debuginfod),
    );
    let (tx, rx) = std::sync::mpsc::channel::<(String, Option<String>)>();
    let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
    let preload_threads = match opts.threads {
        0 => PRELOAD_THREADS,
        1 => 0,
        n => n.min(PRELOAD_THREADS),
    };
    for _ in 0..preload_threads {
        let (rx, preload) = (rx.clone(), preload.clone());
        std::thread::spawn(move || loop {
            let next = match rx.lock() {
                Ok(r) => r.recv(),
                Err(_) => return,
            };
            match next {
                Ok((path, id)) => preload.prepare(&path, id.as_deref()),
                Err(_) => return,
            }
        });
    }
    // The frames are named after the record pass, not in rounds during
    // it: naming early held the binaries' pages and symbol indexes beside
    // the interning tables (+45 MB of peak on a 96 MB trace) and bought no
    // time on two cores, warm or cold (bench/analyze/README.md).
    let release = &|from, to| release(&map, from, to);
    let read = read(
        &mut |path, id| {
            if preload_threads > 0 {
                let _ = tx.send((path.to_owned(), id.map(str::to_owned)));
            }
        },
        release,
    );
    drop(tx);
    let (mut trace, first) = read?;
    let kernel = move |text_then: Option<u64>| {
        let table = match loading {
            Some(handle) => handle.join().unwrap_or(Err(PerfError::KallsymsFailed)),
            None => symbolize::load_kallsyms(&kallsyms_path, &cache),
        };
        if from_cache {
            symbolize::same_boot_or_running(table, text_then, &cache)
        } else {
            table
        }
    };
    symbolize::symbolize_with(&mut trace, kernel, &preload, opts.threads, progress);
    if let Some(first) = first {
        second_pass(&mut trace, first, &map, opts, progress, release)?;
    }
    drop_later(map);
    Ok(trace)
}

/// The second pass of a read by function: `trace` has the first pass's
/// frames, named; they become one frame per function (the first of its
/// frames), and the records are read again for stacks made of those, and
/// for the samples. Stacks that differ only in addresses within the same
/// functions become one: on a 1.2 GB build trace, 313 thousand stack nodes
/// instead of 1.7 million, for the same views. Only exports that list
/// addresses (pprof, the Firefox profiler's format) see fewer of them,
/// and the trace says so in a warning.
fn second_pass(
    trace: &mut Trace,
    mut first: reader::FirstPass,
    data: &[u8],
    opts: &ReadOptions,
    progress: ProgressFn,
    release: &(dyn Fn(usize, usize) + Sync),
) -> Result<(), PerfError> {
    let threads = opts.threads;
    let function_frame = one_frame_per_function(trace);
    first.frames.by_function(&function_frame);
    drop(function_frame);
    let pass = FramePass::Functions(first);
    let progress_2 = in_pass(progress, "read (pass 2 of 2)");
    let (second, _) = reader::read_bytes_with(
        data,
        &progress_2,
        threads,
        pass,
        &mut |_, _| {},
        None,
        release,
    )?;
    if second.events.len() != trace.events.len() || second.threads.len() != trace.threads.len() {
        return Err(PerfError::PassesDiffer);
    }
    for (event, again) in trace.events.iter_mut().zip(&second.events) {
        event.stack = again.stack;
    }
    trace.stacks = second.stacks;
    trace.samples = second.samples;
    let stats = &mut trace.stats;
    stats.unmapped_frames = second.stats.unmapped_frames;
    stats.samples_without_stack = second.stats.samples_without_stack;
    for w in second.stats.warnings {
        if !stats.warnings.contains(&w) {
            stats.warnings.push(w);
        }
    }
    stats.warnings.push(format!(
        "read in two passes with the frames of each function merged, to stay within the memory budget ({}): every view is the same, but exports show one address per function; set SLOWLAB_MEMORY={}M or more to keep every address (one pass is also faster)",
        size_text(opts.memory_budget.unwrap_or(0)),
        data.len().div_ceil(1 << 20)
    ));
    Ok(())
}

/// `progress`, with its stage `"read"` named `read` instead (which pass).
fn in_pass<'p>(
    progress: ProgressFn<'p>,
    read: &'static str,
) -> impl Fn(&str, u64, u64) + Sync + 'p {
    move |stage, done, total| match stage {
        "read" => progress(read, done, total),
        _ => progress(stage, done, total),
    }
}

/// `bytes` as `N MB` (`N KB` below a megabyte).
fn size_text(bytes: u64) -> String {
    if bytes < 1 << 20 {
        format!("{} KB", bytes >> 10)
    } else {
        format!("{} MB", bytes >> 20)
    }
}

/// Replaces `trace.frames` by one frame per function (the first frame
/// naming it, in frame order); returns, for each old frame, its new one.
fn one_frame_per_function(trace: &mut Trace) -> Vec<slowlab_model::trace::FrameIdx> {
    use slowlab_model::trace::FrameIdx;
    let mut new_of_function = vec![u32::MAX; trace.functions.len()];
    let mut frames = Vec::with_capacity(trace.functions.len());
    let old = std::mem::take(&mut trace.frames);
    let function_frame = old
        .into_iter()
        .map(|f| {
            let next = frames.len() as u32;
            let new = match new_of_function.get_mut(f.function.ix()) {
                Some(slot) if *slot != u32::MAX => *slot,
                Some(slot) => {
                    *slot = next;
                    next
                }
                // Not named (cannot happen after symbolization): its own.
                None => next,
            };
            if new == next {
                frames.push(f);
            }
            FrameIdx(new)
        })
        .collect();
    trace.frames = frames;
    function_frame
}

/// Gives back the pages of `map[from..to]` (those wholly inside it): the
/// reader will not look at them again. They stay in the page cache, so a
/// stray read costs a minor fault, never a wrong byte.
fn release(map: &memmap2::Mmap, from: usize, to: usize) {
    let (from, to) = (from.next_multiple_of(PAGE), to.min(map.len()) / PAGE * PAGE);
    if to > from {
        // SAFETY: the map is a private, read-only mapping of a file: after
        // MADV_DONTNEED its pages read the file's bytes again (the same
        // bytes, under the contract of the map above), so every slice of it
        // stays valid.
        let _ = unsafe {
            map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, from, to - from)
        };
    }
}

/// Everything [`read_file`] does with a perf.data image that reads nothing
/// else from disk: the kernel's build id from the header, the record pass
/// on `threads` threads (on one, the records are indexed then read; on
/// more, streamed as they are walked when they can be), and every frame
/// left unsymbolized. The fuzz target (`fuzz/`) and its corpus replay call
/// this, on one thread and on two, and compare.
pub fn read_unsymbolized(data: &[u8], threads: usize) -> Result<Trace, PerfError> {
    let _ = kernel_build_id(data);
    let (progress, release) = (&|_: &str, _, _| {}, &|_, _| {});
    let pass = reader::FramePass::Addresses;
    let on_binary = &mut |_: &str, _: Option<&str>| {};
    let read = reader::read_bytes_with(data, progress, threads, pass, on_binary, None, release);
    let mut trace = read?.0;
    symbolize::leave_unsymbolized(&mut trace);
    Ok(trace)
}

/// Drops `x` on another thread: freeing tens of megabytes (unmapping, and
/// interrupting the other cores to flush their TLBs) then does not hold up
/// the thread that has the next step to do.
pub(crate) fn drop_later<T: Send + 'static>(x: T) {
    std::thread::spawn(move || drop(x));
}

// Parsing with `linux-perf-data`, which may panic on malformed input, is
// guarded; the count and the last message of the panics caught are
// re-exported for the fuzz target and the corpus tests.
pub(crate) use slowlab_guard::guard;
pub use slowlab_guard::{caught_panics, last_caught_panic};
