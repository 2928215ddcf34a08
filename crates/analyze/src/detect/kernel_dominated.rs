//! `kernel-dominated`: a process spending nearly all its CPU in the kernel,
//! most of it through one entry point (one syscall, or page faults) — the
//! shape of a pathology that lives in the operating system rather than in
//! the program's own code.
//!
//! Signature and thresholds, per process:
//! - at least `MIN_SAMPLES` samples and `MIN_TRACE_SHARE` of all samples;
//! - at least `MIN_KERNEL_SHARE` of them with the innermost frame in the
//!   kernel;
//! - one kernel entry point (the outermost kernel frame that names a
//!   syscall or the fault handler) holds at least `MIN_ENTRY_SHARE` of the
//!   kernel samples, and it is not a bulk data mover (read, write, copy,
//!   splice: a process moving data is doing its job).
//!
//! Cost: the process's kernel samples; stack: its top kernel stack.

use std::collections::HashMap;

use slowlab_model::findings::Finding;
use slowlab_model::trace::{ProcIdx, StackIdx};

use super::Context;
use crate::evidence;
use crate::select::BuildFx;

pub const MIN_SAMPLES: u64 = 200;
pub const MIN_TRACE_SHARE: f64 = 0.05;
pub const MIN_KERNEL_SHARE: f64 = 0.85;
pub const MIN_ENTRY_SHARE: f64 = 0.6;

fn is_entry(name: &str) -> bool {
    name.starts_with("__x64_sys_")
        || name.starts_with("__arm64_sys_")
        || name.starts_with("__do_sys_")
        || name == "exc_page_fault"
        || name == "do_mem_abort"
}

fn moves_data(entry: &str) -> bool {
    [
        "read",
        "write",
        "pread",
        "pwrite",
        "copy_file_range",
        "splice",
        "sendfile",
        "sendmsg",
        "recvmsg",
        "sendto",
        "recvfrom",
    ]
    .iter()
    .any(|w| {
        entry.ends_with(&format!("sys_{w}"))
            || entry.ends_with(&format!("sys_{w}64"))
            || entry.ends_with(&format!("sys_{w}v"))
    })
}

pub fn detect(cx: &Context) -> Vec<Finding> {
    let trace = cx.trace;
    let total = trace.samples.len() as u64;
    // Per process: kernel samples by entry point, and by stack.
    let mut entries: HashMap<ProcIdx, HashMap<String, u64>, BuildFx> = HashMap::default();
    let mut stacks: HashMap<ProcIdx, HashMap<Option<StackIdx>, u64, BuildFx>, BuildFx> =
        HashMap::default();
    let mut counts: HashMap<ProcIdx, (u64, u64), BuildFx> = HashMap::default();
    let mut entry_of: HashMap<Option<StackIdx>, Option<String>, BuildFx> = HashMap::default();
    let s = &trace.samples;
    for i in 0..s.len() {
        let proc = cx.process_of(s.thread[i]);
        let c = counts.entry(proc).or_default();
        c.0 += 1;
        let stack = s.stack[i];
        let kernel = trace
            .stack_frames(stack)
            .next()
            .is_some_and(|f| trace.frames[f.ix()].kernel);
        if !kernel {
            continue;
        }
        c.1 += 1;
        let entry = entry_of
            .entry(stack)
            .or_insert_with(|| {
                trace
                    .stack_frames(stack)
                    .filter(|&f| trace.frames[f.ix()].kernel)
                    .map(|f| trace.function_name(trace.frame_function(f)))
                    .filter(|n| is_entry(n))
                    .last()
                    .map(str::to_string)
            })
            .clone()
            .unwrap_or_else(|| "[other kernel]".into());
        *entries.entry(proc).or_default().entry(entry).or_default() += 1;
        *stacks.entry(proc).or_default().entry(stack).or_default() += 1;
    }
    let mut findings = Vec::new();
    for (proc, (samples, kernel)) in counts {
        if samples < MIN_SAMPLES || (samples as f64) < MIN_TRACE_SHARE * total as f64 {
            continue;
        }
        let kernel_share = kernel as f64 / samples as f64;
        if kernel_share < MIN_KERNEL_SHARE {
            continue;
        }
        let Some((entry, n)) = entries
            .get(&proc)
            .and_then(|e| e.iter().max_by_key(|(_, n)| **n))
        else {
            continue;
        };
        let entry_share = *n as f64 / kernel.max(1) as f64;
        if entry_share < MIN_ENTRY_SHARE || moves_data(entry) || entry == "[other kernel]" {
            continue;
        }
        let top_stack = stacks
            .get(&proc)
            .and_then(|m| m.iter().max_by_key(|(_, n)| **n).map(|(s, _)| *s))
            .flatten();
        let culprit = cx.culprit(proc);
        findings.push(cx.finding(
            "kernel-dominated",
            format!(
                "{} spends {:.0}% of its CPU in the kernel, {:.0}% of that in {entry}",
                culprit.comm.as_deref().unwrap_or("?"),
                kernel_share * 100.0,
                entry_share * 100.0
            ),
            kernel as f64 * cx.sample_s(),
            culprit,
            evidence! {
                "samples" => samples,
                "kernel_samples" => kernel,
                "kernel_share" => kernel_share,
                "entry_point" => entry,
                "entry_share" => entry_share,
            },
            cx.names(top_stack),
            "the time is in the operating system: look at the top kernel stack and at how often \
             the program makes this call (strace -c, slowlab analyze --syscalls)",
        ));
    }
    findings
}
