//! The symbolization driver: names every frame of a trace once. Frames are
//! grouped by module; each binary is memory-mapped and its frames' addresses
//! are resolved in one pass over its symbol table (one task per binary, the
//! biggest first, on a pool wider than the cores because with a cold page
//! cache the tasks mostly wait for the disk), and only the symbols actually
//! hit are demangled. A stripped binary falls back to its separate debug
//! file found by build id (`/usr/lib/debug/.build-id/xx/yyyy.debug`), a
//! rebuilt or deleted one to perf's build-id cache (`~/.debug`), and when
//! neither is on the machine both are fetched by build id from debuginfod
//! servers, if given ([`DebuginfodOptions`]). Kernel
//! frames are named from the copy of kallsyms that `perf record` saved in
//! that cache for the trace's kernel, when it was saved in the same boot
//! (a plain file; the kernel spends tens of milliseconds of CPU formatting
//! `/proc/kallsyms`), else from `/proc/kallsyms`, shifted by the KASLR
//! offset between the recording and now.
//!
//! To overlap the record pass, binaries are opened ([`Preload`]: mapped,
//! their symbol tables read ahead and indexed) as their first frame is
//! read; [`symbolize_with`] names the frames after the pass.
//!
//! The parts: `jobs` plans and runs the per-binary jobs and names one
//! binary's frames; `binaries` opens each binary once (the per-binary
//! cache: maps, debug files, read-ahead, sorted indexes); `kernel` reads
//! kallsyms and names the kernel's frames; `cache` keeps the work on big
//! symbol tables, kallsyms and demangling between runs, when asked to
//! ([`SymbolCache`]); `hint` words why a binary's code has no names and
//! what to install (its module's `symbol_error`). Here: the driver, which gathers
//! their results and puts the names into the trace.
//!
//! This is the only part of the crate that opens files other than the
//! perf.data itself; the lookups are in `symbols`.

mod binaries;
mod cache;
mod debuginfod;
mod hint;
mod jobs;
mod kernel;
mod vdso;

use slowlab_model::trace::{
    FrameIdx, FuncIdx, Function, Module, ModuleIdx, ModuleKind, StrIdx, Trace,
};

pub use binaries::Preload;
pub(crate) use binaries::{hex, will_need};
pub use cache::SymbolCache;
pub use debuginfod::{parse_urls as parse_debuginfod_urls, DebuginfodOptions};
use hint::Missing;
use jobs::{run_user_jobs, user_jobs};
pub use kernel::load_kallsyms;
use kernel::symbolize_kernel;
pub(crate) use kernel::{cached_kallsyms, kallsyms_path, same_boot_or_running};

use crate::intern::{FxMap, Strings};
use crate::symbols::Kallsyms;
use crate::{PerfError, ProgressFn, ReadOptions};

const UNKNOWN: &str = "[unknown]";

/// Names found for one module's frames.
struct ModuleResult {
    module: ModuleIdx,
    /// Unique names (demangled) and, per frame, an index into them.
    names: Vec<String>,
    /// Kernel module name of each name (kallsyms), if any.
    kmods: Vec<Option<String>>,
    frames: Vec<(FrameIdx, Option<u32>)>,
    /// Why its frames (all, or the unnamed ones when only its exported
    /// functions have symbols) have no name, with what to do (see `hint`).
    error: Option<String>,
    /// Its code without symbols, when `error` says so (it is then worded
    /// again once the package to install is known).
    missing: Option<Missing>,
}

