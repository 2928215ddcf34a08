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
//! ```
//!
//! A file without an END section was not finished (the recorder died): what is there is
//! read, with a warning. It does not decide what records mean for a trace; the
//! `slowlab-schedrec` crate does.

use std::io::{self, Write};
use std::path::Path;

use crate::error::BpfError;

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

impl RecordKind {
    fn from_u8(k: u8) -> Option<RecordKind> {
        Some(match k {
            1 => RecordKind::Switch,
            2 => RecordKind::Waking,
            3 => RecordKind::Sample,
            4 => RecordKind::Fork,
            5 => RecordKind::Exec,
            6 => RecordKind::Exit,
            7 => RecordKind::Rename,
            8 => RecordKind::SysEnter,
            9 => RecordKind::SysExit,
            10 => RecordKind::Block,
            11 => RecordKind::MajorFault,
            12 => RecordKind::PageFault,
            13 => RecordKind::SysCall,
            14 => RecordKind::Path,
            _ => return None,
        })
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

/// One decoded record.
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
    /// EXEC and RENAME: the command name.
    pub comm: Option<String>,
    /// SYS_ENTER: the first argument; SYS_EXIT: the return value; BLOCK: the sector;
    /// MAJOR_FAULT and PAGE_FAULT: the address; 0 for the others.
    pub value: u64,
    /// PAGE_FAULT: the faulting instruction; 0 for the others.
    pub ip: u64,
    /// SYS_CALL: the syscall's arguments; zeros for the others.
    pub args: [u64; 6],
    /// PATH: the path, as UTF-8 (lossy).
    pub path: Option<String>,
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

/// Decodes the record at the start of `b`; `None` when it is cut or of no known kind.
/// Returns the record and its length.
pub fn decode_record(b: &[u8]) -> Option<(SchedRecord, usize)> {
    let head = b.get(..RECORD_LEN)?;
    let kind = RecordKind::from_u8(head[22])?;
    let len = kind.record_len(u32_at(head, 16));
    let extra = b.get(RECORD_LEN..len)?;
    let comm = matches!(kind, RecordKind::Exec | RecordKind::Rename).then(|| comm_text(extra));
    let path = (kind == RecordKind::Path)
        .then(|| String::from_utf8_lossy(&extra[..u32_at(head, 16) as usize]).into_owned());
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
            comm,
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
            args: match kind {
                RecordKind::SysCall => std::array::from_fn(|i| u64_at(extra, 8 * i)),
                _ => [0; 6],
            },
            path,
        },
        len,
    ))
}

/// How a recording ended (its END section).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchedEnd {
    pub stop_ns: u64,
    /// Records lost because the ring buffer was full.
    pub dropped: u64,
    /// Stacks lost because the stack map could not take them and the ring buffer was full
    /// (in recordings made before stacks were sent in the ring then: because the map was
    /// full or its allocator empty; before the map was keyed by a 64-bit hash, also
    /// because two stacks shared a bucket).
    pub stacks_lost: u64,
    /// Records written.
    pub records: u64,
}

/// A thread named in a THREAD section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedThread {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
}

/// A MAPS section: `/proc/PID/maps` lines of a process at a time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedMaps {
    pub pid: u32,
    /// Index of the first record read after this section (the maps hold from there on).
    pub from_record: usize,
    pub text: String,
}

/// A STACK section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedStack {
    pub id: u32,
    pub kernel: bool,
    /// Addresses, innermost first.
    pub addrs: Vec<u64>,
}

/// A whole recording as read by [`parse_sched`].
#[derive(Clone, Debug, Default)]
pub struct SchedLog {
    pub start_mono_ns: u64,
    pub start_real_ns: u64,
    pub nr_cpus: u32,
    pub sample_freq: u32,
    /// The CPU samples were taken on the scheduler's tick, not on a timer of their own.
    pub samples_on_tick: bool,
    pub records: Vec<SchedRecord>,
    pub threads: Vec<SchedThread>,
    pub maps: Vec<SchedMaps>,
    pub stacks: Vec<SchedStack>,
    /// `None`: the file was not finished.
    pub end: Option<SchedEnd>,
    /// The command the recording ran: its pid and arguments.
    pub command: Option<(u32, Vec<String>)>,
    /// What could not be read, each with what it means.
    pub warnings: Vec<String>,
}

/// One line of a MAPS section, as `/proc/PID/maps` writes it: the mapping's addresses
/// (`start`-`end`), its offset in the file and the file's path (`None`: anonymous).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapsLine<'a> {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    pub path: Option<&'a str>,
}

