//! Replays the committed corpus of the `etl` fuzz target (`fuzz/corpus/etl`,
//! and `fuzz/regressions/etl` when fuzzing found a crash) through what the
//! target runs — `read_bytes`, then `to_trace_and_paths` when it reads, then
//! the analysis of the trace (`analysis_steps.rs`, included from
//! `fuzz/fuzz_targets`) — and fails if any input panics. It also cuts every
//! corpus file at a few lengths and flips bytes, as a truncated or damaged
//! copy would be. It does not fuzz: `fuzz/run.sh etl` does (see
//! `fuzz/README.md`).

#[path = "../../../fuzz/fuzz_targets/analysis_steps.rs"]
mod analysis_steps;

/// What the fuzz target does with one input; true when it panicked.
fn panics(data: &[u8]) -> bool {
    std::panic::catch_unwind(|| {
        if let Ok(etl) = slowlab_etl::read_bytes(data) {
            let (trace, paths) = slowlab_etl::to_trace_and_paths(&etl);
            analysis_steps::analyze_trace(trace, Some(paths));
        }
    })
    .is_err()
}

#[test]
fn every_corpus_input_reads_without_a_panic() {
    let mut inputs = slowlab_testkit::fuzz_corpus("etl");
    inputs.extend(slowlab_testkit::fuzz_regressions("etl"));
    let mut panicked = Vec::new();
    let mut read = 0;
    for path in &inputs {
        let data = std::fs::read(path).expect("a corpus file");
        if panics(&data) {
            panicked.push(path.display().to_string());
        }
        read += slowlab_etl::read_bytes(&data).is_ok() as usize;
    }
    assert!(panicked.is_empty(), "panicked: {}", panicked.join(", "));
    // The corpus grew from real traces; minimized (`fuzz/run.sh cmin etl`)
    // it keeps the inputs of every path the fuzzer found, rejections
    // included, and 115 of its 257 read (2026-11-25). A third at least
    // must, or the replay would no longer exercise the reader.
    assert!(
        read * 3 >= inputs.len(),
        "only {read} of {} inputs read",
        inputs.len()
    );
}

#[test]
fn truncated_and_damaged_copies_never_panic() {
    let mut panicked = Vec::new();
    for path in slowlab_testkit::fuzz_corpus("etl") {
        let data = std::fs::read(&path).expect("a corpus file");
        for cut in [
            0,
            1,
            16,
            64,
            4096,
            4097,
            data.len() / 2,
            data.len().saturating_sub(1),
        ] {
            if panics(&data[..cut.min(data.len())]) {
                panicked.push(format!("{} cut at {cut}", path.display()));
            }
        }
        for (i, at) in (0..data.len()).step_by(997).enumerate() {
            let mut damaged = data.clone();
            damaged[at] ^= [0xff, 0x80, 0x01, 0x7f][i % 4];
            if panics(&damaged) {
                panicked.push(format!("{} byte {at} flipped", path.display()));
            }
        }
    }
    assert!(panicked.is_empty(), "panicked: {}", panicked.join(", "));
}
