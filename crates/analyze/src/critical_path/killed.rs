//! Who killed the command: the earliest signal, in the root's wall time,
//! that another process sent to the root or to a process it started
//! (`timeout` killing its child, `kill PID`, a recording stopped by Ctrl-C
//! that signals its command's group), and after which the target exited
//! (or the trace ended first).
//!
//! Two sources, the first that says:
//! - a recorded `kill`, `tgkill` or `tkill` syscall (`slowlab record`
//!   records them): the target, the signal and the sender exactly. A
//!   group kill (`kill(0, …)`, `kill(-PGID, …)`) targets the tree when the
//!   sender is in it or the group is the pid of one of its processes or of
//!   the root's parent;
//! - else (traces recorded before), a wake-up sent from a `kill` syscall's
//!   stack to a process of the tree that then died of a signal (its exit
//!   stack has `get_signal`): the sender and the target, not the signal.
//!
//! Signals that do not end a process by default (`SIGCHLD`, `SIGCONT`,
//! `SIGWINCH`, `SIGUSR1`…) are not kills, nor a process signalling itself.

use std::collections::HashMap;

use slowlab_model::trace::{EventKind, ProcIdx, StackIdx, ThreadIdx, Trace};

use crate::classify;
use crate::select::BuildFx;
use crate::states::TidIndex;

/// Signals whose default action ends the process: SIGHUP, SIGINT, SIGQUIT,
/// SIGILL, SIGABRT, SIGFPE, SIGKILL, SIGSEGV, SIGPIPE, SIGALRM, SIGTERM.
const FATAL: &[u64] = &[1, 2, 3, 4, 6, 8, 9, 11, 13, 14, 15];

/// A kill found in the trace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Kill {
    pub process: ProcIdx,
    pub by: ThreadIdx,
    pub signal: Option<i32>,
    pub at_ns: u64,
}

/// The process of `pid` in `tree` alive at `t`.
fn alive(trace: &Trace, tree: &[ProcIdx], pid: i32, t: u64) -> Option<ProcIdx> {
    tree.iter().copied().find(|&p| {
        let pr = &trace.processes[p.ix()];
        pr.pid == pid
            && pr.start_ns.or(pr.exec_ns).is_none_or(|s| s <= t)
            && pr.end_ns.is_none_or(|e| e >= t)
    })
}

/// Whether process `p` exited at or after `t` (or not in the trace).
fn exits_after(trace: &Trace, p: ProcIdx, t: u64) -> bool {
    trace.processes[p.ix()].end_ns.is_none_or(|e| e >= t)
}

/// Whether one of the process's threads left through `get_signal` (died
/// of a signal), by its exit event's or its last switch's stack.
fn died_of_a_signal(trace: &Trace, p: ProcIdx, after: u64) -> bool {
    let pr = &trace.processes[p.ix()];
    let threads = &pr.threads;
    let first = trace.events.partition_point(|e| e.time_ns < after);
    let until = pr.end_ns.map_or(u64::MAX, |e| e.saturating_add(10_000_000));
    let last = first + trace.events[first..].partition_point(|e| e.time_ns <= until);
    trace.events[first..last].iter().any(|e| {
        threads.contains(&e.thread)
            && match e.kind {
                EventKind::Other { .. } | EventKind::Switch { .. } => {
                    let names = classify::names(trace, e.stack);
                    names.iter().any(|n| n.contains("do_exit"))
                        && names.iter().any(|n| n.contains("get_signal"))
                }
                _ => false,
            }
    })
}

/// The earliest kill of a process of `tree` (root first) during
/// `[from, to]`.
pub(super) fn find(trace: &Trace, tree: &[ProcIdx], from: u64, to: u64) -> Option<Kill> {
    let root = *tree.first()?;
    let root_parent = trace.processes[root.ix()].ppid;
    let in_tree = |t: ThreadIdx| tree.contains(&trace.threads[t.ix()].process);
    let first = trace.events.partition_point(|e| e.time_ns < from);
    let tids = TidIndex::new(trace);
    let mut kill_stack: HashMap<Option<StackIdx>, bool, BuildFx> = HashMap::default();
    for ev in &trace.events[first..] {
        let now = ev.time_ns;
        if now > to {
            break;
        }
        let sender_proc = trace.threads.get(ev.thread.ix()).map(|t| t.process);
        match ev.kind {
            EventKind::SyscallEnter { name, ref args, .. } => {
                let (target_pid, sig) = match trace.str(name) {
                    "kill" => (args[0] as i32, args[1]),
                    "tgkill" => (args[0] as i32, args[2]),
                    "tkill" => {
                        let tid = args[0] as i32;
                        let pid = trace
                            .threads
                            .iter()
                            .find(|t| t.tid == tid)
                            .map_or(tid, |t| trace.processes[t.process.ix()].pid);
                        (pid, args[1])
                    }
                    _ => continue,
                };
                if !FATAL.contains(&sig) {
                    continue;
                }
                let target = if target_pid > 0 {
                    alive(trace, tree, target_pid, now)
                } else if target_pid == -1 {
                    None
                } else {
                    // A process group: the sender's own (0), or -PGID.
                    let group = -target_pid;
                    let ours = if target_pid == 0 {
                        in_tree(ev.thread)
                    } else {
                        root_parent == Some(group)
                            || tree.iter().any(|&p| trace.processes[p.ix()].pid == group)
                    };
                    // The first of the tree alive then, other than the sender.
                    ours.then(|| {
                        tree.iter().copied().find(|&p| {
                            Some(p) != sender_proc
                                && alive(trace, tree, trace.processes[p.ix()].pid, now) == Some(p)
                        })
                    })
                    .flatten()
                };
                if let Some(p) = target {
                    if Some(p) != sender_proc && exits_after(trace, p, now) {
                        return Some(Kill {
                            process: p,
                            by: ev.thread,
                            signal: Some(sig as i32),
                            at_ns: now,
                        });
                    }
                }
            }
            EventKind::Waking { tid, .. } => {
                let kill_syscall = *kill_stack.entry(ev.stack).or_insert_with(|| {
                    classify::names(trace, ev.stack).iter().any(|n| {
                        n.contains("kill_something_info")
                            || n.contains("sys_tgkill")
                            || n.contains("sys_tkill")
                            || n.contains("pidfd_send_signal")
                    })
                });
                if !kill_syscall {
                    continue;
                }
                let Some(target) = tids.lookup(tid, now).map(|t| trace.threads[t.ix()].process)
                else {
                    continue;
                };
                if tree.contains(&target)
                    && Some(target) != sender_proc
                    && died_of_a_signal(trace, target, now)
                {
                    return Some(Kill {
                        process: target,
                        by: ev.thread,
                        signal: None,
                        at_ns: now,
                    });
                }
            }
            _ => {}
        }
    }
    None
}
