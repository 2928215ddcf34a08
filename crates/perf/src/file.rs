//! Opens a perf.data file for reading: maps it into memory, checks the
//! header against the file's real size, and repairs what an unfinished
//! `perf record` leaves behind (a data size of zero, no feature sections) so
//! that the parser reads every complete record and nothing past the end.
//!
//! It does not parse records; `records` and `reader` do.

use std::io::{Read, Seek, SeekFrom};

use crate::PerfError;

/// Size of `struct perf_file_header` up to the end of the feature bitmap.
pub(crate) const HEADER_LEN: usize = 104;
const PIPE_HEADER_LEN: u64 = 16;

/// What the header check found and changed.
#[derive(Debug, Default)]
pub(crate) struct Repair {
    /// The header's data size was zero or ran past the end of the file.
    pub unfinished: bool,
    /// Bytes after the last complete record that were ignored.
    pub truncated_bytes: u64,
    /// The data size the header claims, when the file ends before it (a finished file
    /// cut short); `None` for a header never finished (a size of zero).
    pub cut_short: Option<u64>,
    /// Feature sections were dropped because they pointed outside the file.
    pub dropped_features: bool,
    /// The file is in pipe format (`perf record -o -`).
    pub pipe: bool,
    /// Where the data section lies (after the repair); for a pipe, its
    /// records after the leading metadata.
    pub data_offset: u64,
    pub data_size: u64,
}

/// A `Read + Seek` view of the mapped file with a patched header.
pub(crate) struct PatchedFile<'a> {
    data: &'a [u8],
    header: [u8; HEADER_LEN],
    pos: u64,
}

impl<'a> PatchedFile<'a> {
    /// The bytes from `pos` on, with the header patch applied.
    fn byte_at(&self, pos: usize) -> u8 {
        if pos < HEADER_LEN {
            self.header[pos]
        } else {
            self.data[pos]
        }
    }
}

impl Read for PatchedFile<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let len = self.data.len() as u64;
        if self.pos >= len {
            return Ok(0);
        }
        let start = self.pos as usize;
        let n = buf.len().min(self.data.len() - start);
        if start < HEADER_LEN {
            for (i, b) in buf[..n].iter_mut().enumerate() {
                *b = self.byte_at(start + i);
            }
        } else {
            buf[..n].copy_from_slice(&self.data[start..start + n]);
        }
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for PatchedFile<'_> {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        let new = match pos {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => (self.data.len() as u64).checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        match new {
            Some(p) => {
                self.pos = p;
                Ok(p)
            }
            None => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "seek before the start of the file",
            )),
        }
    }
}

#[derive(Clone, Copy)]
struct Endian {
    big: bool,
}

impl Endian {
    /// The `u64` at `off`; 0 past the end (callers check lengths first;
    /// this only keeps a mistake from becoming a panic).
    fn u64(self, b: &[u8], off: usize) -> u64 {
        let Some(a) = off
            .checked_add(8)
            .and_then(|end| b.get(off..end))
            .and_then(|s| <[u8; 8]>::try_from(s).ok())
        else {
            return 0;
        };
        if self.big {
            u64::from_be_bytes(a)
        } else {
            u64::from_le_bytes(a)
        }
    }
    fn u32(self, b: &[u8], off: usize) -> u32 {
        let Some(a) = off
            .checked_add(4)
            .and_then(|end| b.get(off..end))
            .and_then(|s| <[u8; 4]>::try_from(s).ok())
        else {
            return 0;
        };
        if self.big {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        }
    }
    fn u16(self, b: &[u8], off: usize) -> u16 {
        let Some(a) = off
            .checked_add(2)
            .and_then(|end| b.get(off..end))
            .and_then(|s| <[u8; 2]>::try_from(s).ok())
        else {
            return 0;
        };
        if self.big {
            u16::from_be_bytes(a)
        } else {
            u16::from_le_bytes(a)
        }
    }
    fn put_u64(self, b: &mut [u8], off: usize, v: u64) {
        let a = if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        b[off..off + 8].copy_from_slice(&a);
    }
}

