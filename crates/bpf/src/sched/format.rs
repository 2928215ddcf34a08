//! The scheduler recording's file format (`slowlab record --backend bpf`): written by
//! [`SchedWriter`] as the recorder drains its ring buffer, read back by [`parse_sched`].
//!
//! Layout, all integers little-endian:
//!
//! ```text
//! magic     b"SLSCHED\x01"                      8 bytes
//! header    start_mono_ns u64, start_real_ns u64, nr_cpus u32, sample_freq u32
//! sections  tag u32, len u32, then len bytes; in any order, repeated:
//!   1 EVENTS  records as the BPF program wrote them: 32 bytes each ([`RECORD_LEN`]),
//!             48 for EXEC and RENAME (the record then 16 bytes of comm, NUL-padded).
//!             A record: time_ns u64 (CLOCK_MONOTONIC), tid u32, a u32, b u32, cpu u16,
//!             kind u8, c u8, kstack i32, ustack i32; a, b, c per kind (see [`RecordKind`]).
//!             SYS_ENTER, SYS_EXIT and BLOCK have one u64 in place of the two stack ids;
//!             MAJOR_FAULT is 40 bytes, the record then the faulting address (u64);
//!             PAGE_FAULT 48, the record then the address and the instruction (u64s);
//!             SYS_CALL 80, the record then the syscall's six arguments (u64s);
//!             PATH 32 + `b` rounded up to 8, the record then the path's `b` bytes.
//!   2 THREAD  pid u32, tid u32, comm (the rest): a thread alive when the recording began
//!             or first seen in it, as /proc said.
//!   3 MAPS    pid u32, then the text of /proc/PID/maps (its executable lines), read the
//!             first time a user stack of that process came, and again after an exec.
//!   4 STACK   id u32, kernel u8 (1: a kernel stack), then u64 addresses, innermost
//!             first: one stack of the kernel's stack map (moved out as it fills, and at
//!             the end), or one the map could not take, sent in the ring.
//!   5 END     stop_ns u64, dropped u64 (records the ring could not take),
//!             stacks_lost u64 (stacks neither the stack map nor the ring could take),
//!             records u64.
//!   6 COMMAND pid u32, then the command's arguments, each ended by a NUL: the command
//!             the recording ran (`slowlab record -- CMD`), if it ran one.
//!   7 SAMPLES clock u32: 1, the CPU samples were taken on the scheduler's tick
//!             (`sample_freq` is its rate). Without it, on a timer (`cpu-clock`).
//!   8 STEAL   wanted u64, stolen u64: the machine's CPU time in clock ticks over what
//!             the file holds (a whole recording, or a snapshot's window), and of it the
//!             host's steal time (`/proc/stat`), when /proc/stat could be read.
//! ```
//!
//! A file without an END section was not finished (the recorder died): what is there is
//! read, with a warning. It does not decide what records mean for a trace; the
//! `slowlab-schedrec` crate does.
//!
//! This file holds the layout and one record's decoding (which the drain's ring window
//! uses too); `write` the sections' writer, `read` the whole file's reader, `records` the
//! records it keeps.

mod read;
mod records;
mod write;

pub use read::{
    is_sched_recording, parse_maps_line, parse_sched, read_sched, MapsLine, SchedEnd, SchedLog,
    SchedMaps, SchedStack, SchedThread,
};
pub use records::{RecordAt, SchedRecords};
pub use write::SchedWriter;

/// The first 8 bytes of a scheduler recording.
pub const SCHED_MAGIC: &[u8; 8] = b"SLSCHED\x01";

/// Bytes of the fixed header after the magic.
const HEADER_LEN: usize = 24;

/// Bytes of an ordinary record; EXEC and RENAME add [`COMM_LEN`].
pub const RECORD_LEN: usize = 32;

/// Bytes of a command name in a record.
pub const COMM_LEN: usize = 16;

const TAG_EVENTS: u32 = 1;
const TAG_THREAD: u32 = 2;
const TAG_MAPS: u32 = 3;
const TAG_STACK: u32 = 4;
const TAG_END: u32 = 5;
const TAG_COMMAND: u32 = 6;
const TAG_SAMPLES: u32 = 7;
const TAG_STEAL: u32 = 8;
/// A SAMPLES section's clock: the scheduler's tick.
const SAMPLES_ON_TICK: u32 = 1;

