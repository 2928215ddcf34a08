//! The index pass and the time order as the file comes in: a thread walks
//! the records in file order and hands them over a few rounds at a time
//! (each such segment sorted there);
//! the caller gets them in time order, each batch as soon as no record
//! still to come can sort before it. So with a cold page cache the records
//! are read while the disk still brings the rest, instead of after the
//! whole file was walked ([`Records::index`] walks it all first).
//!
//! The batches are exactly the time order [`Records::index`] gives, or
//! nothing: a batch is let go by perf's own rule for its rounds (a record
//! is at most one round late, the rule `perf report` sorts by), and a
//! record that breaks it — or a compressed record, which is decompressed
//! as one stream after the walk — ends the stream with [`Unstreamed`]
//! (the caller then reads the file the other way, from the start). Only a
//! late record whose place in time does not matter to the reader
//! ([`order_free`]: perf's count of lost samples, written last with time 0)
//! is handed over at once instead.
//!
//! It decodes no record (the caller does, with [`Records::get`]).

use super::order::{merge_sorted, sort_timed};
use super::unzip::Unzip;
use super::walk::Walk;
use super::{order_free, AttrOf, Endian, Entry, Records, Timed};

/// The most bytes of records a stream's walk needs to go before it hands
/// over what it walked, up to the last end of a round (less for a small
/// file: see `reader::driver`).
pub(crate) const STREAM_STEP: usize = 1 << 20;

/// Segments walked and waiting for the caller, at most: the walk runs that
/// far ahead of the reading.
const SEGMENTS_AHEAD: usize = 2;

/// How a stream of all the records ended.
pub(crate) struct Streamed {
    /// Record headers walked.
    pub walked: u64,
    /// Why the walk stopped early, if it did.
    pub stopped: Option<String>,
}

/// The records cannot be streamed in time order: a record sorts before
/// one already handed over, or records are compressed. What was handed
/// over is not the start of the time order (or not all of it).
#[derive(Debug)]
pub(crate) struct Unstreamed;

/// Records walked, ending at the end of a round (or of the records).
struct Segment {
    /// Sorted (by time, then file order).
    entries: Vec<Timed>,
    /// Where the next segment starts.
    end: usize,
    walked: u64,
    stopped: Option<String>,
    compressed: bool,
    last: bool,
}

