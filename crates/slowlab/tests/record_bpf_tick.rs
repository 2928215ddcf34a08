//! CPU samples taken on the scheduler's tick (`slowlab record --backend bpf --samples-on
//! tick`, the default of `--ring`) see what samples on a timer of their own see: a program
//! that spends the same CPU time in user code and in the kernel is recorded both ways, and
//! the two must agree on its CPU time (samples over the rate each trace gives, so a wrong
//! rate fails), on the share of each half, and name the kernel code the tick came in, with
//! none of the tick's own interrupt frames left in a stack (an earlier interrupt's may be
//! there: a sample in the softirqs it runs on its way out).
//!
//! Skips, with the reason, where perf cannot record or the process is not root.

use std::path::Path;

mod common;
use common::{one_recording_at_a_time, slowlab};

/// `slowlab analyze TRACE --filter process=tick ARGS…`'s output, which must succeed.
fn analyze_tick(trace: &Path, args: &[&std::ffi::OsStr]) -> Vec<u8> {
    let out = slowlab()
        .arg("analyze")
        .arg(trace)
        .args(["--filter", "process=tick"])
        .args(args)
        .output()
        .unwrap();
    slowlab_testkit::assert_succeeded(&out);
    out.stdout
}

/// `analyze --json` of process `tick` in `trace`.
fn summary(trace: &Path) -> serde_json::Value {
    serde_json::from_slice(&analyze_tick(trace, &["--json".as_ref()])).unwrap()
}

/// The folded stacks of process `tick` in `trace` (outermost frame first) with their
/// sample counts.
fn folded(trace: &Path, dir: &Path, name: &str) -> Vec<(Vec<String>, u64)> {
    let file = dir.join(format!("{name}.folded"));
    analyze_tick(trace, &["--collapsed".as_ref(), file.as_os_str()]);
    std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let (stack, n) = l.rsplit_once(' ')?;
            Some((
                stack.split(';').map(str::to_string).collect(),
                n.parse().ok()?,
            ))
        })
        .collect()
}

/// The share of `stacks`' samples with a frame that `is` says.
fn share_with(stacks: &[(Vec<String>, u64)], is: impl Fn(&str) -> bool) -> f64 {
    let total: u64 = stacks.iter().map(|(_, n)| n).sum();
    let inside: u64 = stacks
        .iter()
        .filter(|(s, _)| s.iter().any(|f| is(f)))
        .map(|(_, n)| n)
        .sum();
    inside as f64 / total.max(1) as f64
}

/// The timer interrupt's handler: it runs with interrupts off, so no sample comes inside
/// it, and a stack through it is the sampler's own (the tick's frames left uncut).
const TIMER_HANDLER: &str = "hrtimer_interrupt_[k]";

/// The timer interrupt's entry: a stack may go through it (a sample in the softirqs an
/// earlier interrupt runs on its way out, interrupts on), but not end in it.
const INTERRUPT_ENTRY: [&str; 3] = [
    "asm_sysvec_apic_timer_interrupt_[k]",
    "sysvec_apic_timer_interrupt_[k]",
    "__sysvec_apic_timer_interrupt_[k]",
];

/// The syscall's entry, which calls the syscall's own code.
const SYSCALL_ENTRY: &str = "do_syscall_64_[k]";