/// What a record is (the `kind` byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    /// `sched_switch`: `tid` switched out, `a` the next tid, `b` the next's priority, `c`
    /// the state index (0 runnable, 0xff preempted, else `1 << (c - 1)` is perf's
    /// `prev_state`).
    Switch,
    /// `sched_waking`: `tid` woke `a`, whose CPU was `b`.
    Waking,
    /// A CPU sample: `tid` of process `a` was on the CPU.
    Sample,
    /// `sched_process_fork`: `tid` made thread `a` of process `b`.
    Fork,
    /// `sched_process_exec`: `tid` of process `a` (old tid `b`) ran `comm`.
    Exec,
    /// `sched_process_exit`: thread `tid` of process `a` exited.
    Exit,
    /// `task_rename`: thread `tid` of process `a` is now called `comm`.
    Rename,
    /// `syscalls:sys_enter_NAME` of one of the [`RecordedSyscall`]s (`c`): `tid` called it
    /// with its first argument `value`, the low 32 bits of its second `a` and of its
    /// third `b` (its other arguments are not recorded).
    SysEnter,
    /// `syscalls:sys_exit_NAME`: `tid`'s call of syscall `c` returned `value` (an `i64`).
    SysExit,
    /// `block:block_rq_issue` (`c` bit 0 clear) or `block_rq_complete` (set): a request of
    /// `b` sectors from sector `value` on device `a` (`major << 20 | minor`), a write when
    /// `c` bit 1 is set; `tid` was on the CPU (for a completion, whoever the interrupt
    /// came on).
    Block,
    /// A major fault (the `major-faults` software event) of `tid` of process `a` at address
    /// `value`, with its stacks.
    MajorFault,
    /// `exceptions:page_fault_user` (`c` 1) or `_kernel` (`c` 0): `tid` of process `a`
    /// faulted at address `value`, instruction `ip`, with error code `b`, and its stacks.
    PageFault,
    /// `syscalls:sys_enter_NAME` of one of the detectors' [`RecordedSyscall`]s (`c`):
    /// `tid` of process `a` called it with `args`, from the call site of its user stack.
    SysCall,
    /// The path argument of the [`RecordKind::SysCall`] record of the same `tid` and time:
    /// `path`, `b` bytes long, with [`path_flags`] in `value`.
    Path,
}

/// Bits of a [`RecordKind::Path`] record's `value`.
pub mod path_flags {
    /// The path was longer than 256 bytes and was cut.
    pub const TRUNCATED: u64 = 1;
    /// The pointer could not be read (NULL, bad, or its page never came in).
    pub const UNREADABLE: u64 = 2;
}

/// Bits of a [`RecordKind::Block`] record's `c`.
pub mod block_flags {
    pub const COMPLETE: u8 = 1;
    pub const WRITE: u8 = 2;
}

/// The syscalls the recorder records (the `c` of a SYS_ENTER, SYS_CALL or SYS_EXIT record):
/// the four that say what a wait waits for (ids 1 to 4, SYS_ENTER), then the detectors'
/// (5 on, SYS_CALL).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordedSyscall {
    Futex,
    Wait4,
    Waitid,
    Flock,
    Openat,
    Open,
    Newstat,
    Newlstat,
    Newfstatat,
    Statx,
    Access,
    Faccessat,
    Faccessat2,
    Mmap,
    Munmap,
    Unlink,
    Unlinkat,
    Unshare,
    Clone,
    Clone3,
    Kill,
    Tgkill,
    Tkill,
}

impl RecordedSyscall {
    /// All of them, in the order of their ids (from 1).
    pub const ALL: [RecordedSyscall; 23] = [
        RecordedSyscall::Futex,
        RecordedSyscall::Wait4,
        RecordedSyscall::Waitid,
        RecordedSyscall::Flock,
        RecordedSyscall::Openat,
        RecordedSyscall::Open,
        RecordedSyscall::Newstat,
        RecordedSyscall::Newlstat,
        RecordedSyscall::Newfstatat,
        RecordedSyscall::Statx,
        RecordedSyscall::Access,
        RecordedSyscall::Faccessat,
        RecordedSyscall::Faccessat2,
        RecordedSyscall::Mmap,
        RecordedSyscall::Munmap,
        RecordedSyscall::Unlink,
        RecordedSyscall::Unlinkat,
        RecordedSyscall::Unshare,
        RecordedSyscall::Clone,
        RecordedSyscall::Clone3,
        RecordedSyscall::Kill,
        RecordedSyscall::Tgkill,
        RecordedSyscall::Tkill,
    ];

    /// The syscall of a record's `c`.
    pub fn from_u8(c: u8) -> Option<RecordedSyscall> {
        RecordedSyscall::ALL
            .get(usize::from(c).checked_sub(1)?)
            .copied()
    }

