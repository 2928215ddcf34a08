//! File operations and memory events of an ETL trace into the model.
//!
//! - `FileIO` operations (Create, Cleanup, Close, Read, Write, SetInfo,
//!   Delete, Rename, DirEnum, Flush, QueryInfo, FSControl, DirNotify) become
//!   syscall-like pairs on the thread that asked for them: a
//!   `SyscallEnter` named `FileIO/Create` (…) when the request starts, with
//!   `args = [file object, file key, bytes, create options, IRP, 0]`, and a
//!   `SyscallExit` when its `FileIO/OperationEnd` comes, with the
//!   `NTSTATUS` as the nearest errno (`kernel_io::status_as_errno`); both
//!   carry the operation as a [`FileOp`] (`file_op`), so readers need not
//!   match names. The
//!   file's path (from the create itself, or from the Name, FileCreate and
//!   FileRundown events that name file objects and keys) becomes a
//!   [`CapturedPath`] at the operation's start, as slowlab's eBPF capture
//!   gives for Linux syscalls, so `--syscalls` and the path detectors read
//!   both alike.
//! - Soft page faults (`PageFault/TransitionFault`, `DemandZeroFault`,
//!   `CopyOnWrite`, `GuardPageFault`, `AccessViolation`) become `PageFault`
//!   events with their kind in `windows_kind` ([`WindowsFaultKind`]) and, as
//!   `error_code`, only the x86 user bit (4) when the faulting code was in
//!   user space: ETW records no x86 error code. `HardPageFault` (opcode 14)
//!   is left out: `Memory/HardFault` already gives each hard fault.
//! - `VirtualAlloc` and `VirtualFree` events (emitted when the call is done:
//!   no duration) become a `SyscallEnter` named `VirtualAlloc` or
//!   `VirtualFree` with `args = [base, size, flags, pid, 0, 0]` and a
//!   `SyscallExit` (0) at the same time (no `file_op`).

use std::collections::HashMap;

use slowlab_model::bundle::CapturedPath;
use slowlab_model::trace::{EventKind, FileOp, StrIdx, ThreadIdx, WindowsFaultKind};

use super::{Builder, VolumeMap};
use crate::buffer::Event as EtlEvent;
use crate::kernel_io;
use crate::names::{group, kernel_group};
use crate::stacks::is_kernel_address;
use crate::Etl;

/// The soft page faults read into the model, by opcode.
pub fn soft_fault_kind(opcode: u8) -> Option<WindowsFaultKind> {
    Some(match opcode {
        10 => WindowsFaultKind::Transition,
        11 => WindowsFaultKind::DemandZero,
        12 => WindowsFaultKind::CopyOnWrite,
        13 => WindowsFaultKind::GuardPage,
        15 => WindowsFaultKind::AccessViolation,
        _ => return None,
    })
}

/// The file operations read into the model, by opcode, with their event
/// names (what `--syscalls` lists them as).
pub fn file_op(opcode: u8) -> Option<(FileOp, &'static str)> {
    Some(match opcode {
        64 => (FileOp::Create, "FileIO/Create"),
        65 => (FileOp::Cleanup, "FileIO/Cleanup"),
        66 => (FileOp::Close, "FileIO/Close"),
        67 => (FileOp::Read, "FileIO/Read"),
        68 => (FileOp::Write, "FileIO/Write"),
        69 => (FileOp::SetInfo, "FileIO/SetInfo"),
        70 => (FileOp::Delete, "FileIO/Delete"),
        71 => (FileOp::Rename, "FileIO/Rename"),
        72 => (FileOp::DirEnum, "FileIO/DirEnum"),
        73 => (FileOp::Flush, "FileIO/Flush"),
        74 => (FileOp::QueryInfo, "FileIO/QueryInfo"),
        75 => (FileOp::FsControl, "FileIO/FSControl"),
        77 => (FileOp::DirNotify, "FileIO/DirNotify"),
        _ => return None,
    })
}

/// What the file events need across events: names of file objects and
/// keys, requests in flight, the paths captured.
#[derive(Default)]
pub(super) struct IoState {
    names: HashMap<u64, String>,
    /// IRP → (thread that asked, operation name, operation).
    pending: HashMap<u64, (ThreadIdx, StrIdx, FileOp)>,
    pub paths: Vec<CapturedPath>,
    pub file_ops: u64,
}

impl IoState {
    /// Names every file object and key the trace names (rundowns come at
    /// the end, so this is read before the operations).
    pub fn new(etl: &Etl, volumes: &VolumeMap) -> IoState {
        let mut names = HashMap::new();
        for e in etl.events() {
            let h = &e.header;
            if kernel_group(h.source, h.opcode) == Some(group::FILE_IO)
                && matches!(h.opcode, 0 | 32 | 35 | 36)
            {
                if let Some(n) = kernel_io::file_name(etl.payload(e)) {
                    if !n.name.is_empty() {
                        names.insert(n.file, volumes.to_dos(&n.name));
                    }
                }
            }
        }
        IoState {
            names,
            ..IoState::default()
        }
    }
}

