//! Payload layouts of the classic kernel events slowlab uses, as the MOF
//! classes document them (`Process_V4_TypeGroup1`, `Thread_V3_TypeGroup1`,
//! `Image_Load`, `SampledProfile`, `CSwitch`, `ReadyThread`,
//! `StackWalk_Event` and the stack-key events, `DiskIo_TypeGroup1`,
//! `PageFault_HardFault`). Pointer-sized fields make offsets depend on the
//! event's pointer size; older versions lack later fields. Every read is
//! checked: a payload too short for its layout decodes to `None`.
//!
//! Not decoded here (counted and named only): TcpIp/UdpIp, Registry,
//! system calls and the rest; FileIo and the memory events are in
//! [`crate::kernel_io`].

use crate::logfile::utf16z;

/// Reads little-endian fields of one payload with a given pointer size.
#[derive(Clone, Copy)]
pub struct Payload<'a> {
    pub bytes: &'a [u8],
    pub ptr: usize,
}

impl<'a> Payload<'a> {
    pub fn new(bytes: &'a [u8], ptr: u8) -> Self {
        Payload {
            bytes,
            ptr: if ptr == 4 { 4 } else { 8 },
        }
    }
    pub fn u8(&self, at: usize) -> Option<u8> {
        self.bytes.get(at).copied()
    }
    pub fn u32(&self, at: usize) -> Option<u32> {
        Some(u32::from_le_bytes(
            self.bytes.get(at..at + 4)?.try_into().ok()?,
        ))
    }
    pub fn u64(&self, at: usize) -> Option<u64> {
        Some(u64::from_le_bytes(
            self.bytes.get(at..at + 8)?.try_into().ok()?,
        ))
    }
    /// A pointer-sized field.
    pub fn ptr(&self, at: usize) -> Option<u64> {
        if self.ptr == 4 {
            self.u32(at).map(u64::from)
        } else {
            self.u64(at)
        }
    }
    /// A NUL-terminated UTF-16 string and the offset after it.
    pub fn utf16(&self, at: usize) -> Option<(String, usize)> {
        (at <= self.bytes.len()).then(|| utf16z(self.bytes, at))
    }
    /// A NUL-terminated 8-bit string and the offset after it.
    pub fn ansi(&self, at: usize) -> Option<(String, usize)> {
        let rest = self.bytes.get(at..)?;
        let len = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        let end = (at + len + 1).min(self.bytes.len());
        Some((String::from_utf8_lossy(&rest[..len]).into_owned(), end))
    }
    /// Skips a `TOKEN_USER` and its SID (or a 4-byte zero for none).
    fn skip_sid(&self, at: usize) -> Option<usize> {
        if self.u32(at)? == 0 {
            return Some(at + 4);
        }
        let token = 2 * self.ptr;
        let sub_authorities = self.u8(at + token + 1)? as usize;
        Some(at + token + 8 + 4 * sub_authorities)
    }
}

/// `Process` start, stop, rundown (DCStart/DCStop) and defunct events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessEvent {
    pub unique_key: u64,
    pub pid: u32,
    pub parent_pid: u32,
    pub session_id: u32,
    pub exit_status: i32,
    pub image_file_name: String,
    pub command_line: String,
}

pub fn process(p: Payload, version: u16) -> Option<ProcessEvent> {
    let ptr = p.ptr;
    if version < 1 {
        return None; // Windows 2000's layout; not worth the code.
    }
    let sid_at = match version {
        1 | 2 => ptr + 16,
        3 => 2 * ptr + 16,
        _ => 2 * ptr + 20,
    };
    let name_at = p.skip_sid(sid_at)?;
    let (image_file_name, after_name) = p.ansi(name_at)?;
    let command_line = if version >= 2 {
        p.utf16(after_name).map(|(s, _)| s).unwrap_or_default()
    } else {
        String::new()
    };
    Some(ProcessEvent {
        unique_key: if version >= 2 { p.ptr(0)? } else { 0 },
        pid: p.u32(ptr)?,
        parent_pid: p.u32(ptr + 4)?,
        session_id: p.u32(ptr + 8)?,
        exit_status: p.u32(ptr + 12)? as i32,
        image_file_name,
        command_line,
    })
}

/// `Thread` start, stop and rundown events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadEvent {
    pub pid: u32,
    pub tid: u32,
    pub win32_start_addr: u64,
    /// The thread's name (version 4 and later), often empty.
    pub name: String,
}

pub fn thread(p: Payload, version: u16) -> Option<ThreadEvent> {
    let ptr = p.ptr;
    let (win32_start_addr, name) = if version >= 2 {
        // StackBase, StackLimit, UserStackBase, UserStackLimit, Affinity /
        // StartAddr, Win32StartAddr, TebBase, SubProcessTag, 4 bytes of
        // priorities and flags, then the name.
        let win32 = p.ptr(8 + 5 * ptr).unwrap_or(0);
        let name_at = 8 + 7 * ptr + 8;
        let name = if version >= 3 && p.bytes.len() >= name_at + 2 {
            p.utf16(name_at).map(|(s, _)| s).unwrap_or_default()
        } else {
            String::new()
        };
        (win32, name)
    } else {
        (0, String::new())
    };
    Some(ThreadEvent {
        pid: p.u32(0)?,
        tid: p.u32(4)?,
        win32_start_addr,
        name,
    })
}