impl<'a> Records<'a> {
    /// Walks `data[start..end]` on a thread of its own, and calls
    /// `consume(records, batch, below)` with the entries in time order,
    /// batch by batch, as they are known to come next; `below` is where in
    /// the file the records still to come start, at the lowest (so the
    /// bytes before it are read). When `consume` returns `false`, the
    /// stream stops there ([`Unstreamed`]). The walk hands over what it walked each
    /// time it went `step` bytes and then ended a round.
    pub(crate) fn stream(
        data: &'a [u8],
        start: usize,
        end: usize,
        e: Endian,
        attrs: &AttrOf,
        step: usize,
        consume: &mut dyn FnMut(&Records<'a>, &[Entry], usize) -> bool,
    ) -> Result<Streamed, Unstreamed> {
        let end = end.min(data.len());
        let records = Records {
            data,
            e,
            unzipped: Vec::new(),
            entries: Vec::new(),
            walked: 0,
            stopped: None,
        };
        std::thread::scope(|s| {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Segment>(SEGMENTS_AHEAD);
            s.spawn(move || walk_segments(data, start, end, e, attrs, step, &tx));
            let mut order = InOrder::default();
            let mut batch = Vec::new();
            for segment in rx {
                if segment.compressed {
                    return Err(Unstreamed);
                }
                let free = |e: Entry| records.get(e).is_some_and(|r| order_free(r.ty));
                order.add(segment.entries, segment.last, &mut batch, free)?;
                let below = order.lowest_pos().unwrap_or(segment.end).min(segment.end);
                if !consume(&records, &batch, below) {
                    return Err(Unstreamed);
                }
                if segment.last {
                    return Ok(Streamed {
                        walked: segment.walked,
                        stopped: segment.stopped,
                    });
                }
            }
            // The walk ended without its last segment (it panicked).
            Err(Unstreamed)
        })
    }
}

/// The walk's side: segments of at least `step` bytes, each cut at the
/// last end of a round in it, sent until the last or until the receiver
/// is gone.
fn walk_segments(
    data: &[u8],
    start: usize,
    end: usize,
    e: Endian,
    attrs: &AttrOf,
    step: usize,
    tx: &std::sync::mpsc::SyncSender<Segment>,
) {
    let mut w = Walk::new(e, attrs);
    let mut unzip = Unzip::new(e.big);
    let mut at = start;
    // Walked past the last end of a round: the head of the next segment.
    let mut carried: Vec<Timed> = Vec::new();
    loop {
        let mut entries = std::mem::take(&mut carried);
        let stop = at.saturating_add(step);
        let stopped = w.walk_from(
            data,
            &mut at,
            stop,
            end,
            &mut entries,
            &mut unzip,
            &|_, _| {},
        );
        let compressed = unzip.fed_any();
        let last = stopped.is_some() || at >= end || compressed;
        let cut = match w.round_end.take() {
            _ if last => at,
            Some(round_end) => round_end,
            // No round ended yet: walk on.
            None => {
                carried = entries;
                continue;
            }
        };
        // Entries are in file order (nothing came out of a compressed
        // record), so those past the cut are a tail.
        let keep = entries.partition_point(|t| t.entry.pos() < cut);
        carried = entries.split_off(keep);
        // Sorted here, beside the reading (the caller's thread is the
        // busier: it decodes every record).
        sort_timed(&mut entries);
        let segment = Segment {
            entries,
            end: cut,
            walked: w.walked,
            stopped,
            compressed,
            last,
        };
        if tx.send(segment).is_err() || last {
            return;
        }
    }
}

/// The time order of what was walked so far: segments come in, each
/// sorted and merged with what is held, and the entries no later record
/// can sort before go out.
#[derive(Default)]
struct InOrder {
    /// Sorted; none of them handed over yet.
    held: Vec<Timed>,
    /// The latest time of the segments before the last one.
    before_last: Option<u64>,
    /// The latest time of the last segment and all before it.
    latest: Option<u64>,
    /// The time of the last entry handed over.
    handed: Option<u64>,
}

impl InOrder {
    /// Adds a segment (sorted); fills `batch` with the entries that come next in
    /// time order: those at or before the latest time of the segments
    /// before this one (a record is at most one round late: the rule
    /// `perf report`'s ordering relies on), all of them after the `last`
    /// segment. An entry that sorts before one handed over is late: those
    /// whose order does not matter (`free`, see [`order_free`]) go first in
    /// the batch, and any other is [`Unstreamed`].
    fn add(
        &mut self,
        mut segment: Vec<Timed>,
        last: bool,
        batch: &mut Vec<Entry>,
        free: impl Fn(Entry) -> bool,
    ) -> Result<(), Unstreamed> {
        batch.clear();
        debug_assert!(segment.is_sorted());
        if let Some(handed) = self.handed {
            // Records of one time sort by file position: a later record of
            // the time last handed over still comes after it.
            let late = segment.partition_point(|t| t.time < handed);
            if !segment[..late].iter().all(|t| free(t.entry)) {
                return Err(Unstreamed);
            }
            batch.extend(segment.drain(..late).map(|t| t.entry));
        }
        if let Some(seg_latest) = segment.last().map(|t| t.time) {
            self.before_last = self.latest;
            self.latest = Some(self.latest.map_or(seg_latest, |l| l.max(seg_latest)));
        }
        // Only the held entries the segment's first one sorts before are
        // merged with it (rounds overlap a little).
        let from = segment.first().map_or(self.held.len(), |first| {
            self.held.partition_point(|t| t < first)
        });
        let overlap = self.held.split_off(from);
        merge_sorted(&overlap, &segment, &mut self.held, |t| t);
        let n = if last {
            self.held.len()
        } else {
            match self.before_last {
                Some(bound) => self.held.partition_point(|t| t.time <= bound),
                None => 0,
            }
        };
        if n > 0 {
            self.handed = Some(self.held[n - 1].time);
        }
        batch.extend(self.held.drain(..n).map(|t| t.entry));
        Ok(())
    }

