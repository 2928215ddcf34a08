//! Replays the committed corpus of the `lab_import` fuzz target
//! (`fuzz/corpus/lab_import`, and `fuzz/regressions/lab_import` when fuzzing
//! found a crash) through what `slowlab import` does before rendering, as
//! the target does: [`parse_results`], then [`complete`] on each result. It
//! fails if any input panics. It does not fuzz: `fuzz/run.sh lab_import`
//! does (see `fuzz/README.md`).

use std::path::{Path, PathBuf};

use slowlab_lab::verdicts::{complete, parse_results};

fn fuzz_dir(kind: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz")
        .join(kind)
        .join("lab_import")
}

/// The files of `dir`, sorted; `must_exist` makes a missing or empty
/// directory a failure (the corpus must be there for the test to mean
/// anything).
fn files(dir: &Path, must_exist: bool) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .map(|e| e.expect("a directory entry").path())
            .filter(|p| p.is_file())
            .collect(),
        Err(e) => {
            assert!(!must_exist, "cannot read {}: {e}", dir.display());
            Vec::new()
        }
    };
    assert!(
        !must_exist || !out.is_empty(),
        "{} is empty: the fuzz corpus is missing",
        dir.display()
    );
    out.sort();
    out
}

#[test]
fn every_corpus_input_imports_without_a_panic() {
    let mut inputs = files(&fuzz_dir("corpus"), true);
    inputs.extend(files(&fuzz_dir("regressions"), false));
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
