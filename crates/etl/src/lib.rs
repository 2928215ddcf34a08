//! Reads Windows Event Tracing (ETW) trace files, `.etl` and the `.etl.zip`
//! that WPR and PerfView write, on any operating system and without any
//! Windows API, into slowlab's trace model.
//!
//! The pipeline: [`buffer`] splits the file into its WMI buffers
//! (decompressing them, [`lz77`]), reads each event's header ([`header`]) and
//! merges the per-CPU buffers in time order; [`logfile`] reads the trace's
//! own header event (pointer size, clock, start time, losses); [`names`]
//! names events as TraceEvent does (for `--events` and for checking against
//! its baselines); [`kernel`] decodes the payloads of the classic kernel
//! events slowlab uses; [`model`] builds a [`Trace`] from them.
//!
//! Never panics on a corrupt or truncated file: what cannot be read is a
//! warning in [`Etl::warnings`] (and the trace's `ReadStats`); only a file
//! that is not an ETL trace at all is an [`EtlError`]. Frames are named
//! `module+0xoffset` unless the caller passes a symbol path: then
//! [`pdb_ids`] says which PDB each image was built with and [`symbols`]
//! names functions from the matching local PDBs. [`synth`] writes small
//! 32-bit traces byte by byte for tests.

pub mod buffer;
pub mod guid;
pub mod header;
pub mod kernel;
pub mod kernel_io;
pub mod logfile;
pub mod lz77;
pub mod model;
pub mod names;
pub mod pdb_ids;
pub mod pe;
pub mod stacks;
pub mod symbols;
pub mod synth;
pub mod tracelogging;
mod zip_input;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use buffer::{Buffers, Event};
use header::Source;
use kernel::Payload;
use logfile::LogfileHeader;
pub use model::{to_trace, to_trace_and_paths, to_trace_with_symbols};
use slowlab_model::bundle::CapturedPath;
use slowlab_model::trace::Trace;
pub use symbols::SymbolPath;

/// Why a file could not be read as an ETL trace at all.
#[derive(Debug, thiserror::Error)]
pub enum EtlError {
    #[error("cannot open {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the file is empty (0 bytes), so it holds no trace")]
    Empty,
    #[error("not an ETL trace (no WMI buffer with a trace header at its start); pass a .etl or .etl.zip written by WPR, xperf or PerfView")]
    NotEtl,
    #[error("cannot read the zip archive: {0}")]
    Zip(String),
    #[error("the zip archive holds no .etl file")]
    NoEtlInZip,
}

/// An ETL file read into memory: its header, its events in time order and
/// their bytes.
#[derive(Debug)]
pub struct Etl {
    /// The trace's `TRACE_LOGFILE_HEADER`, when the file has one.
    pub header: Option<LogfileHeader>,
    buffers: Buffers,
    /// Timestamp (raw clock) that is time 0: the header event's.
    start_time: i64,
    /// Extra warnings beyond the buffers' own.
    warnings: Vec<String>,
}

/// True when `bytes` start like an ETL file: a WMI buffer header followed by
/// the trace's header event (a system header with hook id 0).
pub fn looks_like_etl(bytes: &[u8]) -> bool {
    bytes.len() >= 0x50
        && matches!(bytes[0x4a], 1 | 2)
        && bytes[0x4b] & 0xc0 == 0xc0
        && bytes[0x4e..0x50] == [0, 0]
}

/// True when the path's name ends in `.etl` or `.etl.zip` (any case).
pub fn has_etl_extension(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    name.ends_with(".etl") || name.ends_with(".etl.zip")
}

/// True when `path` is an ETL trace: named `.etl`/`.etl.zip`, or starting
/// with an ETL file's first bytes. For dispatching among input formats.
pub fn is_etl_file(path: &Path) -> bool {
    if has_etl_extension(path) {
        return true;
    }
    let mut head = [0u8; 0x50];
    std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
        .is_ok_and(|()| looks_like_etl(&head))
}

/// Reads an ETL file, or the first `.etl` in a zip archive (by content, not
/// by name), from memory. The entry point for the fuzzer.
pub fn read_bytes(bytes: &[u8]) -> Result<Etl, EtlError> {
    if bytes.is_empty() {
        return Err(EtlError::Empty);
    }
    if bytes.starts_with(b"PK\x03\x04") {
        let etl = zip_input::first_etl(bytes)?;
        return read_etl(&etl);
    }
    read_etl(bytes)
}

/// Reads an `.etl` or `.etl.zip` file.
pub fn read_file(path: &Path) -> Result<Etl, EtlError> {
    let bytes = std::fs::read(path).map_err(|source| EtlError::Open {
        path: path.to_owned(),
        source,
    })?;
    read_bytes(&bytes)
}

/// Reads an `.etl` or `.etl.zip` file into slowlab's trace model.
pub fn read_trace(path: &Path) -> Result<Trace, EtlError> {
    Ok(to_trace(&read_file(path)?))
}

