//! The hot path of reading a perf.data file: walking the data section in
//! place (straight from the memory-mapped bytes) and putting its records in
//! time order; [`layout`] finds which attribute a record belongs to and
//! decodes `PERF_RECORD_SAMPLE` by that attribute's `sample_type`.
//!
//! Why this is hand-written: `linux-perf-data`'s record iterator copies every
//! record into an owned buffer for its round-by-round sorter, and
//! `SampleRecord::parse` decodes every field of every sample. On a
//! 150,000-sample trace that was about 45% of `slowlab analyze`'s time. Here
//! no record is copied: one pass indexes (time, position) of every record
//! (its two halves on two threads, for a file of megabytes), one sort
//! orders the index (or [`stream`] does both as the file comes in, round
//! by round, on a thread of its own), and each sample is decoded where it lies,
//! reading only the fields the model uses. `linux-perf-data` still parses the
//! header, the attributes and the feature sections (for a pipe-mode file,
//! its leading metadata records), and the rare records (mmap, comm, fork, exit) are decoded with
//! `linux-perf-event-reader` from the same bytes.
//!
//! It does not build the model; `reader` does. Every read is bounds-checked:
//! malformed input gives `None` or a stop with a reason, never a panic.

mod layout;
mod order;
mod stream;
mod unzip;
mod walk;

pub(crate) use layout::{parse_sample, AttrOf, Layout};
use order::{time_ordered, SORT_ON_TWO_THREADS};
pub(crate) use stream::{Unstreamed, STREAM_STEP};
use unzip::Unzip;
use walk::{walk_halves, Walk, WALK_ON_TWO_THREADS};

/// Record types (`enum perf_event_type` and perf's user records).
pub(crate) mod rtype {
    pub const MMAP: u32 = 1;
    pub const LOST: u32 = 2;
    pub const COMM: u32 = 3;
    pub const EXIT: u32 = 4;
    pub const FORK: u32 = 7;
    pub const SAMPLE: u32 = 9;
    pub const MMAP2: u32 = 10;
    pub const LOST_SAMPLES: u32 = 13;
    /// First of perf's own (user) record types.
    pub const USER_START: u32 = 64;
    /// Pipe mode: the tracing data follows the record.
    pub const TRACING_DATA: u32 = 66;
    /// perf wrote out every CPU's buffer (see `records::stream`).
    pub const FINISHED_ROUND: u32 = 68;
    pub const AUXTRACE: u32 = 71;
    pub const COMPRESSED: u32 = 81;
    pub const COMPRESSED2: u32 = 83;
}

/// Byte order of the file.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Endian {
    pub big: bool,
}

impl Endian {
    #[inline]
    pub fn u64(self, b: &[u8], off: usize) -> Option<u64> {
        let a: [u8; 8] = b.get(off..off.checked_add(8)?)?.try_into().ok()?;
        Some(if self.big {
            u64::from_be_bytes(a)
        } else {
            u64::from_le_bytes(a)
        })
    }

    #[inline]
    pub fn u32(self, b: &[u8], off: usize) -> Option<u32> {
        let a: [u8; 4] = b.get(off..off.checked_add(4)?)?.try_into().ok()?;
        Some(if self.big {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        })
    }

    #[inline]
    fn u16(self, b: &[u8], off: usize) -> Option<u16> {
        let a: [u8; 2] = b.get(off..off.checked_add(2)?)?.try_into().ok()?;
        Some(if self.big {
            u16::from_be_bytes(a)
        } else {
            u16::from_le_bytes(a)
        })
    }
}

/// Whether the reader's use of a record of type `ty` does not depend on
/// where the record comes in time order: it only adds it to a count (a
/// saturating sum, the same in any order; see `reader::decode`). perf
/// writes its PERF_RECORD_LOST_SAMPLES after every other record, with a
/// sample id of all zeros: time 0, so the index puts them first, and a
/// stream hands them over where they come (see `stream`).
pub(crate) fn order_free(ty: u32) -> bool {
    ty == rtype::LOST_SAMPLES
}

/// Bytes a record takes, about (a sample with a short callchain): `n`
/// bytes of records hold about `n / RECORD_BYTES` of them.
pub(crate) const RECORD_BYTES: usize = 96;

