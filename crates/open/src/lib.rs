//! Opens any input slowlab reads into one [`TraceBundle`]: a perf.data file
//! with the files `slowlab record` writes beside it (the path capture
//! `FILE.paths`, the cgroup notes `FILE.cgroups.json`), a scheduler recording of
//! `slowlab record --backend bpf` (known by its magic; its paths come from
//! inside it), a Windows ETW trace
//! (`.etl`, `.etl.zip`: its file operations' paths come from inside it, in
//! the same read), or a `slowlab diagnose` directory (its `trace.data`).
//! Every input is read once, from an explicit [`OpenOptions`] value; the
//! environment is read by the binary, at the edge ([`OpenOptions::from_env`]
//! takes the lookup as a function).
//!
//! What it does not do: analyze, print, or keep anything between calls.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use slowlab_model::bundle::{side_file, CapturedPath, CgroupInfo, TraceBundle};
use slowlab_model::trace::{EventKind, Trace};

/// The trace inside a `slowlab diagnose` directory.
pub const DIAGNOSE_TRACE: &str = "trace.data";

/// The default of [`OpenOptions::memory_budget`]: 1 GiB.
pub use slowlab_perf::DEFAULT_MEMORY_BUDGET;

pub use slowlab_perf::symbolize::DebuginfodOptions;

/// How to read a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenOptions {
    /// Name frames with function names (otherwise every frame is
    /// `[unknown]` in its module).
    pub symbolize: bool,
    /// Windows traces: the PDB directories to name functions from
    /// (`DIR[;DIR…]`, as `slowlab_etl::SymbolPath` reads them).
    pub pdb_symbols: Option<String>,
    /// At most this many threads read and symbolize a perf.data trace; 0:
    /// as many as help.
    pub threads: usize,
    /// Bytes the trace model may take (`None`: no limit).
    pub memory_budget: Option<u64>,
    /// Where work on symbols is kept between runs (`None`: nothing kept).
    pub symbol_cache: Option<PathBuf>,
    /// Read the path capture beside a perf.data trace.
    pub paths: bool,
    /// Read the cgroup notes beside a perf.data trace.
    pub cgroups: bool,
    /// Debuginfod servers to fetch by build id the debug files (and gone
    /// binaries) of a perf.data trace that nothing on the machine has,
    /// whether to ask them at all (`offline`), and their time-out.
    pub debuginfod: DebuginfodOptions,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            symbolize: true,
            pdb_symbols: None,
            threads: 0,
            memory_budget: Some(DEFAULT_MEMORY_BUDGET),
            symbol_cache: None,
            paths: true,
            cgroups: true,
            debuginfod: DebuginfodOptions::default(),
        }
    }
}

/// Why an input could not be opened, or the environment not read.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot analyze {path}: {source}")]
    Perf {
        path: PathBuf,
        source: slowlab_perf::PerfError,
    },
    #[error("cannot analyze {path}: {source}")]
    Etl {
        path: PathBuf,
        source: slowlab_etl::EtlError,
    },
    #[error("cannot analyze {path}: {source}")]
    Sched {
        path: PathBuf,
        source: slowlab_schedrec::SchedRecError,
    },
    #[error("{0} is a directory without a {DIAGNOSE_TRACE}: give a trace file, or the directory `slowlab diagnose -o DIR` wrote")]
    NotADiagnoseDir(PathBuf),
    #[error("--symbols names PDB directories for Windows traces (.etl); {0} is not one (perf.data finds its symbols by itself)")]
    SymbolsNotEtl(PathBuf),
    #[error("{name}={value:?} is not {what}")]
    BadVariable {
        name: &'static str,
        value: String,
        what: &'static str,
    },
}

