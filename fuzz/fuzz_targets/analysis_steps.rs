//! What the fuzz targets do with a trace once it has been read: the analysis every
//! command makes of it (the scheduler replay, the root's critical path, every detector,
//! the per-bucket views `--timeline`, `--procs` and `--faults`, and the interactive page's
//! data). In a file of its own, included with `#[path]` by the targets (`sched_trace`,
//! `perf_data`, `etl`) and by the replays of their corpora in CI (`crates/schedrec`,
//! `crates/perf` and `crates/etl`'s `tests/fuzz_corpus.rs`), so that both run the very
//! same steps.
//!
//! A damaged file is what this feeds the analysis: a time of centuries, a CPU of
//! billions, a thread that switches to itself, a stack id no stack has.

use slowlab_analyze::analysis::{Analysis, Page, Root};
use slowlab_analyze::select::Selection;
use slowlab_model::bundle::{CapturedPath, TraceBundle};
use slowlab_model::trace::Trace;

/// Runs the analysis of a trace read, with the paths read beside it; what it finds is
/// dropped.
pub fn analyze_trace(trace: Trace, paths: Option<Vec<CapturedPath>>) {
    let bundle = TraceBundle {
        trace,
        paths,
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
}