/// Reads an `.etl` or `.etl.zip` file into slowlab's trace model and the
/// paths of its file operations (see [`model::io`]).
pub fn read_trace_and_paths(path: &Path) -> Result<(Trace, Vec<CapturedPath>), EtlError> {
    Ok(to_trace_and_paths(&read_file(path)?))
}

/// As [`read_trace_and_paths`], with function names from the PDBs found on
/// `symbols` (local directories; see [`symbols`]).
pub fn read_trace_with_symbols(
    path: &Path,
    symbols: Option<&SymbolPath>,
) -> Result<(Trace, Vec<CapturedPath>), EtlError> {
    Ok(to_trace_with_symbols(&read_file(path)?, symbols))
}

fn read_etl(bytes: &[u8]) -> Result<Etl, EtlError> {
    if !looks_like_etl(bytes) {
        return Err(EtlError::NotEtl);
    }
    let buffers = buffer::read_buffers(bytes);
    let mut warnings = Vec::new();
    let header_event = buffers
        .events
        .iter()
        .find(|e| e.header.source == Source::Kernel { group: 0 } && e.header.opcode == 0);
    let header = header_event.and_then(|e| {
        let p = payload_of(&buffers, e);
        logfile::parse(p, e.header.pointer_size as usize)
    });
    if header.is_none() {
        warnings.push(
            "the trace's header event is missing or unreadable; times assume a 10 MHz clock"
                .to_string(),
        );
    }
    let start_time = header_event
        .map(|e| e.header.time)
        .or_else(|| buffers.events.first().map(|e| e.header.time))
        .unwrap_or(0);
    if let Some(h) = &header {
        if h.events_lost > 0 || h.buffers_lost > 0 {
            warnings.push(format!(
                "ETW lost {} events and {} buffers while recording; record with larger or more buffers",
                h.events_lost, h.buffers_lost
            ));
        }
    }
    Ok(Etl {
        header,
        buffers,
        start_time,
        warnings,
    })
}

fn payload_of<'a>(buffers: &'a Buffers, e: &Event) -> &'a [u8] {
    let buf = &buffers.data[e.buffer as usize];
    let start = e.offset as usize + e.header.header_len;
    let end = e.offset as usize + e.header.size;
    buf.get(start..end).unwrap_or(&[])
}

impl Etl {
    /// All events, in time order.
    pub fn events(&self) -> &[Event] {
        &self.buffers.events
    }

    /// An event's payload (after its header and extended data).
    pub fn payload(&self, e: &Event) -> Payload<'_> {
        Payload::new(payload_of(&self.buffers, e), e.header.pointer_size)
    }

    /// An event's extended data items (manifest events only).
    pub fn ext(&self, e: &Event) -> &[u8] {
        let Some((start, end)) = e.header.ext else {
            return &[];
        };
        let base = e.offset as usize;
        self.buffers.data[e.buffer as usize]
            .get(base + start..base + end)
            .unwrap_or(&[])
    }

    /// TraceEvent's name for an event.
    pub fn event_name(&self, e: &Event) -> String {
        let tl = match e.header.source {
            Source::Manifest { .. } if e.header.ext.is_some() => tracelogging::names(self.ext(e)),
            _ => None,
        };
        names::event_name(
            e.header.source,
            e.header.opcode,
            tl.as_ref().map(|(p, n)| (p.as_str(), n.as_str())),
        )
    }

    /// How many events of each name the file holds (every event in the
    /// file: unlike TraceEvent's `TraceLog`, nothing is dropped).
    pub fn event_counts(&self) -> BTreeMap<String, u64> {
        let mut counts = BTreeMap::new();
        for e in self.events() {
            *counts.entry(self.event_name(e)).or_insert(0) += 1;
        }
        counts
    }

    /// Ticks per second of the event timestamps.
    pub fn clock_frequency(&self) -> u64 {
        self.header
            .as_ref()
            .map(|h| h.clock_frequency)
            .filter(|&f| f > 0)
            .unwrap_or(10_000_000)
    }

    /// A raw timestamp as nanoseconds since the trace's start (0 for
    /// anything earlier).
    pub fn ns(&self, time: i64) -> u64 {
        let ticks = time.saturating_sub(self.start_time).max(0) as u128;
        (ticks * 1_000_000_000 / self.clock_frequency() as u128).min(u64::MAX as u128) as u64
    }

    /// Clock ticks (a duration) as nanoseconds.
    pub fn ticks_ns(&self, ticks: u64) -> u64 {
        (ticks as u128 * 1_000_000_000 / self.clock_frequency() as u128).min(u64::MAX as u128)
            as u64
    }

    /// What was read, skipped and lost.
    pub fn stats(&self) -> &buffer::BufferStats {
        &self.buffers.stats
    }

    /// Everything worth telling the user about how the file was read.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = self.warnings.clone();
        w.extend(self.buffers.stats.warnings.iter().cloned());
        if self.buffers.stats.unknown_header_events > 0 {
            w.push(format!(
                "{} events have a header kind this reader does not know and were skipped",
                self.buffers.stats.unknown_header_events
            ));
        }
        w
    }
}
