//! Why a thread was blocked, from what the trace holds about one wait: the
//! kernel stack it blocked with, the task state it blocked in, and the stack
//! of whoever woke it. Also whether a wake-up came from interrupt context
//! (a timer or a device: the chain of waits ends there) or from a thread
//! exiting (a join, not a lock).
//!
//! The rules, first match wins:
//! 1. a page-fault frame under the wait → `fault`;
//! 2. storage frames (`io_schedule`, folio/page/buffer waits, journal,
//!    writeback, fsync) → `io`;
//! 3. a wake-up by a timer (`hrtimer_wakeup`, `process_timeout`) → `sleep`
//!    (timed sleeps, and timeouts nobody ended);
//! 4. futex, kernel mutex, rw-semaphore, file lock frames → `lock`, unless the waker
//!    was exiting (a thread join through the kernel's clear-tid futex) →
//!    `ipc`;
//! 5. pipe, socket, poll, wait-for-child, signal frames → `ipc`;
//! 6. sleep frames (`do_nanosleep`, `schedule_timeout`…) → `sleep`;
//! 7. anything else → `other`.
//!
//! Names are matched as parts of the symbol, so `futex_wait_queue`,
//! `__futex_wait` and `anon_pipe_read` (`pipe_read`) count. Also which
//! frames are scheduler plumbing, left out when a wait is named in a line
//! ([`is_plumbing`], [`summarize_stack`]). Pure.

use slowlab_model::critical_path::WaitKind;
use slowlab_model::trace::{StackIdx, Trace};

const FAULT: &[&str] = &[
    "exc_page_fault",
    "do_user_addr_fault",
    "handle_mm_fault",
    "__handle_mm_fault",
    "filemap_fault",
    "do_fault",
    "do_swap_page",
];

const IO: &[&str] = &[
    "io_schedule",
    "folio_wait_bit",
    "folio_wait_writeback",
    "__folio_lock",
    "wait_on_page_bit",
    "wait_on_page_writeback",
    "__wait_on_buffer",
    "wait_on_buffer",
    "bit_wait_io",
    "out_of_line_wait_on_bit",
    "jbd2_",
    "__jbd2_",
    "blk_mq_get_tag",
    "submit_bio_wait",
    "blkdev_",
    "file_write_and_wait",
    "filemap_fdatawait",
    "__filemap_fdatawait",
    "filemap_write_and_wait",
    "ext4_sync_file",
    "xfs_file_fsync",
    "xfs_log_force",
    "btrfs_sync_file",
    "do_fsync",
    "__x64_sys_fsync",
    "__x64_sys_fdatasync",
    "__x64_sys_sync",
    "wait_for_completion_io",
    "nfs_",
];

/// A futex wait's frames.
pub(crate) const FUTEX: &[&str] = &[
    "futex_wait",
    "__futex_wait",
    "futex_do_wait",
    "futex_lock_pi",
    "futex_wait_requeue_pi",
];

/// A kernel lock's frames (a mutex, an rw-semaphore…).
pub(crate) const KERNEL_LOCK: &[&str] = &[
    "__mutex_lock",
    "mutex_lock",
    "rwsem_down_",
    "down_read",
    "down_write",
    "percpu_down_write",
    "percpu_rwsem_wait",
    "rt_mutex",
    "__rt_mutex",
    "rtlock_slowlock",
    "ww_mutex_lock",
];

/// A file lock's frames (`flock`, `fcntl`).
pub(crate) const FILE_LOCK: &[&str] = &[
    "locks_lock_inode_wait",
    "locks_lock_file_wait",
    "flock_lock_inode_wait",
    "posix_lock_inode_wait",
    "fcntl_setlk",
    "__do_sys_flock",
    "__x64_sys_flock",
];

/// A pipe's or FIFO's frames.
pub(crate) const PIPE: &[&str] = &["pipe_read", "pipe_write", "pipe_wait", "wait_for_partner"];

/// A socket's frames.
pub(crate) const SOCKET: &[&str] = &[
    "unix_stream_",
    "unix_dgram_",
    "unix_wait_for_peer",
    "sk_wait_data",
    "sk_stream_wait",
    "__skb_wait_for_more_packets",
    "__skb_recv_",
    "inet_csk_accept",
    "tcp_recvmsg",
];