impl OpenOptions {
    /// The options a command gets from the environment, looked up with
    /// `var` (the binary passes `std::env::var_os`):
    /// - `SLOWLAB_THREADS`: threads reading a perf.data trace (1: all on
    ///   one thread, the same result);
    /// - `SLOWLAB_MEMORY`: the model's memory budget, MB or a number with
    ///   K, M or G (1 GiB by default);
    /// - `SLOWLAB_CACHE_DIR`: the symbol cache (empty or `off`: none), else
    ///   `$XDG_CACHE_HOME/slowlab`, else `$HOME/.cache/slowlab`;
    /// - `DEBUGINFOD_URLS`: debuginfod servers (space-separated, as gdb and
    ///   perf read it), `DEBUGINFOD_TIMEOUT`: their time-out in seconds
    ///   (10 by default), `SLOWLAB_OFFLINE` (set, not empty or `0`: the
    ///   binary's `--offline`): ask no server, use what was fetched before.
    pub fn from_env(var: impl Fn(&str) -> Option<OsString>) -> Result<OpenOptions, OpenError> {
        let text = |name: &'static str| var(name).map(|v| v.to_string_lossy().into_owned());
        let threads = match text("SLOWLAB_THREADS") {
            None => 0,
            Some(v) => match v.trim().parse::<usize>() {
                Ok(n) if n > 0 => n,
                _ => {
                    return Err(OpenError::BadVariable {
                        name: "SLOWLAB_THREADS",
                        value: v,
                        what: "a number of threads: give a whole number from 1 up, or unset it",
                    })
                }
            },
        };
        let memory_budget = match text("SLOWLAB_MEMORY") {
            None => DEFAULT_MEMORY_BUDGET,
            Some(v) => parse_size(&v).ok_or(OpenError::BadVariable {
                name: "SLOWLAB_MEMORY",
                value: v,
                what: "a size: give MB as a whole number from 1 up (1024 by default), or a number with K, M or G (512M, 2G), or unset it",
            })?,
        };
        let symbol_cache = match var("SLOWLAB_CACHE_DIR") {
            Some(dir) => (!dir.is_empty() && dir != "off").then(|| PathBuf::from(dir)),
            None => {
                let xdg = var("XDG_CACHE_HOME")
                    .map(PathBuf::from)
                    .filter(|d| d.is_absolute());
                xdg.or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache")))
                    .map(|base| base.join("slowlab"))
            }
        };
        let timeout = match text("DEBUGINFOD_TIMEOUT") {
            None => None,
            Some(v) => match v.trim().parse::<u64>() {
                Ok(n) if n > 0 => Some(std::time::Duration::from_secs(n)),
                _ => {
                    return Err(OpenError::BadVariable {
                        name: "DEBUGINFOD_TIMEOUT",
                        value: v,
                        what: "a time-out in seconds: give a whole number from 1 up, or unset it",
                    })
                }
            },
        };
        let debuginfod = DebuginfodOptions {
            urls: text("DEBUGINFOD_URLS")
                .map(|v| slowlab_perf::symbolize::parse_debuginfod_urls(&v))
                .unwrap_or_default(),
            offline: text("SLOWLAB_OFFLINE").is_some_and(|v| !v.is_empty() && v != "0"),
            timeout,
        };
        Ok(OpenOptions {
            threads,
            memory_budget: Some(memory_budget),
            symbol_cache,
            debuginfod,
            ..OpenOptions::default()
        })
    }
}

