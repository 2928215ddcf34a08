//! The header in front of each event in a WMI buffer, in all the kinds ETW
//! writes: the classic kernel's system, compact and perfinfo headers (which
//! name the event by a 16-bit hook id, group << 8 | opcode), the MOF-era
//! full and instance headers (a provider GUID and an opcode), and the
//! manifest/TraceLogging `EVENT_HEADER` (a GUID and an event descriptor,
//! with extended data items). Each kind has a 32-bit and a 64-bit variant;
//! the variant is the pointer size of the event's payload.
//!
//! This module reads one header and says where its payload is. It does not
//! name events ([`crate::names`]) or decode payloads ([`crate::kernel`]).

use crate::guid::Guid;
use slowlab_model::le::{get_i64, get_u16, get_u32};

/// Marker bit that every ETW event header has in its fourth byte.
const TRACE_HEADER_FLAG: u8 = 0x80;
/// `EVENT_HEADER.Flags`: extended data items follow the header.
const EVENT_HEADER_FLAG_EXTENDED_INFO: u16 = 0x0001;

/// Who wrote an event and which of its events it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// A classic kernel event: hook id `group << 8 | opcode`.
    Kernel { group: u8 },
    /// A MOF-era event with a provider (task) GUID (full or instance header).
    Classic { guid: Guid },
    /// A manifest-based or TraceLogging event (`EVENT_HEADER`).
    Manifest { guid: Guid, id: u16, task: u16 },
}

/// One event's header, decoded.
#[derive(Clone, Copy, Debug)]
pub struct EventHeader {
    pub source: Source,
    pub opcode: u8,
    pub version: u16,
    /// Raw timestamp on the trace's clock.
    pub time: i64,
    /// `None` when the header has no thread (perfinfo headers) or says -1.
    pub tid: Option<u32>,
    pub pid: Option<u32>,
    /// Pointer size of the payload (4 or 8).
    pub pointer_size: u8,
    /// Header length: the payload (or extended data) starts here.
    pub header_len: usize,
    /// Total length of the event (header, extended data, payload), before
    /// the padding to 8 bytes.
    pub size: usize,
    /// Extended data items (manifest events only): the range within the event.
    pub ext: Option<(usize, usize)>,
}

/// Why an event header could not be read; the rest of its buffer is skipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderProblem {
    /// The buffer ends inside the header or the event.
    Truncated,
    /// A header kind this reader does not know (the size is still known, so
    /// the event can be skipped).
    UnknownKind { kind: u8, size: usize },
    /// A size smaller than the header, or no marker bit: the buffer is corrupt.
    Corrupt,
}

/// A field of a header, or `Truncated` when the buffer ends before it.
fn t<T>(o: Option<T>) -> Result<T, HeaderProblem> {
    o.ok_or(HeaderProblem::Truncated)
}

fn id(v: u32) -> Option<u32> {
    (v != u32::MAX).then_some(v)
}

