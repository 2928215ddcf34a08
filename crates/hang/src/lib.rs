//! `slowlab hang PID`: why is this process stuck right now? For every
//! thread, what it is blocked on and who holds that, followed across
//! threads and processes until the chain ends in a thread that is running,
//! runnable, sleeping on a timer, stopped, waiting for a device or for
//! something slowlab cannot identify, or closes a cycle (a deadlock). The
//! Linux counterpart of Windows' Wait Chain Traversal.
//!
//! - [`walk`]: the walk itself ([`walk::walk`]), reading under a root path;
//! - [`procfs`]: the `/proc` files, parsed by pure functions;
//! - [`futex`]: glibc's mutex, rwlock and join words (the layouts assumed
//!   are written there);
//! - [`kernel`]: kernel locks and I/O waits from kernel stacks;
//! - [`fds`]: who holds the other end of a pipe, FIFO or socket;
//! - [`unix_diag`]: Unix socket peers from `sock_diag`;
//! - [`net`]: the other end of a loopback TCP connection;
//! - [`symbols`]: user stacks found by scanning, named from ELF symbols;
//! - [`model`]: the result, as `--json` prints it; [`render`]: its text.
//!
//! It only reads (`/proc`, `/proc/PID/mem`, netlink): it never stops,
//! attaches to or signals a process, so what it reads is a series of
//! snapshots that a running thread can move past. x86-64 only for system
//! call names and glibc layouts.

pub mod error;
pub mod fds;
pub mod futex;
pub mod kernel;
pub mod model;
pub mod net;
pub mod procfs;
pub mod render;
pub mod symbols;
pub mod syscalls;
pub mod unix_diag;
pub mod walk;

pub use error::HangError;
pub use model::{EndsIn, HangReport, Hop, ThreadChain, ThreadId, WaitKind, WaitsOn};
pub use walk::{walk, Options};
