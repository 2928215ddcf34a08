//! What the `sched_trace` fuzz target does with one input, in a file of its own so that
//! `crates/schedrec/tests/fuzz_corpus.rs` replays the corpus through the very same steps
//! (it includes this file with `#[path]`): bytes → what `slowlab analyze` and `diagnose`
//! do with a recording of the eBPF recorder (`slowlab record --backend bpf`, the SLSCHED
//! format), frames left unnamed (so nothing is read from disk):
//! - the read: `slowlab_bpf::sched::parse_sched`, `slowlab_schedrec::build_trace` (records
//!   in time order, lifetimes, stacks, syscalls, faults, disk requests), `captured_paths`;
//! - the analysis of the trace it gives: the scheduler replay, the root's critical path,
//!   every detector, the per-bucket views (`--timeline`, `--procs`, `--faults`) and the
//!   interactive page's data.
//!
//! A damaged file is what this feeds the analysis, which perf.data's target does not
//! reach: a time of centuries, a thread that switches to itself, a stack id no stack has.

use slowlab_analyze::analysis::{Analysis, Page, Root};
use slowlab_analyze::select::Selection;
use slowlab_model::bundle::TraceBundle;

/// Reads and analyzes `data`; the trace's warnings when it was a recording at all.
pub fn read_and_analyze(data: &[u8]) -> Option<Vec<String>> {
    let log = slowlab_bpf::sched::parse_sched(data).ok()?;
    let mut opts = slowlab_schedrec::ReadOptions::default();
    opts.symbols.symbolize = false;
    let bundle = TraceBundle {
        trace: slowlab_schedrec::build_trace(&log, &opts),
        paths: Some(slowlab_schedrec::captured_paths(&log)),
        cgroups: None,
        warnings: Vec::new(),
    };
    let analysis = Analysis::new(&bundle, Root::Default);
    let all = Selection::default();
    let trace = &bundle.trace;
    let _ = slowlab_analyze::timeline::timeline_view(trace, analysis.schedule(), &all, 1.0, 3);
    let _ = slowlab_analyze::procs::procs_view(trace, &all, 1.0, 10);
    let _ = slowlab_analyze::faults::faults_view(trace, &all, 1.0, Some(10));
    let _ = analysis.report_data(&Page {
        title: "fuzz",
        command: &[],
        selection: &all,
        filter_text: &[],
        warnings: &[],
    });
    Some(trace.stats.warnings.clone())
}