/// Reads one line of a MAPS section; `None` when it is not such a line. The path is the
/// rest of the line after the inode, spaces and all, without the kernel's ` (deleted)`
/// mark of a file removed since it was mapped (its name is still the best guess).
pub fn parse_maps_line(line: &str) -> Option<MapsLine<'_>> {
    let mut rest = line;
    let mut field = || {
        rest = rest.trim_start();
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let (word, after) = rest.split_at(end);
        rest = after;
        (!word.is_empty()).then_some(word)
    };
    let (range, _perms, offset) = (field()?, field()?, field()?);
    let has_inode = field().and(field()).is_some();
    let (start, end) = range.split_once('-')?;
    let hex = |v| u64::from_str_radix(v, 16).ok();
    let path = rest.trim();
    let path = path.strip_suffix(" (deleted)").unwrap_or(path);
    Some(MapsLine {
        start: hex(start)?,
        end: hex(end)?,
        offset: hex(offset)?,
        path: (has_inode && !path.is_empty()).then_some(path),
    })
}

/// Whether `bytes` start like a scheduler recording.
pub fn is_sched_recording(bytes: &[u8]) -> bool {
    bytes.starts_with(SCHED_MAGIC)
}

/// Reads the scheduler recording in the file `path`.
pub fn read_sched(path: &Path) -> Result<SchedLog, BpfError> {
    let bytes = std::fs::read(path).map_err(|e| BpfError::io(path, e))?;
    parse_sched(&bytes).map_err(|reason| BpfError::format(path, reason))
}

/// Reads a scheduler recording from its bytes; the error says why they are not one.
pub fn parse_sched(bytes: &[u8]) -> Result<SchedLog, String> {
    if !is_sched_recording(bytes) || bytes.len() < SCHED_MAGIC.len() + HEADER_LEN {
        return Err("not a slowlab scheduler recording (no SLSCHED header)".into());
    }
    let h = &bytes[SCHED_MAGIC.len()..SCHED_MAGIC.len() + HEADER_LEN];
    let mut log = SchedLog {
        start_mono_ns: u64_at(h, 0),
        start_real_ns: u64_at(h, 8),
        nr_cpus: u32_at(h, 16),
        sample_freq: u32_at(h, 20),
        ..SchedLog::default()
    };
    let mut at = SCHED_MAGIC.len() + HEADER_LEN;
    let mut bad_records = 0u64;
    while at < bytes.len() {
        let Some(head) = bytes.get(at..at + 8) else {
            log.warnings.push(format!(
                "the recording ends inside a section head ({} bytes left): it was cut",
                bytes.len() - at
            ));
            break;
        };
        let (tag, len) = (u32_at(head, 0), u32_at(head, 4) as usize);
        let Some(body) = bytes.get(at + 8..at + 8 + len) else {
            log.warnings.push(
                "the recording's last section is cut short: the recorder did not finish it".into(),
            );
            break;
        };
        at += 8 + len;
        match tag {
            TAG_EVENTS => {
                let mut i = 0;
                while i < body.len() {
                    match decode_record(&body[i..]) {
                        Some((r, n)) => {
                            log.records.push(r);
                            i += n;
                        }
                        None => {
                            bad_records += 1;
                            break;
                        }
                    }
                }
            }
            TAG_THREAD if body.len() >= 8 => log.threads.push(SchedThread {
                pid: u32_at(body, 0),
                tid: u32_at(body, 4),
                comm: comm_text(&body[8..]),
            }),
            TAG_MAPS if body.len() >= 4 => log.maps.push(SchedMaps {
                pid: u32_at(body, 0),
                from_record: log.records.len(),
                text: String::from_utf8_lossy(&body[4..]).into_owned(),
            }),
            TAG_STACK if body.len() >= 5 => log.stacks.push(SchedStack {
                id: u32_at(body, 0),
                kernel: body[4] == 1,
                addrs: body[5..].chunks_exact(8).map(|c| u64_at(c, 0)).collect(),
            }),
            TAG_COMMAND if body.len() >= 4 => {
                let args = body[4..]
                    .split(|&b| b == 0)
                    .filter(|a| !a.is_empty())
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect();
                log.command = Some((u32_at(body, 0), args));
            }
            TAG_SAMPLES if body.len() >= 4 => {
                log.samples_on_tick = u32_at(body, 0) == SAMPLES_ON_TICK;
            }
            TAG_END if body.len() >= 32 => {
                log.end = Some(SchedEnd {
                    stop_ns: u64_at(body, 0),
                    dropped: u64_at(body, 8),
                    stacks_lost: u64_at(body, 16),
                    records: u64_at(body, 24),
                })
            }
            _ => log.warnings.push(format!(
                "skipped a section of unknown tag {tag} ({len} bytes)"
            )),
        }
    }
    if bad_records > 0 {
        log.warnings.push(format!(
            "{bad_records} batches of records ended in a record of unknown kind; their rest was skipped"
        ));
    }
    if log.end.is_none() {
        log.warnings.push(
            "the scheduler recording has no end section: the recorder stopped before \
             finishing it, so stacks and the count of lost events are missing"
                .into(),
        );
    }
    Ok(log)
}

