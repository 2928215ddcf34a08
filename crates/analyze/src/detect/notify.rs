//! The file-change watcher detectors.
//!
//! `notify-permission`: file operations waiting for a fanotify permission
//! watcher. Signature: waits whose blocking stack is in fanotify's
//! permission wait (`fanotify_get_response`, or `fanotify_handle_event` into
//! which 6.1 inlines it), below the permission hooks (`fsnotify_perm`,
//! `fsnotify_open_perm`, …, usually inlined and then not in the stack; a
//! hook without fanotify below is no permission wait), woken by the watcher
//! (a process: a wake-up from the idle task, an interrupt's, is no watcher's
//! answer). Thresholds: at least
//! `MIN_PERMISSION_WAITS` such waits adding up to `MIN_PERMISSION_WAIT_S`.
//! One finding per (waiting process, watcher process); cost: the waiting
//! time; evidence: waits, added time per operation, the watcher.
//!
//! `notify-overhead`: a large share of a process's file-operation CPU under
//! fsnotify (building and queueing events for watchers). Signature: of the
//! process's samples inside file-operation syscalls (open, create, unlink,
//! rename, mkdir, write), at least `MIN_OVERHEAD_SHARE` are under fsnotify
//! functions, with at least `MIN_FILE_OP_SAMPLES` such samples. The watchers
//! named are the processes seen reading inotify or fanotify events, or woken
//! by an event queued for them (`fsnotify_insert_event`: a watcher that
//! polls, and uses too little CPU to be sampled reading). Cost: the samples
//! under fsnotify.

use std::collections::{BTreeSet, HashMap};

use slowlab_model::findings::Finding;
use slowlab_model::trace::{ProcIdx, StackIdx};

use super::Context;
use crate::evidence;
use crate::select::BuildFx;

pub const MIN_PERMISSION_WAITS: u64 = 20;
pub const MIN_PERMISSION_WAIT_S: f64 = 0.010;
pub const MIN_OVERHEAD_SHARE: f64 = 0.20;
pub const MIN_FILE_OP_SAMPLES: u64 = 50;

/// A blocking stack through one of these waits for a permission answer.
/// `fanotify_handle_event` sleeps only for permission events (where the
/// kernel inlines `fanotify_get_response` into it, as 6.1 does). The
/// permission hooks above them (`fsnotify_perm`, `fsnotify_open_perm`, …)
/// are not enough: blocked in a hook without fanotify below, a thread waits
/// for something else (a lock, memory), not for a watcher's answer.
fn in_permission_wait(name: &str) -> bool {
    matches!(name, "fanotify_get_response" | "fanotify_handle_event")
}

/// (total ns, count, a blocking stack) of one process's permission waits.
type PermissionWaits = (u64, u64, Option<StackIdx>);

pub fn detect_permission(cx: &Context) -> Vec<Finding> {
    // (waiting process, watcher process) → (total ns, count, a blocking stack)
    let mut per: HashMap<(ProcIdx, ProcIdx), PermissionWaits, BuildFx> = HashMap::default();
    let mut on_permission_wait = cx.stack_test(&in_permission_wait);
    for w in &cx.schedule.waits {
        let Some(watcher) = w.waker else {
            continue;
        };
        if !on_permission_wait(w.stack) {
            continue;
        }
        let key = (cx.process_of(w.thread), cx.process_of(watcher));
        let e = per.entry(key).or_insert((0, 0, w.stack));
        e.0 += w.end_ns - w.start_ns;
        e.1 += 1;
    }
    let mut findings = Vec::new();
    for ((waiting, watcher), (ns, count, stack)) in per {
        let total_s = ns as f64 / 1e9;
        if count < MIN_PERMISSION_WAITS || total_s < MIN_PERMISSION_WAIT_S {
            continue;
        }
        let watcher_culprit = cx.culprit(watcher);
        let victim = cx.culprit(waiting);
        let per_op_us = total_s / count as f64 * 1e6;
        let title = format!(
            "{} waited {:.0} ms for a fanotify permission watcher ({}) to answer {count} file \
             opens: {per_op_us:.0} µs added per operation",
            victim.comm.as_deref().unwrap_or("?"),
            total_s * 1e3,
            watcher_culprit.comm.as_deref().unwrap_or("?"),
        );
        findings.push(cx.finding(
            "notify-permission",
            title,
            total_s,
            watcher_culprit.clone(),
            evidence! {
                "waits" => count,
                "wait_s" => total_s,
                "added_per_operation_us" => per_op_us,
                "waiting_pid" => victim.pid,
                "waiting_comm" => victim.comm,
                "watcher_pid" => watcher_culprit.pid,
                "watcher_comm" => watcher_culprit.comm,
            },
            cx.names(stack),
            "exclude these files from the on-access scanner, answer permission events faster, or \
             watch with FAN_OPEN (a notification) instead of FAN_OPEN_PERM",
        ));
    }
    findings
}

