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
    #[error("not permitted to read {what} of process {pid}: run as its owner or as root (sudo slowlab hang {pid}); ptrace rules (kernel.yama.ptrace_scope) apply too")]
    NotPermitted { pid: i32, what: String },
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
