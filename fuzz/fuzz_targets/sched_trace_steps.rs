//! What the `sched_trace` fuzz target does with one input, in a file of its own so that
//! `crates/schedrec/tests/fuzz_corpus.rs` replays the corpus through the very same steps
//! (it includes this file and `analysis_steps.rs` with `#[path]`): bytes → the read of a
//! recording of the eBPF recorder (`slowlab record --backend bpf`, the SLSCHED format),
//! frames left unnamed (so nothing is read from disk): `slowlab_bpf::sched::parse_sched`,
//! `slowlab_schedrec::build_trace` (records in time order, lifetimes, stacks, syscalls,
//! faults, disk requests) and `captured_paths`; then the analysis of the trace it gives
//! (`crate::analysis_steps`).

/// Reads and analyzes `data`; the trace's warnings when it was a recording at all.
pub fn read_and_analyze(data: &[u8]) -> Option<Vec<String>> {
    let log = slowlab_bpf::sched::parse_sched(data).ok()?;
    let mut opts = slowlab_schedrec::ReadOptions::default();
    opts.symbols.symbolize = false;
    let trace = slowlab_schedrec::build_trace(&log, &opts);
    let warnings = trace.stats.warnings.clone();
    crate::analysis_steps::analyze_trace(trace, Some(slowlab_schedrec::captured_paths(&log)));
    Some(warnings)
}
