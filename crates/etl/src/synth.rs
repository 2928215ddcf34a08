//! Writes small 32-bit ETL files byte by byte, for tests (this crate's and
//! the binary's end-to-end ones) and fuzz seeds: WMI buffers (optionally
//! compressed with literal-only LZ77), SYSTEM32 and PERFINFO32 event
//! headers, the trace header, and the payloads of the kernel events the
//! reader decodes, at pointer size 4, as their MOF classes lay them out.
//!
//! Also the 32-bit full (MOF) header of classic provider events, for
//! KernelTraceControl's `ImageID` and `DbgID_RSDS` ([`image_id`],
//! [`dbg_id_rsds`]).
//!
//! Not a general ETL writer: no 64-bit headers, no manifest events, one
//! buffer per call of [`buffer`].

/// Ticks per second of the traces written here (the QPC frequency).
pub const FREQ: u64 = 10_000_000;

/// A NUL-terminated UTF-16LE string.
pub fn utf16(s: &str) -> Vec<u8> {
    s.encode_utf16()
        .chain([0])
        .flat_map(u16::to_le_bytes)
        .collect()
}

fn le(values: &[u32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// A SYSTEM32 (`kind` 1) or compact SYSTEM32 (`kind` 3) event with hook id
/// `hook` (group << 8 | opcode).
pub fn system_event(
    kind: u8,
    hook: u16,
    version: u16,
    tid: u32,
    pid: u32,
    time: i64,
    payload: &[u8],
) -> Vec<u8> {
    let header_len = if kind == 1 { 32 } else { 24 };
    let mut b = version.to_le_bytes().to_vec();
    b.extend_from_slice(&[kind, 0xc0]);
    b.extend_from_slice(&((header_len + payload.len()) as u16).to_le_bytes());
    b.extend_from_slice(&hook.to_le_bytes());
    b.extend_from_slice(&tid.to_le_bytes());
    b.extend_from_slice(&pid.to_le_bytes());
    b.extend_from_slice(&time.to_le_bytes());
    b.resize(header_len, 0);
    b.extend_from_slice(payload);
    b
}

/// A PERFINFO32 (kind 0x10) event.
pub fn perfinfo_event(hook: u16, time: i64, payload: &[u8]) -> Vec<u8> {
    let mut b = 2u16.to_le_bytes().to_vec();
    b.extend_from_slice(&[0x10, 0xc0]);
    b.extend_from_slice(&((16 + payload.len()) as u16).to_le_bytes());
    b.extend_from_slice(&hook.to_le_bytes());
    b.extend_from_slice(&time.to_le_bytes());
    b.extend_from_slice(payload);
    b
}

/// One WMI buffer of CPU `cpu` holding `events` (8-byte aligned).
pub fn buffer(cpu: u8, events: &[Vec<u8>], compress: bool) -> Vec<u8> {
    let mut body = Vec::new();
    for e in events {
        body.extend_from_slice(e);
        body.resize(body.len().next_multiple_of(8), 0);
    }
    let filled = 0x48 + body.len();
    let stored = if compress {
        // Plain LZ77 with literals only: a zero flag word per 32 bytes.
        let mut c = Vec::new();
        for chunk in body.chunks(32) {
            c.extend_from_slice(&0u32.to_le_bytes());
            c.extend_from_slice(chunk);
        }
        c
    } else {
        body
    };
    let mut b = vec![0u8; 0x48];
    b[0..4].copy_from_slice(&((0x48 + stored.len()) as u32).to_le_bytes());
    b[4..8].copy_from_slice(&(filled as u32).to_le_bytes());
    b[0x28] = cpu;
    b[0x30..0x34].copy_from_slice(&(filled as u32).to_le_bytes());
    let flags: u16 = if compress { 0x40 } else { 0 };
    b[0x34..0x36].copy_from_slice(&flags.to_le_bytes());
    b.extend_from_slice(&stored);
    b
}

/// The trace header event's payload: Windows 5.1, `cpus` CPUs, pointer
/// size 4, `events_lost` lost, QPC at [`FREQ`].
pub fn logfile_header(cpus: u32, events_lost: u32) -> Vec<u8> {
    let mut p = vec![0u8; 56 + 8 + 172 + 4]; // up to the 8-aligned times (240)
    p[0..4].copy_from_slice(&0x10000u32.to_le_bytes());
    p[4..8].copy_from_slice(&0x0105u32.to_le_bytes()); // 5.1
    p[8..12].copy_from_slice(&2600u32.to_le_bytes());
    p[12..16].copy_from_slice(&cpus.to_le_bytes());
    p[44..48].copy_from_slice(&4u32.to_le_bytes()); // pointer size
    p[48..52].copy_from_slice(&events_lost.to_le_bytes());
    p.extend_from_slice(&0i64.to_le_bytes()); // boot time
    p.extend_from_slice(&(FREQ as i64).to_le_bytes()); // perf freq
    p.extend_from_slice(&0i64.to_le_bytes()); // start time
    p.extend_from_slice(&1u32.to_le_bytes()); // clock: QPC
    p.extend_from_slice(&0u32.to_le_bytes()); // buffers lost
    p.extend_from_slice(&utf16("Synthetic"));
    p.extend_from_slice(&utf16("synthetic.etl"));
    p
}

/// The header event itself (hook 0x0000, version 2).
pub fn header_event(time: i64, cpus: u32, events_lost: u32) -> Vec<u8> {
    system_event(1, 0x0000, 2, 0, 0, time, &logfile_header(cpus, events_lost))
}

/// `Process_V4_TypeGroup1` (Start, DCStart, …) without a SID.
pub fn process(pid: u32, ppid: u32, name: &str, cmd: &str) -> Vec<u8> {
    let mut p = le(&[0x8100_0000, pid, ppid, 1, 259, 0x1000, 0, 0]);
    p.extend_from_slice(name.as_bytes());
    p.push(0);
    p.extend_from_slice(&utf16(cmd));
    p.extend_from_slice(&utf16(""));
    p.extend_from_slice(&utf16(""));
    p
}

/// `Thread_V3_TypeGroup1` (Start, DCStart, …) with a name.
pub fn thread(pid: u32, tid: u32, name: &str) -> Vec<u8> {
    let mut p = le(&[pid, tid]);
    p.extend_from_slice(&[0u8; 7 * 4 + 4 + 4]); // pointers, tag, priorities
    p.extend_from_slice(&utf16(name));
    p
}

/// `Image_Load` version 3.
pub fn image(pid: u32, base: u32, size: u32, path: &str) -> Vec<u8> {
    let mut p = le(&[base, size, pid, 0, 0, 0, base, 0, 0, 0, 0]);
    p.extend_from_slice(&utf16(path));
    p
}

/// `SampledProfile`: a sample of `tid` at `ip`.
pub fn sample(ip: u32, tid: u32) -> Vec<u8> {
    le(&[ip, tid, 1])
}

/// `StackWalk_Event`: the frames of the event at `event_time` of `tid`.
pub fn stack(event_time: i64, pid: u32, tid: u32, frames: &[u32]) -> Vec<u8> {
    let mut p = event_time.to_le_bytes().to_vec();
    p.extend_from_slice(&le(&[pid, tid]));
    p.extend_from_slice(&le(frames));
    p
}

/// `FileIo_Create`: request `irp` of `tid` opens `path` (disposition 1,
/// open an existing file).
pub fn file_create(irp: u32, tid: u32, file_object: u32, path: &str) -> Vec<u8> {
    let mut p = le(&[irp, tid, file_object, 0x0100_0000, 0x80, 7]);
    p.extend_from_slice(&utf16(path));
    p
}

/// `FileIo_OpEnd`: request `irp` ended with `status`.
pub fn file_op_end(irp: u32, status: u32) -> Vec<u8> {
    le(&[irp, 0, status])
}

/// `FileIo_SimpleOp` (Cleanup, Close, …).
pub fn file_simple_op(irp: u32, tid: u32, file_object: u32, file_key: u32) -> Vec<u8> {
    le(&[irp, tid, file_object, file_key])
}

/// `FileIo_Name` (Name, FileCreate, FileRundown).
pub fn file_name(file: u32, path: &str) -> Vec<u8> {
    let mut p = le(&[file]);
    p.extend_from_slice(&utf16(path));
    p
}

/// `PageFault_VirtualAlloc` (VirtualAlloc, VirtualFree).
pub fn virtual_alloc(base: u32, size: u32, pid: u32, flags: u32) -> Vec<u8> {
    le(&[base, size, pid, flags])
}

/// `PageFault_TypeGroup1` (TransitionFault, DemandZeroFault, …).
pub fn soft_fault(address: u32, program_counter: u32) -> Vec<u8> {
    le(&[address, program_counter])
}

/// A classic provider event with a 32-bit full header (`EVENT_TRACE_HEADER`,
/// kind 0x0a, 48 bytes): provider (task) `guid`, `opcode`, `version`.
#[allow(clippy::too_many_arguments)]
pub fn classic_event(
    guid: crate::guid::Guid,
    opcode: u8,
    version: u16,
    tid: u32,
    pid: u32,
    time: i64,
    payload: &[u8],
) -> Vec<u8> {
    let mut b = ((48 + payload.len()) as u16).to_le_bytes().to_vec();
    b.extend_from_slice(&[0x0a, 0xc0, opcode, 0]);
    b.extend_from_slice(&version.to_le_bytes());
    b.extend_from_slice(&tid.to_le_bytes());
    b.extend_from_slice(&pid.to_le_bytes());
    b.extend_from_slice(&time.to_le_bytes());
    b.extend_from_slice(&guid.to_le());
    b.resize(48, 0);
    b.extend_from_slice(payload);
    b
}

/// `KernelTraceControl/ImageID`'s payload at pointer size 4.
pub fn image_id(base: u32, size: u32, time_date_stamp: u32, original_name: &str) -> Vec<u8> {
    let mut p = le(&[base, size, 0, time_date_stamp]);
    p.extend_from_slice(&utf16(original_name));
    p
}

/// `KernelTraceControl/ImageID/DbgID_RSDS`'s payload at pointer size 4:
/// the image at `base` was built with PDB `pdb_name` of `guid` and `age`.
pub fn dbg_id_rsds(base: u32, guid: crate::guid::Guid, age: u32, pdb_name: &str) -> Vec<u8> {
    let mut p = le(&[base, 0]);
    p.extend_from_slice(&guid.to_le());
    p.extend_from_slice(&age.to_le_bytes());
    p.extend_from_slice(pdb_name.as_bytes());
    p.push(0);
    p
}

/// A whole one-CPU trace for symbol tests: process `pid` (`prog.exe`)
/// with thread `pid + 1`, its image `path` loaded at `base..base + size`,
/// the `ImageID` and `DbgID_RSDS` events naming `pdb` (logged by the
/// process, as merged traces log them), and one sample per stack of
/// `stacks` (addresses innermost first; the first is the sampled address)
/// with its `StackWalk` event, 1 ms apart.
pub fn image_trace(
    pid: u32,
    base: u32,
    size: u32,
    path: &str,
    pdb: &crate::pdb_ids::PdbId,
    stacks: &[Vec<u32>],
) -> Vec<u8> {
    const T0: i64 = 1_000_000;
    let tid = pid + 1;
    let ms = FREQ as i64 / 1000;
    let name = path.rsplit(['\\', '/']).next().unwrap_or(path);
    let task = crate::pdb_ids::IMAGE_ID_TASK;
    let mut events = vec![
        header_event(T0, 1, 0),
        system_event(1, 0x0303, 4, 0, 0, T0 + 1, &process(pid, 4, name, name)),
        system_event(1, 0x0503, 3, tid, pid, T0 + 2, &thread(pid, tid, "main")),
        system_event(
            1,
            0x030a,
            3,
            tid,
            pid,
            T0 + 3,
            &image(pid, base, size, path),
        ),
        classic_event(
            task,
            0,
            2,
            u32::MAX,
            pid,
            T0 + 4,
            &image_id(base, size, 0, name),
        ),
        classic_event(
            task,
            crate::pdb_ids::OPCODE_DBG_ID_RSDS,
            2,
            u32::MAX,
            pid,
            T0 + 4,
            &dbg_id_rsds(base, pdb.guid, pdb.age, &pdb.pdb_name),
        ),
    ];
    for (i, frames) in stacks.iter().enumerate() {
        let time = T0 + (i as i64 + 1) * ms;
        let ip = frames.first().copied().unwrap_or(base);
        events.push(perfinfo_event(0x0f2e, time, &sample(ip, tid)));
        events.push(system_event(
            1,
            0x1820,
            2,
            tid,
            pid,
            time + 1,
            &stack(time, pid, tid, frames),
        ));
    }
    buffer(0, &events, false)
}