impl ModuleResult {
    fn unnamed(module: ModuleIdx, frames: &[(u64, FrameIdx)], error: String) -> Self {
        ModuleResult {
            module,
            names: Vec::new(),
            kmods: Vec::new(),
            frames: frames.iter().map(|&(_, f)| (f, None)).collect(),
            error: Some(error),
            missing: None,
        }
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
    // New names are deduplicated against the existing table, which stays as it is (a
    // trace built elsewhere, as from a scheduler recording, may hold a string twice).
    let strings = Strings::of_table(&trace.strings);
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
    let cache = opts.symbol_cache();
    let preload = Preload::new(cache.clone()).with_debuginfod(&opts.debuginfod);
    symbolize_with(
        trace,
        move |_| load_kallsyms(&path, &cache),
        &preload,
        opts.threads,
        progress,
    );
}

/// Symbolizes every frame of `trace` in place. `kernel` gives the kallsyms
/// table for a kernel whose `_text` was at the given address when the trace
/// was recorded (e.g. by joining the thread that loads it) and is called
/// only if there are kernel frames; `preload` has the binaries opened so far;
/// `threads` caps the
/// threads naming frames at once (0: no cap, 1: all on this thread).
pub fn symbolize_with(
    trace: &mut Trace,
    kernel: impl FnOnce(Option<u64>) -> Result<Kallsyms, PerfError> + Send,
    preload: &Preload,
    threads: usize,
    progress: ProgressFn,
) {
    let foreign = trace.modules.iter().any(|m| m.symbol_error.is_some());
    if foreign {
        leave_unsymbolized(trace);
        return;
    }
    let jobs = user_jobs(trace, 0, trace.frames.len());
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
    let user = || run_user_jobs(&jobs, preload, Some(progress), threads);
    // The kernel's frames beside the user frames (owned data, no borrow of
    // the trace); on one thread, in turn. (A panicked job is a bug: its
    // frames stay `[unknown]`.)
    let (kernel_result, user_results) = if threads == 1 {
        (kern(), user())
    } else {
        std::thread::scope(|s| {
            s.spawn(|| rayon::join(kern, user))
                .join()
                .unwrap_or_default()
        })
    };
    // What to install for the binaries without symbols, found for all at
    // once (one pass over dpkg's lists).
    let mut user_results = user_results;
    let needs: Vec<usize> = (0..user_results.len())
        .filter(|&i| user_results[i].missing.is_some())
        .collect();
    let paths: Vec<&str> = needs
        .iter()
        .map(|&i| {
            it.trace
                .str(it.trace.modules[user_results[i].module.ix()].path)
        })
        .collect();
    let packages = hint::packages(&paths);
    let worded: Vec<(usize, String)> = needs
        .iter()
        .zip(paths.iter().zip(&packages))
        .filter_map(|(&i, (path, package))| {
            let missing = user_results[i].missing?;
            let words = hint::no_debug_file(missing, Some(package.as_deref()?));
            Some((i, format!("{path}: {words}")))
        })
        .collect();
    drop(paths);
    for (i, error) in worded {
        user_results[i].error = Some(error);
    }
    // The binaries named only in part (exported functions only).
    let partial: Vec<ModuleIdx> = user_results
        .iter()
        .filter(|r| r.missing == Some(Missing::AllButExported))
        .map(|r| r.module)
        .collect();
    for r in user_results {
        intern_result(&mut it, &mut func_of, &mut warnings, r);
    }
    if let Some((r, w)) = kernel_result {
        intern_result(&mut it, &mut func_of, &mut warnings, r);
        warnings.extend(w);
    }
    warnings.extend(preload.notes().into_iter().map(|n| format!("symbols: {n}")));
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
    let (partly, unreadable): (Vec<_>, Vec<_>) = it
        .trace
        .modules
        .iter()
        .enumerate()
        .filter_map(|(i, m)| Some((ModuleIdx(i as u32), m.symbol_error.clone()?)))
        .partition(|(m, _)| partial.contains(m));
    let ies = |n: usize| if n == 1 { "y" } else { "ies" };
    if let Some((_, first)) = unreadable.first() {
        let n = unreadable.len();
        warnings.push(format!(
            "{n} binar{} could not be symbolized (first: {first}); their frames show as [unknown]",
            ies(n)
        ));
    }
    if let Some((_, first)) = partly.first() {
        let n = partly.len();
        warnings.push(format!(
            "{n} binar{} named only in part (first: {first}); the rest of their code shows as \
             [unknown]",
            ies(n)
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
