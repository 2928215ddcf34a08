//! The time buckets of the views that count per interval (`--timeline`, `--procs`,
//! `--faults`): how many there are over the trace, and which one a time falls in.
//!
//! The count is bounded: a trace whose span would need more than [`MAX_BUCKETS`] of the
//! width asked for (a damaged file with one time of centuries, or a day's ring at 1 ms)
//! gets wider buckets, and the views report the width used. It does not decide what a
//! bucket holds.

use slowlab_model::trace::Trace;

/// The most buckets a view makes: 100,000 rows of a day at ~1 s each.
pub const MAX_BUCKETS: u64 = 100_000;

/// Buckets of equal width from the trace's start to its end.
#[derive(Clone, Copy, Debug)]
pub struct TimeBuckets {
    start_ns: u64,
    width_ns: u64,
    count: usize,
}

impl TimeBuckets {
    /// Buckets of `bucket_s` seconds (at least 1 ms), or wider when the trace's span
    /// would need more than [`MAX_BUCKETS`] of them.
    pub fn new(trace: &Trace, bucket_s: f64) -> TimeBuckets {
        let start_ns = trace.meta.start_ns;
        let span = trace.meta.end_ns.saturating_sub(start_ns);
        let asked = (bucket_s.max(1e-3) * 1e9) as u64;
        let width_ns = asked.max(span / MAX_BUCKETS + 1);
        TimeBuckets {
            start_ns,
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
        b as f64 * self.width_s()
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
        let b = TimeBuckets::new(&spanning(1_000, 1_000 + 2_500_000_000), 1.0);
        assert_eq!(b.count(), 3);
        assert_eq!(b.width_s(), 1.0);
        assert_eq!(b.index(0), 0, "before the start: the first");
        assert_eq!(b.index(1_000 + 1_999_999_999), 1);
        assert_eq!(b.index(u64::MAX), 2, "after the end: the last");
        assert_eq!(b.end_ns(1), 1_000 + 2_000_000_000);
    }

    #[test]
    fn a_span_of_centuries_gets_wider_buckets_not_a_vector_of_terabytes() {
        let b = TimeBuckets::new(&spanning(0, u64::MAX), 1.0);
        assert!(b.count() as u64 <= MAX_BUCKETS, "{} buckets", b.count());
        assert!(b.width_s() > 1e5, "width {} s", b.width_s());
        assert_eq!(b.index(u64::MAX), b.count() - 1);
        assert_eq!(b.end_ns(b.count() - 1), u64::MAX, "the end saturates");

        // A day at 1 ms would be 86.4 M buckets: 100,000 of 0.864 s.
        let day = TimeBuckets::new(&spanning(0, 86_400_000_000_000), 0.001);
        assert_eq!(day.count() as u64, MAX_BUCKETS);
        assert!((day.width_s() - 0.864).abs() < 1e-6, "{}", day.width_s());
        assert_eq!(
            wider_than_asked(0.001, day.width_s()).as_deref(),
            Some("buckets of 864 ms instead of 1 ms: the trace spans more than 100000 of those")
        );
        assert_eq!(wider_than_asked(1.0, 1.0), None);
    }
}