/// Reads the event header at the start of `b` (the rest of the buffer).
pub fn read(b: &[u8]) -> Result<EventHeader, HeaderProblem> {
    use HeaderProblem::*;
    if b.len() < 4 {
        return Err(Truncated);
    }
    let kind = b[2];
    let marker = b[3];
    if marker & TRACE_HEADER_FLAG == 0 {
        return Err(Corrupt);
    }
    let h = match kind {
        // SYSTEM_TRACE_HEADER (system: 32 bytes with CPU times; compact: 24)
        // and PERFINFO_TRACE_HEADER (16 bytes, no thread or process).
        0x01..=0x04 | 0x10 | 0x11 => {
            let size = t(get_u16(b, 4))? as usize;
            let hook = t(get_u16(b, 6))?;
            let version = t(get_u16(b, 0))?;
            let (header_len, tid, pid, time) = match kind {
                0x01 | 0x02 => (
                    32,
                    id(t(get_u32(b, 8))?),
                    id(t(get_u32(b, 12))?),
                    t(get_i64(b, 16))?,
                ),
                0x03 | 0x04 => (
                    24,
                    id(t(get_u32(b, 8))?),
                    id(t(get_u32(b, 12))?),
                    t(get_i64(b, 16))?,
                ),
                _ => (16, None, None, t(get_i64(b, 8))?),
            };
            EventHeader {
                source: Source::Kernel {
                    group: (hook >> 8) as u8,
                },
                opcode: hook as u8,
                version,
                time,
                tid,
                pid,
                pointer_size: if matches!(kind, 0x01 | 0x03 | 0x10) {
                    4
                } else {
                    8
                },
                header_len,
                size,
                ext: None,
            }
        }
        // EVENT_TRACE_HEADER (full, 48 bytes) and the instance header with
        // its GUIDs inline (72 bytes).
        0x0a | 0x14 | 0x0b | 0x15 => {
            let size = t(get_u16(b, 0))? as usize;
            let guid = Guid::from_le(t(b.get(24..40))?);
            EventHeader {
                source: Source::Classic { guid },
                opcode: b.get(4).copied().ok_or(Truncated)?,
                version: t(get_u16(b, 6))?,
                time: t(get_i64(b, 16))?,
                tid: id(t(get_u32(b, 8))?),
                pid: id(t(get_u32(b, 12))?),
                pointer_size: if matches!(kind, 0x0a | 0x0b) { 4 } else { 8 },
                header_len: if matches!(kind, 0x0a | 0x14) { 48 } else { 72 },
                size,
                ext: None,
            }
        }
        // EVENT_HEADER (80 bytes), then extended data items, then the payload.
        0x12 | 0x13 => {
            let size = t(get_u16(b, 0))? as usize;
            let flags = t(get_u16(b, 4))?;
            let guid = Guid::from_le(t(b.get(24..40))?);
            let ext = if flags & EVENT_HEADER_FLAG_EXTENDED_INFO != 0 {
                Some((
                    80,
                    ext_items_end(b.get(..size.min(b.len())).ok_or(Truncated)?, 80)?,
                ))
            } else {
                None
            };
            EventHeader {
                source: Source::Manifest {
                    guid,
                    id: t(get_u16(b, 40))?,
                    task: t(get_u16(b, 46))?,
                },
                opcode: *b.get(45).ok_or(Truncated)?,
                version: *b.get(42).ok_or(Truncated)? as u16,
                time: t(get_i64(b, 16))?,
                tid: id(t(get_u32(b, 8))?),
                pid: id(t(get_u32(b, 12))?),
                pointer_size: if kind == 0x12 { 4 } else { 8 },
                header_len: ext.map_or(80, |(_, end)| end),
                size,
                ext,
            }
        }
        _ => {
            let size = u16::from_le_bytes([b[0], b[1]]) as usize;
            return Err(UnknownKind { kind, size });
        }
    };
    if h.size < h.header_len {
        return Err(Corrupt);
    }
    if h.size > b.len() {
        return Err(Truncated);
    }
    Ok(h)
}

/// The end of the extended data items that start at `at`: each is
/// `{u16 size (8-aligned, with this header), u16 type, u16 more, u16 data
/// size}` then its data; the `more` bit says another item follows.
fn ext_items_end(event: &[u8], mut at: usize) -> Result<usize, HeaderProblem> {
    loop {
        let size = get_u16(event, at).ok_or(HeaderProblem::Truncated)? as usize;
        let more = get_u16(event, at + 4).ok_or(HeaderProblem::Truncated)?;
        if size < 8 || at + size > event.len() {
            return Err(HeaderProblem::Corrupt);
        }
        at += size;
        if more & 1 == 0 {
            return Ok(at);
        }
    }
}

/// The extended data items of an event: `(type, data)` pairs.
pub fn ext_items(ext: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut at = 0usize;
    std::iter::from_fn(move || {
        let size = get_u16(ext, at)? as usize;
        let kind = get_u16(ext, at + 2)?;
        let len = get_u16(ext, at + 6)? as usize;
        let data = ext.get(at + 8..at + 8 + len)?;
        if size < 8 {
            return None;
        }
        at += size;
        Some((kind, data))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn system64(hook: u16, size: u16, tid: u32, pid: u32, time: i64) -> Vec<u8> {
        let mut b = vec![2, 0, 0x02, 0xc0];
        b.extend_from_slice(&size.to_le_bytes());
        b.extend_from_slice(&hook.to_le_bytes());
        b.extend_from_slice(&tid.to_le_bytes());
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(&time.to_le_bytes());
        b.extend_from_slice(&[0; 8]);
        b.resize(size as usize, 0xaa);
        b
    }

    #[test]
    fn a_system_header_names_group_and_opcode() {
        let b = system64(0x0324, 40, 7, u32::MAX, 1234);
        let h = read(&b).unwrap();
        assert_eq!(h.source, Source::Kernel { group: 3 });
        assert_eq!(h.opcode, 0x24);
        assert_eq!((h.tid, h.pid, h.time), (Some(7), None, 1234));
        assert_eq!((h.header_len, h.size, h.pointer_size), (32, 40, 8));
    }

    #[test]
    fn short_or_unmarked_headers_are_problems_not_panics() {
        let b = system64(0x0324, 40, 7, 1, 1);
        for cut in 0..b.len() {
            assert!(read(&b[..cut]).is_err(), "cut at {cut}");
        }
        let mut unmarked = b.clone();
        unmarked[3] = 0;
        assert_eq!(read(&unmarked).unwrap_err(), HeaderProblem::Corrupt);
        let mut too_small = b;
        too_small[4] = 8;
        assert_eq!(read(&too_small).unwrap_err(), HeaderProblem::Corrupt);
    }
}
