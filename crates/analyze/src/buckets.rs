//! The time buckets of the views that count per interval (`--timeline`, `--procs`,
//! `--faults`): how many there are over the trace (or the part of it a selection's
//! `--from`/`--to` keeps), and which one a time falls in.
//!
//! The count is bounded: a trace whose span would need more than [`MAX_BUCKETS`] of the
//! width asked for (a damaged file with one time of centuries, or a day's ring at 1 ms)
//! gets wider buckets, and the views report the width used. It does not decide what a
//! bucket holds.

use slowlab_model::trace::Trace;

use crate::select::Selection;

/// The most buckets a view makes: 100,000 rows of a day at ~1 s each.
pub const MAX_BUCKETS: u64 = 100_000;

/// Buckets of equal width from the trace's start (or `--from`) to its end (or `--to`).
#[derive(Clone, Copy, Debug)]
pub struct TimeBuckets {
    start_ns: u64,
    /// Seconds from the trace's start to the first bucket's.
    offset_s: f64,
    width_ns: u64,
    count: usize,
}

impl TimeBuckets {
    /// Buckets of `bucket_s` seconds (at least 1 ms) over the time `sel` keeps of the
    /// trace, or wider when that span would need more than [`MAX_BUCKETS`] of them.
    pub fn new(trace: &Trace, sel: &Selection, bucket_s: f64) -> TimeBuckets {
        let (from, to) = sel.time_range_ns(trace);
        let start_ns = trace.meta.start_ns.max(from);
        // The last nanosecond that falls in a bucket: the trace's last event's, or the
        // one before `--to` (an end it excludes).
        let last_ns = trace.meta.end_ns.min(to.saturating_sub(1)).max(start_ns);
        let span = last_ns - start_ns;
        let asked = (bucket_s.max(1e-3) * 1e9) as u64;
        let width_ns = asked.max(span / MAX_BUCKETS + 1);
        TimeBuckets {
            start_ns,
            offset_s: start_ns.saturating_sub(trace.meta.start_ns) as f64 / 1e9,
            width_ns,
            count: (span / width_ns + 1) as usize,
        }
    }

    pub fn count(&self) -> usize {
        self.count
    }

    /// The bucket of time `ns` (before the start: the first; after the end: the last).
    pub fn index(&self, ns: u64) -> usize {
        ((ns.saturating_sub(self.start_ns) / self.width_ns) as usize).min(self.count - 1)
    }

    /// When bucket `b` ends, in the trace's clock.
    pub fn end_ns(&self, b: usize) -> u64 {
        self.start_ns
            .saturating_add((b as u64 + 1).saturating_mul(self.width_ns))
    }

    /// Where bucket `b` starts, in seconds from the trace's start.
    pub fn start_s(&self, b: usize) -> f64 {
        self.offset_s + b as f64 * self.width_s()
    }

    /// Where bucket `b` starts, in the trace's clock.
    pub fn start_ns(&self, b: usize) -> u64 {
        self.start_ns
            .saturating_add((b as u64).saturating_mul(self.width_ns))
    }

    /// The width used, in seconds.
    pub fn width_s(&self) -> f64 {
        self.width_ns as f64 / 1e9
    }
}

/// What to tell the user when a view's buckets came out wider than `--bucket` asked (the
/// trace spans more than [`MAX_BUCKETS`] of them: a long ring, or a damaged file's time
/// of centuries); `None` when they did not.
pub fn wider_than_asked(asked_s: f64, used_s: f64) -> Option<String> {
    (used_s > asked_s * (1.0 + 1e-9)).then(|| {
        format!(
            "buckets of {} instead of {}: the trace spans more than {MAX_BUCKETS} of those",
            slowlab_model::units::seconds(used_s),
            slowlab_model::units::seconds(asked_s),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spanning(start_ns: u64, end_ns: u64) -> Trace {
        let mut trace = Trace::default();
        trace.meta.start_ns = start_ns;
        trace.meta.end_ns = end_ns;
        trace
    }

    #[test]
    fn buckets_have_the_width_asked_for_and_cover_the_trace() {
        let all = Selection::default();
        let b = TimeBuckets::new(&spanning(1_000, 1_000 + 2_500_000_000), &all, 1.0);
        assert_eq!(b.count(), 3);
        assert_eq!(b.width_s(), 1.0);
        assert_eq!(b.index(0), 0, "before the start: the first");
        assert_eq!(b.index(1_000 + 1_999_999_999), 1);
        assert_eq!(b.index(u64::MAX), 2, "after the end: the last");
        assert_eq!(b.end_ns(1), 1_000 + 2_000_000_000);
    }

    #[test]
    fn buckets_cover_the_range_from_to_keeps_and_are_named_from_the_trace_start() {
        let trace = spanning(1_000, 1_000 + 10_000_000_000);
        let range = |from_s, to_s| Selection {
            from_s,
            to_s,
            ..Selection::default()
        };
        let b = TimeBuckets::new(&trace, &range(Some(2.0), Some(4.0)), 0.5);
        assert_eq!(b.count(), 4, "[2, 4) in halves");
        assert_eq!(b.start_s(0), 2.0);
        assert_eq!(b.start_s(3), 3.5);
        assert_eq!(b.start_ns(0), 1_000 + 2_000_000_000);
        assert_eq!(b.index(1_000 + 3_999_999_999), 3);
        // A range past the trace's end stops at it; one before its start is one bucket.
        assert_eq!(
            TimeBuckets::new(&trace, &range(Some(8.0), Some(99.0)), 1.0).count(),
            3
        );
        assert_eq!(
            TimeBuckets::new(&trace, &range(None, Some(2.5)), 1.0).count(),
            3
        );
        assert_eq!(
            TimeBuckets::new(&trace, &range(Some(50.0), None), 1.0).count(),
            1
        );
    }

    #[test]
    fn a_span_of_centuries_gets_wider_buckets_not_a_vector_of_terabytes() {
        let all = Selection::default();
        let b = TimeBuckets::new(&spanning(0, u64::MAX), &all, 1.0);
        assert!(b.count() as u64 <= MAX_BUCKETS, "{} buckets", b.count());
        assert!(b.width_s() > 1e5, "width {} s", b.width_s());
        assert_eq!(b.index(u64::MAX), b.count() - 1);
        assert_eq!(b.end_ns(b.count() - 1), u64::MAX, "the end saturates");

        // A day at 1 ms would be 86.4 M buckets: 100,000 of 0.864 s.
        let day = TimeBuckets::new(&spanning(0, 86_400_000_000_000), &all, 0.001);
        assert_eq!(day.count() as u64, MAX_BUCKETS);
        assert!((day.width_s() - 0.864).abs() < 1e-6, "{}", day.width_s());
        assert_eq!(
            wider_than_asked(0.001, day.width_s()).as_deref(),
            Some("buckets of 864 ms instead of 1 ms: the trace spans more than 100000 of those")
        );
        assert_eq!(wider_than_asked(1.0, 1.0), None);
    }
}