/// `Image` load, unload and rundown events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageEvent {
    pub base: u64,
    pub size: u64,
    pub pid: u32,
    pub checksum: u32,
    pub time_date_stamp: u32,
    /// The kernel's path (`\Device\HarddiskVolume2\Windows\…`).
    pub file_name: String,
}

pub fn image(p: Payload, version: u16) -> Option<ImageEvent> {
    let ptr = p.ptr;
    let (pid, checksum, time_date_stamp, name_at) = match version {
        0 => (0, 0, 0, 2 * ptr),
        1 => (p.u32(2 * ptr)?, 0, 0, 2 * ptr + 4),
        _ => (
            p.u32(2 * ptr)?,
            p.u32(2 * ptr + 4)?,
            p.u32(2 * ptr + 8)?,
            3 * ptr + 32,
        ),
    };
    Some(ImageEvent {
        base: p.ptr(0)?,
        size: p.ptr(ptr)?,
        pid,
        checksum,
        time_date_stamp,
        file_name: p.utf16(name_at)?.0,
    })
}

/// `PerfInfo/Sample` (SampledProfile): a CPU sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleEvent {
    pub ip: u64,
    pub tid: u32,
    /// The CPU ran a DPC or an interrupt service routine (not the thread).
    pub in_dpc_or_isr: bool,
}

pub fn sample(p: Payload) -> Option<SampleEvent> {
    let ptr = p.ptr;
    Some(SampleEvent {
        ip: p.ptr(0)?,
        tid: p.u32(ptr)?,
        in_dpc_or_isr: p.u8(ptr + 6).is_some_and(|f| f & 3 != 0),
    })
}

/// `Thread/CSwitch`: the CPU switched from `old_tid` to `new_tid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CSwitchEvent {
    pub new_tid: u32,
    pub old_tid: u32,
    pub new_priority: i8,
    pub old_wait_reason: u8,
    /// `KTHREAD_STATE`: 1 ready, 2 running, 3 standby, 5 waiting, …
    pub old_state: u8,
}

pub fn cswitch(p: Payload) -> Option<CSwitchEvent> {
    Some(CSwitchEvent {
        new_tid: p.u32(0)?,
        old_tid: p.u32(4)?,
        new_priority: p.u8(8)? as i8,
        old_wait_reason: p.u8(12)?,
        old_state: p.u8(14)?,
    })
}

/// `Dispatcher/ReadyThread`: the event's thread made `tid` ready to run.
pub fn ready_thread(p: Payload) -> Option<u32> {
    p.u32(0)
}

/// The frames of a `StackWalk/Stack` event, for the event at `event_time`
/// of thread `tid` (innermost frame first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackEvent {
    pub event_time: i64,
    pub pid: u32,
    pub tid: u32,
    pub frames: Vec<u64>,
}

pub fn stack(p: Payload) -> Option<StackEvent> {
    let frames = p.bytes.get(16..)?;
    Some(StackEvent {
        event_time: p.u64(0)? as i64,
        pid: p.u32(8)?,
        tid: p.u32(12)?,
        frames: frames
            .chunks_exact(p.ptr)
            .map(|c| Payload::new(c, p.ptr as u8).ptr(0).unwrap_or(0))
            .collect(),
    })
}

/// `StackWalk/StackKeyKernel` and `StackKeyUser`: the event at `event_time`
/// of thread `tid` has the stack defined under `key`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackKeyRef {
    pub event_time: i64,
    pub tid: u32,
    pub key: u64,
}

pub fn stack_key_ref(p: Payload) -> Option<StackKeyRef> {
    Some(StackKeyRef {
        event_time: p.u64(0)? as i64,
        tid: p.u32(12)?,
        key: p.ptr(16)?,
    })
}

/// `StackWalk/KeyRundown` and `KeyDelete` (define a key's frames).
pub fn stack_key_def(p: Payload) -> Option<(u64, Vec<u64>)> {
    let key = p.ptr(0)?;
    let frames = p.bytes.get(p.ptr..)?;
    Some((
        key,
        frames
            .chunks_exact(p.ptr)
            .map(|c| Payload::new(c, p.ptr as u8).ptr(0).unwrap_or(0))
            .collect(),
    ))
}

/// `DiskIO/Read`, `Write` (completions) and `FlushBuffers`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskIoEvent {
    pub disk: u32,
    pub transfer_size: u32,
    pub byte_offset: u64,
    pub file_object: u64,
    /// Time from issue to completion, in the trace's clock ticks.
    pub response_time: u64,
    pub issuing_tid: Option<u32>,
}

