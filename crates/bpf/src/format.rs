//! The capture file format: [`PathLogWriter`] writes it, [`read_paths`] / [`parse_paths`]
//! read it back into a [`PathLog`]. Pure data handling: no BPF, no kernel.
//!
//! # Format (version 1)
//!
//! All integers are little-endian. A file is a 40-byte header, then records, then (when the
//! capture was stopped cleanly) one end record.
//!
//! Header:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `SLPATHS\0` |
//! | 8 | 2 | version, `1` |
//! | 10 | 2 | header length in bytes, `40` |
//! | 12 | 4 | reserved, 0 |
//! | 16 | 8 | CLOCK_MONOTONIC ns from which the file holds every record: when the probes were attached (a ring capture's snapshot: the start of its window) |
//! | 24 | 8 | CLOCK_REALTIME ns at the same moment (to convert times to wall-clock) |
//! | 32 | 8 | mask of attached syscalls: bit *n* set ⇔ [`Syscall`] with id *n* was attached |
//!
//! Record: a 24-byte head, then `len` bytes of path (no NUL; the bytes the program passed,
//! not necessarily UTF-8, relative paths left relative):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | `time_ns`: CLOCK_MONOTONIC ns at the `sys_enter` tracepoint |
//! | 8 | 4 | `pid` (thread-group id) |
//! | 12 | 4 | `tid` |
//! | 16 | 2 | syscall id ([`Syscall::id`]); `0xFFFF` marks the end record |
//! | 18 | 1 | argument: 0 = first path argument, 1 = second (rename's new name, ...) |
//! | 19 | 1 | flags: bit 0 = path cut at 256 bytes, bit 1 = path unreadable (len is 0) |
//! | 20 | 2 | `len` |
//! | 22 | 2 | reserved, 0 |
//!
//! End record: a record head with syscall id `0xFFFF`, `time_ns` = CLOCK_MONOTONIC ns at
//! stop, pid = tid = 0, and `len` = 16 bytes of payload: u64 records written, u64 records
//! dropped in the kernel because the ring buffer was full.
//!
//! Records are in the order the kernel's ring buffer delivered them, which is nearly but
//! not exactly time order across CPUs; [`PathLog::events`] is sorted by time.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use crate::error::BpfError;
use crate::syscall::Syscall;
use slowlab_model::le::{u16_at, u32_at, u64_at};

/// The file's first 8 bytes.
pub const MAGIC: [u8; 8] = *b"SLPATHS\0";
/// The format version this crate writes and reads.
pub const VERSION: u16 = 1;
/// Bytes in the file header.
pub const HEADER_LEN: usize = 40;
/// Bytes in a record head (the path follows).
pub const RECORD_HEAD_LEN: usize = 24;
/// The syscall id of the end record.
pub const END_ID: u16 = 0xFFFF;
/// The most path bytes a record holds; longer paths are cut and flagged.
pub const PATH_CAP: usize = 256;

/// Record flag: the path was longer than [`PATH_CAP`] bytes and was cut.
pub const FLAG_TRUNCATED: u8 = 1;
/// Record flag: the path pointer could not be read (NULL, invalid, or not paged in).
pub const FLAG_UNREADABLE: u8 = 2;

const END_PAYLOAD_LEN: usize = 16;

/// One path argument of one syscall, as captured at its `sys_enter` tracepoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathEvent {
    /// CLOCK_MONOTONIC nanoseconds at the tracepoint (`bpf_ktime_get_ns`).
    pub time_ns: u64,
    /// Process id (thread-group id).
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The syscall.
    pub syscall: Syscall,
    /// Which path argument: 0 for the first, 1 for the second (e.g. rename's new name).
    pub arg: u8,
    /// The path as the program passed it (relative paths stay relative), decoded as UTF-8
    /// with invalid bytes replaced by U+FFFD. Empty when [`PathEvent::unreadable`].
    pub path: String,
    /// The path was longer than [`PATH_CAP`] bytes; `path` holds its start.
    pub truncated: bool,
    /// The path could not be read from the process's memory (a NULL pointer, as
    /// `utimensat(fd, NULL, …)` passes, or a page not yet in memory).
    pub unreadable: bool,
}

