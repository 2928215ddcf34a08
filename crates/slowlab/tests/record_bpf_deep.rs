//! The eBPF recorder walks user stacks itself, along the frame pointers (sched.bpf.c's
//! `user_stack_id`: the kernel's walk ended each stack with a page fault, most of its
//! cost). A program spinning at the bottom of a 100-call recursion, with frames smaller
//! than the walk's 512-byte reads (several frame records in each) and larger (a read for
//! each), must have every frame in its samples, and the same stack as perf's backend,
//! whose frames the kernel walks.
//!
//! Skips, with the reason, where perf cannot record or the process is not root.

use std::path::Path;

mod common;
use common::{one_recording_at_a_time, slowlab};

/// The most-sampled stack of process `deep` in `trace`, outermost first.
fn heaviest_stack(trace: &Path, dir: &Path, name: &str) -> Vec<String> {
    let folded = dir.join(format!("{name}.folded"));
    let out = slowlab()
        .arg("analyze")
        .arg(trace)
        .args(["--filter", "process=deep", "--collapsed"])
        .arg(&folded)
        .output()
        .unwrap();
    slowlab_testkit::assert_succeeded(&out);
    let text = std::fs::read_to_string(&folded).unwrap();
    let (stack, _) = text
        .lines()
        .filter_map(|l| {
            let (stack, n) = l.rsplit_once(' ')?;
            Some((stack, n.parse::<u64>().ok()?))
        })
        .max_by_key(|&(_, n)| n)
        .unwrap_or_else(|| panic!("no samples of deep in {}", trace.display()));
    stack.split(';').map(str::to_string).collect()
}

#[test]
fn deep_user_stacks_are_walked_whole_and_as_perf_walks_them() {
    require_perf!();
    require_bpf!();
    let dir = tempfile::tempdir().unwrap();
    let deep = common::compile_workload("bpf/deep.c", dir.path(), "deep");
    const DEPTH: usize = 100;
    for frame_bytes in ["16", "2048"] {
        let mut stacks = Vec::new();
        for backend in ["bpf", "perf"] {
            let trace = dir.path().join(format!("{backend}-{frame_bytes}.trace"));
            let out = {
                let _one = one_recording_at_a_time();
                slowlab()
                    .args(["record", "--backend", backend, "-o"])
                    .arg(&trace)
                    .arg("--")
                    .arg(&deep)
                    .args([&DEPTH.to_string(), frame_bytes, "0.4"])
                    .output()
                    .unwrap()
            };
            assert!(
                out.status.success(),
                "{backend}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let stack = heaviest_stack(&trace, dir.path(), &format!("{backend}-{frame_bytes}"));
            let descents = stack.iter().filter(|f| *f == "descend").count();
            assert_eq!(
                descents, DEPTH,
                "{backend}, {frame_bytes}-byte frames: {stack:?}"
            );
            assert!(
                stack.iter().any(|f| f == "main") && stack.last().is_some_and(|f| f == "bottom"),
                "{backend}, {frame_bytes}-byte frames: {stack:?}"
            );
            stacks.push(stack);
        }
        assert_eq!(
            stacks[0], stacks[1],
            "bpf, then perf ({frame_bytes}-byte frames)"
        );
    }
}
