//! The check both recorders' stop tests end with (`capture.rs`, `sched_stop.rs`, which
//! include it as `#[path = "support/stop.rs"] mod stop;`): the recording ended when it was
//! stopped, though its programs are detached in the background after.

/// Prints when the stop was asked (`asked`), returned (`stopped`) and when the `last` of
/// `what` was recorded (monotonic ns), and asserts that it came less than 250 ms after the
/// stop was asked: a recorder notices a stop within its poll (50 ms) or a pass of its
/// ring, and records nothing after it, also while its programs are being detached (0.5 to
/// 3.6 s here).
pub fn assert_ended_at_the_stop(what: &str, asked: u64, stopped: u64, last: u64) {
    let ms = |ns: u64| ns as f64 / 1e6;
    eprintln!(
        "stop asked at 0 ms, returned at {:.1} ms; last {what} at {:.1} ms",
        ms(stopped - asked),
        ms(last.saturating_sub(asked))
    );
    assert!(
        last < asked + 250_000_000,
        "{what} recorded {:.1} ms after the stop was asked (it returned after {:.1} ms)",
        ms(last - asked),
        ms(stopped - asked)
    );
}