/// What the end record of a cleanly stopped capture says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaptureEnd {
    /// CLOCK_MONOTONIC nanoseconds when the capture stopped.
    pub stop_ns: u64,
    /// Records the capture wrote.
    pub events: u64,
    /// Records lost in the kernel because the ring buffer was full.
    pub drops: u64,
}

/// A capture file read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathLog {
    /// CLOCK_MONOTONIC ns from which the file holds every record captured: when the probes
    /// were attached, or for a ring capture ([`crate::RingOptions`]) the start of the window
    /// it kept.
    pub start_monotonic_ns: u64,
    /// CLOCK_REALTIME ns at that same moment.
    pub start_realtime_ns: u64,
    /// The syscalls whose tracepoints were attached; paths of other syscalls were not
    /// captured (their tracepoint was missing on that kernel).
    pub attached: Vec<Syscall>,
    /// The events, sorted by time, then argument index (other ties keep file order).
    pub events: Vec<PathEvent>,
    /// The end record; `None` when the capture did not stop cleanly (the writer was
    /// killed, or the file was cut), in which case drops are unknown.
    pub end: Option<CaptureEnd>,
    /// 1 when the file ended in the middle of a record (which was ignored), else 0.
    pub truncated_records: u64,
    /// Records with a syscall id this version does not know (ignored).
    pub unknown_records: u64,
    /// Things a reader should tell the user about (a cut last record, unknown records,
    /// drops). Empty for a clean, complete capture.
    pub warnings: Vec<String>,
}

impl PathLog {
    /// The readable paths as the trace model keeps them (`slowlab_model::bundle`):
    /// events whose path could not be read, or is empty, are left out.
    pub fn captured_paths(&self) -> Vec<slowlab_model::bundle::CapturedPath> {
        self.events
            .iter()
            .filter(|e| !e.unreadable && !e.path.is_empty())
            .map(|e| slowlab_model::bundle::CapturedPath {
                time_ns: e.time_ns,
                tid: e.tid as i32,
                syscall: e.syscall.name().to_string(),
                path: e.path.clone(),
            })
            .collect()
    }
}

impl PathLog {
    /// True when the capture stopped cleanly and lost nothing.
    pub fn is_complete(&self) -> bool {
        self.end.is_some_and(|e| e.drops == 0) && self.truncated_records == 0
    }

    /// True when paths of `syscall` were being captured.
    pub fn was_attached(&self, syscall: Syscall) -> bool {
        self.attached.contains(&syscall)
    }
}

/// Encodes a set of syscalls as the header's attached mask.
pub fn syscall_mask(syscalls: &[Syscall]) -> u64 {
    syscalls
        .iter()
        .filter(|s| s.id() < 64)
        .fold(0u64, |m, s| m | (1u64 << s.id()))
}

fn mask_syscalls(mask: u64) -> Vec<Syscall> {
    (0..64u16)
        .filter(|id| mask & (1u64 << id) != 0)
        .filter_map(Syscall::from_id)
        .collect()
}

/// Writes a capture file. The capture uses it; tests and fixtures can use it to make
/// files without BPF. It buffers nothing itself: give it a `BufWriter`.
#[derive(Debug)]
pub struct PathLogWriter<W: Write> {
    out: W,
    records: u64,
}

impl<W: Write> PathLogWriter<W> {
    /// Writes the header and returns the writer.
    pub fn new(
        mut out: W,
        start_monotonic_ns: u64,
        start_realtime_ns: u64,
        attached: &[Syscall],
    ) -> io::Result<Self> {
        let mut head = [0u8; HEADER_LEN];
        head[0..8].copy_from_slice(&MAGIC);
        head[8..10].copy_from_slice(&VERSION.to_le_bytes());
        head[10..12].copy_from_slice(&(HEADER_LEN as u16).to_le_bytes());
        head[16..24].copy_from_slice(&start_monotonic_ns.to_le_bytes());
        head[24..32].copy_from_slice(&start_realtime_ns.to_le_bytes());
        head[32..40].copy_from_slice(&syscall_mask(attached).to_le_bytes());
        out.write_all(&head)?;
        Ok(PathLogWriter { out, records: 0 })
    }

