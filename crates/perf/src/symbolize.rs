//! The symbolization driver: names every frame of a trace once. It groups
//! frames by module, then reads each binary (memory-mapped, one rayon task
//! per binary) and looks its frames up in the binary's symbol table; a
//! stripped binary falls back to its separate debug file found by build id
//! (`/usr/lib/debug/.build-id/xx/yyyy.debug`). Kernel frames are named from
//! kallsyms, shifted by the KASLR offset between the recording and now.
//!
//! This is the only part of the crate that opens files other than the
//! perf.data itself; the lookups are in `symbols`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rayon::prelude::*;
use slowlab_model::trace::{
    FrameIdx, FuncIdx, Function, Module, ModuleIdx, ModuleKind, StrIdx, Trace,
};

use crate::intern::{FxMap, Strings};
use crate::symbols::{demangle, SymbolTable};
use crate::{ProgressFn, ReadOptions};

const UNKNOWN: &str = "[unknown]";

/// A binary's symbols, loaded ahead of use: the mapped file (and its debug
/// file) with their tables.
pub struct Loaded {
    map: memmap2::Mmap,
    table: SymbolTable,
    build_id: Option<String>,
    debug: Option<(memmap2::Mmap, SymbolTable)>,
}

/// The kernel's symbols: the kallsyms text and its table.
pub struct Kernel {
    text: String,
    table: SymbolTable,
}

/// Loads symbol tables in the background (rayon tasks) while the records
/// are read: kallsyms first, then each binary as its first mapping is seen.
#[derive(Default)]
pub struct Loader {
    kernel: Mutex<Option<Result<Kernel, String>>>,
    binaries: Mutex<FxMap<String, Result<Loaded, String>>>,
}

impl Loader {
    /// Loads kallsyms (call from a background task).
    pub fn load_kernel(&self, path: &Path) {
        let r = load_kallsyms(path);
        if let Ok(mut k) = self.kernel.lock() {
            *k = Some(r);
        }
    }

    /// Loads one binary (call from a background task).
    pub fn load_binary(&self, path: &str) {
        let r = load_elf(path);
        if let Ok(mut b) = self.binaries.lock() {
            b.insert(path.to_owned(), r);
        }
    }
}

fn load_kallsyms(path: &Path) -> Result<Kernel, String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "cannot read {} ({e}); kernel frames show as [unknown]",
            path.display()
        )
    })?;
    let table = SymbolTable::from_kallsyms(&text);
    if table.is_empty() {
        return Err(format!(
            "{} shows no addresses (kernel pointers are hidden); run as root or `sysctl kernel.kptr_restrict=0` to name kernel functions",
            path.display()
        ));
    }
    Ok(Kernel { text, table })
}

fn load_elf(path: &str) -> Result<Loaded, String> {
    let map = map_file(Path::new(path)).map_err(|e| format!("cannot open ({e})"))?;
    let (table, id) =
        SymbolTable::from_elf(&map).map_err(|e| format!("not a readable ELF file ({e})"))?;
    let build_id = id.map(|id| hex(&id));
    let mut debug = None;
    if table.dynsym_only {
        // A stripped file (no .symtab): prefer its separate debug file.
        debug = debug_file_candidates(build_id.as_deref(), path)
            .into_iter()
            .filter_map(|p| map_file(&p).ok())
            .find_map(|m| {
                let (t, _) = SymbolTable::from_elf(&m).ok()?;
                (!t.is_empty()).then_some((m, t))
            });
        if debug.is_none() && table.is_empty() {
            return Err("stripped, and no debug file found (install its -dbgsym package)".into());
        }
    }
    Ok(Loaded {
        map,
        table,
        build_id,
        debug,
    })
}

/// Outcome for one module: a name (or none) per frame, or why not.
struct ModuleResult {
    names: Vec<(FrameIdx, Option<String>, Option<String>)>,
    error: Option<String>,
}

struct Interner<'t> {
    trace: &'t mut Trace,
    strings: Strings,
    funcs: FxMap<(u32, StrIdx), FuncIdx>,
    module_by_name: FxMap<String, ModuleIdx>,
}

impl Interner<'_> {
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
    }
}

