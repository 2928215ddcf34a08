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
        memory_budget: Some(memory_budget_from_env()?),
        symbol_cache: symbol_cache_dir(),
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

/// Where work on symbols is kept between runs (`slowlab_perf::SymbolCache`):
/// `SLOWLAB_CACHE_DIR` (empty or `off`: nothing is kept), else
/// `$XDG_CACHE_HOME/slowlab`, else `~/.cache/slowlab`.
fn symbol_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("SLOWLAB_CACHE_DIR") {
        return (!dir.is_empty() && dir != "off").then(|| PathBuf::from(dir));
    }
    let xdg = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute());
    let base = xdg.or_else(|| Some(PathBuf::from(std::env::var_os("HOME")?).join(".cache")))?;
    Some(base.join("slowlab"))
}

/// The memory a trace's model may take, in bytes: `SLOWLAB_MEMORY` (MB, or
/// a number with K, M or G), else 1 GiB. A perf.data file bigger than that
/// whose model would not fit is read in two passes, with the frames of
/// each function merged (`slowlab_perf::read_file`).
fn memory_budget_from_env() -> anyhow::Result<u64> {
    match std::env::var("SLOWLAB_MEMORY") {
        Err(_) => Ok(slowlab_perf::DEFAULT_MEMORY_BUDGET),
        Ok(v) => parse_size(&v).ok_or_else(|| {
            anyhow::anyhow!(
                "SLOWLAB_MEMORY={v:?} is not a size: give MB as a whole number from 1 up (1024 by default), or a number with K, M or G (512M, 2G), or unset it"
            )
        }),
    }
}

/// `"512"` (MB), `"300K"`, `"512M"`, `"2G"` (case-insensitive, powers of
/// 1024) in bytes; `None` for anything else, and for 0.
fn parse_size(v: &str) -> Option<u64> {
    let v = v.trim();
    let (digits, shift) = match v.char_indices().last()? {
        (i, 'k' | 'K') => (&v[..i], 10),
        (i, 'm' | 'M') => (&v[..i], 20),
        (i, 'g' | 'G') => (&v[..i], 30),
        _ => (v, 20),
    };
    let n = digits.parse::<u64>().ok().filter(|&n| n > 0)?;
    n.checked_mul(1 << shift)
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

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn memory_sizes_are_mb_or_carry_their_unit() {
        assert_eq!(parse_size("512"), Some(512 << 20));
        assert_eq!(parse_size(" 300k "), Some(300 << 10));
        assert_eq!(parse_size("2G"), Some(2 << 30));
        assert_eq!(parse_size("64M"), Some(64 << 20));
        for bad in ["", "0", "0K", "-5", "lots", "1.5G", "K", "99999999999999G"] {
            assert_eq!(parse_size(bad), None, "{bad:?}");
        }
    }
}
