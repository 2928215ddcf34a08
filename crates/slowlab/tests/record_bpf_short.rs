//! `slowlab record --backend bpf` on processes too short for the drain's usual pace: a
//! shell runs a 20 ms computation 20 times; each process is gone before the recorder
//! would read its mappings at its first user stack (the drain wakes every 50 ms or a
//! quarter of a ring), so its frames stayed addresses (57% of `hot_loop`'s samples were
//! named on a busy machine). The recorder now reads a process at its exec, which wakes
//! the drain: the samples in the computation's own code are nearly all named, as its
//! function.
//!
//! Skips, with the reason, where the process is not root (the recorder loads BPF
//! programs).

use std::path::Path;

mod common;
use common::{json, one_recording_at_a_time, slowlab};

#[test]
fn short_processes_have_their_own_code_named() {
    require_bpf!();
    let dir = tempfile::tempdir().unwrap();
    let spin = common::compile_workload("why/spin.c", dir.path(), "spin");
    let trace = dir.path().join("short.slr");
    let script = format!("for i in $(seq 20); do {} 0.02; done", spin.display());
    let out = {
        let _one = one_recording_at_a_time();
        slowlab()
            .args(["record", "--backend", "bpf", "-o"])
            .arg(&trace)
            .args(["--", "sh", "-c", &script])
            .output()
            .unwrap()
    };
    slowlab_testkit::assert_succeeded(&out);
    let v = analyze_spin(&trace);
    let functions = v["functions"].as_array().expect("functions");
    // The `column` (self or inclusive samples) of the functions that are `such`, summed.
    let count = |column: &str, such: &dyn Fn(&serde_json::Value) -> bool| -> u64 {
        functions
            .iter()
            .filter(|f| such(f))
            .map(|f| f[column].as_u64().unwrap())
            .sum()
    };
    let unnamed = count("self", &|f| f["module"] == "[unknown]");
    let own_code = count("self", &|f| f["module"] == "spin");
    let crunch_self = count("self", &|f| f["name"] == "crunch" && f["module"] == "spin");
    let total = v["samples"].as_u64().unwrap();
    let crunch = count("inclusive", &|f| f["name"] == "crunch");
    eprintln!(
        "spin: {total} samples, {crunch} under crunch ({crunch_self} in it of {own_code} \
         in spin's code), {unnamed} in no module"
    );
    // 20 × 20 ms of CPU at 1000 Hz: ~400 samples.
    assert!(total >= 200, "too few samples of spin: {total}");
    // What is checked is the naming: the samples in spin's own code, or in code no
    // mapping named (where they went before the fix), are nearly all crunch's, named.
    // Its share of all samples moves with the machine: 91% in a CI run, 79% in another
    // where the loader's start took 7% of them (`get_common_indices` under 35 of 510).
    assert!(
        crunch_self as f64 >= 0.9 * (own_code + unnamed) as f64
            && unnamed as f64 <= 0.05 * total as f64,
        "crunch {crunch_self} of {own_code} in spin's code, {unnamed} unnamed: {functions:#?}"
    );
    // And crunch is most of the run, interrupts included (its inclusive share).
    assert!(
        crunch as f64 >= 0.6 * total as f64,
        "crunch under {crunch} of {total} samples: {functions:#?}"
    );
}

/// `analyze --json` of the spin processes' samples.
fn analyze_spin(trace: &Path) -> serde_json::Value {
    let out = slowlab()
        .arg("analyze")
        .arg(trace)
        .args(["--filter", "process=spin", "--json"])
        .output()
        .unwrap();
    json(&out)
}
