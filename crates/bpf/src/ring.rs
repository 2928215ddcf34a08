//! [`PathRing`]: the path records of the last few seconds, for a capture in ring mode
//! ([`RingOptions`]). A ring capture runs for days beside `perf record --overwrite`; like
//! perf's ring it keeps only its last window, bounded in time *and* in bytes, and writes
//! that window as an ordinary capture file ([`crate::format`]) on each snapshot and at the
//! stop. Nothing accumulates on disk between snapshots.
//!
//! Pure data handling: no BPF, no threads, no files of its own (it writes into any
//! `Write`). The capture thread ([`crate::PathCapture`]) feeds it.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::time::Duration;

use crate::format::{capped, record_head, PathLogWriter, RECORD_HEAD_LEN};
use crate::syscall::Syscall;

/// The default byte bound of a ring: 32 MiB of records, about 400,000 paths of 60 bytes.
/// A busy file workload (`tar xf` of small files on a 2-core VM) makes ~60,000 path records
/// a second, so the bound holds about 7 s of that and minutes of an ordinary machine; a
/// window that does not fit is cut at its old end, and the file's header says from when
/// it is complete.
pub const DEFAULT_RING_MAX_BYTES: u64 = 32 << 20;

/// Ring mode of a capture: keep the records of the last `keep`, and at most `max_bytes` of
/// them (the file written is at most `max_bytes` plus 64 bytes of header and end record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingOptions {
    /// How far back a snapshot reaches.
    pub keep: Duration,
    /// The most record bytes kept (in memory, and so in a snapshot file).
    pub max_bytes: u64,
}

impl RingOptions {
    /// Keep the last `keep`, within [`DEFAULT_RING_MAX_BYTES`].
    pub fn new(keep: Duration) -> RingOptions {
        RingOptions {
            keep,
            max_bytes: DEFAULT_RING_MAX_BYTES,
        }
    }
}

/// Encoded records (the file's record format) in arrival order.
#[derive(Debug)]
struct Chunk {
    bytes: Vec<u8>,
    /// The time of the chunk's first record.
    first_ns: u64,
    /// The latest record time in the chunk (arrival order is nearly, not exactly, time
    /// order across CPUs).
    last_ns: u64,
}

/// The window of records; see the module documentation.
#[derive(Debug)]
pub(crate) struct PathRing {
    keep_ns: u64,
    max_bytes: u64,
    chunk_cap: usize,
    chunks: VecDeque<Chunk>,
    bytes: u64,
    /// Records before this time may have been let go: to stay within `max_bytes`, or
    /// forgotten ([`PathRing::forget`]).
    space_cut_ns: u64,
}

impl PathRing {
    pub(crate) fn new(options: &RingOptions) -> PathRing {
        PathRing {
            keep_ns: u64::try_from(options.keep.as_nanos()).unwrap_or(u64::MAX),
            max_bytes: options.max_bytes,
            // Old records go a chunk at a time: 1/32 of the bound keeps the bound tight.
            chunk_cap: usize::try_from(options.max_bytes / 32)
                .unwrap_or(1 << 20)
                .clamp(4096, 1 << 20),
            chunks: VecDeque::new(),
            bytes: 0,
            space_cut_ns: 0,
        }
    }

