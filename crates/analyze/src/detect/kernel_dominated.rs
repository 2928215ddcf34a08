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
//!   splice, send, receive, io_uring: the syscalls `slowlab_model::syscalls`
//!   marks as moving data; a process moving data is doing its job).
//!
//! Cost: the process's kernel samples; stack: its top kernel stack.

use std::collections::HashMap;

use slowlab_model::findings::Finding;
use slowlab_model::syscalls;
use slowlab_model::trace::{ProcIdx, StackIdx};

use super::{heaviest, Context};
use crate::evidence;
use crate::select::BuildFx;

pub const MIN_SAMPLES: u64 = 200;
pub const MIN_TRACE_SHARE: f64 = 0.05;
pub const MIN_KERNEL_SHARE: f64 = 0.85;
pub const MIN_ENTRY_SHARE: f64 = 0.6;

/// The prefixes of a syscall's kernel entry function (`__x64_sys_openat`).
const SYSCALL_ENTRY_PREFIXES: [&str; 3] = ["__x64_sys_", "__arm64_sys_", "__do_sys_"];

fn is_entry(name: &str) -> bool {
    SYSCALL_ENTRY_PREFIXES.iter().any(|p| name.starts_with(p))
        || name == "exc_page_fault"
        || name == "do_mem_abort"
}

