//! One stretch of time a thread spent blocked, classified: what the
//! exports that mark waits on a timeline (the Firefox Profiler's interval
//! markers) need of the replayed thread states. Computed by
//! `slowlab_analyze::export::blocked_stretches`.

use crate::critical_path::WaitKind;
use crate::trace::{StackIdx, ThreadIdx};

/// A thread blocked during `[start_ns, end_ns)` (absolute trace time).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockedStretch {
    pub thread: ThreadIdx,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Why, from the blocking stack, the task state and who ended it.
    pub kind: WaitKind,
    /// The task state it blocked in (1 interruptible, 2 uninterruptible…).
    pub task_state: u64,
    /// Whether the wait ended within the trace.
    pub woken: bool,
    /// The thread the wake-up was recorded on (`None`: the idle task, an
    /// interrupt on an idle CPU, or an unseen wake-up).
    pub waker: Option<ThreadIdx>,
    /// Where it blocked.
    pub stack: Option<StackIdx>,
}
