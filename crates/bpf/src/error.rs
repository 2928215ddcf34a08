//! The crate's one error type, [`BpfError`]. Every message says what went wrong and, where
//! the user can do something about it, what to do. It does no I/O of its own.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong while loading, running or reading slowlab's eBPF programs
/// (the path capture beside perf, and the eBPF recorder).
#[derive(Debug, thiserror::Error)]
pub enum BpfError {
    /// The process lacks the privileges to load BPF programs or open tracepoints.
    #[error(
        "not permitted to load eBPF programs ({detail}): run as root, or give the binary \
         CAP_BPF and CAP_PERFMON (e.g. `sudo setcap cap_bpf,cap_perfmon+ep BINARY`)"
    )]
    NotPermitted {
        /// What was refused.
        detail: String,
    },

    /// The kernel lacks something the capture needs (BPF, the BPF ring buffer, syscall
    /// tracepoints, a mounted tracefs).
    #[error("this kernel cannot run slowlab's eBPF programs: {reason}")]
    Unsupported {
        /// What is missing and, where possible, how to get it.
        reason: String,
    },

    /// Creating the maps failed because the locked-memory limit is too low and could not
    /// be raised (kernels before 5.11 charge BPF maps to RLIMIT_MEMLOCK).
    #[error(
        "locked-memory limit too low for the BPF ring buffer ({limit} bytes, {needed} \
         needed): run as root, or raise it with `ulimit -l unlimited` (or LimitMEMLOCK= in \
         a systemd unit)"
    )]
    Memlock {
        /// The soft limit in force, in bytes.
        limit: u64,
        /// Roughly what the maps need, in bytes.
        needed: u64,
    },

    /// libbpf failed to open or load a program for another reason (the verifier refused
    /// it, say).
    #[error("loading slowlab's eBPF programs failed: {message}{}", log_suffix(.log))]
    Load {
        /// libbpf's error.
        message: String,
        /// The last lines libbpf printed (often the verifier's reason); may be empty.
        log: String,
    },

    /// Attaching to a tracepoint that exists failed.
    #[error("attaching to tracepoint {tracepoint} failed: {message}")]
    Attach {
        /// The tracepoint, e.g. `syscalls:sys_enter_openat`.
        tracepoint: String,
        /// libbpf's error.
        message: String,
    },

    /// The ring buffer could not be polled or its consumer could not be set up.
    #[error("reading the BPF ring buffer failed: {message}")]
    RingBuffer {
        /// libbpf's error.
        message: String,
    },

    /// Reading or writing a capture file failed.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },

    /// A file is not a path capture (or a scheduler recording, as `what` says), or is
    /// damaged before its last record.
    #[error("{}: not a readable slowlab {what}: {reason}", .path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What it was read as: "path capture" or "scheduler recording".
        what: &'static str,
        /// What is wrong with it.
        reason: String,
    },

    /// A [`CaptureOptions`](crate::CaptureOptions) value the capture cannot use.
    #[error("invalid capture option: {reason}")]
    Options {
        /// What is wrong.
        reason: String,
    },

    /// The capture thread panicked (a bug).
    #[error("the path capture thread panicked")]
    ThreadPanicked,
}

fn log_suffix(log: &str) -> String {
    if log.trim().is_empty() {
        String::new()
    } else {
        format!("\nlibbpf said:\n{}", log.trim_end())
    }
}

impl BpfError {
    /// libbpf's error setting up or reading a ring buffer, with its causes (`{:#}`).
    pub(crate) fn ring_buffer(e: impl std::fmt::Display) -> BpfError {
        BpfError::RingBuffer {
            message: format!("{e:#}"),
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> BpfError {
        BpfError::Io {
            path: path.into(),
            source,
        }
    }

    /// A path capture that cannot be read.
    pub(crate) fn format(path: impl Into<PathBuf>, reason: impl Into<String>) -> BpfError {
        BpfError::Format {
            path: path.into(),
            what: "path capture",
            reason: reason.into(),
        }
    }

    /// A scheduler recording that cannot be read.
    pub(crate) fn sched_format(path: impl Into<PathBuf>, reason: impl Into<String>) -> BpfError {
        BpfError::Format {
            path: path.into(),
            what: "scheduler recording",
            reason: reason.into(),
        }
    }
}
