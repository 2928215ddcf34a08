//! Putting the record index in time order: perf writes its records in
//! rounds of per-CPU buffers, runs in time order that overlap only a little,
//! so the runs are merged where they belong ([`merge_runs`]), with a sort
//! (on two threads for a big index) when records are far out of order.
//!
//! It does not walk the records (`walk`) nor read them (`records`).

use super::{Entry, Timed};

/// Records from which the index is sorted on two threads.
pub(super) const SORT_ON_TWO_THREADS: usize = 1 << 18;

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
pub(super) fn time_ordered(mut entries: Vec<Timed>, two_threads: bool) -> Vec<Entry> {
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
    merge_sorted(low, high, &mut merged, |t| t.entry);
    merged
}

/// Sorts `entries` (by time, then file order): by merging their runs, or
/// with a sort when they are far out of order.
pub(super) fn sort_timed(entries: &mut [Timed]) {
    if !merge_runs(entries) {
        entries.sort_unstable();
    }
}

/// Appends the sorted `a` and `b` to `out` as one sorted run, each entry
/// as `f` makes it.
pub(super) fn merge_sorted<T>(a: &[Timed], b: &[Timed], out: &mut Vec<T>, f: impl Fn(Timed) -> T) {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i] <= b[j] {
            out.push(f(a[i]));
            i += 1;
        } else {
            out.push(f(b[j]));
            j += 1;
        }
    }
    out.extend(a[i..].iter().chain(&b[j..]).map(|&t| f(t)));
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
