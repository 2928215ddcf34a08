//! Where the fields of one attribute's records lie (from its
//! `sample_type`, `read_format` and `sample_id_all`), which attribute a
//! record belongs to (by the event id it carries), and the decoding of a
//! `PERF_RECORD_SAMPLE` body in place, reading only the fields the model
//! uses.
//!
//! It does not walk the data section (`records` does) and gives `None`,
//! never a panic, for a body shorter than its fields say.

use super::{rtype, Endian};
use crate::intern::FxMap;

/// `perf_event_attr.sample_type` bits (`include/uapi/linux/perf_event.h`).
pub(crate) mod sample {
    pub const IP: u64 = 1 << 0;
    pub const TID: u64 = 1 << 1;
    pub const TIME: u64 = 1 << 2;
    pub const ADDR: u64 = 1 << 3;
    pub const READ: u64 = 1 << 4;
    pub const CALLCHAIN: u64 = 1 << 5;
    pub const ID: u64 = 1 << 6;
    pub const CPU: u64 = 1 << 7;
    pub const PERIOD: u64 = 1 << 8;
    pub const STREAM_ID: u64 = 1 << 9;
    pub const RAW: u64 = 1 << 10;
    pub const IDENTIFIER: u64 = 1 << 16;
}

/// `perf_event_attr.read_format` bits.
mod read_format {
    pub const TOTAL_TIME_ENABLED: u64 = 1 << 0;
    pub const TOTAL_TIME_RUNNING: u64 = 1 << 1;
    pub const ID: u64 = 1 << 2;
    pub const GROUP: u64 = 1 << 3;
    pub const LOST: u64 = 1 << 4;
}

/// Where the fields of one attribute's records lie.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Layout {
    pub sample_type: u64,
    read_format: u64,
    /// Offsets of the fixed-position fields of a SAMPLE body (`NONE` when
    /// absent), and where the variable part (READ, CALLCHAIN, RAW) starts.
    fixed: Fixed,
    /// Offset of the time in a SAMPLE body.
    sample_time: Option<usize>,
    /// Offset of the event id in a SAMPLE body.
    sample_id: Option<usize>,
    /// Distance of the time from the end of a non-sample body
    /// (`sample_id_all` trailer).
    trailer_time: Option<usize>,
    /// Distance of the event id from the end of a non-sample body.
    trailer_id: Option<usize>,
}

impl Layout {
    pub fn new(sample_type: u64, read_format: u64, sample_id_all: bool) -> Layout {
        let has = |bit| sample_type & bit != 0;
        // SAMPLE: IDENTIFIER, IP, TID, TIME, ADDR, ID, STREAM_ID, …
        let mut off = 0;
        let mut sample_id = None;
        if has(sample::IDENTIFIER) {
            sample_id = Some(0);
            off += 8;
        }
        for bit in [sample::IP, sample::TID] {
            if has(bit) {
                off += 8;
            }
        }
        let sample_time = has(sample::TIME).then_some(off);
        if has(sample::TIME) {
            off += 8;
        }
        if has(sample::ADDR) {
            off += 8;
        }
        if sample_id.is_none() && has(sample::ID) {
            sample_id = Some(off);
        }
        // Non-sample trailer: TID, TIME, ID, STREAM_ID, CPU, IDENTIFIER.
        let (mut trailer_time, mut trailer_id) = (None, None);
        if sample_id_all {
            let fields = [
                sample::TID,
                sample::TIME,
                sample::ID,
                sample::STREAM_ID,
                sample::CPU,
                sample::IDENTIFIER,
            ];
            let len = fields.iter().filter(|&&b| has(b)).count() * 8;
            let mut pos = 0;
            for bit in fields {
                if !has(bit) {
                    continue;
                }
                let from_end = len - pos;
                match bit {
                    sample::TIME => trailer_time = Some(from_end),
                    sample::IDENTIFIER => trailer_id = Some(from_end),
                    sample::ID if !has(sample::IDENTIFIER) => trailer_id = Some(from_end),
                    _ => {}
                }
                pos += 8;
            }
        }
        Layout {
            sample_type,
            read_format,
            fixed: Fixed::new(sample_type),
            sample_time,
            sample_id,
            trailer_time,
            trailer_id,
        }
    }

