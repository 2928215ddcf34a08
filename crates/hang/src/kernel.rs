//! What a kernel stack (`/proc/PID/task/TID/stack`) says a thread waits
//! for: a kernel lock (the lock function and its caller), device I/O, or a
//! timer. Pure functions over the stack's frames.
//!
//! The holder of a kernel mutex or semaphore is in kernel memory that
//! `/proc` does not show; this module names the lock, not who holds it.
//! On kernels whose unwinder hides the scheduler's section (`__sched`
//! functions: `mutex_lock`, `down_read`, `rwsem_down_*_slowpath`,
//! `io_schedule`, as 6.x does), the lock functions themselves never show
//! and the walk names the function that took the lock instead (the
//! innermost frame of an uninterruptible sleep); the patterns here still
//! catch the ones that are not in that section (`folio_wait_bit_common`,
//! `percpu_rwsem_wait`, `handle_userfault`, …).

use crate::procfs::frame_function;

/// What the kernel stack shows.
#[derive(Clone, Debug, PartialEq)]
pub enum KernelWait {
    /// A sleeping lock: its function (`mutex_lock`, `down_write`, …) and
    /// the first function above the locking ones (the caller).
    Lock {
        function: String,
        caller: Option<String>,
    },
    /// Waiting for I/O: the function that waits and its caller.
    Io {
        function: String,
        caller: Option<String>,
    },
    Timer,
    /// A page fault on memory registered with userfaultfd, waiting for
    /// whoever reads that userfaultfd to fill the page (even inside a
    /// system call that copies from that memory).
    UserFault,
}

/// A frame's function without its compiler suffix
/// (`__mutex_lock.constprop.0` → `__mutex_lock`).
fn base(frame: &str) -> &str {
    let f = frame_function(frame);
    f.split('.').next().unwrap_or(f)
}

fn is_scheduler(f: &str) -> bool {
    matches!(
        f,
        "__schedule"
            | "schedule"
            | "schedule_preempt_disabled"
            | "schedule_timeout"
            | "schedule_hrtimeout_range"
            | "schedule_hrtimeout_range_clock"
            | "__switch_to"
            | "__switch_to_asm"
    )
}

fn is_lock(f: &str) -> bool {
    f.contains("mutex_lock")
        || f.starts_with("rwsem_down_")
        || f.starts_with("down_read")
        || f.starts_with("down_write")
        || matches!(
            f,
            "down"
                | "__down"
                | "__down_common"
                | "down_interruptible"
                | "down_killable"
                | "down_timeout"
                | "__down_interruptible"
                | "__down_killable"
                | "rt_mutex_slowlock"
                | "__rt_mutex_slowlock"
                | "rt_mutex_lock"
                | "percpu_rwsem_wait"
                | "percpu_down_write"
                | "__percpu_down_read"
                | "rwbase_write_lock"
                | "rwbase_read_lock"
        )
}

fn is_io(f: &str) -> bool {
    matches!(
        f,
        "io_schedule"
            | "io_schedule_timeout"
            | "bit_wait_io"
            | "folio_wait_bit_common"
            | "folio_wait_bit"
            | "folio_wait_writeback"
            | "wait_on_page_bit_common"
            | "__folio_lock"
            | "__lock_page"
            | "blk_mq_get_tag"
            | "rq_qos_wait"
            | "wbt_wait"
            | "jbd2_log_wait_commit"
            | "rpc_wait_bit_killable"
            | "wait_for_completion_io"
            | "blk_execute_rq"
            | "submit_bio_wait"
    )
}

fn is_timer(f: &str) -> bool {
    matches!(
        f,
        "do_nanosleep" | "hrtimer_nanosleep" | "common_nsleep" | "msleep" | "msleep_interruptible"
    )
}

/// Classifies a kernel stack (innermost frame first).
pub fn classify(stack: &[String]) -> Option<KernelWait> {
    let funcs: Vec<&str> = stack.iter().map(|f| base(f)).collect();
    for (i, &f) in funcs.iter().enumerate() {
        if is_scheduler(f) {
            continue;
        }
        if is_timer(f) {
            return Some(KernelWait::Timer);
        }
        if f == "handle_userfault" {
            return Some(KernelWait::UserFault);
        }
        let lock = is_lock(f);
        let io = is_io(f);
        if !lock && !io {
            continue;
        }
        // The outermost of the run of locking (or waiting) functions is
        // the one the caller called; the frame above it is the caller.
        let same = |g: &str| {
            if lock {
                is_lock(g)
            } else {
                is_io(g) || is_scheduler(g)
            }
        };
        let mut last = i;
        while last + 1 < funcs.len() && same(funcs[last + 1]) {
            last += 1;
        }
        let function = funcs[last].to_string();
        let caller = funcs.get(last + 1).map(|c| c.to_string());
        return Some(if lock {
            KernelWait::Lock { function, caller }
        } else {
            KernelWait::Io { function, caller }
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(frames: &[&str]) -> Vec<String> {
        frames.iter().map(|f| format!("{f}+0x10/0x40")).collect()
    }

    #[test]
    fn a_mutex_in_the_kernel_names_the_lock_and_its_caller() {
        let s = stack(&[
            "__schedule",
            "schedule",
            "schedule_preempt_disabled",
            "__mutex_lock.constprop.0",
            "__mutex_lock_slowpath",
            "mutex_lock",
            "rtnl_lock",
            "dev_ioctl",
            "sock_ioctl",
        ]);
        assert_eq!(
            classify(&s),
            Some(KernelWait::Lock {
                function: "mutex_lock".into(),
                caller: Some("rtnl_lock".into())
            })
        );
    }

    #[test]
    fn rwsem_and_io_and_timers() {
        let s = stack(&[
            "__schedule",
            "rwsem_down_write_slowpath",
            "down_write",
            "do_mmap",
        ]);
        assert_eq!(
            classify(&s),
            Some(KernelWait::Lock {
                function: "down_write".into(),
                caller: Some("do_mmap".into())
            })
        );
        let s = stack(&[
            "__schedule",
            "io_schedule",
            "folio_wait_bit_common",
            "filemap_fault",
        ]);
        assert_eq!(
            classify(&s),
            Some(KernelWait::Io {
                function: "folio_wait_bit_common".into(),
                caller: Some("filemap_fault".into())
            })
        );
        let s = stack(&["__schedule", "do_nanosleep", "hrtimer_nanosleep"]);
        assert_eq!(classify(&s), Some(KernelWait::Timer));
    }

    #[test]
    fn a_fault_inside_a_write_waits_for_userfaultfd_not_for_the_pipe() {
        let s = stack(&[
            "handle_userfault",
            "__handle_mm_fault",
            "handle_mm_fault",
            "exc_page_fault",
            "asm_exc_page_fault",
            "_copy_from_iter",
            "anon_pipe_write",
            "vfs_write",
        ]);
        assert_eq!(classify(&s), Some(KernelWait::UserFault));
    }

    #[test]
    fn a_futex_wait_is_no_kernel_lock() {
        let s = stack(&["futex_wait_queue", "__futex_wait", "futex_wait", "do_futex"]);
        assert_eq!(classify(&s), None);
    }
}