/// Checks the header of `data` and returns a patched reader over it.
pub(crate) fn open(data: &[u8]) -> Result<(PatchedFile<'_>, Repair), PerfError> {
    if data.is_empty() {
        return Err(PerfError::Empty);
    }
    if data.len() < 8 {
        return Err(PerfError::NotPerfData(
            "shorter than a perf.data header".into(),
        ));
    }
    let endian = match &data[..8] {
        b"PERFILE2" => Endian { big: false },
        b"2ELIFREP" => Endian { big: true },
        b"PERFFILE" => {
            return Err(PerfError::NotPerfData(
                "old perf.data format version 1 is not supported; record again with a perf newer than 2011".into(),
            ))
        }
        _ => {
            return Err(PerfError::NotPerfData(
                "no perf.data magic (PERFILE2) at the start of the file".into(),
            ))
        }
    };
    let mut repair = Repair::default();
    if data.len() >= 16 && endian.u64(data, 8) == PIPE_HEADER_LEN {
        if !pipe_event_desc_ok(data, endian) {
            return Err(PerfError::Header(
                "the event descriptions claim more events or ids than they hold (a damaged file)"
                    .into(),
            ));
        }
        repair.pipe = true;
        // The records after the stream's leading metadata, which
        // `linux-perf-data` parses as it opens it.
        repair.data_offset = pipe_records_start(data, endian) as u64;
        repair.data_size = data.len() as u64 - repair.data_offset;
        let mut header = [0u8; HEADER_LEN];
        let n = data.len().min(HEADER_LEN);
        header[..n].copy_from_slice(&data[..n]);
        return Ok((
            PatchedFile {
                data,
                header,
                pos: 0,
            },
            repair,
        ));
    }
    if data.len() < HEADER_LEN {
        return Err(PerfError::NotPerfData(format!(
            "the file is {} bytes, shorter than a perf.data header ({HEADER_LEN} bytes)",
            data.len()
        )));
    }
    let file_len = data.len() as u64;
    let mut header = [0u8; HEADER_LEN];
    header.copy_from_slice(&data[..HEADER_LEN]);

    let attr_size = endian.u64(data, 16);
    let attrs_off = endian.u64(data, 24);
    let attrs_size = endian.u64(data, 32);
    if !(64..=4096).contains(&attr_size)
        || attrs_size == 0
        || attrs_off
            .checked_add(attrs_size)
            .is_none_or(|e| e > file_len)
    {
        return Err(PerfError::NotPerfData(
            "the event attribute section is missing or lies outside the file".into(),
        ));
    }
    let data_off = endian.u64(data, 40);
    let data_size = endian.u64(data, 48);
    if data_off < HEADER_LEN as u64 || data_off > file_len {
        return Err(PerfError::NotPerfData(
            "the data section starts outside the file".into(),
        ));
    }
    let data_end = data_off.checked_add(data_size);
    let features_ok = |end: u64| -> bool {
        // The feature-section table follows the data section: one
        // (offset, size) pair per feature bit that is set.
        let nfeat: u64 = (72..HEADER_LEN)
            .step_by(8)
            .map(|o| endian.u64(data, o).count_ones() as u64)
            .sum();
        let table_end = end + nfeat * 16;
        if table_end > file_len {
            return false;
        }
        // `linux-perf-data` copies every section: together they may not
        // claim more than the file holds (real sections never overlap).
        let mut total = 0u64;
        (0..nfeat).all(|i| {
            let o = (end + i * 16) as usize;
            let off = endian.u64(data, o);
            let size = endian.u64(data, o + 8);
            total = total.saturating_add(size);
            off.checked_add(size).is_some_and(|e| e <= file_len) && total <= file_len
        })
    };
    repair.data_offset = data_off;
    repair.data_size = data_size;
    match data_end {
        Some(end) if data_size > 0 && end <= file_len => {
            if !features_ok(end) || !event_desc_ok(data, &header, endian, end) {
                repair.dropped_features = true;
                for o in (72..HEADER_LEN).step_by(8) {
                    endian.put_u64(&mut header, o, 0);
                }
            }
        }
        _ => {
            // `perf record` writes the real data size and the feature
            // sections only when it finishes; it was killed. Read every
            // complete record up to the end of the file, as `perf report`
            // does.
            repair.unfinished = true;
            repair.cut_short = (data_size > 0).then_some(data_size);
            let mut pos = data_off;
            while pos + 8 <= file_len {
                let size = endian.u16(data, pos as usize + 6) as u64;
                if size < 8 || pos + size > file_len {
                    break;
                }
                pos += size;
            }
            repair.truncated_bytes = file_len - pos;
            repair.data_size = pos - data_off;
            endian.put_u64(&mut header, 48, pos - data_off);
            for o in (72..HEADER_LEN).step_by(8) {
                endian.put_u64(&mut header, o, 0);
            }
        }
    }
    // The obsolete event-types section: its entries point at id lists that
    // `linux-perf-data` reserves room for before reading.
    if !event_types_ok(data, endian, attr_size) {
        endian.put_u64(&mut header, 64, 0);
    }
    Ok((
        PatchedFile {
            data,
            header,
            pos: 0,
        },
        repair,
    ))
}

