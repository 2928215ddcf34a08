//! `HangError`: why a process could not be walked at all. Each message is
//! one line that says what to do where something can be done.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum HangError {
    #[error("no process {0}")]
    NoSuchProcess(i32),
    #[error("process {pid} ({comm}) is a zombie: it has exited and waits for its parent {ppid} to reap it; look at the parent instead: slowlab hang {ppid}")]
    Zombie { pid: i32, comm: String, ppid: i32 },
    #[error("process {pid} ({comm}) is a kernel thread: it has no user-space locks to walk; its kernel stack is in /proc/{pid}/stack")]
    KernelThread { pid: i32, comm: String },
    #[error("not permitted to read {what} of process {pid}: {advice}")]
    NotPermitted {
        pid: i32,
        what: String,
        /// What to do: run as root, or, already root, what else stands in the way.
        advice: String,
    },
    #[error("process {0} exited during the walk")]
    Exited(i32),
    #[error("this kernel does not provide {0}")]
    Unsupported(String),
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl HangError {
    /// Reading `what` of `pid` was refused: the advice depends on whether slowlab already
    /// runs as root (then a missing capability or a security module refused it).
    pub(crate) fn not_permitted(pid: i32, what: String) -> HangError {
        // SAFETY: geteuid has no preconditions.
        let advice = if unsafe { libc::geteuid() } == 0 {
            format!(
                "even as root, this process lacks what it takes (CAP_SYS_PTRACE, or the \
                 capabilities process {pid} holds: run slowlab outside the container or sandbox \
                 it is in), or a security module refuses it (kernel.yama.ptrace_scope = 3, \
                 SELinux, AppArmor)"
            )
        } else {
            format!(
                "run as its owner or as root (sudo slowlab hang {pid}); ptrace rules \
                 (kernel.yama.ptrace_scope) apply too"
            )
        };
        HangError::NotPermitted { pid, what, advice }
    }
}