fn is_fsnotify(name: &str) -> bool {
    name == "fsnotify"
        || name.starts_with("__fsnotify")
        || name.starts_with("fsnotify_")
        || name.starts_with("inotify_handle")
        || name == "fanotify_handle_event"
        || name == "send_to_group"
}

fn is_file_op(name: &str) -> bool {
    matches!(
        name,
        "do_sys_openat2"
            | "do_sys_open"
            | "do_unlinkat"
            | "do_rmdir"
            | "do_mkdirat"
            | "do_renameat2"
            | "vfs_write"
            | "do_linkat"
            | "do_symlinkat"
    )
}

fn reads_notifications(name: &str) -> bool {
    matches!(name, "inotify_read" | "fanotify_read")
}

/// A wake-up raised where fsnotify queues an event for a watcher's group (which wakes
/// whoever waits for it); not one raised by an interrupt that came meanwhile, whose
/// stack has the interrupted code below it.
fn queues_a_notification(waker: &[String]) -> bool {
    let names: Vec<&str> = waker.iter().map(String::as_str).collect();
    names.contains(&"fsnotify_insert_event")
        && crate::classify::wake_context(&names).interrupt.is_none()
}

pub fn detect_overhead(cx: &Context) -> Vec<Finding> {
    let file_ops = cx.samples_by_process(&is_file_op);
    let both = cx.samples_where(&|stack| {
        cx.stack_has(stack, &is_fsnotify) && cx.stack_has(stack, &is_file_op)
    });
    // Watchers: processes with samples or waits in the notification readers.
    let mut watchers: BTreeSet<String> = BTreeSet::new();
    for (proc, (_, hits)) in cx.samples_by_process(&reads_notifications) {
        if hits > 0 {
            watchers.insert(cx.culprit(proc).comm.unwrap_or_default());
        }
    }
    // Or waits (in a read, a poll, an epoll) ended by a notification queued for them.
    let mut reading = cx.stack_test(&reads_notifications);
    let mut notified = cx.stack_names_test(&queues_a_notification);
    for w in &cx.schedule.waits {
        if reading(w.stack) || notified(w.waker_stack) {
            watchers.insert(cx.culprit(cx.process_of(w.thread)).comm.unwrap_or_default());
        }
    }
    let mut findings = Vec::new();
    for (proc, (_, file_op_samples)) in file_ops {
        let notify_samples = both.get(&proc).map_or(0, |s| s.1);
        if file_op_samples < MIN_FILE_OP_SAMPLES {
            continue;
        }
        let share = notify_samples as f64 / file_op_samples as f64;
        if share < MIN_OVERHEAD_SHARE {
            continue;
        }
        let culprit = cx.culprit(proc);
        let watcher_list: Vec<String> = watchers.iter().cloned().collect();
        findings.push(cx.finding(
            "notify-overhead",
            format!(
                "{:.0}% of {}'s file-operation CPU goes to file-change notifications (watchers: {})",
                share * 100.0,
                culprit.comm.as_deref().unwrap_or("?"),
                if watcher_list.is_empty() { "not seen".to_string() } else { watcher_list.join(", ") }
            ),
            notify_samples as f64 * cx.sample_s(),
            culprit,
            evidence! {
                "file_op_samples" => file_op_samples,
                "fsnotify_samples" => notify_samples,
                "share" => share,
                "watchers" => watcher_list,
            },
            Vec::new(),
            "watch fewer directories or events (inotify masks), or move this work to a directory \
             no one watches",
        ));
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TraceBuilder;
    use slowlab_model::trace::Trace;

    /// Blocked in `openat` until fanotify's listener answers.
    const PERMISSION: &[&str] = &[
        "__x64_sys_openat",
        "do_sys_openat2",
        "do_filp_open",
        "path_openat",
        "do_open",
        "fsnotify_open_perm",
        "fsnotify",
        "send_to_group",
        "fanotify_handle_event",
        "fanotify_get_response",
        "schedule",
    ];
    /// Blocked reading a pipe: an ordinary wait.
    const PIPE: &[&str] = &["__x64_sys_read", "vfs_read", "pipe_read", "schedule"];

    /// `app` (pid 10) on CPU 0 opens `n` files, each blocking `wait_ns` in
    /// `blocked` until `av-scan` (pid 30) on CPU 1 wakes it, then runs
    /// 0.1 ms.
    fn permission_trace(n: u64, wait_ns: u64, blocked: &[&str]) -> Trace {
        let mut b = TraceBuilder::default();
        b.process(10, "app");
        let scanner = b.process(30, "av-scan");
        let blocked = b.stack(blocked);
        let answer = b.stack(&[
            "__x64_sys_write",
            "vfs_write",
            "fanotify_write",
            "finish_permission_event",
            "__wake_up",
        ]);
        let mut t = 1_000_000;
        for _ in 0..n {
            b.switch(t, 0, 10, 1, 0, blocked);
            t += wait_ns;
            b.waking(t, 1, scanner, 10, answer);
            b.switch(t + 1_000, 0, 0, 0, 10, None);
            t += 100_000;
        }
        b.build()
    }

    fn permission(n: u64, wait_ns: u64, blocked: &[&str]) -> Vec<Finding> {
        let trace = permission_trace(n, wait_ns, blocked);
        detect_permission(&Context::new(&trace, None, None))
    }

    #[test]
    fn opens_waiting_for_a_permission_watcher_are_found() {
        let f = permission(30, 500_000, PERMISSION);
        assert_eq!(f.len(), 1, "{f:?}");
        let f = &f[0];
        assert_eq!(f.id, "notify-permission");
        assert_eq!(f.culprit.pid, Some(30), "the watcher is blamed");
        assert_eq!(f.culprit.comm.as_deref(), Some("av-scan"));
        assert_eq!(f.evidence["waits"], 30);
        assert_eq!(f.evidence["wait_s"], 0.015);
        assert_eq!(f.evidence["added_per_operation_us"], 500.0);
        assert_eq!(f.evidence["waiting_pid"], 10);
        assert_eq!(f.evidence["waiting_comm"], "app");
        assert_eq!(f.evidence["watcher_pid"], 30);
        assert!((f.cost_s - 0.015).abs() < 1e-12, "{}", f.cost_s);
        assert_eq!(f.stack.first().map(String::as_str), Some("schedule"));
        assert!(f.stack.iter().any(|n| n == "fanotify_get_response"));
    }

    #[test]
    fn the_inlined_permission_wait_of_6_1_is_found() {
        // 6.1 inlines fanotify_get_response into fanotify_handle_event.
        let inlined: Vec<&str> = PERMISSION
            .iter()
            .copied()
            .filter(|&n| n != "fanotify_get_response")
            .collect();
        let f = permission(30, 500_000, &inlined);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].evidence["waits"], 30);
    }

    #[test]
    fn ordinary_waits_woken_by_another_process_are_not_permission_waits() {
        assert!(permission(30, 500_000, PIPE).is_empty());
    }

    #[test]
    fn a_permission_hook_without_fanotify_below_is_no_permission_wait() {
        // Blocked under the open hook, but on a lock in fsnotify, not on a
        // fanotify watcher's answer.
        let hook_only: &[&str] = &[
            "__x64_sys_openat",
            "do_sys_openat2",
            "do_filp_open",
            "path_openat",
            "do_open",
            "fsnotify_open_perm",
            "fsnotify",
            "mutex_lock",
            "schedule",
        ];
        assert!(permission(30, 500_000, hook_only).is_empty());
        // With fanotify's wait below the same hook, it is one.
        let answered: Vec<&str> = [&hook_only[..6], &PERMISSION[6..]].concat();
        assert_eq!(permission(30, 500_000, &answered).len(), 1);
    }

    #[test]
    fn waits_ended_by_an_interrupt_are_no_watchers_answer() {
        // The same blocked opens, each woken from the idle task (an
        // interrupt), not by a process answering them.
        let mut b = TraceBuilder::default();
        b.process(10, "app");
        let idle = b.process(0, "swapper/1");
        let blocked = b.stack(PERMISSION);
        let irq = b.stack(&["asm_common_interrupt", "__wake_up"]);
        let mut t = 1_000_000;
        for _ in 0..30 {
            b.switch(t, 0, 10, 1, 0, blocked);
            t += 500_000;
            b.waking(t, 1, idle, 10, irq);
            b.switch(t + 1_000, 0, 0, 0, 10, None);
            t += 100_000;
        }
        let trace = b.build();
        let cx = Context::new(&trace, None, None);
        assert_eq!(cx.schedule.waits.len(), 30, "the waits are there");
        assert!(cx.schedule.waits.iter().all(|w| w.waker.is_none()));
        let f = detect_permission(&cx);
        assert!(f.is_empty(), "{f:?}");
    }

    #[test]
    fn min_permission_waits_is_the_edge() {
        // Each wait long enough that their time passes in any case.
        let n = MIN_PERMISSION_WAITS;
        let wait_ns = (2.0 * MIN_PERMISSION_WAIT_S * 1e9 / n as f64) as u64;
        let f = permission(n, wait_ns, PERMISSION);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].evidence["waits"], n);
        assert!(permission(n - 1, wait_ns, PERMISSION).is_empty());
    }

    #[test]
    fn min_permission_wait_s_is_the_edge() {
        let n = 2 * MIN_PERMISSION_WAITS;
        let wait_ns = (MIN_PERMISSION_WAIT_S * 1e9 / n as f64).round() as u64;
        let f = permission(n, wait_ns + 1, PERMISSION);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].evidence["wait_s"].as_f64().unwrap() >= MIN_PERMISSION_WAIT_S);
        assert!(permission(n, wait_ns - 1, PERMISSION).is_empty());
    }

    /// Samples of one stack: user frames, then kernel frames (both
    /// outermost first), `count` times.
    type Part<'a> = (&'a [&'a str], &'a [&'a str], u64);

    const CREATE: &[&str] = &[
        "entry_SYSCALL_64",
        "do_syscall_64",
        "__x64_sys_openat",
        "do_sys_openat2",
        "do_filp_open",
        "path_openat",
        "ext4_create",
    ];
    const NOTIFIED: &[&str] = &[
        "entry_SYSCALL_64",
        "do_syscall_64",
        "__x64_sys_openat",
        "do_sys_openat2",
        "do_filp_open",
        "path_openat",
        "fsnotify",
        "send_to_group",
        "inotify_handle_inode_event",
        "kmem_cache_alloc",
    ];
    const WATCHER_READ: &[&str] = &[
        "entry_SYSCALL_64",
        "do_syscall_64",
        "__x64_sys_read",
        "vfs_read",
        "inotify_read",
    ];

    fn create(n: u64) -> Part<'static> {
        (&["main", "write_files"], CREATE, n)
    }

    fn notified(n: u64) -> Part<'static> {
        (&["main", "write_files"], NOTIFIED, n)
    }

    /// `builder` (pid 10) sampled at 1 kHz on CPU 0 with `parts`, and
    /// `inotifywait` (pid 40) on CPU 1 reading events `watcher` times.
    fn overhead_trace(parts: &[Part], watcher: u64) -> Trace {
        let mut b = TraceBuilder::default();
        let builder = b.process(10, "builder");
        let waiter = b.process(40, "inotifywait");
        let mut t = 0;
        for &(user, kernel, count) in parts {
            let stack = b.mixed_stack(user, kernel);
            for _ in 0..count {
                t += 1_000_000;
                b.sample(t, builder, 0, stack);
            }
        }
        let read = b.mixed_stack(&["main", "next_event"], WATCHER_READ);
        for _ in 0..watcher {
            t += 1_000_000;
            b.sample(t, waiter, 1, read);
        }
        b.build()
    }

    fn overhead(parts: &[Part], watcher: u64) -> Vec<Finding> {
        let trace = overhead_trace(parts, watcher);
        detect_overhead(&Context::new(&trace, None, None))
    }

    #[test]
    fn file_operations_spending_on_notifications_are_found() {
        let compute: Part = (&["main", "compile"], &[], 50);
        let f = overhead(&[compute, create(150), notified(100)], 5);
        assert_eq!(f.len(), 1, "{f:?}");
        let f = &f[0];
        assert_eq!(f.id, "notify-overhead");
        assert_eq!(f.culprit.pid, Some(10));
        assert_eq!(f.culprit.comm.as_deref(), Some("builder"));
        assert_eq!(f.evidence["file_op_samples"], 250);
        assert_eq!(f.evidence["fsnotify_samples"], 100);
        assert_eq!(f.evidence["share"], 0.4);
        assert_eq!(f.evidence["watchers"], serde_json::json!(["inotifywait"]));
        assert!((f.cost_s - 0.1).abs() < 1e-9, "{}", f.cost_s);
    }

    #[test]
    fn a_watcher_seen_only_waiting_for_events_is_named() {
        let mut b = TraceBuilder::default();
        let builder = b.process(10, "builder");
        b.process(40, "inotifywait");
        let mut t = 0;
        for (kernel, count) in [(CREATE, 150), (NOTIFIED, 100)] {
            let stack = b.mixed_stack(&["main", "write_files"], kernel);
            for _ in 0..count {
                t += 1_000_000;
                b.sample(t, builder, 0, stack);
            }
        }
        // inotifywait sleeps in inotify_read until the builder's event wakes it.
        let sleep = b.stack(&["__x64_sys_read", "vfs_read", "inotify_read", "schedule"]);
        let send = b.stack(&["fsnotify", "send_to_group", "__wake_up"]);
        b.switch(1_000_000, 1, 40, 1, 0, sleep);
        b.waking(2_000_000, 0, builder, 40, send);
        let trace = b.build();
        let f = detect_overhead(&Context::new(&trace, None, None));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(
            f[0].evidence["watchers"],
            serde_json::json!(["inotifywait"])
        );
        // Sleeping in a poll instead, woken by the event queued for it.
        let mut b = TraceBuilder::default();
        let builder = b.process(10, "builder");
        b.process(40, "fanotify-av");
        let stack = b.mixed_stack(&["main", "write_files"], NOTIFIED);
        for t in 1..=200 {
            b.sample(t * 1_000_000, builder, 0, stack);
        }
        let poll = b.stack(&["do_sys_poll", "poll_schedule_timeout", "schedule"]);
        let queue = b.stack(&["fsnotify", "fanotify_handle_event", "fsnotify_insert_event"]);
        let pipe = b.stack(&["pipe_write", "__wake_up"]);
        b.switch(1_000_000, 1, 40, 1, 0, poll);
        b.waking(2_000_000, 0, builder, 40, queue);
        // A poll ended by anything else names nobody, nor does a timer's wake-up that
        // interrupted the queueing.
        b.process(50, "shell");
        b.switch(3_000_000, 1, 50, 1, 0, poll);
        b.waking(4_000_000, 0, builder, 50, pipe);
        let timer = b.stack(&[
            "fsnotify",
            "fanotify_handle_event",
            "fsnotify_insert_event",
            "asm_sysvec_apic_timer_interrupt",
            "hrtimer_interrupt",
            "__hrtimer_run_queues",
            "hrtimer_wakeup",
        ]);
        b.process(60, "rcu_preempt");
        b.switch(5_000_000, 1, 60, 1, 0, poll);
        b.waking(6_000_000, 0, builder, 60, timer);
        let trace = b.build();
        let f = detect_overhead(&Context::new(&trace, None, None));
        assert_eq!(
            f[0].evidence["watchers"],
            serde_json::json!(["fanotify-av"])
        );
        // Without the wait, no watcher is known.
        let f = overhead(&[create(150), notified(100)], 0);
        assert_eq!(f[0].evidence["watchers"], serde_json::json!([]));
        assert!(f[0].title.contains("watchers: not seen"), "{}", f[0].title);
    }

    #[test]
    fn notifications_outside_file_operations_do_not_count() {
        // fsnotify under reads (access events) is no file operation.
        let read: &[&str] = &[
            "entry_SYSCALL_64",
            "do_syscall_64",
            "__x64_sys_read",
            "vfs_read",
            "fsnotify",
            "send_to_group",
        ];
        let f = overhead(&[create(150), (&["main", "load"], read, 100)], 5);
        assert!(f.is_empty(), "{f:?}");
    }

    #[test]
    fn min_file_op_samples_is_the_edge() {
        let n = MIN_FILE_OP_SAMPLES;
        let f = overhead(&[create(n - n / 2), notified(n / 2)], 5);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].evidence["file_op_samples"], n);
        assert!(overhead(&[create(n - 1 - n / 2), notified(n / 2)], 5).is_empty());
    }

    #[test]
    fn min_overhead_share_is_the_edge() {
        let n = 1000;
        let edge = (MIN_OVERHEAD_SHARE * n as f64).round() as u64;
        for (under, fires) in [(edge + 1, true), (edge - 1, false)] {
            let f = overhead(&[create(n - under), notified(under)], 5);
            assert_eq!(f.len(), fires as usize, "{under} of {n}: {f:?}");
        }
    }
}
