//! Payload layouts of the kernel's file and memory events, as the MOF
//! classes document them (TraceEvent's `KernelTraceEventParser` reads the
//! same offsets): `FileIo_Name` (Name, FileCreate, FileDelete,
//! FileRundown), `FileIo_Create`, `FileIo_ReadWrite`, `FileIo_SimpleOp`
//! and `FileIo_Info` (the other operations share its first four fields),
//! `FileIo_OpEnd`, `PageFault_TypeGroup1` (the soft-fault kinds) and
//! `PageFault_VirtualAlloc` (VirtualAlloc and VirtualFree). Pointer-sized
//! fields move with the event's pointer size; a payload too short for its
//! layout decodes to `None`.
//!
//! Not decoded: the file-mapping events (MapFile), the directory-change
//! notification's name, `FileIo_Info`'s information class.

use crate::kernel::Payload;

/// `FileIO/Name`, `FileCreate`, `FileDelete` and `FileRundown`: the file
/// object (or file key) `file` has the kernel path `name`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileNameEvent {
    pub file: u64,
    pub name: String,
}

pub fn file_name(p: Payload) -> Option<FileNameEvent> {
    Some(FileNameEvent {
        file: p.ptr(0)?,
        name: p.utf16(p.ptr)?.0,
    })
}

/// A file operation's start: which request (IRP), thread and file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileOpEvent {
    pub irp: u64,
    /// The thread that asked for the operation.
    pub tid: u32,
    pub file_object: u64,
    /// The file key (the same for every handle of one open file); 0 for a
    /// create, which has none yet.
    pub file_key: u64,
    /// Bytes asked for (read and write), else 0.
    pub size: u32,
    /// The path opened (create only, kernel form).
    pub path: Option<String>,
    /// Create only: `CreateOptions` with the disposition in its top byte.
    pub create_options: u32,
}

/// `FileIO/Create` (opcode 64).
pub fn file_create(p: Payload) -> Option<FileOpEvent> {
    let ptr = p.ptr;
    Some(FileOpEvent {
        irp: p.ptr(0)?,
        tid: p.u32(ptr)?,
        file_object: p.ptr(2 * ptr)?,
        file_key: 0,
        size: 0,
        create_options: p.u32(3 * ptr)?,
        path: Some(p.utf16(3 * ptr + 12)?.0),
    })
}

/// `FileIO/Read` and `Write` (opcodes 67, 68): the offset comes first.
pub fn file_read_write(p: Payload) -> Option<FileOpEvent> {
    let ptr = p.ptr;
    Some(FileOpEvent {
        irp: p.ptr(8)?,
        tid: p.u32(8 + ptr)?,
        file_object: p.ptr(8 + 2 * ptr)?,
        file_key: p.ptr(8 + 3 * ptr)?,
        size: p.u32(8 + 4 * ptr)?,
        create_options: 0,
        path: None,
    })
}

/// The other operations (Cleanup, Close, Flush, SetInfo, Delete, Rename,
/// QueryInfo, FSControl, DirEnum, DirNotify): IRP, thread, file object and
/// file key first.
pub fn file_simple_op(p: Payload) -> Option<FileOpEvent> {
    let ptr = p.ptr;
    Some(FileOpEvent {
        irp: p.ptr(0)?,
        tid: p.u32(ptr)?,
        file_object: p.ptr(2 * ptr)?,
        file_key: p.ptr(3 * ptr)?,
        size: 0,
        create_options: 0,
        path: None,
    })
}

/// `FileIO/OperationEnd` (opcode 76): request `irp` finished with `status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileOpEnd {
    pub irp: u64,
    pub extra_info: u64,
    /// An `NTSTATUS`: negative (as i32) is a failure.
    pub status: u32,
}

pub fn file_op_end(p: Payload) -> Option<FileOpEnd> {
    let ptr = p.ptr;
    Some(FileOpEnd {
        irp: p.ptr(0)?,
        extra_info: p.ptr(ptr)?,
        status: p.u32(2 * ptr)?,
    })
}

/// The errno closest to an `NTSTATUS`, as a negative syscall result (0 for
/// success and informational codes): so the views that read Linux results
/// ("failed", "ENOENT") read Windows file operations too.
pub fn status_as_errno(status: u32) -> i64 {
    if (status as i32) >= 0 {
        return 0;
    }
    -match status {
        0xC000_0034 | 0xC000_003A | 0xC000_000F => 2, // name or path not found: ENOENT
        0xC000_0035 => 17,                            // name collision: EEXIST
        0xC000_0022 => 13,                            // access denied: EACCES
        0xC000_0043 => 16,                            // sharing violation: EBUSY
        0xC000_0103 => 20,                            // not a directory: ENOTDIR
        0xC000_00BA => 21,                            // file is a directory: EISDIR
        0xC000_0101 => 39,                            // directory not empty: ENOTEMPTY
        0x8000_0006 => 61,                            // no more files: ENODATA
        _ => 5,                                       // EIO
    }
}