/// Bytes of records walked between two calls of the index's `release`.
pub(crate) const RELEASE_STEP: usize = 8 << 20;

/// One record of the time-ordered index: where it lies, and its event
/// (attribute). 8 bytes: a big trace has tens of millions of records, and
/// the index lives through the whole record pass (the times it was sorted
/// by are dropped once it is sorted, see [`Timed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Entry {
    /// `position << 17 | in_unzipped << 16 | attribute`.
    loc: u64,
}

/// An index entry with its record's time, while the index is sorted:
/// sorting by `(time, entry)` gives time order, and file order among
/// records with the same time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Timed {
    time: u64,
    entry: Entry,
}

impl Entry {
    pub(crate) fn new(pos: usize, unzipped: bool, attr: usize) -> Entry {
        Entry {
            loc: (pos as u64) << 17 | (unzipped as u64) << 16 | (attr as u64 & 0xffff),
        }
    }
    pub fn attr(self) -> usize {
        (self.loc & 0xffff) as usize
    }
    /// Where the record lies in the file; `None` for a record that came
    /// out of a compressed one (it lies in memory of the reader's own).
    pub fn file_pos(self) -> Option<usize> {
        (!self.unzipped()).then(|| self.pos())
    }
    fn pos(self) -> usize {
        (self.loc >> 17) as usize
    }
    fn unzipped(self) -> bool {
        self.loc & (1 << 16) != 0
    }
}

/// A record in place: its type, `misc` bits and body (after the header).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Record<'a> {
    pub ty: u32,
    pub misc: u16,
    pub body: &'a [u8],
}

/// All records of a data section, indexed in time order.
pub(crate) struct Records<'a> {
    data: &'a [u8],
    e: Endian,
    /// Records that came out of PERF_RECORD_COMPRESSED, decompressed.
    unzipped: Vec<u8>,
    pub entries: Vec<Entry>,
    /// Record headers walked (including perf's own records).
    pub walked: u64,
    /// Why the walk stopped early, if it did.
    pub stopped: Option<String>,
}

impl<'a> Records<'a> {
    /// Indexes the records in `data[start..end]` and sorts them by time
    /// (on two threads if `two_threads`: the walk, see [`walk_halves`], and
    /// the sort, see [`time_ordered`]). `release(from, to)` is called
    /// as the walk leaves bytes behind (every [`RELEASE_STEP`] bytes), so
    /// that a mapped file's pages can be given back while the rest is
    /// walked.
    pub fn index(
        data: &'a [u8],
        start: usize,
        end: usize,
        e: Endian,
        attrs: &AttrOf,
        two_threads: bool,
        release: &(dyn Fn(usize, usize) + Sync),
    ) -> Self {
        let end = end.min(data.len());
        let mut entries = Vec::with_capacity(end.saturating_sub(start) / RECORD_BYTES);
        // Tens of megabytes written once in order: faulted in 2 MiB at a
        // time instead of 4 KiB.
        crate::intern::huge_pages(&entries);
        let mut w = Walk::new(e, attrs);
        let mut unzip = Unzip::new(e.big);
        let mut stopped = if two_threads && end.saturating_sub(start) >= WALK_ON_TWO_THREADS {
            walk_halves(data, start, end, &mut w, &mut entries, &mut unzip, release)
        } else {
            w.walk(data, start, end, &mut entries, &mut unzip, release)
        };
        // Compressed records hold runs of records, and one record may
        // straddle two of them: decompress all, then index the result.
        let (unzipped, error) = unzip.finish();
        if !unzipped.is_empty() || error.is_some() {
            let at = w.walk_unzipped(&unzipped, &mut entries);
            stopped = stopped.or(error).or_else(|| {
                (at < unzipped.len()).then(|| {
                    format!(
                        "{} bytes of decompressed data do not form a whole record",
                        unzipped.len() - at
                    )
                })
            });
        }
        let parallel = two_threads && entries.len() >= SORT_ON_TWO_THREADS;
        let entries = time_ordered(entries, parallel);
        Records {
            data,
            e,
            unzipped,
            entries,
            walked: w.walked,
            stopped,
        }
    }

