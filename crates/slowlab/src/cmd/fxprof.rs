//! The glue of `--fxprof` (on `analyze` and `diagnose`): the selection's
//! threads and time range, the replayed blocked stretches and the findings,
//! computed by `slowlab_analyze`, handed to `slowlab_report::fxprof`, which
//! builds the profile's bytes. Writing them is the caller's.

use std::path::Path;

use slowlab_analyze::select::Selection;
use slowlab_analyze::states::ThreadStates;
use slowlab_model::findings::Finding;
use slowlab_model::trace::Trace;
use slowlab_report::fxprof::{
    fxprof_bytes, wants_gzip, FxprofInput, MAX_BLOCKED_MARKERS, MIN_BLOCKED_MARKER_NS,
};

/// The Firefox Profiler profile of the selection, gzipped when `path` ends
/// in `.gz`.
pub fn profile_bytes(
    trace: &Trace,
    sel: &Selection,
    findings: &[Finding],
    path: &Path,
) -> anyhow::Result<Vec<u8>> {
    let threads = sel.thread_mask(trace);
    let range_ns = sel.time_range_ns(trace);
    let blocked = ThreadStates::build(trace).blocked_stretches(
        trace,
        &threads,
        range_ns,
        MIN_BLOCKED_MARKER_NS,
        MAX_BLOCKED_MARKERS,
    );
    let input = FxprofInput {
        trace,
        threads: &threads,
        range_ns,
        blocked: &blocked,
        findings,
    };
    Ok(fxprof_bytes(&input, wants_gzip(path))?)
}
