//! The index pass: each record's header, walked from one to the next in
//! place, its time and attribute put in the index ([`Walk`]); for a file of
//! megabytes, its two halves on two threads ([`walk_halves`]).
//!
//! It does not order the index (`order`) nor decompress records (`unzip`).

use super::unzip::Unzip;
use super::{rtype, AttrOf, Endian, Entry, Timed, RECORD_BYTES, RELEASE_STEP};

/// Bytes of records from which they are walked on two threads.
pub(super) const WALK_ON_TWO_THREADS: usize = 4 << 20;

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
/// confirms it by landing on it (see [`walk_halves`]).
fn find_record_start(
    buf: &[u8],
    e: Endian,
    start: usize,
    from: usize,
    end: usize,
) -> Option<usize> {
    // A record's size, if `pos` holds a plausible header: a known type
    // (not one with data after the record, AUX or tracing data, which is
    // not hopped over here) and a whole size within `end`.
    let header = |pos: usize| -> Option<usize> {
        let ty = e.u32(buf, pos)?;
        let size = usize::from(e.u16(buf, pos + 6)?);
        let known = (1..=21).contains(&ty) || (rtype::USER_START..=83).contains(&ty);
        let trailing = matches!(ty, rtype::AUXTRACE | rtype::TRACING_DATA);
        (known && !trailing && size >= 8 && size % 8 == 0 && pos + size <= end).then_some(size)
    };
    let mut pos = start + (from.saturating_sub(start)).next_multiple_of(8);
    let last = from.saturating_add(SYNC_SEARCH).min(end);
    while pos < last {
        let mut at = pos;
        let mut seen = 0;
        while seen < HEADERS_IN_A_ROW && at < end {
            let Some(size) = header(at) else { break };
            at += size;
            seen += 1;
        }
        if seen == HEADERS_IN_A_ROW || (seen > 0 && at == end) {
            return Some(pos);
        }
        pos += 8;
    }
    None
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
pub(super) fn walk_halves(
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
    let mut at = start;
    let (first_stop, other) = std::thread::scope(|s| {
        let other = s.spawn(move || {
            let mut w2 = Walk::new(e, attrs);
            let mut out = Vec::with_capacity((end - second) / RECORD_BYTES);
            crate::intern::huge_pages(&out);
            let mut unzip2 = Unzip::new(e.big);
            let stopped = w2.walk(data, second, end, &mut out, &mut unzip2, release);
            let compressed = unzip2.fed_any();
            (w2, out, stopped, compressed)
        });
        let first_stop = w.walk_from(data, &mut at, second, end, entries, unzip, release);
        (first_stop, other.join())
    });
    match (first_stop, other) {
        (None, Ok((w2, mut out, stopped, false))) if at == second => {
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
        (Some(why), _) => Some(why),
        (None, _) => w.walk(data, at, end, entries, unzip, release),
    }
}

/// The index pass over one buffer of records.
pub(super) struct Walk<'x> {
    e: Endian,
    attrs: &'x AttrOf,
    /// Time of the previous timed record: records without a time keep
    /// their place after it.
    last_time: u64,
    /// A timed record was seen; before it, `untimed_head` records were
    /// indexed without a time (given `last_time`'s start, 0).
    seen_time: bool,
    untimed_head: usize,
    pub(super) walked: u64,
    /// Where the last PERF_RECORD_FINISHED_ROUND walked ends (for
    /// `stream`, which takes it).
    pub(super) round_end: Option<usize>,
}

impl<'x> Walk<'x> {
    pub(super) fn new(e: Endian, attrs: &'x AttrOf) -> Self {
        Walk {
            e,
            attrs,
            last_time: 0,
            seen_time: false,
            untimed_head: 0,
            walked: 0,
            round_end: None,
        }
    }

    /// Indexes `buf[start..end]`, handing compressed bodies to `unzip`.
    /// Returns why it stopped early, if it did.
    pub(super) fn walk(
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
    pub(super) fn walk_from(
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
                rtype::FINISHED_ROUND => self.round_end = Some(next),
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
    pub(super) fn walk_unzipped(&mut self, buf: &[u8], out: &mut Vec<Timed>) -> usize {
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

#[cfg(test)]
mod tests {
    use super::super::tests::{rec, sample_body, ST};
    use super::super::{Layout, Records};
    use super::*;

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
}