    /// Bytes of records held.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Adds one record (a path longer than [`PATH_CAP`] is cut and flagged, as in a file).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn push(
        &mut self,
        time_ns: u64,
        pid: u32,
        tid: u32,
        syscall_id: u16,
        arg: u8,
        flags: u8,
        path: &[u8],
    ) {
        let (path, flags) = capped(path, flags);
        let len = RECORD_HEAD_LEN + path.len();
        // A chunk holds at most `chunk_cap` bytes and an eighth of the window, so the
        // chunks beyond the window are let go soon after they leave it.
        let full = match self.chunks.back() {
            Some(c) => {
                c.bytes.len() + len > self.chunk_cap
                    || time_ns.saturating_sub(c.first_ns) > self.keep_ns / 8
            }
            None => true,
        };
        if full {
            self.chunks.push_back(Chunk {
                bytes: Vec::with_capacity(self.chunk_cap.min(64 * 1024)),
                first_ns: time_ns,
                last_ns: 0,
            });
        }
        if let Some(chunk) = self.chunks.back_mut() {
            let head = record_head(time_ns, pid, tid, syscall_id, arg, flags, path.len() as u16);
            chunk.bytes.extend_from_slice(&head);
            chunk.bytes.extend_from_slice(path);
            chunk.last_ns = chunk.last_ns.max(time_ns);
        }
        self.bytes += len as u64;
        while self.bytes > self.max_bytes && self.chunks.len() > 1 {
            if let Some(old) = self.chunks.pop_front() {
                self.bytes -= old.bytes.len() as u64;
                self.space_cut_ns = self.space_cut_ns.max(old.last_ns.saturating_add(1));
            }
        }
    }

    /// Lets go of the chunks whose records are all older than the window ending at
    /// `now_ns`.
    pub(crate) fn expire(&mut self, now_ns: u64) {
        let start = now_ns.saturating_sub(self.keep_ns);
        while self.chunks.len() > 1 && self.chunks.front().is_some_and(|c| c.last_ns < start) {
            if let Some(old) = self.chunks.pop_front() {
                self.bytes -= old.bytes.len() as u64;
            }
        }
    }

    /// Lets go of every record so far: the window starts at `now_ns` (a record that comes
    /// late with an earlier time stays out of it).
    pub(crate) fn forget(&mut self, now_ns: u64) {
        self.chunks.clear();
        self.bytes = 0;
        self.space_cut_ns = self.space_cut_ns.max(now_ns);
    }

    /// Where the window ending at `now_ns` starts: `keep` earlier, but not before the
    /// capture started (`capture_start_ns`) nor before records were let go for space.
    pub(crate) fn window_start(&self, now_ns: u64, capture_start_ns: u64) -> u64 {
        now_ns
            .saturating_sub(self.keep_ns)
            .max(capture_start_ns)
            .max(self.space_cut_ns)
    }

    /// Writes the window ending at `now_ns` as a capture file: the header says the window's
    /// start (CLOCK_MONOTONIC `start.0`, CLOCK_REALTIME `start.1` at the capture's start
    /// give the wall-clock time), then the records of the window in arrival order, then
    /// the end record with `drops`. Returns the writer and the records written.
    pub(crate) fn write<W: Write>(
        &self,
        out: W,
        now_ns: u64,
        start: (u64, u64),
        attached: &[Syscall],
        drops: u64,
    ) -> io::Result<(W, u64)> {
        let from = self.window_start(now_ns, start.0);
        let realtime = start.1.saturating_add(from - start.0.min(from));
        let mut w = PathLogWriter::new(out, from, realtime, attached)?;
        for chunk in &self.chunks {
            if chunk.last_ns < from {
                continue;
            }
            let b = &chunk.bytes;
            let mut at = 0;
            while at + RECORD_HEAD_LEN <= b.len() {
                let len =
                    RECORD_HEAD_LEN + usize::from(u16::from_le_bytes([b[at + 20], b[at + 21]]));
                let mut time = [0u8; 8];
                time.copy_from_slice(&b[at..at + 8]);
                if u64::from_le_bytes(time) >= from {
                    w.encoded(&b[at..(at + len).min(b.len())], 1)?;
                }
                at += len;
            }
        }
        let records = w.records();
        Ok((w.finish(now_ns, drops)?, records))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::format::parse_paths;
    use crate::format::PATH_CAP;

    const S: u64 = 1_000_000_000;

    fn ring(keep_s: u64, max_bytes: u64) -> PathRing {
        PathRing::new(&RingOptions {
            keep: Duration::from_secs(keep_s),
            max_bytes,
        })
    }

    fn push(r: &mut PathRing, time_ns: u64, path: &str) {
        r.push(time_ns, 7, 8, Syscall::Openat.id(), 0, 0, path.as_bytes());
    }

    fn read(r: &PathRing, now_ns: u64) -> crate::PathLog {
        let (bytes, n) = r
            .write(Vec::new(), now_ns, (S, 50 * S), &[Syscall::Openat], 0)
            .expect("vec write");
        let log = parse_paths(&bytes, Path::new("ring")).expect("a ring writes a capture file");
        assert_eq!(log.events.len() as u64, n);
        assert!(log.is_complete(), "{:?}", log.warnings);
        log
    }

    #[test]
    fn a_snapshot_holds_the_last_window_only() {
        let mut r = ring(3, DEFAULT_RING_MAX_BYTES);
        // One path every 10 ms for 20 s.
        for i in 0..2000u64 {
            push(&mut r, S + i * 10_000_000, &format!("/tmp/f.{i}"));
            r.expire(S + i * 10_000_000);
        }
        let now = S + 20 * S;
        let log = read(&r, now);
        assert_eq!(log.start_monotonic_ns, now - 3 * S);
        assert_eq!(log.start_realtime_ns, 50 * S + (now - 3 * S - S));
        assert!(log.events.iter().all(|e| e.time_ns >= now - 3 * S));
        assert_eq!(log.events.len(), 300, "3 s of one path per 10 ms");
        assert_eq!(
            log.events.last().map(|e| e.path.as_str()),
            Some("/tmp/f.1999")
        );
        // Memory holds the window and at most an eighth of it more.
        assert!(r.bytes() <= 340 * 35, "{}", r.bytes());
    }

    #[test]
    fn bytes_are_bounded_and_the_header_says_where_the_window_is_cut() {
        let mut r = ring(60, 64 * 1024);
        for i in 0..100_000u64 {
            push(
                &mut r,
                S + i * 100_000,
                "/usr/lib/x86_64-linux-gnu/libc.so.6",
            );
        }
        assert!(r.bytes() <= 64 * 1024, "{}", r.bytes());
        let now = S + 100_000 * 100_000;
        let (bytes, _) = r.write(Vec::new(), now, (S, 0), &[], 0).expect("vec write");
        assert!(bytes.len() <= 64 * 1024 + 64, "{}", bytes.len());
        let log = parse_paths(&bytes, Path::new("ring")).expect("parses");
        let first = log.events.first().expect("recent records kept").time_ns;
        assert!(
            log.start_monotonic_ns > S,
            "cut for space, not the capture start"
        );
        assert!(log.start_monotonic_ns <= first);
    }

    #[test]
    fn a_young_capture_starts_its_window_at_the_capture_start() {
        let mut r = ring(30, DEFAULT_RING_MAX_BYTES);
        push(&mut r, 2 * S, "a");
        let long = "x".repeat(400);
        push(&mut r, 3 * S, &long);
        let log = read(&r, 4 * S);
        assert_eq!(log.start_monotonic_ns, S);
        assert_eq!(log.events.len(), 2);
        assert!(log.events[1].truncated);
        assert_eq!(log.events[1].path.len(), PATH_CAP);
    }

    #[test]
    fn a_forgotten_window_starts_where_it_was_forgotten() {
        let mut r = ring(3600, DEFAULT_RING_MAX_BYTES);
        push(&mut r, 2 * S, "/before");
        r.forget(3 * S);
        assert_eq!(r.bytes(), 0);
        // One that comes late, from before the forget, stays out.
        push(&mut r, 3 * S - 1, "/late");
        push(&mut r, 4 * S, "/after");
        let log = read(&r, 5 * S);
        assert_eq!(log.start_monotonic_ns, 3 * S);
        let paths: Vec<&str> = log.events.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["/after"]);
    }
}