    /// The lowest file position of the entries held.
    fn lowest_pos(&self) -> Option<usize> {
        self.held.iter().map(|t| t.entry.pos()).min()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{rec, sample_body, ST};
    use super::super::{rtype, Layout};
    use super::*;

    /// Records as perf writes them: `rounds` rounds, each the buffers of
    /// three CPUs in turn (each in time order), a FINISHED_ROUND after each
    /// round, and a COMM now and then (without a time of its own, unless
    /// the attribute has sample ids on every record). Round `r`
    /// spans the times from `r * 1000`, but the buffers of odd CPUs start
    /// `late` earlier: up to 1000, no record is more than a round late.
    fn rounds_data(rounds: u64, late: u64) -> Vec<u8> {
        let mut data = Vec::new();
        let mut i = 0u64;
        for r in 0..rounds {
            for cpu in 0..3u64 {
                let base = (r * 1000 + 2000).saturating_sub(late * (cpu % 2));
                for k in 0..(12 + (r * 7 + cpu) % 13) {
                    i += 1;
                    if i.is_multiple_of(29) {
                        // pid and tid, then (as a sample id) the same
                        // and a time.
                        let ids = [7u8, 0, 0, 0, 8, 0, 0, 0];
                        let time = (base + k * 40).to_le_bytes();
                        data.extend(rec(rtype::COMM, &[ids, ids, time].concat()));
                    } else {
                        let chain = [i, i + 1];
                        data.extend(rec(
                            rtype::SAMPLE,
                            &sample_body(i, 7, base + k * 40, &chain),
                        ));
                    }
                }
            }
            data.extend(rec(rtype::FINISHED_ROUND, &[]));
        }
        data
    }

    fn attrs() -> AttrOf {
        // No sample id on other records: a COMM has no time of its own.
        AttrOf::new(vec![(Layout::new(ST, 0, false), vec![])])
    }

    /// The index of `data`, walked on one thread and sorted.
    fn indexed(data: &[u8]) -> Records<'_> {
        let e = Endian::default();
        Records::index(data, 0, data.len(), e, &attrs(), false, &|_, _| {})
    }

    /// The entries `data` streams, batch by batch, each with the `below`
    /// that came with it.
    fn streamed(data: &[u8], step: usize) -> Result<(Batches, Streamed), Unstreamed> {
        streamed_with(data, step, &attrs())
    }

    /// [`streamed`], with the attributes `attrs`.
    fn streamed_with(
        data: &[u8],
        step: usize,
        attrs: &AttrOf,
    ) -> Result<(Batches, Streamed), Unstreamed> {
        let mut batches = Vec::new();
        let e = Endian::default();
        let end = Records::stream(
            data,
            0,
            data.len(),
            e,
            attrs,
            step,
            &mut |_, batch, below| {
                batches.push((batch.to_vec(), below));
                true
            },
        )?;
        Ok((batches, end))
    }

    #[test]
    fn streamed_batches_are_the_time_order_of_the_index() {
        for late in [0, 500, 1000] {
            let data = rounds_data(80, late);
            let index = indexed(&data);
            for step in [1, 300, 4096, 1 << 20] {
                let (batches, end) = streamed(&data, step).expect("streamed");
                let all = batches.concat_entries();
                assert_eq!(all, index.entries, "late {late}, step {step}");
                assert_eq!(end.walked, index.walked);
                assert!(end.stopped.is_none());
                // Each `below` is at or before every record handed over
                // after it.
                let mut lowest_later = usize::MAX;
                for (batch, below) in batches.iter().rev() {
                    assert!(*below <= lowest_later, "late {late}, step {step}");
                    let lowest = batch.iter().map(|e| e.pos()).min();
                    lowest_later = lowest_later.min(lowest.unwrap_or(usize::MAX));
                }
                // Small steps hand over round by round, not all at the end.
                if step <= 300 {
                    let handed_early = batches[..batches.len() - 1].iter();
                    let early: usize = handed_early.map(|(b, _)| b.len()).sum();
                    assert!(early > all.len() * 9 / 10, "late {late}, step {step}");
                }
            }
        }
        // Without rounds, everything comes at the end, in the same order.
        let data: Vec<u8> = (0..500u64)
            .flat_map(|i| rec(rtype::SAMPLE, &sample_body(i, 7, (i * 7919) % 1000, &[i])))
            .collect();
        let (batches, _) = streamed(&data, 64).expect("streamed");
        assert_eq!(batches.iter().filter(|(b, _)| !b.is_empty()).count(), 1);
        assert_eq!(batches.concat_entries(), indexed(&data).entries);
    }

