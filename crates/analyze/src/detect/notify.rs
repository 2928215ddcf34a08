//! The file-change watcher detectors.
//!
//! `notify-permission`: file operations waiting for a fanotify permission
//! watcher. Signature: waits whose blocking stack is in the permission path
//! (`fanotify_get_response`, or `fsnotify_perm`/`fsnotify_open_perm` with
//! fanotify below), woken by the watcher. Thresholds: at least
//! `MIN_PERMISSION_WAITS` such waits adding up to `MIN_PERMISSION_WAIT_S`.
//! One finding per (waiting process, watcher process); cost: the waiting
//! time; evidence: waits, added time per operation, the watcher.
//!
//! `notify-overhead`: a large share of a process's file-operation CPU under
//! fsnotify (building and queueing events for watchers). Signature: of the
//! process's samples inside file-operation syscalls (open, create, unlink,
//! rename, mkdir, write), at least `MIN_OVERHEAD_SHARE` are under fsnotify
//! functions, with at least `MIN_FILE_OP_SAMPLES` such samples. The watchers
//! named are the processes seen reading inotify or fanotify events. Cost:
//! the samples under fsnotify.

use std::collections::{BTreeSet, HashMap};

use slowlab_model::findings::Finding;
use slowlab_model::trace::ProcIdx;

use super::Context;
use crate::evidence;
use crate::select::BuildFx;

pub const MIN_PERMISSION_WAITS: u64 = 20;
pub const MIN_PERMISSION_WAIT_S: f64 = 0.010;
pub const MIN_OVERHEAD_SHARE: f64 = 0.20;
pub const MIN_FILE_OP_SAMPLES: u64 = 50;

/// A blocking stack through one of these waits for a permission answer.
/// `fanotify_handle_event` sleeps only for permission events (where the
/// kernel inlines `fanotify_get_response` into it, as 6.1 does).
fn in_permission_path(name: &str) -> bool {
    matches!(
        name,
        "fanotify_get_response"
            | "fanotify_handle_event"
            | "fsnotify_perm"
            | "fsnotify_open_perm"
            | "fsnotify_file_perm"
            | "fsnotify_pre_content"
            | "fsnotify_file_area_perm"
    )
}

/// (total ns, count, a blocking stack) of one process's permission waits.
type PermissionWaits = (u64, u64, Option<slowlab_model::trace::StackIdx>);

pub fn detect_permission(cx: &Context) -> Vec<Finding> {
    // (waiting process, watcher process) → (total ns, count, a blocking stack)
    let mut per: HashMap<(ProcIdx, Option<ProcIdx>), PermissionWaits, BuildFx> = HashMap::default();
    for w in &cx.schedule.waits {
        if !cx.stack_has(w.stack, &in_permission_path) {
            continue;
        }
        let key = (cx.process_of(w.thread), w.waker.map(|t| cx.process_of(t)));
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
        let watcher_culprit = watcher.map(|p| cx.culprit(p)).unwrap_or_default();
        let victim = cx.culprit(waiting);
        let per_op_us = total_s / count as f64 * 1e6;
        let title = format!(
            "{} waited {:.0} ms for a fanotify permission watcher ({}) to answer {count} file \
             opens: {per_op_us:.0} µs added per operation",
            victim.comm.as_deref().unwrap_or("?"),
            total_s * 1e3,
            watcher_culprit.comm.as_deref().unwrap_or("unknown watcher"),
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
    for w in &cx.schedule.waits {
        if cx.stack_has(w.stack, &reads_notifications) {
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
