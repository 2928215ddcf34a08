//! [`Sink`]: what the capture thread does with each record of the BPF ring buffer. It
//! decodes the record and appends it to the capture file (streaming mode) or to the
//! [`PathRing`] of the last window (ring mode), and writes a ring's window as a file,
//! through a temporary name renamed into place, so a snapshot is never seen half written.
//!
//! It does not touch BPF; the records it decodes are those `paths.bpf.c` sends.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use crate::error::BpfError;
use crate::format::{PathLogWriter, FLAG_TRUNCATED, FLAG_UNREADABLE};
use crate::ring::PathRing;
use crate::syscall::Syscall;

/// Bytes of the ring buffer's record head; must match `struct path_event` in the C file.
pub(crate) const RING_HEAD_LEN: usize = 24;

/// Where the records go.
pub(crate) enum Store {
    /// Streamed into the capture file as they come.
    File(PathLogWriter<BufWriter<File>>),
    /// Kept in memory for the last window only (ring mode).
    Ring(PathRing),
}

/// What the ring-buffer callback accumulates.
pub(crate) struct Sink {
    pub(crate) store: Store,
    pub(crate) unreadable: u64,
    pub(crate) truncated: u64,
    pub(crate) error: Option<io::Error>,
}

impl Sink {
    pub(crate) fn new(store: Store) -> Sink {
        Sink {
            store,
            unreadable: 0,
            truncated: 0,
            error: None,
        }
    }

    /// Decodes one ring-buffer record and stores it; returns non-zero to stop consuming.
    pub(crate) fn on_record(&mut self, data: &[u8]) -> i32 {
        // The program always sends a whole head and `len` path bytes; anything shorter
        // cannot come from it and is skipped.
        if data.len() < RING_HEAD_LEN {
            return 0;
        }
        let u64_at = |at: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&data[at..at + 8]);
            u64::from_ne_bytes(a)
        };
        let u32_at = |at: usize| {
            let mut a = [0u8; 4];
            a.copy_from_slice(&data[at..at + 4]);
            u32::from_ne_bytes(a)
        };
        let u16_at = |at: usize| u16::from_ne_bytes([data[at], data[at + 1]]);
        let len = usize::from(u16_at(20));
        let Some(path) = data.get(RING_HEAD_LEN..RING_HEAD_LEN + len) else {
            return 0;
        };
        let flags = data[19];
        if flags & FLAG_UNREADABLE != 0 {
            self.unreadable += 1;
        }
        if flags & FLAG_TRUNCATED != 0 {
            self.truncated += 1;
        }
        let (time, pid, tid, id, arg) = (u64_at(0), u32_at(8), u32_at(12), u16_at(16), data[18]);
        match &mut self.store {
            Store::File(writer) => match writer.record(time, pid, tid, id, arg, flags, path) {
                Ok(()) => 0,
                Err(e) => {
                    self.error = Some(e);
                    -1
                }
            },
            Store::Ring(ring) => {
                ring.push(time, pid, tid, id, arg, flags, path);
                0
            }
        }
    }
}

/// Writes the window of `ring` ending at `now_ns` to `path` (through `PATH.partial`,
/// renamed into place); returns the records written. `start` is the capture's start
/// (CLOCK_MONOTONIC, CLOCK_REALTIME ns).
pub(crate) fn write_ring_file(
    ring: &PathRing,
    path: &Path,
    now_ns: u64,
    start: (u64, u64),
    attached: &[Syscall],
    drops: u64,
) -> Result<u64, BpfError> {
    let partial = slowlab_model::bundle::partial_file(path);
    let written = (|| {
        let file = File::create(&partial)?;
        let (out, records) = ring.write(
            BufWriter::with_capacity(1 << 20, file),
            now_ns,
            start,
            attached,
            drops,
        )?;
        out.into_inner().map_err(|e| e.into_error())?.flush()?;
        Ok(records)
    })();
    let records = written.map_err(|e: io::Error| {
        let _ = std::fs::remove_file(&partial);
        BpfError::io(path, e)
    })?;
    std::fs::rename(&partial, path).map_err(|e| {
        let _ = std::fs::remove_file(&partial);
        BpfError::io(path, e)
    })?;
    Ok(records)
}