pub fn disk_io(p: Payload) -> Option<DiskIoEvent> {
    let ptr = p.ptr;
    Some(DiskIoEvent {
        disk: p.u32(0)?,
        transfer_size: p.u32(8)?,
        byte_offset: p.u64(16)?,
        file_object: p.ptr(24)?,
        response_time: p.u64(24 + 2 * ptr)?,
        issuing_tid: p.u32(32 + 2 * ptr),
    })
}

/// `Memory/HardFault`: a page read from disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HardFaultEvent {
    pub initial_time: i64,
    pub read_offset: u64,
    pub virtual_address: u64,
    pub file_object: u64,
    pub tid: u32,
    pub byte_count: u32,
}

pub fn hard_fault(p: Payload) -> Option<HardFaultEvent> {
    let ptr = p.ptr;
    Some(HardFaultEvent {
        initial_time: p.u64(0)? as i64,
        read_offset: p.u64(8)?,
        virtual_address: p.ptr(16)?,
        file_object: p.ptr(16 + ptr)?,
        tid: p.u32(16 + 2 * ptr)?,
        byte_count: p.u32(20 + 2 * ptr)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A decoder's name, whether it read its payload, and the shortest
    /// payload it needs for pointer size `ptr` when every byte is `fill`:
    /// its required fields, from the layouts above (later, optional fields
    /// such as a thread's start address or a disk I/O's issuing thread may
    /// be missing).
    type Decoder = (&'static str, fn(Payload) -> bool, fn(usize, u8) -> usize);

    fn decoders() -> Vec<Decoder> {
        vec![
            // UniqueProcessKey, 4 ids, DirectoryTableBase, Flags, then the
            // UserSID: 4 zero bytes for none, else a TOKEN_USER (2
            // pointers), the SID's 8 bytes and its sub-authorities (0xff of
            // them when every byte is 0xff). The name may be cut.
            (
                "process v4",
                |p| process(p, 4).is_some(),
                |ptr, fill| match fill {
                    0 => 2 * ptr + 24,
                    _ => 2 * ptr + 20 + 2 * ptr + 8 + 4 * 0xff,
                },
            ),
            // ProcessId, TThreadId.
            ("thread v3", |p| thread(p, 3).is_some(), |_, _| 8),
            // ImageBase, ImageSize, 4 u32s, DefaultBase, 4 reserved u32s.
            ("image v3", |p| image(p, 3).is_some(), |ptr, _| 3 * ptr + 32),
            // InstructionPointer, ThreadId.
            ("sample", |p| sample(p).is_some(), |ptr, _| ptr + 4),
            // Two thread ids, then bytes up to OldThreadState at 14.
            ("cswitch", |p| cswitch(p).is_some(), |_, _| 15),
            // EventTimeStamp, StackProcess, StackThread.
            ("stack", |p| stack(p).is_some(), |_, _| 16),
            // EventTimeStamp, StackProcess, StackThread, StackKey.
            (
                "stack key ref",
                |p| stack_key_ref(p).is_some(),
                |ptr, _| 16 + ptr,
            ),
            // StackKey.
            (
                "stack key def",
                |p| stack_key_def(p).is_some(),
                |ptr, _| ptr,
            ),
            // DiskNumber, IrpFlags, TransferSize, Reserved, ByteOffset,
            // FileObject, Irp, HighResResponseTime.
            ("disk io", |p| disk_io(p).is_some(), |ptr, _| 32 + 2 * ptr),
            // InitialTime, ReadOffset, VirtualAddress, FileObject,
            // TThreadId, ByteCount.
            (
                "hard fault",
                |p| hard_fault(p).is_some(),
                |ptr, _| 24 + 2 * ptr,
            ),
        ]
    }

    #[test]
    fn short_payloads_decode_to_none_not_a_panic() {
        for fill in [0x00u8, 0xff] {
            let bytes = [fill; 1100];
            for ptr in [4u8, 8] {
                for (name, decodes, needs) in decoders() {
                    let needs = needs(ptr as usize, fill);
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
    fn a_32_bit_image_load_reads_pointer_sized_fields() {
        let mut b = Vec::new();
        b.extend_from_slice(&0x1000_0000u32.to_le_bytes()); // base
        b.extend_from_slice(&0x2000u32.to_le_bytes()); // size
        b.extend_from_slice(&42u32.to_le_bytes()); // pid
        b.extend_from_slice(&7u32.to_le_bytes()); // checksum
        b.extend_from_slice(&9u32.to_le_bytes()); // time stamp
        b.extend_from_slice(&[0; 4]); // reserved
        b.extend_from_slice(&0x1000_0000u32.to_le_bytes()); // default base
        b.extend_from_slice(&[0; 16]); // reserved 1-4
        for u in "a.dll".encode_utf16().chain([0]) {
            b.extend_from_slice(&u.to_le_bytes());
        }
        let img = image(Payload::new(&b, 4), 3).unwrap();
        assert_eq!((img.base, img.size, img.pid), (0x1000_0000, 0x2000, 42));
        assert_eq!(img.file_name, "a.dll");
    }
}