/// Reads a `FileIO` event into the model; `None` when its payload is too
/// short for its layout.
pub(super) fn on_file_event(
    b: &mut Builder,
    etl: &Etl,
    e: &EtlEvent,
    volumes: &VolumeMap,
) -> Option<()> {
    let h = &e.header;
    let now = etl.ns(h.time);
    let p = etl.payload(e);
    if h.opcode == 76 {
        let end = kernel_io::file_op_end(p)?;
        if let Some((thread, name, op)) = b.io.pending.remove(&end.irp) {
            let kind = EventKind::SyscallExit {
                name,
                ret: kernel_io::status_as_errno(end.status),
                file_op: Some(op),
            };
            b.push_event(now, e.cpu, thread, kind, None);
        }
        return Some(());
    }
    let Some((file_op, op_name)) = file_op(h.opcode) else {
        return Some(()); // names (read beforehand), map events: not operations
    };
    let op = match h.opcode {
        64 => kernel_io::file_create(p)?,
        67 | 68 => kernel_io::file_read_write(p)?,
        _ => kernel_io::file_simple_op(p)?,
    };
    let tid = if op.tid == 0 || op.tid == u32::MAX {
        h.tid.unwrap_or(u32::MAX)
    } else {
        op.tid
    };
    let thread = b.thread(tid, h.pid);
    let pid = b.t.processes[b.t.threads[thread.ix()].process.ix()].pid as u32;
    let name = b.sb.string(&mut b.t, op_name);
    let path = match &op.path {
        Some(p) => {
            let dos = volumes.to_dos(p);
            b.io.names.insert(op.file_object, dos.clone());
            Some(dos)
        }
        None => {
            b.io.names
                .get(&op.file_key)
                .or_else(|| b.io.names.get(&op.file_object))
                .cloned()
        }
    };
    if let Some(path) = path.filter(|p| !p.is_empty()) {
        b.io.paths.push(CapturedPath {
            time_ns: now,
            tid: tid as i32,
            syscall: op_name.to_string(),
            path,
        });
    }
    let kind = EventKind::SyscallEnter {
        name,
        args: Box::new([
            op.file_object,
            op.file_key,
            op.size as u64,
            op.create_options as u64,
            op.irp,
            0,
        ]),
        file_op: Some(file_op),
    };
    b.push_event(now, e.cpu, thread, kind, Some((h.time, [tid, tid], pid)));
    b.io.pending.insert(op.irp, (thread, name, file_op));
    b.io.file_ops += 1;
    Some(())
}

/// Reads a soft page fault or a VirtualAlloc/VirtualFree event into the
/// model; `None` when its payload is too short.
pub(super) fn on_memory_event(b: &mut Builder, etl: &Etl, e: &EtlEvent) -> Option<()> {
    let h = &e.header;
    let now = etl.ns(h.time);
    let p = etl.payload(e);
    let tid = h.tid.unwrap_or(u32::MAX);
    match h.opcode {
        10..=13 | 15 => {
            let windows_kind = soft_fault_kind(h.opcode);
            let f = kernel_io::soft_fault(p)?;
            let thread = b.thread(tid, h.pid);
            let pid = b.t.processes[b.t.threads[thread.ix()].process.ix()].pid as u32;
            let user = !is_kernel_address(f.program_counter, b.sb.pointer_size);
            let kind = EventKind::PageFault {
                address: f.virtual_address,
                ip: f.program_counter,
                error_code: if user { 4 } else { 0 },
                user,
                windows_kind,
            };
            b.push_event(now, e.cpu, thread, kind, Some((h.time, [tid, tid], pid)));
        }
        98 | 99 => {
            let v = kernel_io::virtual_alloc(p)?;
            let thread = b.thread(tid, h.pid.or(Some(v.pid)));
            let op = if h.opcode == 98 {
                "VirtualAlloc"
            } else {
                "VirtualFree"
            };
            let name = b.sb.string(&mut b.t, op);
            let args = [v.base, v.size, v.flags as u64, v.pid as u64, 0, 0];
            let key = Some((h.time, [tid, tid], v.pid));
            b.push_event(
                now,
                e.cpu,
                thread,
                EventKind::SyscallEnter {
                    name,
                    args: Box::new(args),
                    file_op: None,
                },
                key,
            );
            b.push_event(
                now,
                e.cpu,
                thread,
                EventKind::SyscallExit {
                    name,
                    ret: 0,
                    file_op: None,
                },
                None,
            );
        }
        _ => {}
    }
    Some(())
}