/// Other waits for another thread or process.
const IPC: &[&str] = &[
    "wait_woken",
    "do_wait",
    "kernel_wait4",
    "__do_sys_wait4",
    "ep_poll",
    "do_epoll_wait",
    "do_select",
    "core_sys_select",
    "do_sys_poll",
    "do_poll",
    "eventfd_read",
    "sigsuspend",
    "__x64_sys_pause",
    "do_sigtimedwait",
    "n_tty_read",
    "wait_for_completion",
    "do_msgrcv",
    "do_semtimedop",
    "io_cqring_wait",
];

const SLEEP: &[&str] = &[
    "do_nanosleep",
    "hrtimer_nanosleep",
    "common_nsleep",
    "schedule_hrtimeout",
    "schedule_timeout",
    "msleep",
    "usleep_range",
];

/// A waker stack in interrupt context: whichever thread the interrupt hit
/// is not the waker.
const INTERRUPT: &[&str] = &[
    "asm_sysvec_",
    "sysvec_",
    "__sysvec_",
    "asm_common_interrupt",
    "common_interrupt",
    "handle_irq_event",
    "__handle_irq_event",
    "handle_softirqs",
    "__do_softirq",
    "do_softirq",
    "irq_exit_rcu",
    "__irq_exit_rcu",
    "run_ksoftirqd",
    "hrtimer_interrupt",
    "__hrtimer_run_queues",
];

const TIMER: &[&str] = &[
    "hrtimer_wakeup",
    "process_timeout",
    "__hrtimer_run_queues",
    "run_timer_softirq",
    "call_timer_fn",
];

const DEVICE: &[&str] = &[
    "blk_mq_end_request",
    "blk_update_request",
    "bio_endio",
    "blk_mq_complete_request",
    "scsi_",
    "nvme_",
    "virtblk_",
    "ata_qc_complete",
    "ata_scsi",
    "net_rx_action",
    "napi_",
];

/// A waker that was exiting: a thread join (clear-tid futex) or a parent
/// told of a child's exit.
const EXIT: &[&str] = &[
    "do_exit",
    "mm_release",
    "exit_mm",
    "do_group_exit",
    "exit_notify",
];

pub(crate) fn any_part(names: &[&str], set: &[&str]) -> bool {
    names.iter().any(|n| set.iter().any(|p| n.contains(p)))
}

/// A waker stack that sends a signal from another thread (`kill`,
/// `tgkill`, a process group's kill, `pidfd_send_signal`): the sender is
/// not what the woken thread waited for. A child's exit (`do_notify_parent`)
/// and a timer's signal (interrupt context) are not in this set's sense a
/// sender; [`wake_context`] leaves them out.
const SIGNAL: &[&str] = &[
    "complete_signal",
    "signal_wake_up_state",
    "__send_signal_locked",
    "send_signal_locked",
    "do_send_sig_info",
    "kill_something_info",
    "kill_pid_info",
    "__kill_pgrp_info",
    "do_send_specific",
    "__x64_sys_kill",
    "__x64_sys_tgkill",
    "__x64_sys_tkill",
    "__x64_sys_pidfd_send_signal",
];

/// The parent told of a child's exit or stop (`SIGCHLD`, a pidfd): the
/// resource a child-waiter waits for.
const CHILD_NOTICE: &[&str] = &["do_notify_parent", "do_notify_pidfd", "wake_up_parent"];

/// Blocking frames of a wait for a child process: `wait4`/`waitid`
/// (`do_wait`), and the signal waits that a `SIGCHLD` ends (`sigsuspend`
/// as `timeout` waits, `pause`, `sigtimedwait`).
const CHILD_WAIT: &[&str] = &[
    "do_wait",
    "kernel_wait4",
    "kernel_waitid",
    "__do_sys_wait4",
    "__x64_sys_wait4",
    "__x64_sys_waitid",
    "sigsuspend",
    "__x64_sys_rt_sigsuspend",
    "__x64_sys_pause",
    "do_sigtimedwait",
    "__x64_sys_rt_sigtimedwait",
];

/// Whether a blocking stack waits for a child process (`wait4`, `waitid`,
/// `sigsuspend`, `pause`, `sigtimedwait`):
/// whole names, less a compiler's suffix (`sigsuspend.isra.0`), so that
/// `futex_do_wait` is not `do_wait`.
pub fn is_child_wait(blocked_names: &[&str]) -> bool {
    blocked_names.iter().any(|n| {
        let base = n.split('.').next().unwrap_or(n);
        CHILD_WAIT.contains(&base)
    })
}

/// Function names of a stack, innermost first.
pub(crate) fn names(trace: &Trace, stack: Option<StackIdx>) -> Vec<&str> {
    trace
        .stack_frames(stack)
        .map(|f| trace.function_name(trace.frame_function(f)))
        .collect()
}