    /// Writes one record. `path` longer than [`PATH_CAP`] is cut and flagged truncated.
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &mut self,
        time_ns: u64,
        pid: u32,
        tid: u32,
        syscall_id: u16,
        arg: u8,
        flags: u8,
        path: &[u8],
    ) -> io::Result<()> {
        let (path, flags) = capped(path, flags);
        self.head(time_ns, pid, tid, syscall_id, arg, flags, path.len() as u16)?;
        self.out.write_all(path)?;
        self.records += 1;
        Ok(())
    }

    /// Writes a [`PathEvent`] as a record.
    pub fn event(&mut self, e: &PathEvent) -> io::Result<()> {
        let flags = if e.truncated { FLAG_TRUNCATED } else { 0 }
            | if e.unreadable { FLAG_UNREADABLE } else { 0 };
        self.record(
            e.time_ns,
            e.pid,
            e.tid,
            e.syscall.id(),
            e.arg,
            flags,
            e.path.as_bytes(),
        )
    }

    /// Records written so far (the end record not counted).
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Writes the end record, flushes, and returns the inner writer.
    pub fn finish(mut self, stop_ns: u64, drops: u64) -> io::Result<W> {
        self.head(stop_ns, 0, 0, END_ID, 0, 0, END_PAYLOAD_LEN as u16)?;
        self.out.write_all(&self.records.to_le_bytes())?;
        self.out.write_all(&drops.to_le_bytes())?;
        self.out.flush()?;
        Ok(self.out)
    }

    /// Flushes without ending the file.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Writes records already encoded (heads and paths, as [`record_head`] makes them);
    /// `records` is how many they are.
    pub(crate) fn encoded(&mut self, bytes: &[u8], records: u64) -> io::Result<()> {
        self.out.write_all(bytes)?;
        self.records += records;
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn head(
        &mut self,
        time_ns: u64,
        pid: u32,
        tid: u32,
        syscall_id: u16,
        arg: u8,
        flags: u8,
        len: u16,
    ) -> io::Result<()> {
        let h = record_head(time_ns, pid, tid, syscall_id, arg, flags, len);
        self.out.write_all(&h)
    }
}

/// A path cut to [`PATH_CAP`] bytes, with [`FLAG_TRUNCATED`] added to `flags`
/// when it was longer: what every record holds.
pub(crate) fn capped(path: &[u8], flags: u8) -> (&[u8], u8) {
    if path.len() > PATH_CAP {
        (&path[..PATH_CAP], flags | FLAG_TRUNCATED)
    } else {
        (path, flags)
    }
}

/// The 24-byte head of a record (see the format table above).
#[allow(clippy::too_many_arguments)]
pub(crate) fn record_head(
    time_ns: u64,
    pid: u32,
    tid: u32,
    syscall_id: u16,
    arg: u8,
    flags: u8,
    len: u16,
) -> [u8; RECORD_HEAD_LEN] {
    let mut h = [0u8; RECORD_HEAD_LEN];
    h[0..8].copy_from_slice(&time_ns.to_le_bytes());
    h[8..12].copy_from_slice(&pid.to_le_bytes());
    h[12..16].copy_from_slice(&tid.to_le_bytes());
    h[16..18].copy_from_slice(&syscall_id.to_le_bytes());
    h[18] = arg;
    h[19] = flags;
    h[20..22].copy_from_slice(&len.to_le_bytes());
    h
}

/// Reads a capture file written by [`PathCapture`](crate::PathCapture).
///
/// A file cut in the middle of its last record (the writer was killed) reads fine: the
/// partial record is dropped and counted in [`PathLog::truncated_records`], with a
/// warning. An empty file, a file that is not a capture, or an unsupported version is a
/// [`BpfError::Format`].
pub fn read_paths(file: &Path) -> Result<PathLog, BpfError> {
    let bytes = fs::read(file).map_err(|e| BpfError::io(file, e))?;
    parse_paths(&bytes, file)
}