/// Writes a scheduler recording section by section.
#[derive(Debug)]
pub struct SchedWriter<W: Write> {
    out: W,
    events: Vec<u8>,
    records: u64,
}

/// Records are gathered into EVENTS sections of about this many bytes.
const EVENTS_SECTION: usize = 1 << 16;

impl<W: Write> SchedWriter<W> {
    /// Writes the magic and the header.
    pub fn new(
        mut out: W,
        start_mono_ns: u64,
        start_real_ns: u64,
        nr_cpus: u32,
        sample_freq: u32,
    ) -> io::Result<Self> {
        out.write_all(SCHED_MAGIC)?;
        out.write_all(&start_mono_ns.to_le_bytes())?;
        out.write_all(&start_real_ns.to_le_bytes())?;
        out.write_all(&nr_cpus.to_le_bytes())?;
        out.write_all(&sample_freq.to_le_bytes())?;
        Ok(SchedWriter {
            out,
            events: Vec::with_capacity(EVENTS_SECTION + 64),
            records: 0,
        })
    }

    /// Records written so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Whether records are gathered that no EVENTS section holds yet.
    pub fn has_pending_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// Where the sections go.
    pub fn out_mut(&mut self) -> &mut W {
        &mut self.out
    }

    /// Copies whole sections another writer wrote (a ring's window), after the records
    /// gathered so far; `records` of them are records.
    pub fn sections(&mut self, bytes: &[u8], records: u64) -> io::Result<()> {
        self.flush_events()?;
        self.records += records;
        self.out.write_all(bytes)
    }

    /// Adds one record as the ring buffer gave it (its bytes are kept as they are: the
    /// program writes them little-endian on the machines BPF runs on here).
    pub fn record(&mut self, raw: &[u8]) -> io::Result<()> {
        self.events.extend_from_slice(raw);
        self.records += 1;
        if self.events.len() >= EVENTS_SECTION {
            self.flush_events()?;
        }
        Ok(())
    }

    fn section(&mut self, tag: u32, parts: &[&[u8]]) -> io::Result<()> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let len = u32::try_from(len).map_err(|_| io::Error::other("section too long"))?;
        self.out.write_all(&tag.to_le_bytes())?;
        self.out.write_all(&len.to_le_bytes())?;
        for p in parts {
            self.out.write_all(p)?;
        }
        Ok(())
    }

    /// Writes the records gathered so far as an EVENTS section.
    pub fn flush_events(&mut self) -> io::Result<()> {
        if self.events.is_empty() {
            return Ok(());
        }
        let events = std::mem::take(&mut self.events);
        let result = self.section(TAG_EVENTS, &[&events]);
        self.events = events;
        self.events.clear();
        result
    }

    /// A THREAD section (after the records gathered so far).
    pub fn thread(&mut self, pid: u32, tid: u32, comm: &str) -> io::Result<()> {
        self.flush_events()?;
        self.section(
            TAG_THREAD,
            &[&pid.to_le_bytes(), &tid.to_le_bytes(), comm.as_bytes()],
        )
    }

    /// A MAPS section (after the records gathered so far).
    pub fn maps(&mut self, pid: u32, text: &str) -> io::Result<()> {
        self.flush_events()?;
        self.section(TAG_MAPS, &[&pid.to_le_bytes(), text.as_bytes()])
    }

    /// A COMMAND section: the command the recording runs, as process `pid`.
    pub fn command(&mut self, pid: u32, args: &[String]) -> io::Result<()> {
        self.flush_events()?;
        let mut text = Vec::new();
        for a in args {
            text.extend_from_slice(a.as_bytes());
            text.push(0);
        }
        self.section(TAG_COMMAND, &[&pid.to_le_bytes(), &text])
    }

    /// A STACK section.
    pub fn stack(&mut self, id: u32, kernel: bool, addrs: &[u64]) -> io::Result<()> {
        self.flush_events()?;
        let bytes: Vec<u8> = addrs.iter().flat_map(|a| a.to_le_bytes()).collect();
        self.section(TAG_STACK, &[&id.to_le_bytes(), &[u8::from(kernel)], &bytes])
    }

    /// The SAMPLES section: the CPU samples are taken on the scheduler's tick.
    pub fn samples_on_tick(&mut self) -> io::Result<()> {
        self.section(TAG_SAMPLES, &[&SAMPLES_ON_TICK.to_le_bytes()])
    }

    /// The END section; flushes and returns the output.
    pub fn finish(mut self, end: SchedEnd) -> io::Result<W> {
        self.flush_events()?;
        self.section(
            TAG_END,
            &[
                &end.stop_ns.to_le_bytes(),
                &end.dropped.to_le_bytes(),
                &end.stacks_lost.to_le_bytes(),
                &end.records.to_le_bytes(),
            ],
        )?;
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests;
