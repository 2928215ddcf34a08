//! Reads a perf.data file into slowlab's trace model ([`slowlab_model::trace`])
//! and symbolizes it.
//!
//! The pipeline is: [`file`] maps the file and repairs an unfinished header;
//! [`reader`] walks the records once, in time order (via `linux-perf-data`),
//! keeping per-process memory maps and interning every frame and stack; then
//! [`symbolize`] names each unique frame once, one binary per task in
//! parallel, from ELF symbol tables ([`symbols`]) and the kernel's kallsyms.
//!
//! This crate never prints. Problems that still allow an analysis (lost
//! events, a truncated file, a binary that cannot be read) become counts and
//! warnings in [`slowlab_model::trace::ReadStats`]; problems that do not are
//! an [`Error`].

mod file;
mod intern;
mod reader;
pub mod symbolize;
pub mod symbols;
pub mod tracepoint;

use std::path::{Path, PathBuf};

pub use reader::{read_bytes, read_bytes_with};
use slowlab_model::trace::Trace;

/// Why a perf.data file could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot open {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the file is empty (0 bytes), so it holds no trace; was `perf record` stopped before it started?")]
    Empty,
    #[error("not a perf.data file: {0}")]
    NotPerfData(String),
    #[error("cannot parse the perf.data header: {0}")]
    Header(String),
}

/// What to do while reading.
#[derive(Clone, Debug)]
pub struct ReadOptions {
    /// Name frames with function names (otherwise every frame is
    /// `[unknown]` in its module).
    pub symbolize: bool,
    /// Where to read kernel symbols; `/proc/kallsyms` by default.
    pub kallsyms: Option<PathBuf>,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            symbolize: true,
            kallsyms: None,
        }
    }
}

/// Progress of a long read: `(stage, done, total)`; stages are `"read"`
/// (bytes of the data section) and `"symbolize"` (binaries).
pub type ProgressFn<'a> = &'a (dyn Fn(&str, u64, u64) + Sync);

/// Reads and symbolizes the perf.data file at `path`.
pub fn read_file(path: &Path, opts: &ReadOptions, progress: ProgressFn) -> Result<Trace, Error> {
    let open_err = |source| Error::Open {
        path: path.to_owned(),
        source,
    };
    let f = std::fs::File::open(path).map_err(open_err)?;
    let len = f.metadata().map_err(open_err)?.len();
    if len == 0 {
        return Err(Error::Empty);
    }
    // SAFETY: the map is read-only and private to this process. If another
    // process truncates the file while we read, we may get SIGBUS — the
    // same contract every mmap-based reader (perf included) accepts.
    let map = unsafe { memmap2::Mmap::map(&f) }.map_err(open_err)?;
    if !opts.symbolize {
        let mut trace = read_bytes(&map, progress)?;
        symbolize::leave_unsymbolized(&mut trace);
        return Ok(trace);
    }
    // Read the records on this thread while the other cores load symbol
    // tables: kallsyms at once, each binary when its first mapping is read.
    let loader = symbolize::Loader::default();
    let kallsyms = opts
        .kallsyms
        .clone()
        .unwrap_or_else(|| PathBuf::from("/proc/kallsyms"));
    let result = rayon::in_place_scope(|s| {
        let loader = &loader;
        let kallsyms = &kallsyms;
        s.spawn(move |_| loader.load_kernel(kallsyms));
        read_bytes_with(&map, progress, &mut |path| {
            let path = path.to_owned();
            s.spawn(move |_| loader.load_binary(&path));
        })
    });
    let mut trace = result?;
    symbolize::symbolize_with(&mut trace, opts, &loader, progress);
    Ok(trace)
}