    /// The record of an index entry.
    #[inline]
    pub fn get(&self, entry: Entry) -> Option<Record<'_>> {
        let buf: &[u8] = if entry.unzipped() {
            &self.unzipped
        } else {
            self.data
        };
        let pos = entry.pos();
        let ty = self.e.u32(buf, pos)?;
        let misc = self.e.u16(buf, pos + 4)?;
        let size = self.e.u16(buf, pos + 6)? as usize;
        let body = buf.get(pos + 8..pos.checked_add(size)?)?;
        Some(Record { ty, misc, body })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::layout::sample;

    /// A record of type `ty` with `body` (little-endian).
    pub(super) fn rec(ty: u32, body: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&ty.to_le_bytes());
        v.extend_from_slice(&0u16.to_le_bytes());
        v.extend_from_slice(&((body.len() + 8) as u16).to_le_bytes());
        v.extend_from_slice(body);
        v
    }

    /// A sample's body for [`ST`].
    pub(super) fn sample_body(ip: u64, pid: u32, time: u64, chain: &[u64]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&ip.to_le_bytes());
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(&(pid + 1).to_le_bytes());
        b.extend_from_slice(&time.to_le_bytes());
        b.extend_from_slice(&(chain.len() as u64).to_le_bytes());
        for a in chain {
            b.extend_from_slice(&a.to_le_bytes());
        }
        b
    }

    pub(super) const ST: u64 = sample::IP | sample::TID | sample::TIME | sample::CALLCHAIN;

    #[test]
    fn samples_are_indexed_in_time_order_and_decoded_in_place() {
        let mut data = Vec::new();
        data.extend(rec(rtype::SAMPLE, &sample_body(0x10, 7, 300, &[1, 2, 3])));
        data.extend(rec(rtype::SAMPLE, &sample_body(0x20, 8, 100, &[4])));
        data.extend(rec(68, &[])); // FINISHED_ROUND
        data.extend(rec(rtype::SAMPLE, &sample_body(0x30, 9, 200, &[])));
        let layout = Layout::new(ST, 0, true);
        let attrs = AttrOf::new(vec![(layout, vec![])]);
        let e = Endian::default();
        let released = std::sync::Mutex::new(Vec::new());
        let r = Records::index(&data, 0, data.len(), e, &attrs, false, &|a, b| {
            released.lock().unwrap().push((a, b))
        });
        assert!(r.stopped.is_none());
        // The walk gives back every byte it walked, once.
        assert_eq!(released.into_inner().unwrap(), vec![(0, data.len())]);
        assert_eq!(r.walked, 4);
        let time = |x: &Entry| {
            parse_sample(e, &layout, r.get(*x).unwrap().body)
                .unwrap()
                .time
        };
        let times: Vec<_> = r.entries.iter().map(time).collect();
        assert_eq!(times, vec![Some(100), Some(200), Some(300)]);
        let first = r.get(r.entries[0]).unwrap();
        let s = parse_sample(e, &layout, first.body).unwrap();
        assert_eq!(
            (s.ip, s.pid, s.tid, s.time),
            (Some(0x20), Some(8), Some(9), Some(100))
        );
        assert_eq!(s.callchain.unwrap().len(), 8);
    }

    #[test]
    fn short_or_oversized_records_stop_the_walk_with_a_reason() {
        let mut data = rec(rtype::SAMPLE, &sample_body(1, 1, 1, &[]));
        let good = data.len();
        data.extend_from_slice(&[9, 0, 0, 0, 0, 0, 200, 0]);
        let attrs = AttrOf::new(vec![(Layout::new(ST, 0, true), vec![])]);
        let r = Records::index(
            &data,
            0,
            data.len(),
            Endian::default(),
            &attrs,
            false,
            &|_, _| {},
        );
        assert_eq!(r.entries.len(), 1);
        assert!(r.stopped.is_some());
        // A sample whose callchain claims more than the body holds.
        let mut body = sample_body(1, 1, 1, &[5]);
        body[24] = 0xff;
        let l = Layout::new(ST, 0, true);
        assert!(parse_sample(Endian::default(), &l, &body).is_none());
        assert!(good > 0);
    }
}
