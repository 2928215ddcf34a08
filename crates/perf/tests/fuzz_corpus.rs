//! Replays the committed corpus of the `perf_data` fuzz target
//! (`fuzz/corpus/perf_data`) and the inputs fuzzing found to crash
//! (`fuzz/regressions/perf_data`, each fixed since) through what the target
//! does: [`slowlab_perf::read_unsymbolized`], on one thread and on two, then
//! the analysis of the trace read (`analysis_steps.rs`, included from
//! `fuzz/fuzz_targets`). It fails when an input panics (or aborts the
//! process, as an allocation of gigabytes does), when the perf crate's guard
//! catches a panic inside `linux-perf-data` (which it silences in ordinary
//! use), or when the two reads differ (the records indexed then read, or
//! streamed as they are walked). It does not fuzz: `fuzz/run.sh perf_data`
//! does (see `fuzz/README.md`).

#[path = "../../../fuzz/fuzz_targets/analysis_steps.rs"]
mod analysis_steps;

#[test]
fn every_corpus_and_regression_input_reads_without_a_panic() {
    let mut inputs = slowlab_testkit::fuzz_corpus("perf_data");
    let corpus = inputs.len();
    inputs.extend(slowlab_testkit::fuzz_regressions("perf_data"));
    let mut failures = Vec::new();
    for path in &inputs {
        let data = std::fs::read(path).expect("a corpus file");
        let before = slowlab_perf::caught_panics();
        let escaped = std::panic::catch_unwind(|| {
            let one = slowlab_perf::read_unsymbolized(&data, 1);
            let two = slowlab_perf::read_unsymbolized(&data, 2);
            let same = format!("{one:?}") == format!("{two:?}");
            if let Ok(trace) = one {
                analysis_steps::analyze_trace(trace, None);
            }
            same
        });
        if escaped.is_err() {
            failures.push(format!("{}: panicked", path.display()));
        } else if matches!(escaped, Ok(false)) {
            failures.push(format!(
                "{}: differs on one thread and on two",
                path.display()
            ));
        } else if slowlab_perf::caught_panics() != before {
            let why = slowlab_perf::last_caught_panic().unwrap_or_default();
            failures.push(format!(
                "{}: the guard caught a panic inside linux-perf-data: {why}",
                path.display()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    println!(
        "replayed {corpus} corpus and {} regression inputs",
        inputs.len() - corpus
    );
}
