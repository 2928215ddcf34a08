//! Fuzz target: bytes → `slowlab_etl::read_bytes` (an ETL file, or the zip
//! WPR and PerfView write) and, when that reads, the conversion into the
//! trace model with the file operations' paths (`to_trace_and_paths`) —
//! everything `slowlab analyze trace.etl` does before the views; then the
//! analysis of that trace (`analysis_steps.rs`), as every command does.

#[path = "analysis_steps.rs"]
mod analysis_steps;

fn main() {
    afl::fuzz!(|data: &[u8]| {
        if let Ok(etl) = slowlab_etl::read_bytes(data) {
            let (trace, paths) = slowlab_etl::to_trace_and_paths(&etl);
            analysis_steps::analyze_trace(trace, Some(paths));
        }
    });
}
