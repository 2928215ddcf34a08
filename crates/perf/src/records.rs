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
//! orders the index, and each sample is decoded where it lies,
//! reading only the fields the model uses. `linux-perf-data` still parses the
//! header, the attributes and the feature sections (for a pipe-mode file,
//! its leading metadata records), and the rare records (mmap, comm, fork, exit) are decoded with
//! `linux-perf-event-reader` from the same bytes.
//!
//! It does not build the model; `reader` does. Every read is bounds-checked:
//! malformed input gives `None` or a stop with a reason, never a panic.

mod layout;

pub(crate) use layout::{parse_sample, AttrOf, Layout};

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
    /// (on two threads if `two_threads`: the walk, see [`Records::walk_halves`],
    /// and the sort, see [`time_ordered`]). `release(from, to)` is called
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
        let mut unzip = Unzip {
            big: e.big,
            ..Unzip::default()
        };
        let mut stopped = if two_threads && end.saturating_sub(start) >= WALK_ON_TWO_THREADS {
            Self::walk_halves(data, start, end, &mut w, &mut entries, &mut unzip, release)
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

    /// Walks `data[start..end]` on two threads: this one from `start`, the
    /// other from a record start found past the middle
    /// ([`find_record_start`]), each into entries of its own, appended in
    /// file order. The other half counts only when this walk lands exactly
    /// on where it began (so that place is a record start for sure), and it
    /// met no compressed record (those are one stream, decompressed in
    /// order); otherwise this walk goes on alone: the index is the one
    /// thread's either way. Records without a time of their own at the
    /// head of the second half take the last time of the first, as they
    /// would in one walk.
    fn walk_halves(
        data: &[u8],
        start: usize,
        end: usize,
        w: &mut Walk<'_>,
        entries: &mut Vec<Timed>,
        unzip: &mut Unzip,
        release: &(dyn Fn(usize, usize) + Sync),
    ) -> Option<String> {
        let middle = start + (end - start) / 2;
        let Some(second) = find_record_start(data, w.e, start, middle, end) else {
            return w.walk(data, start, end, entries, unzip, release);
        };
        let (e, attrs) = (w.e, w.attrs);
        let (first_stop, other) = std::thread::scope(|s| {
            let other = s.spawn(move || {
                let mut w2 = Walk::new(e, attrs);
                let mut out = Vec::with_capacity((end - second) / RECORD_BYTES);
                crate::intern::huge_pages(&out);
                let mut unzip2 = Unzip::default();
                let stopped = w2.walk(data, second, end, &mut out, &mut unzip2, release);
                let compressed = unzip2.fed > 0 || unzip2.error.is_some();
                (w2, out, stopped, compressed)
            });
            let first_stop = w.walk_until(data, start, second, end, entries, unzip, release);
            (first_stop, other.join())
        });
        match (first_stop, other) {
            (WalkEnd::At(pos), Ok((w2, mut out, stopped, false))) if pos == second => {
                for t in out.iter_mut().take(w2.untimed_head) {
                    t.time = w.last_time;
                }
                if w2.seen_time {
                    w.last_time = w2.last_time;
                }
                w.walked += w2.walked;
                entries.append(&mut out);
                stopped
            }
            // The first walk stopped early (a corrupt record): what comes
            // after it is not read.
            (WalkEnd::Stopped(why), _) => Some(why),
            (WalkEnd::At(pos), _) => w.walk(data, pos, end, entries, unzip, release),
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

/// Records from which the index is sorted on two threads.
const SORT_ON_TWO_THREADS: usize = 1 << 18;

/// Bytes of records from which they are walked on two threads.
const WALK_ON_TWO_THREADS: usize = 4 << 20;

/// Record headers that must follow each other, each where the one before
/// it ends, for a place in the middle of the records to be taken for the
/// start of one (see [`find_record_start`]).
const HEADERS_IN_A_ROW: usize = 16;

/// How far past the middle a record start is looked for.
const SYNC_SEARCH: usize = 1 << 20;

/// Where, at or after `from` (and at a multiple of 8 bytes from `start`,
/// as records are), `buf[..end]` seems to hold the start of a record:
/// [`HEADERS_IN_A_ROW`] headers of known types and whole sizes follow each
/// other from there (or up to `end`). Only a guess: the walk from `start`
/// confirms it by landing on it (see [`Records::walk_halves`]).
fn find_record_start(
    buf: &[u8],
    e: Endian,
    start: usize,
    from: usize,
    end: usize,
) -> Option<usize> {
    let header = |pos: usize| -> Option<usize> {
        let ty = e.u32(buf, pos)?;
        let size = usize::from(e.u16(buf, pos + 6)?);
        let known = (1..=21).contains(&ty) || (rtype::USER_START..=83).contains(&ty);
        (known && size >= 8 && size % 8 == 0 && pos + size <= end).then_some(size)
    };
    let mut pos = start + (from.saturating_sub(start)).next_multiple_of(8);
    let last = from.saturating_add(SYNC_SEARCH).min(end);
    while pos < last {
        let mut at = pos;
        let mut seen = 0;
        while seen < HEADERS_IN_A_ROW && at < end {
            match header(at) {
                // Records with data after them (AUX, tracing data) are
                // not hopped over here.
                Some(size)
                    if !matches!(e.u32(buf, at), Some(rtype::AUXTRACE | rtype::TRACING_DATA)) =>
                {
                    at += size;
                    seen += 1;
                }
                _ => break,
            }
        }
        if seen == HEADERS_IN_A_ROW || (seen > 0 && at == end) {
            return Some(pos);
        }
        pos += 8;
    }
    None
}

/// Sorts `entries` by merging each run (entries in increasing order) into
/// the tail of the sorted part before it, where it belongs: the tail is set
/// aside and merged with the run into place. `false` when that would move
/// more entries than there are (records far out of order): it stops, and
/// leaves `entries` in some other order for a sort.
fn merge_runs(entries: &mut [Timed]) -> bool {
    let n = entries.len();
    let mut moved = 0;
    let mut tail: Vec<Timed> = Vec::new();
    // `entries[..sorted]` is in order.
    let mut sorted = 0;
    while sorted < n {
        let mut end = sorted + 1;
        while end < n && entries[end - 1] < entries[end] {
            end += 1;
        }
        let first = entries[sorted];
        let from = entries[..sorted].partition_point(|t| *t < first);
        if from < sorted {
            moved += sorted - from;
            if moved > n {
                return false;
            }
            tail.clear();
            tail.extend_from_slice(&entries[from..sorted]);
            // Writing never passes the next entry of the run to read
            // (`out` reaches `b` only when the tail is used up).
            let (mut a, mut b, mut out) = (0, sorted, from);
            while a < tail.len() && b < end {
                if tail[a] < entries[b] {
                    entries[out] = tail[a];
                    a += 1;
                } else {
                    entries[out] = entries[b];
                    b += 1;
                }
                out += 1;
            }
            // What is left of the run is in place; what is left of the
            // tail goes before it.
            entries[out..out + tail.len() - a].copy_from_slice(&tail[a..]);
        }
        sorted = end;
    }
    true
}

/// The index in time order (file order among records of one time), without
/// the times: half its memory.
///
/// perf writes the records in rounds of per-CPU buffers: runs in time
/// order, each overlapping only the last few thousand records before it.
/// So each run is merged into the tail of what is sorted so far
/// ([`merge_runs`]): about half a pass over the index on build traces
/// (4.5 M records moved for 9 M on a 1.23 GB trace, whose 10,646 runs the
/// standard library's sort merged level by level: sorting and compacting
/// that index took 260 ms on two threads, now 40 ms on one; on a 95 MB
/// trace, 15 ms then, 3 ms now). Records far out of order (more moved
/// than the index holds) are sorted instead, each half on a thread of its
/// own with `two_threads`, the two then merged: entries are unique, so any
/// correct sort gives this one order.
fn time_ordered(mut entries: Vec<Timed>, two_threads: bool) -> Vec<Entry> {
    let merged = merge_runs(&mut entries);
    if merged || !two_threads {
        if !merged {
            entries.sort_unstable();
        }
        // Made in place; the shrink gives the second half of the buffer back.
        let mut entries: Vec<Entry> = entries.into_iter().map(|t| t.entry).collect();
        entries.shrink_to_fit();
        return entries;
    }
    let mid = entries.len() / 2;
    let (low, high) = entries.split_at_mut(mid);
    std::thread::scope(|s| {
        s.spawn(|| low.sort());
        high.sort();
    });
    let (low, high) = entries.split_at(mid);
    let mut merged = Vec::with_capacity(entries.len());
    let (mut i, mut j) = (0, 0);
    while i < low.len() && j < high.len() {
        if low[i] <= high[j] {
            merged.push(low[i].entry);
            i += 1;
        } else {
            merged.push(high[j].entry);
            j += 1;
        }
    }
    merged.extend(low[i..].iter().chain(&high[j..]).map(|t| t.entry));
    merged
}

/// The index pass over one buffer of records.
struct Walk<'x> {
    e: Endian,
    attrs: &'x AttrOf,
    /// Time of the previous timed record: records without a time keep
    /// their place after it.
    last_time: u64,
    /// A timed record was seen; before it, `untimed_head` records were
    /// indexed without a time (given `last_time`'s start, 0).
    seen_time: bool,
    untimed_head: usize,
    walked: u64,
}

/// Where a walk that was to stop at a place ended.
enum WalkEnd {
    /// At the first record start at or past the place.
    At(usize),
    /// Before it, at a corrupt record (why).
    Stopped(String),
}

impl<'x> Walk<'x> {
    fn new(e: Endian, attrs: &'x AttrOf) -> Self {
        Walk {
            e,
            attrs,
            last_time: 0,
            seen_time: false,
            untimed_head: 0,
            walked: 0,
        }
    }

    /// Indexes `buf[start..end]` up to the first record that starts at or
    /// past `stop` (handing compressed bodies to `unzip`).
    #[allow(clippy::too_many_arguments)]
    fn walk_until(
        &mut self,
        buf: &[u8],
        start: usize,
        stop: usize,
        end: usize,
        out: &mut Vec<Timed>,
        unzip: &mut Unzip,
        release: &(dyn Fn(usize, usize) + Sync),
    ) -> WalkEnd {
        let mut at = start;
        match self.walk_from(buf, &mut at, stop, end, out, unzip, release) {
            Some(why) => WalkEnd::Stopped(why),
            None => WalkEnd::At(at),
        }
    }

    /// Indexes `buf[start..end]`, handing compressed bodies to `unzip`.
    /// Returns why it stopped early, if it did.
    fn walk(
        &mut self,
        buf: &[u8],
        start: usize,
        end: usize,
        out: &mut Vec<Timed>,
        unzip: &mut Unzip,
        release: &(dyn Fn(usize, usize) + Sync),
    ) -> Option<String> {
        let mut pos = start;
        self.walk_from(buf, &mut pos, end, end, out, unzip, release)
    }

    /// Indexes the records of `buf[..end]` from `*pos` on, up to the first
    /// that starts at or past `stop`, and leaves `*pos` there; gives back
    /// the bytes walked. Returns why it stopped early, if it did.
    #[allow(clippy::too_many_arguments)]
    fn walk_from(
        &mut self,
        buf: &[u8],
        at: &mut usize,
        stop: usize,
        end: usize,
        out: &mut Vec<Timed>,
        unzip: &mut Unzip,
        release: &(dyn Fn(usize, usize) + Sync),
    ) -> Option<String> {
        let mut released = *at;
        while *at < stop.min(end) {
            let pos = *at;
            if pos - released >= RELEASE_STEP {
                release(released, pos);
                released = pos;
            }
            let Some(size) = self.e.u16(buf, pos + 6).map(usize::from) else {
                return Some(format!(
                    "{} bytes at the end do not hold a record header",
                    end - pos
                ));
            };
            if size < 8 || pos + size > end {
                return Some(format!(
                    "a record at offset {pos} claims {size} bytes, which the data section cannot hold"
                ));
            }
            let ty = self.e.u32(buf, pos).unwrap_or(0);
            let body = &buf[pos + 8..pos + size];
            self.walked += 1;
            let mut next = pos + size;
            match ty {
                rtype::COMPRESSED => unzip.feed(body, false),
                rtype::COMPRESSED2 => unzip.feed(body, true),
                rtype::AUXTRACE | rtype::TRACING_DATA => {
                    // The trace data follows the record; its size is the
                    // record's first field (a u64 for AUX data, a u32 for
                    // a pipe's tracing data).
                    let extra = match ty {
                        rtype::AUXTRACE => self.e.u64(body, 0).unwrap_or(0),
                        _ => self.e.u32(body, 0).map_or(0, u64::from),
                    };
                    match usize::try_from(extra)
                        .ok()
                        .and_then(|x| next.checked_add(x))
                    {
                        Some(n) if n <= end => next = n,
                        _ => {
                            return Some(
                                "an AUX trace or tracing-data record runs past the data section"
                                    .into(),
                            )
                        }
                    }
                }
                t if t < rtype::USER_START => self.push(t, body, pos, false, out),
                _ => {}
            }
            *at = next;
        }
        if *at > released {
            release(released, (*at).min(end));
        }
        None
    }

    /// Indexes decompressed records (nothing in them is compressed again);
    /// returns where the last whole record ended.
    fn walk_unzipped(&mut self, buf: &[u8], out: &mut Vec<Timed>) -> usize {
        let mut pos = 0;
        while pos + 8 <= buf.len() {
            let size = self.e.u16(buf, pos + 6).map_or(0, usize::from);
            if size < 8 || pos + size > buf.len() {
                break;
            }
            let ty = self.e.u32(buf, pos).unwrap_or(0);
            self.walked += 1;
            if ty < rtype::USER_START {
                self.push(ty, &buf[pos + 8..pos + size], pos, true, out);
            }
            pos += size;
        }
        pos
    }

    #[inline]
    fn push(&mut self, ty: u32, body: &[u8], pos: usize, unzipped: bool, out: &mut Vec<Timed>) {
        let attr = self.attrs.attr(self.e, ty, body);
        let time = self
            .attrs
            .layout(attr)
            .and_then(|l| l.time(self.e, ty, body));
        let time = match time {
            Some(t) => {
                self.last_time = t;
                self.seen_time = true;
                t
            }
            None => {
                if !self.seen_time {
                    self.untimed_head += 1;
                }
                self.last_time
            }
        };
        out.push(Timed {
            time,
            entry: Entry::new(pos, unzipped, attr),
        });
    }
}

/// The most a compressed record may grow when decompressed, as a multiple
/// of the compressed bytes (plus one chunk): perf's zstd at its default
/// level shrinks records about 3 to 10 times, while a hostile file could
/// claim gigabytes in a few kilobytes of zstd.
pub(crate) const MAX_UNZIP_RATIO: usize = 256;

/// Decompresses the bodies of PERF_RECORD_COMPRESSED(2) records, one zstd
/// stream across all of them.
/// Bytes decompressed per step.
const UNZIP_CHUNK: usize = 1 << 20;

#[derive(Default)]
struct Unzip {
    out: Vec<u8>,
    /// Compressed bytes fed so far.
    fed: usize,
    chunk: Vec<u8>,
    error: Option<String>,
    dctx: Option<zstd_safe::DCtx<'static>>,
    big: bool,
}

impl Unzip {
    fn feed(&mut self, body: &[u8], v2: bool) {
        if self.error.is_some() {
            return;
        }
        let data = if v2 {
            // COMPRESSED2: u64 data size, then the data and padding.
            let e = Endian { big: self.big };
            match e
                .u64(body, 0)
                .and_then(|n| body.get(8..8usize.checked_add(usize::try_from(n).ok()?)?))
            {
                Some(d) => d,
                None => {
                    self.error = Some("a compressed record is corrupt".into());
                    return;
                }
            }
        } else {
            body
        };
        self.fed = self.fed.saturating_add(data.len());
        let most = self
            .fed
            .saturating_mul(MAX_UNZIP_RATIO)
            .saturating_add(UNZIP_CHUNK);
        let dctx = self.dctx.get_or_insert_with(zstd_safe::DCtx::create);
        let mut input = zstd_safe::InBuffer::around(data);
        if self.chunk.is_empty() {
            self.chunk = vec![0u8; UNZIP_CHUNK];
        }
        let chunk = &mut self.chunk;
        loop {
            let mut output = zstd_safe::OutBuffer::around(&mut chunk[..]);
            match dctx.decompress_stream(&mut output, &mut input) {
                Ok(_) => {
                    let n = output.pos();
                    if self.out.len() + n > most {
                        self.error = Some(format!(
                            "compressed records decompress to more than {MAX_UNZIP_RATIO} times their size (a damaged file)"
                        ));
                        return;
                    }
                    self.out.extend_from_slice(&chunk[..n]);
                    if n < chunk.len() && input.pos() == data.len() {
                        break;
                    }
                }
                Err(code) => {
                    self.error = Some(format!(
                        "a compressed record could not be decompressed ({})",
                        zstd_safe::get_error_name(code)
                    ));
                    return;
                }
            }
        }
    }

    fn finish(self) -> (Vec<u8>, Option<String>) {
        (self.out, self.error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::layout::sample;

    fn rec(ty: u32, body: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&ty.to_le_bytes());
        v.extend_from_slice(&0u16.to_le_bytes());
        v.extend_from_slice(&((body.len() + 8) as u16).to_le_bytes());
        v.extend_from_slice(body);
        v
    }

    fn sample_body(ip: u64, pid: u32, time: u64, chain: &[u64]) -> Vec<u8> {
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

    const ST: u64 = sample::IP | sample::TID | sample::TIME | sample::CALLCHAIN;

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
    fn merged_runs_are_sorted_whatever_the_order_and_far_disorder_gives_up() {
        // Random runs: overlapping the sorted part by a little or a lot,
        // single entries, all descending; each either sorted by merging or
        // given up on, and then sorted the same by time_ordered.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        let timed = |time: u64, i: usize| Timed {
            time,
            entry: Entry::new(i * 8, false, 0),
        };
        let mut gave_up = 0;
        for round in 0..200 {
            let mut entries = Vec::new();
            let mut end = 0u64;
            for _ in 0..next(30) {
                // A run starting up to half its span before the latest
                // time so far (or anywhere, in every fourth index).
                let (len, step) = (1 + next(60), 1 + next(20));
                let span = len * step;
                let back = next(if round % 4 == 0 {
                    100_000
                } else {
                    span / 2 + 1
                });
                let start = end.saturating_sub(back);
                for k in 0..len {
                    entries.push(timed(start + k * step, entries.len()));
                }
                end = end.max(start + span);
            }
            if round % 10 == 0 {
                entries.reverse();
            }
            let mut want = entries.clone();
            want.sort();
            let mut merged = entries.clone();
            if merge_runs(&mut merged) {
                assert_eq!(merged, want, "round {round}");
            } else {
                gave_up += 1;
            }
            let want: Vec<Entry> = want.iter().map(|t| t.entry).collect();
            assert_eq!(time_ordered(entries.clone(), false), want);
            assert_eq!(time_ordered(entries, true), want);
        }
        // Given up on: the reversed indexes (runs of one, each before all
        // the rest), and some of those with runs from anywhere.
        assert!((10..100).contains(&gave_up), "{gave_up}");
    }

    #[test]
    fn the_index_is_in_the_same_order_sorted_on_one_thread_or_two() {
        // Runs in time order, interleaved and overlapping as perf's rounds
        // of per-CPU buffers are, with records of one time.
        let mut entries = Vec::new();
        for round in 0..40u64 {
            for cpu in 0..3u64 {
                for k in 0..(5 + (round * 7 + cpu) % 11) {
                    let time = round * 100 + cpu * 13 + k * 9 - (k % 4) * 9;
                    let pos = entries.len() * 64;
                    entries.push(Timed {
                        time,
                        entry: Entry::new(pos, false, 0),
                    });
                }
            }
        }
        let one = time_ordered(entries.clone(), false);
        assert_eq!(time_ordered(entries.clone(), true), one);
        let mut want = entries;
        want.sort_by_key(|t| (t.time, t.entry.pos()));
        assert_eq!(one, want.iter().map(|t| t.entry).collect::<Vec<_>>());
    }

    /// Records of a few megabytes, more than [`WALK_ON_TWO_THREADS`]:
    /// samples in overlapping runs of times, with records of no time of
    /// their own (a COMM without its sample id) among them, a run of those
    /// where the walk is split, and one sample whose callchain looks like
    /// a row of records (eight-byte COMMs) right at `fake_at` of the data.
    fn walk_test_data(fake_at: f64) -> Vec<u8> {
        let mut data = Vec::new();
        let fake_word = 3u64 | (8u64 << 48);
        let mut i = 0u64;
        let mut faked = false;
        while data.len() < WALK_ON_TWO_THREADS + (1 << 20) {
            let middle = data.len() as f64 / (WALK_ON_TWO_THREADS + (1 << 20)) as f64;
            if !faked && middle > fake_at - 0.0001 {
                faked = true;
                data.extend(rec(
                    rtype::SAMPLE,
                    &sample_body(1, 1, i, &[fake_word; 4096]),
                ));
                continue;
            }
            if (0.499..0.501).contains(&middle) || i.is_multiple_of(97) {
                data.extend(rec(rtype::COMM, &[0; 8]));
            } else {
                let time = (i / 50) * 1000 + (i * 37) % 1500;
                data.extend(rec(rtype::SAMPLE, &sample_body(i, 7, time, &[i, i + 1])));
            }
            i += 1;
        }
        data
    }

    fn index_of(data: &[u8], two_threads: bool) -> (Vec<Entry>, u64, Option<String>) {
        // No sample id on other records: a COMM has no time of its own.
        let attrs = AttrOf::new(vec![(Layout::new(ST, 0, false), vec![])]);
        let released = std::sync::Mutex::new(0usize);
        let r = Records::index(
            data,
            0,
            data.len(),
            Endian::default(),
            &attrs,
            two_threads,
            &|a, b| *released.lock().unwrap() += b - a,
        );
        // Every byte walked is given back, whoever walked it: once by one
        // walk; by two, some twice when the first goes on alone.
        let released = released.into_inner().unwrap();
        if r.stopped.is_none() {
            assert!(released >= data.len());
            assert!(two_threads || released == data.len());
        }
        (r.entries, r.walked, r.stopped)
    }

    #[test]
    fn the_index_is_the_same_walked_on_one_thread_or_two() {
        // Split at a record start (the run of untimed records takes the
        // first half's last time); past a fake row of records inside a
        // sample (the first walk jumps over it and goes on alone); at a
        // corrupt record in either half.
        for fake_at in [0.9, 0.5] {
            let data = walk_test_data(fake_at);
            let one = index_of(&data, false);
            assert!(one.2.is_none());
            assert!(one.0.len() > 10_000);
            assert_eq!(index_of(&data, true), one, "fake row at {fake_at}");
        }
        let data = walk_test_data(0.9);
        let middle = find_record_start(&data, Endian::default(), 0, data.len() / 2, data.len())
            .expect("a record start past the middle");
        assert!(middle < data.len() * 6 / 10);
        for corrupt_at in [data.len() / 4, data.len() * 3 / 4] {
            let mut bad = data.clone();
            // The size of the record that starts at or after corrupt_at.
            let mut pos = 0;
            while pos < corrupt_at {
                pos += u16::from_le_bytes([bad[pos + 6], bad[pos + 7]]) as usize;
            }
            bad[pos + 6..pos + 8].copy_from_slice(&4u16.to_le_bytes());
            let one = index_of(&bad, false);
            assert!(one.2.is_some());
            assert_eq!(index_of(&bad, true), one, "corrupt at {corrupt_at}");
        }
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
