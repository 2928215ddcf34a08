//! The WMI buffers an ETL file is made of: a 72-byte `WMI_BUFFER_HEADER`
//! (size on disk, bytes filled, the CPU, flags), then events, each 8-byte
//! aligned, until the filled offset or a `0xFFFFFFFF` pad marker. Buffers of
//! a compressed trace hold their events in MS-XCA plain LZ77 after the
//! header ([`crate::lz77`]). Each buffer holds the events of one CPU in time
//! order; [`read_buffers`] reads them all and merges them into one stream
//! in time order.
//!
//! Every size read from the file is checked against the bytes present;
//! a truncated or corrupt buffer ends with a warning, never a panic. This
//! module does not name events or decode payloads.

use crate::header::{self, EventHeader, HeaderProblem, Source};
use crate::lz77;
use slowlab_model::le::{u16_at, u32_at};

/// Length of `WMI_BUFFER_HEADER`.
pub const BUFFER_HEADER_LEN: usize = 0x48;
const FLAG_EVENTS_LOST: u16 = 0x0002;
const FLAG_BUFFER_LOST: u16 = 0x0004;
const FLAG_PROC_INDEX: u16 = 0x0020;
const FLAG_COMPRESSED: u16 = 0x0040;
/// Largest buffer ETW writes (16 MiB); a larger claim is corrupt.
const MAX_BUFFER_LEN: usize = 16 << 20;

/// One event of the file: its header and where its bytes are.
#[derive(Clone, Copy, Debug)]
pub struct Event {
    pub header: EventHeader,
    /// The CPU whose buffer held the event.
    pub cpu: u16,
    /// Index into [`Buffers::data`].
    pub buffer: u32,
    /// Offset of the event's header in its buffer.
    pub offset: u32,
}

/// What reading the buffers found wrong or worth saying.
#[derive(Clone, Debug, Default)]
pub struct BufferStats {
    pub buffers: u64,
    pub compressed_buffers: u64,
    /// Buffers flagged as having lost events or as following a lost buffer.
    pub buffers_with_losses: u64,
    /// Events with a header kind this reader does not know (skipped).
    pub unknown_header_events: u64,
    /// Bytes at the end of the file or of a buffer that could not be read.
    pub unreadable_bytes: u64,
    pub warnings: Vec<String>,
}

/// The buffers' bytes (decompressed) and the events in time order.
#[derive(Debug, Default)]
pub struct Buffers {
    pub data: Vec<Vec<u8>>,
    pub events: Vec<Event>,
    pub stats: BufferStats,
}