    /// The id that says which attribute a record of type `ty` belongs to.
    fn id(&self, e: Endian, ty: u32, body: &[u8]) -> Option<u64> {
        if ty == rtype::SAMPLE {
            e.u64(body, self.sample_id?)
        } else {
            e.u64(body, body.len().checked_sub(self.trailer_id?)?)
        }
    }

    /// The record's time, if the attribute records it.
    pub fn time(&self, e: Endian, ty: u32, body: &[u8]) -> Option<u64> {
        if ty == rtype::SAMPLE {
            e.u64(body, self.sample_time?)
        } else {
            e.u64(body, body.len().checked_sub(self.trailer_time?)?)
        }
    }
}

/// Finds the attribute of a record.
pub(crate) struct AttrOf {
    layouts: Vec<Layout>,
    by_id: FxMap<u64, u16>,
    /// Where the id is read: all attributes share it (`linux-perf-data`
    /// refuses files where they do not and the id cannot be found).
    id_layout: Option<Layout>,
}

impl AttrOf {
    /// `attrs`: the layout and event ids of each attribute, in file order.
    pub fn new(attrs: Vec<(Layout, Vec<u64>)>) -> AttrOf {
        let mut by_id = FxMap::default();
        for (i, (_, ids)) in attrs.iter().enumerate() {
            for &id in ids {
                by_id.insert(id, i as u16);
            }
        }
        let layouts: Vec<Layout> = attrs.into_iter().map(|(l, _)| l).collect();
        let id_layout = if layouts.len() <= 1 {
            None
        } else if layouts
            .iter()
            .all(|l| l.sample_id == layouts[0].sample_id && l.trailer_id == layouts[0].trailer_id)
        {
            Some(layouts[0])
        } else {
            // Mixed layouts: perf then requires IDENTIFIER everywhere,
            // which is first in samples and last in the trailer.
            Some(Layout {
                sample_id: Some(0),
                trailer_id: Some(8),
                ..layouts[0]
            })
        };
        AttrOf {
            layouts,
            by_id,
            id_layout,
        }
    }

    pub fn layout(&self, attr: usize) -> Option<&Layout> {
        self.layouts.get(attr)
    }

    #[inline]
    pub(super) fn attr(&self, e: Endian, ty: u32, body: &[u8]) -> usize {
        match &self.id_layout {
            None => 0,
            Some(l) => l
                .id(e, ty, body)
                .and_then(|id| self.by_id.get(&id))
                .map_or(0, |&a| a as usize),
        }
    }
}

const NONE: u8 = u8::MAX;

/// Offsets of a SAMPLE's fields that come before the first variable-size
/// one, so that decoding is a few loads after one length check.
#[derive(Clone, Copy, Debug)]
struct Fixed {
    ip: u8,
    tid: u8,
    time: u8,
    addr: u8,
    cpu: u8,
    period: u8,
    /// Where READ / CALLCHAIN / RAW start.
    end: u8,
}

impl Fixed {
    fn new(st: u64) -> Fixed {
        let has = |bit| st & bit != 0;
        let mut off = 0u8;
        let mut field = |bit: u64| -> u8 {
            if has(bit) {
                off += 8;
                off - 8
            } else {
                NONE
            }
        };
        let _identifier = field(sample::IDENTIFIER);
        let ip = field(sample::IP);
        let tid = field(sample::TID);
        let time = field(sample::TIME);
        let addr = field(sample::ADDR);
        let _id = field(sample::ID);
        let _stream = field(sample::STREAM_ID);
        let cpu = field(sample::CPU);
        let period = field(sample::PERIOD);
        Fixed {
            ip,
            tid,
            time,
            addr,
            cpu,
            period,
            end: off,
        }
    }
}