/// Names every frame `[unknown]` (no symbolization).
pub fn leave_unsymbolized(trace: &mut Trace) {
    let mut it = interner(trace);
    for i in 0..it.trace.frames.len() {
        let (module, kernel) = (it.trace.frames[i].module, it.trace.frames[i].kernel);
        let f = it.func(module, UNKNOWN, kernel);
        it.trace.frames[i].function = f;
    }
}

/// Symbolizes every frame of `trace` in place, loading what `loader` does
/// not have yet.
pub fn symbolize(trace: &mut Trace, opts: &ReadOptions, progress: ProgressFn) {
    let loader = Loader::default();
    symbolize_with(trace, opts, &loader, progress);
}

/// Symbolizes with tables already (partly) loaded by `loader`.
pub fn symbolize_with(
    trace: &mut Trace,
    opts: &ReadOptions,
    loader: &Loader,
    progress: ProgressFn,
) {
    let foreign = trace.modules.iter().any(|m| m.symbol_error.is_some());
    if foreign {
        leave_unsymbolized(trace);
        return;
    }
    // Frames per module.
    let mut by_module: Vec<Vec<FrameIdx>> = vec![Vec::new(); trace.modules.len()];
    for (i, f) in trace.frames.iter().enumerate() {
        by_module[f.module.ix()].push(FrameIdx(i as u32));
    }
    let kallsyms_path = opts
        .kallsyms
        .clone()
        .unwrap_or_else(|| PathBuf::from("/proc/kallsyms"));
    let jobs: Vec<(usize, &Vec<FrameIdx>)> = by_module
        .iter()
        .enumerate()
        .filter(|(_, frames)| !frames.is_empty())
        .collect();
    let kernel_frames: Vec<FrameIdx> = jobs
        .iter()
        .filter(|(m, _)| {
            matches!(
                trace.modules[*m].kind,
                ModuleKind::Kernel | ModuleKind::KernelModule
            )
        })
        .flat_map(|(_, f)| f.iter().copied())
        .collect();
    let user_jobs: Vec<(usize, &Vec<FrameIdx>)> = jobs
        .iter()
        .filter(|(m, _)| trace.modules[*m].kind == ModuleKind::User)
        .map(|(m, f)| (*m, *f))
        .collect();
    let total = user_jobs.len() as u64;
    let done = std::sync::atomic::AtomicU64::new(0);
    let trace_ref: &Trace = trace;
    // Take what the background tasks loaded; load the rest now.
    let mut preloaded = loader
        .binaries
        .lock()
        .map(|mut b| std::mem::take(&mut *b))
        .unwrap_or_default();
    type Job<'a> = (usize, &'a Vec<FrameIdx>, Option<Result<Loaded, String>>);
    let work: Vec<Job<'_>> = user_jobs
        .into_iter()
        .map(|(m, f)| {
            (
                m,
                f,
                preloaded.remove(trace_ref.str(trace_ref.modules[m].path)),
            )
        })
        .collect();
    drop(preloaded);
    let mut results: Vec<ModuleResult> = work
        .into_par_iter()
        .map(|(m, frames, pre)| {
            let module = &trace_ref.modules[m];
            let path = trace_ref.str(module.path);
            let loaded = pre.unwrap_or_else(|| load_elf(path));
            let mut r = symbolize_user_module(trace_ref, module, frames, loaded);
            let d = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            progress("symbolize", d, total);
            if let Some(e) = &mut r.error {
                *e = format!("{path}: {e}");
            }
            r
        })
        .collect();
    if !kernel_frames.is_empty() {
        let kernel = loader
            .kernel
            .lock()
            .ok()
            .and_then(|mut k| k.take())
            .unwrap_or_else(|| load_kallsyms(&kallsyms_path));
        results.push(symbolize_kernel(trace_ref, kernel, &kernel_frames));
    }

    let mut it = interner(trace);
    let mut warnings = Vec::new();
    for r in results {
        if let Some(e) = r.error {
            match r.names.first() {
                Some((first, _, _))
                    if it.trace.modules[it.trace.frames[first.ix()].module.ix()].kind
                        == ModuleKind::User =>
                {
                    let m = it.trace.frames[first.ix()].module;
                    it.trace.modules[m.ix()].symbol_error = Some(e);
                }
                _ => warnings.push(e),
            }
        }
        for (frame, name, kmod) in r.names {
            let f = &it.trace.frames[frame.ix()];
            let (mut module, kernel) = (f.module, f.kernel);
            if let Some(km) = kmod {
                module = it.kernel_module(&km);
            }
            let func = it.func(module, name.as_deref().unwrap_or(UNKNOWN), kernel);
            it.trace.frames[frame.ix()].function = func;
        }
    }
    // Frames of modules that were not symbolized (anonymous memory, vdso,
    // unmapped) and any frame left over.
    for i in 0..it.trace.frames.len() {
        if it.trace.frames[i].function == crate::reader::NO_FUNC {
            let (module, kernel) = (it.trace.frames[i].module, it.trace.frames[i].kernel);
            let f = it.func(module, UNKNOWN, kernel);
            it.trace.frames[i].function = f;
        }
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

fn symbolize_kernel(
    trace: &Trace,
    kernel: Result<Kernel, String>,
    frames: &[FrameIdx],
) -> ModuleResult {
    let kernel = match kernel {
        Ok(k) => k,
        Err(e) => {
            return ModuleResult {
                names: frames.iter().map(|&f| (f, None, None)).collect(),
                error: Some(e),
            }
        }
    };
    let base = kernel.text.as_bytes();
    let names = frames
        .iter()
        .map(|&f| {
            let addr = trace.frames[f.ix()].address;
            match kernel.table.lookup(base, addr) {
                Some(found) => (
                    f,
                    Some(found.name.into_owned()),
                    found.module.map(str::to_owned),
                ),
                None => (f, None, None),
            }
        })
        .collect();
    ModuleResult { names, error: None }
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

fn map_file(path: &Path) -> std::io::Result<memmap2::Mmap> {
    let f = std::fs::File::open(path)?;
    // SAFETY: read-only private map; see `read_file`.
    unsafe { memmap2::Mmap::map(&f) }
}

fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

fn symbolize_user_module(
    trace: &Trace,
    module: &Module,
    frames: &[FrameIdx],
    loaded: Result<Loaded, String>,
) -> ModuleResult {
    let unnamed = |error: String| ModuleResult {
        names: frames.iter().map(|&f| (f, None, None)).collect(),
        error: Some(error),
    };
    // perf record keeps a copy of every binary it saw in its build-id
    // cache (~/.debug); use it when the file is gone or was rebuilt.
    let from_cache = || {
        let id = module.build_id.as_deref()?;
        let home = std::env::var_os("HOME")?;
        let p = Path::new(&home)
            .join(".debug/.build-id")
            .join(id.get(..2)?)
            .join(id.get(2..)?)
            .join("elf");
        load_elf(p.to_str()?).ok()
    };
    let loaded = match loaded {
        Ok(l) => l,
        Err(e) => match from_cache() {
            Some(l) => l,
            None => return unnamed(e),
        },
    };
    let loaded = match (&module.build_id, &loaded.build_id) {
        (Some(recorded), Some(now)) if recorded != now => match from_cache() {
            Some(l) => l,
            None => return unnamed(
                "the file changed since the recording (build id differs); analyze on the machine and build that recorded it".into(),
            ),
        },
        _ => loaded,
    };
    let (base, symbols): (&[u8], &SymbolTable) = match &loaded.debug {
        Some((m, t)) => (m, t),
        None => (&loaded.map, &loaded.table),
    };
    // Demangle each symbol once.
    let mut cache: FxMap<usize, String> = FxMap::default();
    let mut names = Vec::with_capacity(frames.len());
    for &f in frames {
        let offset = trace.frames[f.ix()].address;
        let name = loaded
            .table
            .offset_to_address(offset)
            .and_then(|a| symbols.lookup_index(base, a))
            .map(|i| {
                cache
                    .entry(i)
                    .or_insert_with(|| demangle(&symbols.found(base, i).name))
                    .clone()
            });
        names.push((f, name, None));
    }
    ModuleResult { names, error: None }
}