/// Feature bit of `HEADER_EVENT_DESC`.
const EVENT_DESC: usize = 12;

/// Whether the event-description feature section (if the header lists
/// one) holds together: every count in it fits in the bytes that follow.
/// `linux-perf-data` reserves memory by these counts before reading, and a
/// damaged count would make it ask for gigabytes (an abort, not a panic).
fn event_desc_ok(data: &[u8], header: &[u8; HEADER_LEN], endian: Endian, features_at: u64) -> bool {
    let bit = |i: usize| endian.u64(header, 72 + (i / 64) * 8) >> (i % 64) & 1 == 1;
    if !bit(EVENT_DESC) {
        return true;
    }
    // The feature table has one (offset, size) per set bit, in bit order.
    let index = (0..EVENT_DESC).filter(|&i| bit(i)).count() as u64;
    let entry = (features_at + index * 16) as usize;
    let (off, size) = (endian.u64(data, entry), endian.u64(data, entry + 8));
    usize::try_from(off)
        .ok()
        .zip(usize::try_from(size).ok())
        .and_then(|(o, n)| data.get(o..o.checked_add(n)?))
        .is_some_and(|d| event_desc_section_ok(d, endian))
}

/// Record types of a pipe-mode stream's leading metadata records.
const PIPE_HEADER_ATTR: u32 = 64;
const PIPE_HEADER_FEATURE: u32 = 80;

/// Where the records of a pipe-mode stream start: after its leading
/// attribute and feature records (as `linux-perf-data` reads them).
fn pipe_records_start(data: &[u8], endian: Endian) -> usize {
    let mut pos = PIPE_HEADER_LEN as usize;
    while pos + 8 <= data.len() {
        let size = usize::from(endian.u16(data, pos + 6));
        let ty = endian.u32(data, pos);
        if size < 8
            || pos + size > data.len()
            || !matches!(ty, PIPE_HEADER_ATTR | PIPE_HEADER_FEATURE)
        {
            break;
        }
        pos += size;
    }
    pos.min(data.len())
}

/// [`event_desc_ok`] for a pipe-mode stream (`perf record -o -`): its
/// feature sections come as `HEADER_FEATURE` records among the leading
/// metadata records, which `linux-perf-data` parses as it opens the
/// stream; an event-description record among them must hold together.
fn pipe_event_desc_ok(data: &[u8], endian: Endian) -> bool {
    let mut pos = PIPE_HEADER_LEN as usize;
    while pos + 8 <= data.len() {
        let ty = endian.u32(data, pos);
        let size = usize::from(endian.u16(data, pos + 6));
        let Some(body) = data.get(pos + 8..pos + size.max(8)) else {
            return true; // `linux-perf-data` stops at a record cut short
        };
        match ty {
            PIPE_HEADER_ATTR => {}
            // The body: u64 feature id, then the section.
            PIPE_HEADER_FEATURE => {
                let is_event_desc = endian.u64(body, 0) as u32 == EVENT_DESC as u32;
                if is_event_desc && !event_desc_section_ok(body.get(8..).unwrap_or(&[]), endian) {
                    return false;
                }
            }
            _ => return true,
        }
        if size < 8 {
            return true;
        }
        pos += size;
    }
    true
}