/// `"512"` (MB), `"300K"`, `"512M"`, `"2G"` (case-insensitive, powers of
/// 1024) in bytes; `None` for anything else, and for 0.
pub fn parse_size(v: &str) -> Option<u64> {
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

/// The trace file an input names: the input itself, or a diagnose
/// directory's `trace.data`.
pub fn trace_file(input: &Path) -> Result<PathBuf, OpenError> {
    if input.is_dir() {
        let inside = input.join(DIAGNOSE_TRACE);
        return if inside.is_file() {
            Ok(inside)
        } else {
            Err(OpenError::NotADiagnoseDir(input.to_owned()))
        };
    }
    Ok(input.to_owned())
}

/// How far reading has come: (stage, done, total).
pub type Progress<'a> = slowlab_perf::ProgressFn<'a>;

/// Opens `input` (see the module doc) into a bundle: the trace, the side
/// files asked for, and the warnings of all of them (the trace's first).
/// A side file that cannot be read is a warning, not an error.
pub fn open(
    input: &Path,
    opts: &OpenOptions,
    progress: Progress,
) -> Result<TraceBundle, OpenError> {
    let file = trace_file(input)?;
    if slowlab_etl::is_etl_file(&file) {
        let symbols = opts
            .pdb_symbols
            .as_deref()
            .map(slowlab_etl::SymbolPath::parse);
        let (trace, paths) = slowlab_etl::read_trace_with_symbols(&file, symbols.as_ref())
            .map_err(|source| OpenError::Etl {
                path: file.clone(),
                source,
            })?;
        let warnings = trace.stats.warnings.clone();
        return Ok(TraceBundle {
            trace,
            paths: (opts.paths && !paths.is_empty()).then_some(paths),
            cgroups: None,
            warnings,
        });
    }
    if opts.pdb_symbols.is_some() {
        return Err(OpenError::SymbolsNotEtl(file));
    }
    if slowlab_schedrec::is_sched_file(&file) {
        let read = slowlab_schedrec::ReadOptions {
            symbols: perf_options(opts),
        };
        let (trace, paths) =
            slowlab_schedrec::read_file(&file, &read).map_err(|source| OpenError::Sched {
                path: file.clone(),
                source,
            })?;
        let mut warnings = trace.stats.warnings.clone();
        let cgroups = if opts.cgroups {
            read_cgroups(&file, &mut warnings)
        } else {
            None
        };
        return Ok(TraceBundle {
            trace,
            paths: (opts.paths && !paths.is_empty()).then_some(paths),
            cgroups,
            warnings,
        });
    }
    let read = perf_options(opts);
    let trace =
        slowlab_perf::read_file(&file, &read, progress).map_err(|source| OpenError::Perf {
            path: file.clone(),
            source,
        })?;
    let mut warnings = trace.stats.warnings.clone();
    let paths = if opts.paths {
        read_paths(&file, &mut warnings)
    } else {
        None
    };
    let cgroups = if opts.cgroups {
        read_cgroups(&file, &mut warnings)
    } else {
        None
    };
    Ok(TraceBundle {
        trace,
        paths,
        cgroups,
        warnings,
    })
}

/// How perf.data is read, and how any trace's frames are named.
fn perf_options(opts: &OpenOptions) -> slowlab_perf::ReadOptions {
    slowlab_perf::ReadOptions {
        symbolize: opts.symbolize,
        threads: opts.threads,
        memory_budget: opts.memory_budget,
        symbol_cache: opts.symbol_cache.clone(),
        debuginfod: opts.debuginfod.clone(),
        ..slowlab_perf::ReadOptions::default()
    }
}

/// The path capture beside a perf.data trace, if there is one.
fn read_paths(trace: &Path, warnings: &mut Vec<String>) -> Option<Vec<CapturedPath>> {
    let file = side_file(trace, "paths");
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

/// The cgroup notes beside a perf.data trace or a scheduler recording, if there are some.
fn read_cgroups(trace: &Path, warnings: &mut Vec<String>) -> Option<CgroupInfo> {
    let file = side_file(trace, "cgroups.json");
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

/// How many events of each name `input` holds, with the reader's
/// warnings: an ETL file counted as read (every event, named as
/// TraceEvent names them), a perf.data file by its samples and decoded
/// events under perf's names (unsymbolized: names are not needed).
pub fn event_counts(
    input: &Path,
    opts: &OpenOptions,
    progress: Progress,
) -> Result<(BTreeMap<String, u64>, Vec<String>), OpenError> {
    let file = trace_file(input)?;
    if slowlab_etl::is_etl_file(&file) {
        let etl = slowlab_etl::read_file(&file).map_err(|source| OpenError::Etl {
            path: file.clone(),
            source,
        })?;
        return Ok((etl.event_counts(), etl.warnings().to_vec()));
    }
    let opts = OpenOptions {
        symbolize: false,
        paths: false,
        cgroups: false,
        ..opts.clone()
    };
    let bundle = open(&file, &opts, progress)?;
    Ok((perf_event_counts(&bundle.trace), bundle.warnings))
}

/// A perf.data trace's samples and events, counted under perf's names.
pub fn perf_event_counts(trace: &Trace) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    let sample_event = trace.meta.sample_event.clone().unwrap_or("samples".into());
    if !trace.samples.is_empty() {
        counts.insert(sample_event, trace.samples.len() as u64);
    }
    for e in &trace.events {
        let name = match &e.kind {
            EventKind::Switch { .. } => "sched:sched_switch".to_string(),
            EventKind::Waking { .. } => "sched:sched_waking".to_string(),
            EventKind::PageFault { user: true, .. } => "exceptions:page_fault_user".to_string(),
            EventKind::PageFault { .. } => "exceptions:page_fault_kernel".to_string(),
            EventKind::MajorFault { .. } => "major-faults".to_string(),
            EventKind::SyscallEnter { name, .. } => {
                format!("syscalls:sys_enter_{}", trace.str(*name))
            }
            EventKind::SyscallExit { name, .. } => {
                format!("syscalls:sys_exit_{}", trace.str(*name))
            }
            EventKind::BlockRequest {
                complete: false, ..
            } => "block:block_rq_issue".to_string(),
            EventKind::BlockRequest { .. } => "block:block_rq_complete".to_string(),
            EventKind::Other { name } => trace.str(*name).to_string(),
        };
        *counts.entry(name).or_insert(0) += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

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

    #[test]
    fn the_environment_is_read_through_the_lookup_given() {
        let o = OpenOptions::from_env(env(&[
            ("SLOWLAB_THREADS", "3"),
            ("SLOWLAB_MEMORY", "512M"),
            ("HOME", "/home/u"),
        ]))
        .unwrap();
        assert_eq!(o.threads, 3);
        assert_eq!(o.memory_budget, Some(512 << 20));
        assert_eq!(
            o.symbol_cache,
            Some(PathBuf::from("/home/u/.cache/slowlab"))
        );
        let o = OpenOptions::from_env(env(&[
            ("SLOWLAB_CACHE_DIR", "off"),
            ("XDG_CACHE_HOME", "/x"),
        ]))
        .unwrap();
        assert_eq!((o.threads, o.symbol_cache), (0, None));
        assert_eq!(o.memory_budget, Some(DEFAULT_MEMORY_BUDGET));
        let o = OpenOptions::from_env(env(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/h")])).unwrap();
        assert_eq!(o.symbol_cache, Some(PathBuf::from("/x/slowlab")));
        for (name, bad) in [("SLOWLAB_THREADS", "0"), ("SLOWLAB_MEMORY", "lots")] {
            let e = OpenOptions::from_env(env(&[(name, bad)])).unwrap_err();
            assert!(e.to_string().starts_with(&format!("{name}=")), "{e}");
        }
    }

    #[test]
    fn debuginfod_servers_offline_and_time_out_come_from_the_environment() {
        let o = OpenOptions::from_env(env(&[])).unwrap();
        assert_eq!(o.debuginfod, DebuginfodOptions::default());
        let o = OpenOptions::from_env(env(&[
            ("DEBUGINFOD_URLS", "http://a:8002 https://b"),
            ("DEBUGINFOD_TIMEOUT", "3"),
            ("SLOWLAB_OFFLINE", "1"),
        ]))
        .unwrap();
        assert_eq!(o.debuginfod.urls, ["http://a:8002", "https://b"]);
        assert_eq!(
            o.debuginfod.timeout,
            Some(std::time::Duration::from_secs(3))
        );
        assert!(o.debuginfod.offline);
        let o = OpenOptions::from_env(env(&[("SLOWLAB_OFFLINE", "0")])).unwrap();
        assert!(!o.debuginfod.offline);
        let e = OpenOptions::from_env(env(&[("DEBUGINFOD_TIMEOUT", "soon")])).unwrap_err();
        assert!(e.to_string().starts_with("DEBUGINFOD_TIMEOUT="), "{e}");
    }

    #[test]
    fn a_directory_opens_its_diagnose_trace_or_says_what_to_give() {
        let dir = tempfile::tempdir().unwrap();
        let e = trace_file(dir.path()).unwrap_err();
        assert!(e.to_string().contains("slowlab diagnose -o DIR"), "{e}");
        std::fs::write(dir.path().join(DIAGNOSE_TRACE), b"x").unwrap();
        assert_eq!(
            trace_file(dir.path()).unwrap(),
            dir.path().join(DIAGNOSE_TRACE)
        );
        let file = dir.path().join("t.data");
        assert_eq!(trace_file(&file).unwrap(), file);
    }

    #[test]
    fn symbols_for_a_perf_trace_are_refused_before_reading_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.data");
        std::fs::write(&file, b"PERFILE2").unwrap();
        let opts = OpenOptions {
            pdb_symbols: Some("/pdbs".into()),
            ..OpenOptions::default()
        };
        let e = open(&file, &opts, &|_, _, _| {}).unwrap_err();
        assert!(matches!(e, OpenError::SymbolsNotEtl(_)), "{e}");
    }
}
