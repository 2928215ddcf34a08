//! Replays the committed corpus of the `lab_import` fuzz target
//! (`fuzz/corpus/lab_import`, and `fuzz/regressions/lab_import` when fuzzing
//! found a crash) through what `slowlab import` does before rendering, as
//! the target does: [`parse_results`], then [`complete`] on each result. It
//! fails if any input panics. It does not fuzz: `fuzz/run.sh lab_import`
//! does (see `fuzz/README.md`).

use slowlab_lab::verdicts::{complete, parse_results};

#[test]
fn every_corpus_input_imports_without_a_panic() {
    let mut inputs = slowlab_testkit::fuzz_corpus("lab_import");
    inputs.extend(slowlab_testkit::fuzz_regressions("lab_import"));
    let mut panicked = Vec::new();
    let mut parsed = 0;
    for path in &inputs {
        let data = std::fs::read(path).expect("a corpus file");
        let Ok(text) = std::str::from_utf8(&data) else {
            continue; // the target skips what is not UTF-8, as `import` refuses it
        };
        let run = std::panic::catch_unwind(|| match parse_results(text) {
            Ok(mut results) => {
                results.iter_mut().for_each(complete);
                true
            }
            Err(_) => false,
        });
        match run {
            Ok(ok) => parsed += usize::from(ok),
            Err(_) => panicked.push(path.display().to_string()),
        }
    }
    assert!(panicked.is_empty(), "panicked: {}", panicked.join(", "));
    // The seeds are real results of the Windows probes: some must parse.
    assert!(parsed > 0, "no corpus input parsed as results");
    println!("replayed {} inputs, {parsed} parsed", inputs.len());
}