#[test]
fn tick_samples_see_what_timer_samples_see() {
    require_perf!();
    require_bpf!();
    let dir = tempfile::tempdir().unwrap();
    let tick = common::compile_workload("bpf/tick.c", dir.path(), "tick");
    const HALF_SECONDS: f64 = 0.5;
    let mut seen = Vec::new();
    for clock in ["tick", "timer"] {
        let trace = dir.path().join(format!("{clock}.trace"));
        let out = {
            let _one = one_recording_at_a_time();
            slowlab()
                .args(["record", "--backend", "bpf", "--samples-on", clock, "-o"])
                .arg(&trace)
                .arg("--")
                .arg(&tick)
                .arg(HALF_SECONDS.to_string())
                .output()
                .unwrap()
        };
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{clock}: {err}");
        assert!(
            !err.contains("scheduler's tick:"),
            "{clock}: the tick was not found: {err}"
        );
        let v = summary(&trace);
        let event = v["sample_event"].as_str().unwrap_or("").to_string();
        let freq = v["sample_freq"].as_f64().unwrap_or(0.0);
        let samples = v["processes"][0]["samples"].as_f64().unwrap_or(0.0);
        let stacks = folded(&trace, dir.path(), clock);
        seen.push((event, freq, samples / freq.max(1.0), stacks));
    }
    let (tick_event, _, tick_cpu, tick_stacks) = &seen[0];
    let (timer_event, _, timer_cpu, timer_stacks) = &seen[1];
    assert_eq!(tick_event, "sched-tick");
    assert_eq!(timer_event, "cpu-clock");
    // Both see the one second of CPU time the program spent, each at its own rate.
    let ratio = tick_cpu / timer_cpu;
    assert!(
        (0.6..=1.6).contains(&ratio),
        "CPU seconds from tick samples {tick_cpu:.2}, from timer samples {timer_cpu:.2}"
    );
    for (name, stacks) in [("tick", tick_stacks), ("timer", timer_stacks)] {
        for (stack, _) in stacks.iter() {
            assert!(
                !stack.iter().any(|f| f == TIMER_HANDLER)
                    && !stack
                        .last()
                        .is_some_and(|f| INTERRUPT_ENTRY.contains(&f.as_str())),
                "{name}: the sampling interrupt's own frames in {stack:?}"
            );
        }
    }
    // The halves, alike (the kernel's: samples with kernel frames, `_[k]`; getppid's libc
    // wrapper keeps no frame pointer, so call_the_kernel is not in its stacks); the kernel
    // half named down to the syscall's code.
    let user = |f: &str| f == "spin_in_user";
    let kernel = |f: &str| f.ends_with("_[k]");
    for (half, t, p) in [
        (
            "user",
            share_with(tick_stacks, user),
            share_with(timer_stacks, user),
        ),
        (
            "kernel",
            share_with(tick_stacks, kernel),
            share_with(timer_stacks, kernel),
        ),
    ] {
        assert!(
            (t - p).abs() < 0.2 && t > 0.25,
            "{half}: {t:.2} of the tick's samples, {p:.2} of the timer's"
        );
    }
    // The kernel half named down to the syscall's code: its stacks cross the interrupt into
    // the syscall's entry, and go on to a named function beneath it as often with the tick
    // as with the timer. Not getppid's own share: its code is a sliver (some 10 of the
    // tick's ~100 kernel samples here) beside the syscall's path and the recorder's own
    // programs, too few samples to bound.
    let beneath = |stacks: &[(Vec<String>, u64)]| {
        let kernel_half: Vec<_> = stacks
            .iter()
            .filter(|(s, _)| s.iter().any(|f| kernel(f)))
            .cloned()
            .collect();
        let named_beneath =
            |f: &str| f.ends_with("_[k]") && f != SYSCALL_ENTRY && !f.starts_with("[unknown]");
        let through = share_with(&kernel_half, |f| f == SYSCALL_ENTRY);
        let below: Vec<_> = kernel_half
            .iter()
            .map(|(s, n)| {
                let after_entry = s.iter().skip_while(|f| *f != SYSCALL_ENTRY).skip(1);
                (after_entry.cloned().collect::<Vec<_>>(), *n)
            })
            .collect();
        (through, share_with(&below, named_beneath))
    };
    let (tick_through, tick_beneath) = beneath(tick_stacks);
    let (timer_through, timer_beneath) = beneath(timer_stacks);
    assert!(
        tick_through > 0.5 && timer_through > 0.5,
        "kernel samples through {SYSCALL_ENTRY}: {tick_through:.2} of the tick's, \
         {timer_through:.2} of the timer's: {tick_stacks:?}"
    );
    assert!(
        tick_beneath > 0.15 && (tick_beneath - timer_beneath).abs() < 0.25,
        "kernel samples in a named function beneath {SYSCALL_ENTRY}: {tick_beneath:.2} of \
         the tick's, {timer_beneath:.2} of the timer's: {tick_stacks:?}"
    );
}