/// What ended a wait from interrupt context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndedBy {
    Timer,
    Device,
    Interrupt,
    /// A signal sent by another thread (`kill`, `tgkill`…), not from
    /// interrupt context: the waker is the sender, not what was waited for.
    Signal,
}

impl EndedBy {
    pub fn as_str(self) -> &'static str {
        match self {
            EndedBy::Timer => "timer",
            EndedBy::Device => "device",
            EndedBy::Interrupt => "interrupt",
            EndedBy::Signal => "signal",
        }
    }
}

/// What a waker's stack says about the wake-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WakeContext {
    /// `Some` when the wake-up ran in interrupt context (or in a timer).
    pub interrupt: Option<EndedBy>,
    /// The waker was exiting.
    pub exiting: bool,
    /// The wake-up sent a signal from a thread (not a timer's, not a
    /// child's exit notice): see [`EndedBy::Signal`].
    pub signal: bool,
}

/// Reads a waker's stack.
pub fn wake_context(waker_names: &[&str]) -> WakeContext {
    let timer = any_part(waker_names, TIMER);
    let interrupt = if timer {
        Some(EndedBy::Timer)
    } else if any_part(waker_names, INTERRUPT) {
        Some(if any_part(waker_names, DEVICE) {
            EndedBy::Device
        } else {
            EndedBy::Interrupt
        })
    } else {
        None
    };
    WakeContext {
        interrupt,
        exiting: any_part(waker_names, EXIT),
        signal: interrupt.is_none()
            && any_part(waker_names, SIGNAL)
            && !any_part(waker_names, CHILD_NOTICE),
    }
}

/// No wake-up to read (a wait the trace's end cut, or its own kind).
pub const NO_WAKE: WakeContext = WakeContext {
    interrupt: None,
    exiting: false,
    signal: false,
};

/// The kind of a wait (see the module doc for the rules).
pub fn wait_kind(blocked_names: &[&str], task_state: u64, wake: WakeContext) -> WaitKind {
    if any_part(blocked_names, FAULT) {
        return WaitKind::Fault;
    }
    if any_part(blocked_names, IO) {
        return WaitKind::Io;
    }
    if wake.interrupt == Some(EndedBy::Timer) {
        return WaitKind::Sleep;
    }
    if [FUTEX, KERNEL_LOCK, FILE_LOCK]
        .iter()
        .any(|set| any_part(blocked_names, set))
    {
        return if wake.exiting {
            WaitKind::Ipc
        } else {
            WaitKind::Lock
        };
    }
    if [PIPE, SOCKET, IPC]
        .iter()
        .any(|set| any_part(blocked_names, set))
    {
        return WaitKind::Ipc;
    }
    if any_part(blocked_names, SLEEP) {
        return WaitKind::Sleep;
    }
    // An uninterruptible wait ended by a device is storage or a driver.
    if task_state & 2 != 0 && wake.interrupt == Some(EndedBy::Device) {
        return WaitKind::Io;
    }
    WaitKind::Other
}

/// The kind of one blocked span of [`crate::states::ThreadStates`].
pub fn span_kind(trace: &Trace, b: &crate::states::BlockedSpan) -> WaitKind {
    let wake = if b.woken {
        wake_context(&names(trace, b.waker_stack))
    } else {
        NO_WAKE
    };
    wait_kind(&names(trace, b.stack), b.task_state, wake)
}

/// The innermost function of a blocking stack that is not plumbing.
pub fn blocked_in<'t>(blocked_names: &[&'t str]) -> Option<&'t str> {
    blocked_names.iter().copied().find(|n| !is_plumbing(n))
}

/// Scheduler and wake-up plumbing that says nothing about *why* a thread
/// waited: skipped when a wait is summarized in one line.
pub fn is_plumbing(name: &str) -> bool {
    const PREFIXES: [&str; 12] = [
        "schedule",
        "__schedule",
        "io_schedule",
        "preempt_schedule",
        "try_to_wake_up",
        "ttwu",
        "wake_up",
        "__wake_up",
        "autoremove_wake_function",
        "default_wake_function",
        "finish_task_switch",
        "__traceiter",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p)) || name == "[unknown]"
}

/// The first `count` frames of a stack that are not scheduler plumbing,
/// joined innermost first with " ← "; `[no stack]` when none is left.
pub fn summarize_stack(names: &[String], count: usize) -> String {
    let kept: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|n| !is_plumbing(n))
        .take(count)
        .collect();
    if kept.is_empty() {
        "[no stack]".to_string()
    } else {
        kept.join(" ← ")
    }
}