/// The fields of a sample that the model uses, borrowed from the record.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Sample<'a> {
    pub ip: Option<u64>,
    pub pid: Option<i32>,
    pub tid: Option<i32>,
    pub time: Option<u64>,
    pub addr: Option<u64>,
    pub cpu: Option<u32>,
    pub period: Option<u64>,
    /// The callchain's raw bytes (`nr` u64 addresses).
    pub callchain: Option<&'a [u8]>,
    pub raw: Option<&'a [u8]>,
}

/// Decodes a SAMPLE body by the attribute's layout. `None` when the body is
/// shorter than its fields say.
pub(crate) fn parse_sample<'a>(e: Endian, l: &Layout, body: &'a [u8]) -> Option<Sample<'a>> {
    let st = l.sample_type;
    let has = |bit| st & bit != 0;
    let f = &l.fixed;
    let mut p = f.end as usize;
    let head = body.get(..p)?;
    let u64_at = |off: u8| (off != NONE).then(|| e.u64(head, off as usize)).flatten();
    let u32_at = |off: u8, plus: usize| {
        (off != NONE)
            .then(|| e.u32(head, off as usize + plus))
            .flatten()
    };
    let mut s = Sample {
        ip: u64_at(f.ip),
        pid: u32_at(f.tid, 0).map(|v| v as i32),
        tid: u32_at(f.tid, 4).map(|v| v as i32),
        time: u64_at(f.time),
        addr: u64_at(f.addr),
        cpu: u32_at(f.cpu, 0),
        period: u64_at(f.period),
        callchain: None,
        raw: None,
    };
    if has(sample::READ) {
        p = p.checked_add(read_size(e, l.read_format, body, p)?)?;
    }
    if has(sample::CALLCHAIN) {
        let nr = usize::try_from(e.u64(body, p)?).ok()?;
        p += 8;
        let end = p.checked_add(nr.checked_mul(8)?)?;
        s.callchain = Some(body.get(p..end)?);
        p = end;
    }
    if has(sample::RAW) {
        let size = e.u32(body, p)? as usize;
        p += 4;
        s.raw = Some(body.get(p..p.checked_add(size)?)?);
    }
    Some(s)
}

/// Size of a sample's `struct read_format` at `body[p..]`.
fn read_size(e: Endian, rf: u64, body: &[u8], p: usize) -> Option<usize> {
    let has = |bit| rf & bit != 0;
    let times = has(read_format::TOTAL_TIME_ENABLED) as usize
        + has(read_format::TOTAL_TIME_RUNNING) as usize;
    let per_value = 1 + has(read_format::ID) as usize + has(read_format::LOST) as usize;
    if has(read_format::GROUP) {
        let nr = usize::try_from(e.u64(body, p)?).ok()?;
        Some(8 * (1 + times) + nr.checked_mul(8 * per_value)?)
    } else {
        Some(8 * (times + per_value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_finds_time_and_id_in_the_trailer() {
        let st = sample::TID | sample::TIME | sample::CPU | sample::IDENTIFIER;
        let l = Layout::new(st, 0, true);
        // trailer: pid/tid, time, cpu, identifier
        let mut body = vec![0u8; 16];
        for v in [0x0000_0002_0000_0001u64, 555, 3, 42] {
            body.extend_from_slice(&v.to_le_bytes());
        }
        let e = Endian::default();
        assert_eq!(l.time(e, rtype::COMM, &body), Some(555));
        assert_eq!(l.id(e, rtype::COMM, &body), Some(42));
    }

    #[test]
    fn read_format_group_is_skipped() {
        // GROUP | ID: nr, then (value, id) × nr.
        let rf = read_format::GROUP | read_format::ID;
        let mut b = Vec::new();
        b.extend_from_slice(&2u64.to_le_bytes());
        b.extend_from_slice(&[0u8; 32]);
        assert_eq!(read_size(Endian::default(), rf, &b, 0), Some(40));
        assert_eq!(
            read_size(Endian::default(), read_format::ID, &b, 0),
            Some(16)
        );
    }
}
