//! `slowlab hang`'s arguments. Definitions and help only: the binary runs them.

use clap::Args;

/// Why is this process stuck right now?
///
/// For every thread of PID: what it is blocked on and who holds that,
/// followed across threads and processes until the chain ends in a thread
/// that is running, runnable, sleeping on a timer, stopped, waiting for a
/// device or on something slowlab cannot identify, or closes a cycle (a
/// deadlock, reported with every member). Follows glibc mutexes (their
/// owner field), rwlocks held for writing, pthread_join, pipes and FIFOs
/// (who holds the other end), Unix sockets (the peer, from sock_diag),
/// loopback TCP connections, flock and fcntl locks (/proc/locks), wait4
/// on children; names kernel locks from the kernel stack. Condition
/// variables and semaphores have no owner: their other waiters are listed.
/// A loop is a deadlock when every wait in it has a single way out.
///
/// Only reads /proc (and the process's memory through /proc/PID/mem): the
/// process is never stopped or attached to. Needs the right to ptrace it
/// (its owner, or root; root for kernel stacks and other users' processes).
///
/// Exit status: 0 no thread blocked, 1 blocked chains, 3 a deadlock among
/// them, 2 the process could not be inspected.
///
/// Examples:
///
///   sudo slowlab hang 1234
///   sudo slowlab hang $(pidof make) --all-threads
///   sudo slowlab hang 1234 --json | jq '.threads[] | select(.cycle)'
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct HangArgs {
    /// The process (a thread id walks its whole process)
    #[arg(value_name = "PID")]
    pub pid: i32,

    /// Print the chains as JSON (the schema is in the README)
    #[arg(long)]
    pub json: bool,

    /// Report every thread, also the running and sleeping ones
    #[arg(long)]
    pub all_threads: bool,
}