    /// Its name, as its tracepoints (`syscalls:sys_enter_NAME`) and perf's reader spell it.
    pub fn name(self) -> &'static str {
        match self {
            RecordedSyscall::Futex => "futex",
            RecordedSyscall::Wait4 => "wait4",
            RecordedSyscall::Waitid => "waitid",
            RecordedSyscall::Flock => "flock",
            RecordedSyscall::Openat => "openat",
            RecordedSyscall::Open => "open",
            RecordedSyscall::Newstat => "newstat",
            RecordedSyscall::Newlstat => "newlstat",
            RecordedSyscall::Newfstatat => "newfstatat",
            RecordedSyscall::Statx => "statx",
            RecordedSyscall::Access => "access",
            RecordedSyscall::Faccessat => "faccessat",
            RecordedSyscall::Faccessat2 => "faccessat2",
            RecordedSyscall::Mmap => "mmap",
            RecordedSyscall::Munmap => "munmap",
            RecordedSyscall::Unlink => "unlink",
            RecordedSyscall::Unlinkat => "unlinkat",
            RecordedSyscall::Unshare => "unshare",
            RecordedSyscall::Clone => "clone",
            RecordedSyscall::Clone3 => "clone3",
            RecordedSyscall::Kill => "kill",
            RecordedSyscall::Tgkill => "tgkill",
            RecordedSyscall::Tkill => "tkill",
        }
    }
}

/// The `kind` byte of a [`RecordKind::Switch`] record.
pub(crate) const KIND_SWITCH: u8 = 1;
/// The `kind` byte of a [`RecordKind::SysEnter`] record.
pub(crate) const KIND_SYS_ENTER: u8 = 8;

impl RecordKind {
    fn from_u8(k: u8) -> Option<RecordKind> {
        Some(match k {
            KIND_SWITCH => RecordKind::Switch,
            2 => RecordKind::Waking,
            3 => RecordKind::Sample,
            4 => RecordKind::Fork,
            5 => RecordKind::Exec,
            6 => RecordKind::Exit,
            7 => RecordKind::Rename,
            KIND_SYS_ENTER => RecordKind::SysEnter,
            9 => RecordKind::SysExit,
            10 => RecordKind::Block,
            11 => RecordKind::MajorFault,
            12 => RecordKind::PageFault,
            13 => RecordKind::SysCall,
            14 => RecordKind::Path,
            _ => return None,
        })
    }

    /// The `kind` byte of a record of this kind.
    fn to_u8(self) -> u8 {
        match self {
            RecordKind::Switch => KIND_SWITCH,
            RecordKind::Waking => 2,
            RecordKind::Sample => 3,
            RecordKind::Fork => 4,
            RecordKind::Exec => 5,
            RecordKind::Exit => 6,
            RecordKind::Rename => 7,
            RecordKind::SysEnter => KIND_SYS_ENTER,
            RecordKind::SysExit => 9,
            RecordKind::Block => 10,
            RecordKind::MajorFault => 11,
            RecordKind::PageFault => 12,
            RecordKind::SysCall => 13,
            RecordKind::Path => 14,
        }
    }

    /// Bytes a record of this kind takes, `b` being its head's `b` (a PATH record's
    /// length).
    pub fn record_len(self, b: u32) -> usize {
        match self {
            RecordKind::Path => RECORD_LEN + (b as usize).div_ceil(8) * 8,
            RecordKind::Exec | RecordKind::Rename => RECORD_LEN + COMM_LEN,
            RecordKind::MajorFault => RECORD_LEN + 8,
            RecordKind::PageFault => RECORD_LEN + 16,
            RecordKind::SysCall => RECORD_LEN + 48,
            _ => RECORD_LEN,
        }
    }
}

/// One decoded record: 64 bytes, whatever its kind (an 88 s `cargo build`'s trace held 8.3
/// million records, most of them page faults; with the few kinds' arguments, path and
/// command name in every record, 152 bytes each took 1.25 GB while the trace was read).
/// A read recording keeps its records as their bytes ([`SchedRecords`]) and decodes them
/// one at a time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedRecord {
    pub time_ns: u64,
    pub tid: u32,
    pub a: u32,
    pub b: u32,
    pub cpu: u16,
    pub kind: RecordKind,
    pub c: u8,
    /// Kernel stack id; `None` when the record has none.
    pub kstack: Option<u32>,
    /// User stack id; `None` when the record has none.
    pub ustack: Option<u32>,
    /// SYS_ENTER: the first argument; SYS_EXIT: the return value; BLOCK: the sector;
    /// MAJOR_FAULT and PAGE_FAULT: the address; 0 for the others.
    pub value: u64,
    /// PAGE_FAULT: the faulting instruction; 0 for the others.
    pub ip: u64,
    /// What only a few kinds carry ([`SchedRecord::comm`], [`SchedRecord::args`],
    /// [`SchedRecord::path`]).
    pub extra: Option<Box<RecordExtra>>,
}

