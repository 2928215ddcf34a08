//! Fuzz target: bytes → the perf crate's whole read of a perf.data image
//! (header repair, `linux-perf-data`'s header and feature parsing, the
//! record index and decoding, the trace model), without symbolization.
//!
//! A panic inside `linux-perf-data` is caught by the perf crate's guard and
//! silenced; the target aborts when the guard's count grows, so afl sees
//! it as a crash like any other panic. The image is read on one thread
//! (records indexed, then read) and on two (streamed as they are walked):
//! the two traces must be the same, or it aborts too. The trace read is then
//! analyzed (`analysis_steps.rs`), as every command does.

#[path = "analysis_steps.rs"]
mod analysis_steps;


fn main() {
    afl::fuzz!(|data: &[u8]| {
        let before = slowlab_perf::caught_panics();
        let one = slowlab_perf::read_unsymbolized(data, 1);
        let two = slowlab_perf::read_unsymbolized(data, 2);
        if slowlab_perf::caught_panics() != before {
            let why = slowlab_perf::last_caught_panic().unwrap_or_default();
            eprintln!("the perf crate's guard caught a panic inside linux-perf-data: {why}");
            std::process::abort();
        }
        if format!("{one:?}") != format!("{two:?}") {
            eprintln!("read on one thread and on two, the traces differ");
            std::process::abort();
        }
        if let Ok(trace) = one {
            analysis_steps::analyze_trace(trace, None);
        }
    });
}