/// The syscall a blocking stack is in (`fsync` from `__x64_sys_fsync`).
pub fn syscall_of(blocked_names: &[&str]) -> Option<String> {
    blocked_names.iter().find_map(|n| {
        n.strip_prefix("__x64_sys_")
            .or_else(|| n.strip_prefix("__arm64_sys_"))
            .or_else(|| n.strip_prefix("__do_sys_"))
            .or_else(|| n.strip_prefix("ksys_"))
            .map(str::to_string)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_from_blocking_stacks() {
        let k = |names: &[&str]| wait_kind(names, 1, NO_WAKE);
        assert_eq!(
            k(&["__schedule", "futex_wait_queue", "__futex_wait"]),
            WaitKind::Lock
        );
        assert_eq!(
            k(&["schedule", "__mutex_lock", "rtnl_lock"]),
            WaitKind::Lock
        );
        assert_eq!(k(&["schedule", "pipe_read", "vfs_read"]), WaitKind::Ipc);
        assert_eq!(
            k(&["schedule", "anon_pipe_read", "vfs_read"]),
            WaitKind::Ipc
        );
        assert_eq!(k(&["schedule", "do_wait", "kernel_wait4"]), WaitKind::Ipc);
        assert_eq!(
            k(&[
                "io_schedule",
                "folio_wait_bit_common",
                "filemap_fault",
                "do_fault"
            ]),
            WaitKind::Fault
        );
        assert_eq!(
            k(&["schedule", "jbd2_log_wait_commit", "ext4_sync_file"]),
            WaitKind::Io
        );
        assert_eq!(k(&["schedule", "do_nanosleep"]), WaitKind::Sleep);
        assert_eq!(k(&["schedule", "worker_thread"]), WaitKind::Other);
        assert_eq!(k(&[]), WaitKind::Other);
    }

    #[test]
    fn the_waker_decides_timeouts_joins_and_devices() {
        let timer = wake_context(&[
            "hrtimer_wakeup",
            "__hrtimer_run_queues",
            "hrtimer_interrupt",
        ]);
        assert_eq!(timer.interrupt, Some(EndedBy::Timer));
        // A futex wait that timed out is a sleep nobody ended.
        assert_eq!(wait_kind(&["futex_wait_queue"], 1, timer), WaitKind::Sleep);
        let exit = wake_context(&["futex_wake", "mm_release", "exit_mm", "do_exit"]);
        assert_eq!(exit.interrupt, None);
        assert_eq!(wait_kind(&["futex_wait_queue"], 1, exit), WaitKind::Ipc);
        let disk = wake_context(&["try_to_wake_up", "blk_mq_end_request", "common_interrupt"]);
        assert_eq!(disk.interrupt, Some(EndedBy::Device));
        assert_eq!(
            wait_kind(&["schedule", "some_driver_wait"], 2, disk),
            WaitKind::Io
        );
        assert_eq!(wake_context(&["futex_wake", "do_futex"]), NO_WAKE);
    }

    #[test]
    fn child_waits_and_signal_wake_ups() {
        assert!(is_child_wait(&["schedule", "do_wait", "kernel_wait4"]));
        assert!(is_child_wait(&["schedule", "sigsuspend.isra.0"]));
        assert!(!is_child_wait(&[
            "schedule",
            "futex_do_wait",
            "__futex_wait"
        ]));
        let kill = wake_context(&["complete_signal", "__send_signal_locked", "__x64_sys_kill"]);
        assert!(kill.signal && kill.interrupt.is_none(), "{kill:?}");
        let sigchld = wake_context(&["complete_signal", "do_notify_parent", "do_exit"]);
        assert!(!sigchld.signal);
        let alarm = wake_context(&[
            "complete_signal",
            "posix_timer_fn",
            "__hrtimer_run_queues",
            "hrtimer_interrupt",
        ]);
        assert!(!alarm.signal && alarm.interrupt == Some(EndedBy::Timer));
    }

    #[test]
    fn syscall_and_blocking_function() {
        let names = [
            "__schedule",
            "schedule",
            "jbd2_log_wait_commit",
            "ext4_sync_file",
            "__x64_sys_fsync",
        ];
        assert_eq!(syscall_of(&names).as_deref(), Some("fsync"));
        assert_eq!(blocked_in(&names), Some("jbd2_log_wait_commit"));
        assert_eq!(blocked_in(&["schedule"]), None);
    }
}
