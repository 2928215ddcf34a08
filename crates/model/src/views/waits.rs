//! The waits view's result (`analyze --waits`): per thread the time it ran,
//! was blocked and was runnable, its blocking stacks and who woke it; and how
//! a blocking stack is summarized in one line. Computed by
//! `slowlab_analyze::waits`, rendered by `slowlab_report::trace_views`.

use serde::Serialize;

/// A waker of one kind of wait, aggregated.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WakerView {
    pub pid: Option<i32>,
    pub tid: Option<i32>,
    pub comm: String,
    pub wait_s: f64,
    pub count: u64,
    /// The waker's stack at the wake-up, innermost first.
    pub stack: Vec<String>,
}

/// One blocking stack of a thread, with its wakers.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WaitView {
    /// Where the thread blocked, innermost first.
    pub stack: Vec<String>,
    pub wait_s: f64,
    pub count: u64,
    /// Longest single wait.
    pub max_s: f64,
    pub wakers: Vec<WakerView>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ThreadView {
    pub pid: i32,
    pub tid: i32,
    pub comm: String,
    pub running_s: f64,
    pub blocked_s: f64,
    pub runnable_s: f64,
    pub waits: Vec<WaitView>,
}

/// The `--waits` view: `{"threads":[…]}`, threads by blocked time.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WaitsView {
    pub threads: Vec<ThreadView>,
    /// Whether the trace had scheduler events at all.
    pub has_sched_events: bool,
}
