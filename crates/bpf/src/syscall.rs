//! The syscalls whose path strings the capture records: slowlab's one syscall table lives
//! in `slowlab_model::syscalls` (each syscall's stable capture id, its tracepoint name,
//! which arguments are paths); this module re-exports its [`Syscall`] for the capture.
//!
//! The build script (`build.rs`) compiles that same file to generate the BPF program's
//! list of probes from [`Syscall::ALL`], so the C program and the Rust side cannot
//! disagree on ids or argument positions. This module adds nothing of its own.

pub use slowlab_model::syscalls::{Syscall, TracepointName};