/// Whether an event-description section holds together: every count in
/// it fits in the bytes that follow.
fn event_desc_section_ok(d: &[u8], endian: Endian) -> bool {
    let u32_at = |p: usize| -> Option<usize> {
        let b = d.get(p..p.checked_add(4)?)?;
        let a = [b[0], b[1], b[2], b[3]];
        Some(if endian.big {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        } as usize)
    };
    let (Some(nr), Some(attr_size)) = (u32_at(0), u32_at(4)) else {
        return false;
    };
    if !(64..=4096).contains(&attr_size) {
        return false;
    }
    let mut p = 8usize;
    // Each event takes at least attr_size + 8 bytes: the loop ends with
    // the section.
    for _ in 0..nr {
        let Some(read) = attr_bytes_read(d, p, attr_size as u64, endian) else {
            return false;
        };
        let Some(nr_ids) = u32_at(p + read) else {
            return false;
        };
        p += read + 4;
        let Some(len) = u32_at(p) else { return false };
        p += 4 + len;
        p = match nr_ids.checked_mul(8).and_then(|n| p.checked_add(n)) {
            Some(end) if end <= d.len() => end,
            _ => return false,
        };
    }
    true
}

/// Whether the header's event-types section (if any) and the id lists its
/// entries point at lie inside the file.
fn event_types_ok(data: &[u8], endian: Endian, attr_size: u64) -> bool {
    let (off, size) = (endian.u64(data, 56), endian.u64(data, 64));
    if size == 0 {
        return true;
    }
    let len = data.len() as u64;
    if off.checked_add(size).is_none_or(|e| e > len) {
        return false;
    }
    let mut at = off as usize;
    (0..size / (attr_size + 16)).all(|_| {
        let Some(read) = attr_bytes_read(data, at, attr_size, endian) else {
            return false;
        };
        at += read;
        let (o, n) = (endian.u64(data, at), endian.u64(data, at + 8));
        at += 16;
        o.checked_add(n).is_some_and(|e| e <= len)
    })
}

/// Sizes of `struct perf_event_attr` through its versions (`PERF_ATTR_SIZE_VER0..7`).
const ATTR_VERSIONS: [u64; 8] = [64, 72, 80, 96, 104, 112, 120, 128];

/// How many bytes `linux-perf-data` consumes for the attribute at `at` of
/// a section whose entries are `attr_size` bytes apart: it reads the
/// fields of the largest version the attribute's own size field reaches,
/// then skips `attr_size` minus that size field. With a size between two
/// versions, that is less than `attr_size`, and what follows (the id
/// counts it then reserves room for) is read from there. `None` where it
/// stops with an error instead.
fn attr_bytes_read(b: &[u8], at: usize, attr_size: u64, endian: Endian) -> Option<usize> {
    let own = u64::from(endian.u32(b, at.checked_add(4)?));
    if own < ATTR_VERSIONS[0] || own > attr_size || at.checked_add(attr_size as usize)? > b.len() {
        return None;
    }
    let read = match ATTR_VERSIONS.iter().rev().find(|&&v| v <= own) {
        Some(&v) if v < ATTR_VERSIONS[7] => v,
        _ => own,
    };
    usize::try_from(attr_size - own + read).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_garbage_are_errors() {
        assert!(matches!(open(b""), Err(PerfError::Empty)));
        assert!(matches!(open(b"hello"), Err(PerfError::NotPerfData(_))));
        assert!(matches!(open(&[7u8; 4096]), Err(PerfError::NotPerfData(_))));
        let mut short = b"PERFILE2".to_vec();
        short.extend_from_slice(&[0; 40]);
        assert!(matches!(open(&short), Err(PerfError::NotPerfData(_))));
    }

    #[test]
    fn patched_reader_reads_and_seeks() {
        let mut data = vec![0u8; 200];
        data[..8].copy_from_slice(b"PERFILE2");
        let mut f = PatchedFile {
            data: &data,
            header: [1u8; HEADER_LEN],
            pos: 0,
        };
        let mut buf = [0u8; 110];
        assert_eq!(f.read(&mut buf).unwrap(), 110);
        assert_eq!(buf[0], 1);
        assert_eq!(buf[105], 0);
        assert_eq!(f.seek(SeekFrom::End(-10)).unwrap(), 190);
        assert_eq!(f.read(&mut buf).unwrap(), 10);
        assert_eq!(f.read(&mut buf).unwrap(), 0);
    }
}