/// `PageFault/TransitionFault`, `DemandZeroFault`, `CopyOnWrite`,
/// `GuardPageFault`, `HardPageFault`, `AccessViolation` (opcodes 10–15).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SoftFaultEvent {
    pub virtual_address: u64,
    pub program_counter: u64,
}

pub fn soft_fault(p: Payload) -> Option<SoftFaultEvent> {
    Some(SoftFaultEvent {
        virtual_address: p.ptr(0)?,
        program_counter: p.ptr(p.ptr)?,
    })
}

/// `PageFault/VirtualAlloc` and `VirtualFree` (opcodes 98, 99).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VirtualAllocEvent {
    pub base: u64,
    pub size: u64,
    pub pid: u32,
    /// `MEM_COMMIT` 0x1000, `MEM_RESERVE` 0x2000, `MEM_DECOMMIT` 0x4000,
    /// `MEM_RELEASE` 0x8000, `MEM_TOP_DOWN` 0x10_0000, …
    pub flags: u32,
}

pub fn virtual_alloc(p: Payload) -> Option<VirtualAllocEvent> {
    let ptr = p.ptr;
    Some(VirtualAllocEvent {
        base: p.ptr(0)?,
        size: p.ptr(ptr)?,
        pid: p.u32(2 * ptr)?,
        flags: p.u32(2 * ptr + 4)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A decoder's name, whether it read its payload, and the shortest
    /// payload it needs for pointer size `ptr`: its fields, from the
    /// layouts above (a name or path may be cut or empty).
    type Decoder = (&'static str, fn(Payload) -> bool, fn(usize) -> usize);

    fn decoders() -> Vec<Decoder> {
        vec![
            // FileObject, then FileName.
            ("file name", |p| file_name(p).is_some(), |ptr| ptr),
            // IrpPtr, TTID, FileObject, CreateOptions, FileAttributes,
            // ShareAccess, then OpenPath.
            (
                "file create",
                |p| file_create(p).is_some(),
                |ptr| 3 * ptr + 12,
            ),
            // Offset, IrpPtr, TTID, FileObject, FileKey, IoSize.
            (
                "file read/write",
                |p| file_read_write(p).is_some(),
                |ptr| 8 + 4 * ptr + 4,
            ),
            // IrpPtr, TTID, FileObject, FileKey.
            (
                "file simple op",
                |p| file_simple_op(p).is_some(),
                |ptr| 4 * ptr,
            ),
            // IrpPtr, ExtraInfo, NtStatus.
            (
                "file op end",
                |p| file_op_end(p).is_some(),
                |ptr| 2 * ptr + 4,
            ),
            // VirtualAddress, ProgramCounter.
            ("soft fault", |p| soft_fault(p).is_some(), |ptr| 2 * ptr),
            // BaseAddress, RegionSize, ProcessId, Flags.
            (
                "virtual alloc",
                |p| virtual_alloc(p).is_some(),
                |ptr| 2 * ptr + 8,
            ),
        ]
    }

    #[test]
    fn short_payloads_decode_to_none_not_a_panic() {
        for fill in [0x00u8, 0xff] {
            let bytes = [fill; 80];
            for ptr in [4u8, 8] {
                for (name, decodes, needs) in decoders() {
                    let needs = needs(ptr as usize);
                    assert!(needs < bytes.len(), "{name}");
                    for len in 0..=bytes.len() {
                        let decoded = decodes(Payload::new(&bytes[..len], ptr));
                        assert_eq!(
                            decoded,
                            len >= needs,
                            "{name} on {len} bytes of {fill:#x}, {ptr}-byte pointers"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_64_bit_create_reads_its_path_after_three_pointers() {
        let mut b = Vec::new();
        for v in [0x1111u64, 42, 0x3333] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&(0x0100_0040u32).to_le_bytes()); // FILE_OPEN
        b.extend_from_slice(&[0; 8]);
        b.extend(
            "\\Device\\HarddiskVolume2\\x.0.dat"
                .encode_utf16()
                .chain([0])
                .flat_map(u16::to_le_bytes),
        );
        let c = file_create(Payload::new(&b, 8)).unwrap();
        assert_eq!((c.irp, c.tid, c.file_object), (0x1111, 42, 0x3333));
        assert_eq!(c.create_options >> 24, 1);
        assert_eq!(
            c.path.as_deref(),
            Some("\\Device\\HarddiskVolume2\\x.0.dat")
        );
    }

    #[test]
    fn failures_map_to_their_errno_and_success_to_zero() {
        assert_eq!(status_as_errno(0), 0);
        assert_eq!(status_as_errno(0x0000_0103), 0); // STATUS_PENDING
        assert_eq!(status_as_errno(0xC000_0034), -2);
        assert_eq!(status_as_errno(0xC000_0035), -17);
        assert_eq!(status_as_errno(0xC000_0001), -5);
    }
}
