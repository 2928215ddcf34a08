//! Fuzz target: bytes → the read and the analysis of a recording of the eBPF recorder
//! (SLSCHED), as `slowlab analyze` does them before naming frames: see
//! `sched_trace_steps.rs` and `analysis_steps.rs`, which the corpus's replay in CI runs too.

#[path = "analysis_steps.rs"]
mod analysis_steps;
#[path = "sched_trace_steps.rs"]
mod steps;

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let _ = steps::read_and_analyze(data);
    });
}
