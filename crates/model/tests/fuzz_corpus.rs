//! Replays the committed corpus of the `cgroup_notes` fuzz target
//! (`fuzz/corpus/cgroup_notes`, and `fuzz/regressions/cgroup_notes` when
//! fuzzing found a crash) through [`CgroupInfo::from_json`], the function the
//! target calls, and fails if any input panics. It does not fuzz:
//! `fuzz/run.sh cgroup_notes` does (see `fuzz/README.md`).

use std::path::{Path, PathBuf};

use slowlab_model::bundle::CgroupInfo;

fn fuzz_dir(kind: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz")
        .join(kind)
        .join("cgroup_notes")
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
fn every_corpus_input_parses_without_a_panic() {
    let mut inputs = files(&fuzz_dir("corpus"), true);
    inputs.extend(files(&fuzz_dir("regressions"), false));
    let mut panicked = Vec::new();
    let mut parsed = 0;
    for path in &inputs {
        let data = std::fs::read(path).expect("a corpus file");
        match std::panic::catch_unwind(|| CgroupInfo::from_json(&data)) {
            Ok(r) => parsed += usize::from(r.is_ok()),
            Err(_) => panicked.push(path.display().to_string()),
        }
    }
    assert!(panicked.is_empty(), "panicked: {}", panicked.join(", "));
    // The seeds are notes `slowlab record` could write: some must parse.
    assert!(parsed > 0, "no corpus input parsed as cgroup notes");
    println!("replayed {} inputs, {parsed} parsed", inputs.len());
}
