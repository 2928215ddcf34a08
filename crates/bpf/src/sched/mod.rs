//! The scheduler flight recorder: every context switch and wake-up with the stacks of the
//! threads involved, CPU samples, thread lifetimes and the waiting syscalls (futex, wait4,
//! waitid, flock, which name what a wait waits for), recorded with eBPF
//! (`src/bpf/sched.bpf.c`) into a file of its own ([`format`]), at a fraction of what
//! `perf record` costs on the same events: stacks are deduplicated in the kernel (a stack
//! map) and records are 32 bytes.
//!
//! - [`SchedRecorder`]: start and stop a recording into a file, or, in ring mode, keep its
//!   last seconds in memory and write snapshots of them (`ring`).
//! - [`format`]: the file format, its writer and its reader ([`read_sched`]).
//!
//! Turning a recording into slowlab's trace model (names, stacks, lifetimes) is the
//! `slowlab-schedrec` crate's job.

mod attach;
mod drain;
pub mod format;
mod mmaps;
mod options;
mod recorder;
mod recording_thread;
mod ring;
mod tick;

pub use format::{
    is_sched_recording, parse_sched, read_sched, RecordedSyscall, SchedLog, SCHED_MAGIC,
};
pub use options::{ProgramCost, SampleClock, SchedOptions, SchedStats, StackMode};
pub use recorder::{SchedRecorder, DEFAULT_SCHED_RING_BYTES, DEFAULT_STACK_ENTRIES};
pub use ring::{RingOptions, SnapshotInfo};
