//! Replays the committed corpus of the `cgroup_notes` fuzz target
//! (`fuzz/corpus/cgroup_notes`, and `fuzz/regressions/cgroup_notes` when
//! fuzzing found a crash) through [`CgroupInfo::from_json`], the function the
//! target calls, and fails if any input panics. It does not fuzz:
//! `fuzz/run.sh cgroup_notes` does (see `fuzz/README.md`).

use slowlab_model::bundle::CgroupInfo;

#[test]
fn every_corpus_input_parses_without_a_panic() {
    let mut inputs = slowlab_testkit::fuzz_corpus("cgroup_notes");
    inputs.extend(slowlab_testkit::fuzz_regressions("cgroup_notes"));
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
