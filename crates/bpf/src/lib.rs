//! slowlab's syscall path capture: the file names that perf's syscall tracepoints cannot
//! record.
//!
//! perf's `syscalls:sys_enter_openat` (and friends) records the *pointer* to the file name,
//! not the name. This crate attaches a small eBPF program (`src/bpf/paths.bpf.c`, built
//! with libbpf-cargo) to the same tracepoints; it copies each path string out of the
//! calling process and streams it through a BPF ring buffer into a capture file, stamped
//! with CLOCK_MONOTONIC time, pid and tid. Afterwards each perf syscall event is matched to
//! its path by thread and time.
//!
//! - [`PathCapture::start`] / [`PathCapture::stop`]: run a capture into a file; in ring
//!   mode ([`RingOptions`]) it keeps only the last window, bounded in time and bytes, and
//!   [`PathCapture::snapshot`] writes that window to a file of its own.
//! - [`read_paths`]: read a capture file into a [`PathLog`] of [`PathEvent`]s.
//! - [`PathIndex`] / [`PathMatcher`]: match a perf event (tid, time, syscall) to its path:
//!   the latest capture event of that thread and syscall at or before perf's time (the
//!   capture's stamp is taken first), and after the thread's previous perf sample.
//!
//! **perf must record with `-k monotonic`** (`--clockid monotonic`) for its times to be
//! comparable with the capture's; see [`correlate`].
//!
//! It also holds the scheduler flight recorder ([`sched`]: `slowlab record --backend bpf`),
//! a second eBPF program that records context switches, wake-ups, CPU samples and
//! lifetimes without perf.
//!
//! This crate does not run perf, read perf.data, or analyze paths; the `record` and
//! `analyze` crates do that with it. The capture needs root (or CAP_BPF and CAP_PERFMON);
//! reading a capture file needs nothing.
//!
//! ```no_run
//! use std::path::Path;
//! use slowlab_bpf::{read_paths, PathCapture, PathIndex};
//!
//! let capture = PathCapture::start(Path::new("/tmp/paths.slp"))?;
//! // ... run the workload (and `perf record -k monotonic ...`) ...
//! let stats = capture.stop()?;
//! eprintln!("{} paths, {} lost", stats.events, stats.drops);
//!
//! let log = read_paths(Path::new("/tmp/paths.slp"))?;
//! for w in &log.warnings {
//!     eprintln!("warning: {w}");
//! }
//! let index = PathIndex::new(&log);
//! let mut matcher = index.matcher();
//! // Feed perf's samples in time order; for a syscalls:sys_enter_openat sample by
//! // thread 1234 at time t (ns, `perf record -k monotonic`):
//! # let t = 0;
//! if let Some(m) = matcher.match_name(1234, t, "syscalls:sys_enter_openat") {
//!     println!("openat({})", m.path());
//! }
//! // and for any other sample of a thread: matcher.observe(tid, time)
//! # Ok::<(), slowlab_bpf::BpfError>(())
//! ```

mod capture;
pub mod correlate;
mod counters;
mod error;
pub mod format;
mod globals;
mod libbpf_log;
mod links;
mod nudge;
pub mod ring;
pub mod sched;
mod sink;
mod sys;
mod syscall;
mod syscall_numbers;
mod worker;

#[allow(clippy::all, dead_code, missing_docs)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/paths.skel.rs"));
}

#[allow(clippy::all, dead_code, missing_docs)]
mod sched_skel {
    include!(concat!(env!("OUT_DIR"), "/sched.skel.rs"));
}

pub use capture::{CaptureOptions, CaptureStats, PathCapture, DEFAULT_RING_BYTES};
pub use correlate::{PathIndex, PathMatch, PathMatcher, DEFAULT_WINDOW_NS};
pub use error::BpfError;
pub use format::{parse_paths, read_paths, CaptureEnd, PathEvent, PathLog, PathLogWriter};
pub use nudge::sleep_until_readable;
pub use ring::{RingOptions, DEFAULT_RING_MAX_BYTES};
pub use sys::{cpu_times_now, cpu_times_since, monotonic_ns, mount_tracefs_if_absent};
pub use syscall::{Syscall, TracepointName};
