//! Reading a scheduler recording back ([`parse_sched`], [`read_sched`]): its sections into
//! a [`SchedLog`], with a warning for each part that is cut or unknown. It does not decide
//! what the records mean; the layout is in the parent module's doc.

use std::path::Path;

use super::{
    comm_text, u32_at, u64_at, RecordAt, SchedRecords, HEADER_LEN, SAMPLES_ON_TICK, SCHED_MAGIC,
    TAG_COMMAND, TAG_END, TAG_EVENTS, TAG_MAPS, TAG_SAMPLES, TAG_STACK, TAG_STEAL, TAG_THREAD,
};
use crate::error::BpfError;
use slowlab_model::host_steal::CpuTimes;

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
    /// Where the first record read after this section is (the maps hold from there on).
    pub from_record: RecordAt,
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
    pub records: SchedRecords,
    pub threads: Vec<SchedThread>,
    pub maps: Vec<SchedMaps>,
    pub stacks: Vec<SchedStack>,
    /// `None`: the file was not finished.
    pub end: Option<SchedEnd>,
    /// The command the recording ran: its pid and arguments.
    pub command: Option<(u32, Vec<String>)>,
    /// The machine's CPU time over what the file holds, and the host's steal of it (its
    /// STEAL section; `None` without one).
    pub cpu_times: Option<CpuTimes>,
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
    parse_sched(&bytes).map_err(|reason| BpfError::sched_format(path, reason))
}

/// Reads a scheduler recording from its bytes; the error says why they are not one.
pub fn parse_sched(bytes: &[u8]) -> Result<SchedLog, String> {
    if !is_sched_recording(bytes) {
        return Err("no SLSCHED magic: not a file `slowlab record --backend bpf` wrote".into());
    }
    if bytes.len() < SCHED_MAGIC.len() + HEADER_LEN {
        return Err(format!(
            "its header is cut short ({} of {} bytes): the recorder stopped before it wrote \
             any record; record again",
            bytes.len(),
            SCHED_MAGIC.len() + HEADER_LEN
        ));
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
    // Sections of a tag this reader does not know (a newer recorder's) or too short for
    // theirs (damage): counted and said once, so that a file of them gives one line, not
    // one a section.
    let (mut unread_sections, mut unread_bytes) = (0u64, 0u64);
    let mut unread_tags = std::collections::BTreeSet::new();
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
                if !log.records.push_batch(body) {
                    bad_records += 1;
                }
            }
            TAG_THREAD if body.len() >= 8 => log.threads.push(SchedThread {
                pid: u32_at(body, 0),
                tid: u32_at(body, 4),
                comm: comm_text(&body[8..]),
            }),
            TAG_MAPS if body.len() >= 4 => log.maps.push(SchedMaps {
                pid: u32_at(body, 0),
                from_record: log.records.end(),
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
            TAG_STEAL if body.len() >= 16 => {
                log.cpu_times = Some(CpuTimes {
                    wanted: u64_at(body, 0),
                    stolen: u64_at(body, 8),
                })
            }
            TAG_END if body.len() >= 32 => {
                log.end = Some(SchedEnd {
                    stop_ns: u64_at(body, 0),
                    dropped: u64_at(body, 8),
                    stacks_lost: u64_at(body, 16),
                    records: u64_at(body, 24),
                })
            }
            _ => {
                unread_sections += 1;
                unread_bytes += len as u64;
                unread_tags.insert(tag);
            }
        }
    }
    if unread_sections > 0 {
        let mut named: Vec<String> = unread_tags.iter().take(5).map(u32::to_string).collect();
        if unread_tags.len() > 5 {
            named.push(format!("… ({} tags)", unread_tags.len()));
        }
        let (count, them) = match unread_sections {
            1 => ("a section".to_string(), "it"),
            n => (format!("{n} sections"), "them"),
        };
        log.warnings.push(format!(
            "skipped {count} that could not be read (tags {}, {unread_bytes} bytes: a tag this \
             slowlab does not know, or too short for its tag): a newer slowlab wrote {them}, \
             or the file is damaged",
            named.join(", ")
        ));
    }
    if bad_records > 0 {
        let batches = match bad_records {
            1 => "a batch of records ends".to_string(),
            n => format!("{n} batches of records end"),
        };
        log.warnings.push(format!(
            "{batches} in a damaged record (of no known kind, or longer than the batch): the \
             rest was skipped"
        ));
    }
    log.records.shrink_to_fit();
    if log.end.is_none() {
        log.warnings.push(
            "the scheduler recording has no end section: the recorder stopped before \
             finishing it, so stacks and the count of lost events are missing"
                .into(),
        );
    }
    Ok(log)
}
