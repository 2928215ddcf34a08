//! Loading a trace with what `slowlab record` writes beside it: the path
//! capture (`FILE.paths`, from the eBPF probe) and the memory-cgroup notes
//! (`FILE.cgroups.json`). Shared by `analyze` and `diagnose`; glue between
//! the `perf`, `bpf` and `analyze` crates.

use std::path::{Path, PathBuf};

use anyhow::Context;
use slowlab_model::bundle::{CapturedPath, CgroupInfo, TraceBundle};

/// The side file of the path capture of a trace.
pub fn paths_file(trace: &Path) -> PathBuf {
    slowlab_record::side_file(trace, "paths")
}

/// The side file of the cgroup notes of a trace.
pub fn cgroups_file(trace: &Path) -> PathBuf {
    slowlab_record::side_file(trace, "cgroups.json")
}

/// The captured paths of a trace, if it has a capture; warnings go to the
/// returned list. A capture that cannot be read is a warning, not an error.
pub fn load_paths(trace: &Path, warnings: &mut Vec<String>) -> Option<Vec<CapturedPath>> {
    if slowlab_etl::is_etl_file(trace) {
        return etl_paths(trace, warnings);
    }
    let file = paths_file(trace);
    if !file.exists() {
        return None;
    }
    match slowlab_bpf::read_paths(&file) {
        Ok(log) => {
            warnings.extend(log.warnings.iter().cloned());
            Some(log.captured_paths())
        }
        Err(e) => {
            warnings.push(format!(
                "the path capture {} could not be read: {e}",
                file.display()
            ));
            None
        }
    }
}

/// The cgroup notes written by `slowlab record` (`slowlab_record::CgroupNotes`).
pub fn load_cgroups(trace: &Path, warnings: &mut Vec<String>) -> Option<CgroupInfo> {
    let file = cgroups_file(trace);
    let bytes = std::fs::read(&file).ok()?;
    match CgroupInfo::from_json(&bytes) {
        Ok(info) => Some(info),
        Err(e) => {
            warnings.push(format!(
                "the cgroup notes {} could not be read: {e}",
                file.display()
            ));
            None
        }
    }
}

/// The file-operation paths of the ETL trace `read_trace` read last (an
/// ETL trace carries its paths inside; reading it twice would double the
/// loading time).
static ETL_PATHS: std::sync::Mutex<Option<(PathBuf, Vec<CapturedPath>)>> =
    std::sync::Mutex::new(None);

/// The paths of an ETL trace's file operations: kept from `read_trace`,
/// else read from the file; `None` when it has none.
fn etl_paths(file: &Path, warnings: &mut Vec<String>) -> Option<Vec<CapturedPath>> {
    let kept = ETL_PATHS
        .lock()
        .ok()
        .and_then(|mut k| k.take_if(|(f, _)| f == file).map(|(_, p)| p));
    let paths = match kept {
        Some(p) => p,
        None => match slowlab_etl::read_trace_and_paths(file) {
            Ok((_, p)) => p,
            Err(e) => {
                warnings.push(format!(
                    "the file operations of {} could not be read: {e}",
                    file.display()
                ));
                return None;
            }
        },
    };
    (!paths.is_empty()).then_some(paths)
}

/// Reads an ETL trace naming its functions from the PDBs on the symbol
/// path `spec` (`slowlab analyze --symbols`); an error for other traces.
pub fn read_etl_with_symbols(
    file: &Path,
    spec: &str,
) -> anyhow::Result<slowlab_model::trace::Trace> {
    if !slowlab_etl::is_etl_file(file) {
        anyhow::bail!(
            "--symbols names PDB directories for Windows traces (.etl); {} is not one (perf.data finds its symbols by itself)",
            file.display()
        );
    }
    let symbols = slowlab_etl::SymbolPath::parse(spec);
    let (trace, paths) = slowlab_etl::read_trace_with_symbols(file, Some(&symbols))
        .with_context(|| format!("cannot analyze {}", file.display()))?;
    if let Ok(mut kept) = ETL_PATHS.lock() {
        *kept = Some((file.to_owned(), paths));
    }
    Ok(trace)
}

/// How a command that reads traces names their functions: `--no-symbols`,
/// and `--symbols` for the PDBs of Windows traces.
#[derive(Debug, Clone, clap::Args)]
pub struct SymbolArgs {
    /// Do not name functions (faster; every frame is [unknown]).
    #[arg(long)]
    pub no_symbols: bool,
    /// Windows traces: name functions from the PDBs in these local
    /// directories, `DIR[;DIR…]`, flat (`DIR/name.pdb`) or in a symbol
    /// store's layout (`DIR/name.pdb/<GUID><AGE>/name.pdb`); also
    /// `_NT_SYMBOL_PATH`'s `srv*DIR*URL` form, of which only the
    /// directories are read: nothing is downloaded. A PDB whose GUID or age
    /// differs from the traced image's is not used (a warning says which).
    #[arg(long, value_name = "DIR[;DIR…]", conflicts_with = "no_symbols")]
    pub symbols: Option<String>,
}

impl SymbolArgs {
    /// Reads `file` (perf.data or ETL) with the symbols these flags ask for.
    pub fn read(&self, file: &Path) -> anyhow::Result<slowlab_model::trace::Trace> {
        match &self.symbols {
            Some(spec) => read_etl_with_symbols(file, spec),
            None => read_trace(file, !self.no_symbols),
        }
    }
}

/// Reads a trace with a progress bar on stderr.
pub fn read_trace(file: &Path, symbolize: bool) -> anyhow::Result<slowlab_model::trace::Trace> {
    // A Windows ETW trace (.etl, .etl.zip): no side files, and no symbols
    // unless asked for (`read_etl_with_symbols`); the paths of its file
    // operations are kept for `load_paths`.
    if slowlab_etl::is_etl_file(file) {
        let (trace, paths) = slowlab_etl::read_trace_and_paths(file)
            .with_context(|| format!("cannot analyze {}", file.display()))?;
        if let Ok(mut kept) = ETL_PATHS.lock() {
            *kept = Some((file.to_owned(), paths));
        }
        return Ok(trace);
    }
    let bar = crate::progress::reading_bar();
    let opts = slowlab_perf::ReadOptions {
        symbolize,
        threads: threads_from_env()?,
        ..slowlab_perf::ReadOptions::default()
    };
    let trace = slowlab_perf::read_file(file, &opts, &|stage, done, total| {
        bar.set_length(total.max(1));
        bar.set_position(done);
        bar.set_message(stage.to_string());
    })
    .with_context(|| format!("cannot analyze {}", file.display()));
    bar.finish_and_clear();
    trace
}

/// How many threads may read and symbolize a trace at once:
/// `SLOWLAB_THREADS` (1 does everything on one thread, with the same
/// result), else as many as help.
fn threads_from_env() -> anyhow::Result<usize> {
    match std::env::var("SLOWLAB_THREADS") {
        Err(_) => Ok(0),
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => anyhow::bail!(
                "SLOWLAB_THREADS={v:?} is not a number of threads: give a whole number from 1 up, or unset it"
            ),
        },
    }
}

/// Reads a trace and its side files; what could not be read beside it is
/// in the bundle's warnings, with the trace's own warnings first.
pub fn read_bundle(file: &Path, symbolize: bool) -> anyhow::Result<TraceBundle> {
    let trace = read_trace(file, symbolize)?;
    let mut warnings = trace.stats.warnings.clone();
    let paths = load_paths(file, &mut warnings);
    let cgroups = load_cgroups(file, &mut warnings);
    Ok(TraceBundle {
        trace,
        paths,
        cgroups,
        warnings,
    })
}