/// Reads every buffer of `file` and the events in them, merged in time order.
pub fn read_buffers(file: &[u8]) -> Buffers {
    let mut out = Buffers::default();
    // Decompressed bytes are bounded by the file's size times this (ETW's
    // buffers compress about 5:1), so a corrupt file cannot exhaust memory.
    let mut budget = file.len().saturating_mul(64).max(64 << 20);
    // The size of the trace's buffers, from its header event (in the
    // first buffer, which is never compressed): no compressed buffer
    // expands to more.
    let mut buffer_size: Option<usize> = None;
    let mut at = 0usize;
    while at < file.len() {
        let rest = &file[at..];
        if rest.len() < BUFFER_HEADER_LEN {
            out.stats.unreadable_bytes += rest.len() as u64;
            out.stats
                .warnings
                .push(format!("the file ends inside a buffer header ({} bytes at offset {at}); the trace was cut short", rest.len()));
            break;
        }
        let size = u32_at(rest, 0) as usize;
        let filled = u32_at(rest, 0x30) as usize;
        let flags = u16_at(rest, 0x34);
        if !(BUFFER_HEADER_LEN..=MAX_BUFFER_LEN).contains(&size) {
            out.stats.unreadable_bytes += rest.len() as u64;
            out.stats.warnings.push(format!(
                "a buffer at offset {at} claims {size} bytes; the rest of the file ({} bytes) is unreadable",
                rest.len()
            ));
            break;
        }
        let present = size.min(rest.len());
        if present < size {
            out.stats.unreadable_bytes += (size - present) as u64;
            out.stats.warnings.push(format!(
                "the last buffer is cut short ({present} of {size} bytes); its events up to the cut are read"
            ));
        }
        let cpu = if flags & FLAG_PROC_INDEX != 0 {
            u16_at(rest, 0x28)
        } else {
            rest[0x28] as u16
        };
        if flags & (FLAG_EVENTS_LOST | FLAG_BUFFER_LOST) != 0 {
            out.stats.buffers_with_losses += 1;
        }
        let data = if flags & FLAG_COMPRESSED != 0 {
            out.stats.compressed_buffers += 1;
            let limit = buffer_size.unwrap_or(MAX_BUFFER_LEN);
            if filled > limit {
                out.stats.unreadable_bytes += present as u64;
                out.stats.warnings.push(format!(
                    "a compressed buffer at offset {at} claims {filled} bytes, more than the trace's {limit}-byte buffers; its events are skipped"
                ));
                at += size;
                continue;
            }
            let max = filled.saturating_sub(BUFFER_HEADER_LEN);
            if max > budget {
                out.stats.warnings.push(format!(
                    "compressed buffers expand to more than {} MiB; the rest of the file is not read",
                    budget >> 20
                ));
                break;
            }
            match lz77::decompress(&rest[BUFFER_HEADER_LEN..present], max) {
                Ok(body) => {
                    budget -= body.len();
                    let mut buf = rest[..BUFFER_HEADER_LEN].to_vec();
                    buf.extend_from_slice(&body);
                    buf
                }
                Err(e) => {
                    out.stats.unreadable_bytes += present as u64;
                    out.stats
                        .warnings
                        .push(format!("a compressed buffer at offset {at} is corrupt ({e}); its events are skipped"));
                    at += size;
                    continue;
                }
            }
        } else {
            rest[..filled.clamp(BUFFER_HEADER_LEN, present)].to_vec()
        };
        out.stats.buffers += 1;
        let index = out.data.len() as u32;
        let first_event = out.events.len();
        split_events(&data, index, cpu, &mut out);
        if buffer_size.is_none() {
            buffer_size = header_buffer_size(&data, &out.events[first_event..]);
        }
        out.data.push(data);
        at += size;
    }
    // Each buffer is in time order; a stable sort merges them and keeps
    // events with equal times in file order.
    out.events.sort_by_key(|e| e.header.time);
    out
}

/// The `BufferSize` of the trace's header event (`EventTrace` header,
/// hook 0x0000: its payload starts with it) among `events` of buffer
/// `buf`, when it is there and sane.
fn header_buffer_size(buf: &[u8], events: &[Event]) -> Option<usize> {
    let e = events
        .iter()
        .find(|e| e.header.source == Source::Kernel { group: 0 } && e.header.opcode == 0)?;
    let payload = buf.get(e.offset as usize + e.header.header_len..)?;
    let size = u32_at(payload.get(..4)?, 0) as usize;
    (BUFFER_HEADER_LEN..=MAX_BUFFER_LEN)
        .contains(&size)
        .then_some(size)
}

/// Appends the events of one buffer to `out.events`.
fn split_events(buf: &[u8], index: u32, cpu: u16, out: &mut Buffers) {
    let mut at = BUFFER_HEADER_LEN;
    while at + 4 <= buf.len() {
        if u32_at(buf, at) == u32::MAX {
            break; // padding to the end of the buffer
        }
        match header::read(&buf[at..]) {
            Ok(header) => {
                out.events.push(Event {
                    header,
                    cpu,
                    buffer: index,
                    offset: at as u32,
                });
                at += header.size.next_multiple_of(8);
            }
            Err(HeaderProblem::UnknownKind { size, .. }) if size >= 4 => {
                out.stats.unknown_header_events += 1;
                at += size.next_multiple_of(8);
            }
            Err(problem) => {
                out.stats.unreadable_bytes += (buf.len() - at) as u64;
                out.stats.warnings.push(format!(
                    "a buffer of CPU {cpu} has a {} event at byte {at}; the rest of that buffer is skipped",
                    if problem == HeaderProblem::Truncated { "truncated" } else { "corrupt" }
                ));
                break;
            }
        }
    }
}