/// Whether an entry point is a syscall that moves bulk data (the table's data movers:
/// read, write, copy, splice, send, receive and their vector and io_uring forms).
fn moves_data(entry: &str) -> bool {
    SYSCALL_ENTRY_PREFIXES
        .iter()
        .find_map(|p| entry.strip_prefix(p))
        .is_some_and(syscalls::moves_data)
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
        let Some((entry, n)) = entries.get(&proc).and_then(|e| heaviest(e.iter())) else {
            continue;
        };
        let entry_share = *n as f64 / kernel.max(1) as f64;
        if entry_share < MIN_ENTRY_SHARE || moves_data(entry) || entry == "[other kernel]" {
            continue;
        }
        let top_stack = stacks
            .get(&proc)
            .and_then(|m| heaviest(m.iter()).map(|(s, _)| *s))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TraceBuilder;
    use slowlab_model::trace::Trace;

    /// Samples of `app` with one stack: user frames, then kernel frames
    /// (both outermost first), `count` times.
    type Part<'a> = (&'a [&'a str], &'a [&'a str], u64);

    const COMPUTE: Part = (&["main", "compute"], &[], 0);
    const FAULT: &[&str] = &[
        "asm_exc_page_fault",
        "exc_page_fault",
        "do_user_addr_fault",
        "handle_mm_fault",
        "clear_page_erms",
    ];
    const TOUCH: &[&str] = &["main", "touch_pages"];

    /// A syscall's kernel stack.
    fn sys(entry: &'static str, inner: &'static str) -> Vec<&'static str> {
        vec!["entry_SYSCALL_64", "do_syscall_64", entry, inner]
    }

    /// `app` (pid 10) sampled at 1 kHz on CPU 0 with `parts`, then
    /// `other` (pid 20) on CPU 1 in its own code `other_samples` times.
    fn trace_of(parts: &[Part], other_samples: u64) -> Trace {
        let mut b = TraceBuilder::default();
        let app = b.process(10, "app");
        let other = b.process(20, "other");
        let mut t = 0;
        for &(user, kernel, count) in parts {
            let stack = b.mixed_stack(user, kernel);
            for _ in 0..count {
                t += 1_000_000;
                b.sample(t, app, 0, stack);
            }
        }
        let render = b.mixed_stack(&["main", "render"], &[]);
        for _ in 0..other_samples {
            t += 1_000_000;
            b.sample(t, other, 1, render);
        }
        b.build()
    }

    fn findings(parts: &[Part], other_samples: u64) -> Vec<Finding> {
        let trace = trace_of(parts, other_samples);
        detect(&Context::new(&trace, None, None))
    }

    fn with_count(part: Part<'static>, count: u64) -> Part<'static> {
        (part.0, part.1, count)
    }

    #[test]
    fn a_process_living_in_page_faults_is_found() {
        let madvise = sys("__x64_sys_madvise", "zap_page_range");
        let mprotect = sys("__x64_sys_mprotect", "change_protection");
        let f = findings(
            &[
                with_count(COMPUTE, 30),
                (TOUCH, FAULT, 200),
                (&["main", "release"], &madvise, 40),
                (&["main", "protect"], &mprotect, 30),
            ],
            10,
        );
        assert_eq!(f.len(), 1, "{f:?}");
        let f = &f[0];
        assert_eq!(f.id, "kernel-dominated");
        assert_eq!(f.culprit.pid, Some(10));
        assert_eq!(f.culprit.comm.as_deref(), Some("app"));
        assert_eq!(f.evidence["samples"], 300);
        assert_eq!(f.evidence["kernel_samples"], 270);
        assert_eq!(f.evidence["kernel_share"], 0.9);
        assert_eq!(f.evidence["entry_point"], "exc_page_fault");
        assert_eq!(f.evidence["entry_share"], 200.0 / 270.0);
        assert!((f.cost_s - 0.270).abs() < 1e-9, "{}", f.cost_s);
        // The top kernel stack, innermost first, down to the program.
        assert_eq!(f.stack.first().map(String::as_str), Some("clear_page_erms"));
        assert_eq!(f.stack.last().map(String::as_str), Some("main"));
    }

    /// Issue 41: the program's own code has no symbols (a stripped
    /// library): its frames are named by the library, never by the next
    /// frame that has a name, and the finding says why and what to install.
    #[test]
    fn code_without_symbols_in_the_stack_is_named_by_its_binary() {
        let mut b = TraceBuilder::default();
        let app = b.process(10, "app");
        let lib = "[unknown] in liblzma.so.5";
        let stack = b.mixed_stack(&["main", lib, lib], FAULT);
        for i in 0..300 {
            b.sample(1_000_000 * (i + 1), app, 0, stack);
        }
        b.symbol_error(
            "liblzma.so.5",
            "liblzma.so.5: stripped, and no debug file found (install liblzma5-dbgsym, or set \
             DEBUGINFOD_URLS)",
        );
        let trace = b.build();
        let f = detect(&Context::new(&trace, None, None));
        assert_eq!(f.len(), 1, "{f:?}");
        let user: Vec<&str> = f[0].stack[FAULT.len()..]
            .iter()
            .map(String::as_str)
            .collect();
        assert_eq!(user, ["liblzma.so.5 (no symbols)", "main"]);
        assert_eq!(
            f[0].evidence["no_symbols"],
            "liblzma.so.5: stripped, and no debug file found (install liblzma5-dbgsym, or set \
             DEBUGINFOD_URLS)"
        );
    }

    #[test]
    fn the_entry_point_is_the_outermost_one() {
        // Faults taken while copying an ioctl's argument belong to the ioctl.
        let ioctl: Vec<&str> = [
            &[
                "entry_SYSCALL_64",
                "do_syscall_64",
                "__x64_sys_ioctl",
                "_copy_from_user",
            ],
            FAULT,
        ]
        .concat();
        let f = findings(&[(&["main", "control"], &ioctl, 300)], 0);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].evidence["entry_point"], "__x64_sys_ioctl");
        assert_eq!(f[0].evidence["entry_share"], 1.0);
    }

    #[test]
    fn a_process_mostly_in_its_own_code_is_not_kernel_dominated() {
        let f = findings(&[with_count(COMPUTE, 200), (TOUCH, FAULT, 100)], 0);
        assert!(f.is_empty(), "{f:?}");
    }

    #[test]
    fn a_process_moving_data_is_doing_its_job() {
        let read = sys("__x64_sys_read", "copy_page_to_iter");
        let pwrite = sys("__x64_sys_pwrite64", "ext4_buffered_write_iter");
        for kernel in [&read, &pwrite] {
            let f = findings(&[(&["main", "copy"], kernel, 300)], 0);
            assert!(f.is_empty(), "{kernel:?}: {f:?}");
        }
    }

    #[test]
    fn vector_ring_and_pipe_data_movers_are_doing_their_job_too() {
        // Missed before the syscall table marked them as moving data.
        for entry in [
            "__x64_sys_preadv2",
            "__x64_sys_pwritev2",
            "__x64_sys_sendmmsg",
            "__x64_sys_recvmmsg",
            "__x64_sys_vmsplice",
            "__x64_sys_tee",
            "__x64_sys_io_uring_enter",
            "__arm64_sys_io_uring_enter",
        ] {
            let kernel = sys(entry, "copy_page_to_iter");
            let f = findings(&[(&["main", "copy"], &kernel, 300)], 0);
            assert!(f.is_empty(), "{entry}: {f:?}");
        }
        // The same samples in a syscall that moves no data are a finding.
        let kernel = sys("__x64_sys_io_uring_setup", "copy_page_to_iter");
        let f = findings(&[(&["main", "copy"], &kernel, 300)], 0);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].evidence["entry_point"], "__x64_sys_io_uring_setup");
    }

    #[test]
    fn the_top_stack_of_tied_stacks_is_the_same_on_every_run() {
        // Two fault stacks with as many samples each; the stack made first
        // wins the tie, though the other one is sampled first.
        let zero: Vec<&str> = [&FAULT[..4], &["clear_page_erms"]].concat();
        let copy: Vec<&str> = [&FAULT[..4], &["copy_mc_enhanced_fast_string"]].concat();
        for (made, expected) in [
            ([&zero, &copy], "clear_page_erms"),
            ([&copy, &zero], "copy_mc_enhanced_fast_string"),
        ] {
            let mut b = TraceBuilder::default();
            let app = b.process(10, "app");
            let first = b.mixed_stack(TOUCH, made[0]);
            let second = b.mixed_stack(TOUCH, made[1]);
            let mut t = 0;
            for stack in [second, first] {
                for _ in 0..150 {
                    t += 1_000_000;
                    b.sample(t, app, 0, stack);
                }
            }
            let trace = b.build();
            let f = detect(&Context::new(&trace, None, None));
            assert_eq!(f.len(), 1, "{f:?}");
            assert_eq!(f[0].stack.first().map(String::as_str), Some(expected));
        }
    }

    #[test]
    fn kernel_time_without_an_entry_point_is_not_blamed_on_one() {
        let irq: &[&str] = &[
            "asm_common_interrupt",
            "common_interrupt",
            "handle_irq_event",
        ];
        let f = findings(&[(&["main", "spin"], irq, 300)], 0);
        assert!(f.is_empty(), "{f:?}");
    }

    #[test]
    fn min_samples_is_the_edge() {
        let n = MIN_SAMPLES;
        assert_eq!(findings(&[(TOUCH, FAULT, n)], 0).len(), 1);
        assert!(findings(&[(TOUCH, FAULT, n - 1)], 0).is_empty());
    }

    #[test]
    fn min_trace_share_is_the_edge() {
        // `app` all in faults; `other` in its own code makes up the rest.
        let app = 2 * MIN_SAMPLES;
        let edge_total = (app as f64 / MIN_TRACE_SHARE).round() as u64;
        let above = findings(&[(TOUCH, FAULT, app)], edge_total - 10 - app);
        assert_eq!(above.len(), 1, "{above:?}");
        assert_eq!(above[0].culprit.pid, Some(10));
        assert!(findings(&[(TOUCH, FAULT, app)], edge_total + 10 - app).is_empty());
    }

    #[test]
    fn min_kernel_share_is_the_edge() {
        let n = 1000;
        let edge = (MIN_KERNEL_SHARE * n as f64).round() as u64;
        for (kernel, fires) in [(edge + 1, true), (edge - 1, false)] {
            let f = findings(
                &[with_count(COMPUTE, n - kernel), (TOUCH, FAULT, kernel)],
                0,
            );
            assert_eq!(f.len(), fires as usize, "{kernel} of {n}: {f:?}");
        }
    }

    #[test]
    fn min_entry_share_is_the_edge() {
        // All in the kernel: faults, and the rest spread over four syscalls.
        let n = 1000;
        let edge = (MIN_ENTRY_SHARE * n as f64).round() as u64;
        let others = [
            sys("__x64_sys_mmap", "vm_mmap_pgoff"),
            sys("__x64_sys_munmap", "__vm_munmap"),
            sys("__x64_sys_brk", "do_brk_flags"),
            sys("__x64_sys_mprotect", "change_protection"),
        ];
        for (faults, fires) in [(edge + 1, true), (edge - 1, false)] {
            let rest = n - faults;
            let mut parts: Vec<Part> = vec![(TOUCH, FAULT, faults)];
            for (i, k) in others.iter().enumerate() {
                let count = rest / 4 + u64::from((i as u64) < rest % 4);
                parts.push((&["main", "remap"], k, count));
            }
            let f = findings(&parts, 0);
            assert_eq!(f.len(), fires as usize, "{faults} of {n}: {f:?}");
            if fires {
                assert_eq!(f[0].evidence["kernel_share"], 1.0);
                assert_eq!(f[0].evidence["entry_point"], "exc_page_fault");
            }
        }
    }
}