    #[test]
    fn a_record_more_than_a_round_late_or_a_compressed_one_is_not_streamed() {
        // Odd CPUs 2.5 rounds behind: a round starts before the end of the
        // round two before it, which was handed over.
        assert!(streamed(&rounds_data(40, 2500), 1).is_err());
        // A compressed record (its contents are decompressed after the
        // walk, as one stream).
        let mut data = rounds_data(20, 0);
        data.extend(rec(rtype::COMPRESSED, &[0; 16]));
        data.extend(rounds_data(20, 0));
        assert!(streamed(&data, 300).is_err());
    }

    #[test]
    fn late_lost_samples_are_handed_over_at_once_and_no_other_late_record_is() {
        // Sample ids on every record: each COMM has a time of its own.
        let attrs = AttrOf::new(vec![(Layout::new(ST, 0, true), vec![])]);
        let mut data = rounds_data(40, 500);
        let lost_from = data.len();
        // perf's count of lost samples, written last with a sample id of
        // all zeros (time 0): the index puts them first.
        let zero_id = [7u64.to_le_bytes(), [0; 8], [0; 8]].concat();
        for _ in 0..4 {
            data.extend(rec(rtype::LOST_SAMPLES, &zero_id));
        }
        let e = Endian::default();
        let index = Records::index(&data, 0, data.len(), e, &attrs, false, &|_, _| {});
        let is_lost = |x: &Entry| x.pos() >= lost_from;
        assert!(index.entries[..4].iter().all(is_lost));
        for step in [1, 300, 4096] {
            let (batches, end) = streamed_with(&data, step, &attrs).expect("streamed");
            assert!(batches.len() > 2, "handed over before the end");
            // The stream hands them over where they come, and every other
            // record in the index's order.
            let all = batches.concat_entries();
            let (lost, others): (Vec<Entry>, Vec<Entry>) = all.into_iter().partition(is_lost);
            assert_eq!(lost, index.entries[..4], "step {step}");
            assert_eq!(others, index.entries[4..], "step {step}");
            assert_eq!(end.walked, index.walked);
        }
        // Any other record that late ends the stream (a COMM of time 0).
        data.extend(rec(rtype::COMM, &[&[0; 8][..], &zero_id].concat()));
        assert!(streamed_with(&data, 300, &attrs).is_err());
        assert!(
            streamed(&data, 300).is_ok(),
            "without sample ids it has a time"
        );
    }

    #[test]
    fn a_corrupt_record_ends_the_stream_where_it_ends_the_index() {
        let mut data = rounds_data(60, 700);
        // The record that starts at or after the middle claims 4 bytes.
        let mut pos = 0;
        while pos < data.len() / 2 {
            pos += u16::from_le_bytes([data[pos + 6], data[pos + 7]]) as usize;
        }
        data[pos + 6..pos + 8].copy_from_slice(&4u16.to_le_bytes());
        let index = indexed(&data);
        assert!(index.stopped.is_some());
        let (batches, end) = streamed(&data, 300).expect("streamed");
        assert_eq!(batches.concat_entries(), index.entries);
        assert_eq!((end.walked, end.stopped), (index.walked, index.stopped));
    }

    /// Batches handed over, each with its `below`.
    type Batches = Vec<(Vec<Entry>, usize)>;

    trait Concat {
        fn concat_entries(&self) -> Vec<Entry>;
    }

    impl Concat for Batches {
        fn concat_entries(&self) -> Vec<Entry> {
            self.iter().flat_map(|(b, _)| b.iter().copied()).collect()
        }
    }
}