/// What a record of a few kinds carries besides the head every record has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordExtra {
    /// EXEC and RENAME: the command name.
    Comm(String),
    /// SYS_CALL: the syscall's arguments.
    Args([u64; 6]),
    /// PATH: the path, as UTF-8 (lossy).
    Path(String),
}

impl SchedRecord {
    /// EXEC and RENAME: the command name.
    pub fn comm(&self) -> Option<&str> {
        match self.extra.as_deref() {
            Some(RecordExtra::Comm(c)) => Some(c),
            _ => None,
        }
    }

    /// SYS_CALL: the syscall's arguments; zeros for the others.
    pub fn args(&self) -> [u64; 6] {
        match self.extra.as_deref() {
            Some(RecordExtra::Args(a)) => *a,
            _ => [0; 6],
        }
    }

    /// PATH: the path, as UTF-8 (lossy).
    pub fn path(&self) -> Option<&str> {
        match self.extra.as_deref() {
            Some(RecordExtra::Path(p)) => Some(p),
            _ => None,
        }
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

fn comm_text(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// A record's 32-byte head as the BPF program lays it out (what [`decode_record`] reads),
/// for the records userspace writes itself (a ring's held waits).
pub(crate) struct Head {
    pub time_ns: u64,
    pub tid: u32,
    pub a: u32,
    pub b: u32,
    pub cpu: u16,
    pub kind: u8,
    pub c: u8,
    /// The stack ids (kernel in the low half, user in the high, -1 for none), or the
    /// value of SYS_ENTER, SYS_EXIT and BLOCK.
    pub tail: u64,
}

impl Head {
    /// The tail of a record naming the stacks `kstack` and `ustack`.
    pub fn stacks(kstack: Option<u32>, ustack: Option<u32>) -> u64 {
        let id = |s: Option<u32>| u64::from(s.unwrap_or(u32::MAX));
        id(kstack) | id(ustack) << 32
    }

    pub fn bytes(&self) -> [u8; RECORD_LEN] {
        let mut r = [0u8; RECORD_LEN];
        r[0..8].copy_from_slice(&self.time_ns.to_le_bytes());
        r[8..12].copy_from_slice(&self.tid.to_le_bytes());
        r[12..16].copy_from_slice(&self.a.to_le_bytes());
        r[16..20].copy_from_slice(&self.b.to_le_bytes());
        r[20..22].copy_from_slice(&self.cpu.to_le_bytes());
        r[22] = self.kind;
        r[23] = self.c;
        r[24..32].copy_from_slice(&self.tail.to_le_bytes());
        r
    }
}

/// Decodes the record at the start of `b`; `None` when it is cut or of no known kind.
/// Returns the record and its length.
pub fn decode_record(b: &[u8]) -> Option<(SchedRecord, usize)> {
    let head = b.get(..RECORD_LEN)?;
    let kind = RecordKind::from_u8(head[22])?;
    let len = kind.record_len(u32_at(head, 16));
    let extra = b.get(RECORD_LEN..len)?;
    let carried = match kind {
        RecordKind::Exec | RecordKind::Rename => Some(RecordExtra::Comm(comm_text(extra))),
        RecordKind::Path => Some(RecordExtra::Path(
            String::from_utf8_lossy(&extra[..u32_at(head, 16) as usize]).into_owned(),
        )),
        RecordKind::SysCall => Some(RecordExtra::Args(std::array::from_fn(|i| {
            u64_at(extra, 8 * i)
        }))),
        _ => None,
    };
    let value_in_stacks = matches!(
        kind,
        RecordKind::SysEnter | RecordKind::SysExit | RecordKind::Block
    );
    let has_stacks = !value_in_stacks && kind != RecordKind::Path;
    let stack = |v: u32| (has_stacks && v as i32 >= 0).then_some(v);
    Some((
        SchedRecord {
            time_ns: u64_at(head, 0),
            tid: u32_at(head, 8),
            a: u32_at(head, 12),
            b: u32_at(head, 16),
            cpu: u16::from_le_bytes([head[20], head[21]]),
            kind,
            c: head[23],
            kstack: stack(u32_at(head, 24)),
            ustack: stack(u32_at(head, 28)),
            value: match kind {
                _ if value_in_stacks => u64_at(head, 24),
                RecordKind::Path => u64::from(u32_at(head, 24)),
                RecordKind::MajorFault | RecordKind::PageFault => u64_at(extra, 0),
                _ => 0,
            },
            ip: match kind {
                RecordKind::PageFault => u64_at(extra, 8),
                _ => 0,
            },
            extra: carried.map(Box::new),
        },
        len,
    ))
}

#[cfg(test)]
mod tests;