/// Parses the bytes of a capture file; `name` is only used in errors. See [`read_paths`].
pub fn parse_paths(bytes: &[u8], name: &Path) -> Result<PathLog, BpfError> {
    if bytes.is_empty() {
        return Err(BpfError::format(
            name,
            "the file is empty (the capture wrote nothing: did it fail to start?)",
        ));
    }
    let magic_len = bytes.len().min(MAGIC.len());
    if bytes[..magic_len] != MAGIC[..magic_len] {
        return Err(BpfError::format(
            name,
            "bad magic: expected a file written by slowlab's path capture (`SLPATHS`)",
        ));
    }
    if bytes.len() < HEADER_LEN {
        return Err(BpfError::format(
            name,
            format!(
                "the header is cut short ({} of {HEADER_LEN} bytes)",
                bytes.len()
            ),
        ));
    }
    let version = u16_at(bytes, 8);
    if version != VERSION {
        return Err(BpfError::format(
            name,
            format!("format version {version} is not supported (this slowlab reads {VERSION})"),
        ));
    }
    let header_len = usize::from(u16_at(bytes, 10));
    if header_len < HEADER_LEN || header_len > bytes.len() {
        return Err(BpfError::format(
            name,
            format!("bad header length {header_len}"),
        ));
    }

    let mut log = PathLog {
        start_monotonic_ns: u64_at(bytes, 16),
        start_realtime_ns: u64_at(bytes, 24),
        attached: mask_syscalls(u64_at(bytes, 32)),
        events: Vec::new(),
        end: None,
        truncated_records: 0,
        unknown_records: 0,
        warnings: Vec::new(),
    };

    let mut at = header_len;
    while at < bytes.len() {
        let rest = &bytes[at..];
        if rest.len() < RECORD_HEAD_LEN {
            log.truncated_records += 1;
            break;
        }
        let len = usize::from(u16_at(rest, 20));
        if rest.len() < RECORD_HEAD_LEN + len {
            log.truncated_records += 1;
            break;
        }
        let payload = &rest[RECORD_HEAD_LEN..RECORD_HEAD_LEN + len];
        let time_ns = u64_at(rest, 0);
        let id = u16_at(rest, 16);
        at += RECORD_HEAD_LEN + len;

        if id == END_ID {
            if len >= END_PAYLOAD_LEN {
                log.end = Some(CaptureEnd {
                    stop_ns: time_ns,
                    events: u64_at(payload, 0),
                    drops: u64_at(payload, 8),
                });
            } else {
                log.warnings
                    .push(format!("the end record is malformed ({len} bytes)"));
            }
            if at < bytes.len() {
                log.warnings.push(format!(
                    "{} bytes after the end record were ignored",
                    bytes.len() - at
                ));
            }
            break;
        }
        let Some(syscall) = Syscall::from_id(id) else {
            log.unknown_records += 1;
            continue;
        };
        let flags = rest[19];
        log.events.push(PathEvent {
            time_ns,
            pid: u32_at(rest, 8),
            tid: u32_at(rest, 12),
            syscall,
            arg: rest[18],
            path: String::from_utf8_lossy(payload).into_owned(),
            truncated: flags & FLAG_TRUNCATED != 0,
            unreadable: flags & FLAG_UNREADABLE != 0,
        });
    }

    if log.truncated_records > 0 {
        log.warnings.push(format!(
            "the file ends in the middle of a record ({} bytes ignored): the capture did not \
             stop cleanly",
            bytes.len() - at
        ));
    } else if log.end.is_none() {
        log.warnings.push(
            "the file has no end record: the capture did not stop cleanly, so drops are unknown"
                .into(),
        );
    }
    if log.unknown_records > 0 {
        log.warnings.push(format!(
            "{} records of unknown syscalls were ignored (written by a newer slowlab?)",
            log.unknown_records
        ));
    }
    if let Some(end) = log.end {
        if end.drops > 0 {
            log.warnings.push(format!(
                "{} paths were lost because the ring buffer was full (the capture could not \
                 keep up); a larger ring buffer helps",
                end.drops
            ));
        }
        if end.events != log.events.len() as u64 + log.unknown_records {
            log.warnings.push(format!(
                "the end record counts {} records but the file holds {}",
                end.events,
                log.events.len() as u64 + log.unknown_records
            ));
        }
    }

    // Ring-buffer order is nearly time order. A two-path syscall's records share a time
    // stamp; the argument index orders them (the first may come later when it was read at
    // sys_exit).
    log.events.sort_by_key(|e| (e.time_ns, e.arg));
    Ok(log)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(time_ns: u64, tid: u32, syscall: Syscall, path: &str) -> PathEvent {
        PathEvent {
            time_ns,
            pid: 7,
            tid,
            syscall,
            arg: 0,
            path: path.into(),
            truncated: false,
            unreadable: false,
        }
    }

    fn file(events: &[PathEvent], end: Option<u64>) -> Vec<u8> {
        let mut w = PathLogWriter::new(
            Vec::new(),
            1000,
            2000,
            &[Syscall::Openat, Syscall::Newfstatat],
        )
        .expect("vec write");
        for e in events {
            w.event(e).expect("vec write");
        }
        match end {
            Some(drops) => w.finish(5000, drops).expect("vec write"),
            None => w.out,
        }
    }

    #[test]
    fn round_trip_keeps_every_field() {
        let mut odd = ev(1500, 9, Syscall::Renameat2, "new");
        odd.arg = 1;
        let mut cut = ev(1400, 9, Syscall::Openat, "");
        cut.unreadable = true;
        let events = vec![ev(1200, 8, Syscall::Newfstatat, "name.0.dat"), cut, odd];
        let bytes = file(&events, Some(0));
        let log = parse_paths(&bytes, Path::new("x")).expect("parses");
        assert_eq!(log.events, events);
        assert_eq!(log.start_monotonic_ns, 1000);
        assert_eq!(log.start_realtime_ns, 2000);
        assert_eq!(log.attached, vec![Syscall::Openat, Syscall::Newfstatat]);
        assert_eq!(
            log.end,
            Some(CaptureEnd {
                stop_ns: 5000,
                events: 3,
                drops: 0
            })
        );
        assert!(log.is_complete());
        assert!(log.warnings.is_empty(), "{:?}", log.warnings);
    }

    #[test]
    fn events_come_back_sorted_by_time() {
        let events = vec![
            ev(300, 1, Syscall::Openat, "c"),
            ev(100, 1, Syscall::Openat, "a"),
            ev(200, 2, Syscall::Openat, "b"),
        ];
        let log = parse_paths(&file(&events, Some(0)), Path::new("x")).expect("parses");
        let paths: Vec<&str> = log.events.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["a", "b", "c"]);
    }

    #[test]
    fn long_paths_are_cut_and_flagged() {
        let long = "x".repeat(300);
        let log = parse_paths(
            &file(&[ev(1, 1, Syscall::Openat, &long)], Some(0)),
            Path::new("x"),
        )
        .expect("parses");
        assert_eq!(log.events[0].path.len(), PATH_CAP);
        assert!(log.events[0].truncated);
    }

    #[test]
    fn every_cut_point_reads_without_error_after_the_header() {
        let events = vec![
            ev(1, 1, Syscall::Openat, "/etc/passwd"),
            ev(2, 1, Syscall::Newfstatat, "name.1.dat"),
        ];
        let bytes = file(&events, Some(0));
        for cut in HEADER_LEN..bytes.len() {
            let log = parse_paths(&bytes[..cut], Path::new("x")).expect("cut file parses");
            assert!(log.end.is_none());
            assert!(!log.warnings.is_empty());
            assert!(log.events.len() <= 2);
        }
    }

    #[test]
    fn drops_and_unknown_records_are_warned_about() {
        let mut w = PathLogWriter::new(Vec::new(), 0, 0, &[]).expect("vec write");
        w.record(1, 1, 1, 999, 0, 0, b"future").expect("vec write");
        let bytes = w.finish(2, 5).expect("vec write");
        let log = parse_paths(&bytes, Path::new("x")).expect("parses");
        assert_eq!(log.unknown_records, 1);
        assert!(log.events.is_empty());
        assert!(!log.is_complete());
        assert_eq!(log.warnings.len(), 2, "{:?}", log.warnings);
    }
}
