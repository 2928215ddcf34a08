//! The recording thread's side of a scheduler recording: [`Drain`] takes each record the
//! ring buffer gives, names the threads and maps the processes the records need (from
//! `/proc`), and hands them to the writer (a file, or in ring mode the window); the
//! kernel's stack map read whole for a snapshot ([`read_stack_map`]), moved into the file
//! (or a spilling window's chunks) as it goes ([`flush_stacks`]) or emptied of what the
//! window no longer names, reading only the stacks the window has not learned
//! ([`evict_stacks`]), and the stacks the map could not take, which come in the ring; and
//! a window written as a snapshot ([`write_window`]).
//! It loads and attaches nothing (`recorder`).

use std::collections::VecDeque;
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use libbpf_rs::{MapCore, MapFlags};
// Looked up for every record (two or three times): FxHash, not SipHash, whose cost showed
// in the drain's profile (a fifth of its CPU on a file workload).
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use super::format::{
    decode_record, parse_maps_line, RecordKind, SchedEnd, SchedWriter, RECORD_LEN,
};
use super::mmaps::ExecMapping;
use super::recorder::STACK_DEPTH;
use super::ring::{MapStack, Sink, SnapshotInfo, StackBook, Window};
use crate::error::BpfError;
use crate::globals;
use crate::sys;

/// Reads `/proc/TID/status`'s `Tgid` and `Name`.
pub(crate) fn proc_thread(tid: u32) -> Option<(u32, String)> {
    let status = fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
    };
    Some((field("Tgid:")?.parse().ok()?, field("Name:")?))
}

/// The executable file mappings of a process, and its vDSO (named from the running
/// kernel's copy by the analysis), as `/proc/PID/maps` lines.
pub(crate) fn proc_exec_maps(pid: u32) -> Option<String> {
    let maps = fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    Some(
        maps.lines()
            .filter(|l| {
                let mut f = l.split_whitespace();
                let perms = f.nth(1).unwrap_or("");
                perms.contains('x')
                    && f.nth(3)
                        .is_some_and(|p| p.starts_with('/') || p == "[vdso]")
            })
            .fold(String::new(), |mut s, l| {
                s.push_str(l);
                s.push('\n');
                s
            }),
    )
}

/// A process exec'd lately has its mappings read again at a user stack this long (ns of
/// the records' time) after the last read …
const REREAD_AFTER_NS: u64 = 5_000_000;

/// … until one comes this long after its exec, when the loader has mapped its libraries.
const SETTLED_AFTER_NS: u64 = 20_000_000;

/// How long a thread that exited stays known (its last switch comes after its exit).
const EXITED_KEPT: Duration = Duration::from_secs(1);

/// What the drain thread keeps besides the file (or the ring's window).
pub(crate) struct Drain {
    pub(crate) writer: SchedWriter<Sink>,
    /// Thread → process of every thread named in the file, but those that exited more
    /// than [`EXITED_KEPT`] ago.
    pids: HashMap<u32, u32>,
    /// Processes whose mappings are in the file for good (since their last exec).
    mapped: HashSet<u32>,
    /// Processes exec'd lately, with the exec's time and their last read's: the loader
    /// maps the libraries after the exec, so a user stack [`REREAD_AFTER_NS`] after the
    /// last read reads them again, until one comes [`SETTLED_AFTER_NS`] after the exec.
    young: HashMap<u32, (u64, u64)>,
    /// Each process's executable mappings as the file has them last: its last
    /// `/proc/PID/maps` read, and the mappings the kernel reported since (`mmaps`).
    exec_maps: HashMap<u32, Vec<(u64, u64, String)>>,
    /// Threads that exited (with when), to forget after [`EXITED_KEPT`].
    exited: VecDeque<(Instant, u32)>,
    /// Stacks the kernel's map could not take, sent in the ring: how many came (in file
    /// mode each is written into the file, or the drain's error says why not).
    pub(crate) stacks_in_ring: u64,
    pub(crate) error: Option<std::io::Error>,
}

impl Drain {
    pub(crate) fn new(writer: SchedWriter<Sink>) -> Drain {
        Drain {
            writer,
            pids: HashMap::default(),
            mapped: HashSet::default(),
            young: HashMap::default(),
            exec_maps: HashMap::default(),
            exited: VecDeque::new(),
            stacks_in_ring: 0,
            error: None,
        }
    }

    /// Names every thread alive now (from `/proc`); later ones come with their fork.
    pub(crate) fn name_threads_alive(&mut self) {
        let Ok(procs) = fs::read_dir("/proc") else {
            return;
        };
        for p in procs.flatten() {
            let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
                continue;
            };
            for t in tasks.flatten() {
                let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                    continue;
                };
                let comm =
                    fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).unwrap_or_default();
                self.thread(pid, tid, comm.trim_end());
                self.pids.insert(tid, pid);
            }
        }
    }

    /// The ring's window, in ring mode.
    pub(crate) fn window(&mut self) -> Option<&mut Window> {
        match self.writer.out_mut() {
            Sink::Window(w) => Some(w),
            Sink::File(_) => None,
        }
    }

    /// The window's stacks, in ring mode when the window keeps them (a spilling window's
    /// go into its chunks, as a file's do).
    pub(crate) fn stack_book(&mut self) -> Option<&mut StackBook> {
        self.window().filter(|w| !w.spills()).map(|w| w.stacks())
    }

    /// A THREAD section.
    fn thread(&mut self, pid: u32, tid: u32, comm: &str) {
        if let Err(e) = self.writer.thread(pid, tid, comm) {
            self.error.get_or_insert(e);
        }
        if let Some(w) = self.window() {
            w.note_thread(pid, tid, comm);
        }
    }

    /// A user stack of `pid` at `time_ns`, whose mappings are not read for good: read them
    /// (again, for a process exec'd lately: [`REREAD_AFTER_NS`], [`SETTLED_AFTER_NS`]).
    fn user_stack_of(&mut self, pid: u32, time_ns: u64) {
        match self.young.get(&pid).copied() {
            None => {
                self.maps(pid);
                self.mapped.insert(pid);
            }
            Some((exec_ns, last_ns)) if time_ns >= last_ns + REREAD_AFTER_NS => {
                self.maps(pid);
                if time_ns >= exec_ns + SETTLED_AFTER_NS {
                    self.young.remove(&pid);
                    self.mapped.insert(pid);
                } else {
                    self.young.insert(pid, (exec_ns, time_ns));
                }
            }
            Some(_) => {}
        }
    }

    /// A MAPS section of `pid`'s executable mappings now, if it is still alive. Not when it
    /// has none: a process that exited and is not yet reaped (a zombie) has an empty
    /// `/proc/PID/maps`, and a section of it would leave its last stacks unnamed.
    fn maps(&mut self, pid: u32) {
        let Some(maps) = proc_exec_maps(pid).filter(|m| !m.is_empty()) else {
            return;
        };
        let lines = maps
            .lines()
            .filter_map(|l| {
                let m = parse_maps_line(l)?;
                Some((m.start, m.end, l.to_string()))
            })
            .collect();
        self.exec_maps.insert(pid, lines);
        self.write_maps(pid, &maps);
    }

    /// An executable mapping the kernel reported (`mmaps`): a MAPS section of the process's
    /// mappings with it in place of those it overlaps, so that a process gone before its
    /// maps could be read has its code named all the same.
    pub(crate) fn mapping(&mut self, m: ExecMapping) {
        let known = self.exec_maps.entry(m.pid).or_default();
        known.retain(|(start, end, _)| *end <= m.start || m.end <= *start);
        known.push((m.start, m.end, m.line));
        let text = known.iter().fold(String::new(), |mut s, (_, _, l)| {
            s.push_str(l);
            s.push('\n');
            s
        });
        self.write_maps(m.pid, &text);
    }

    fn write_maps(&mut self, pid: u32, text: &str) {
        if let Err(e) = self.writer.maps(pid, text) {
            self.error.get_or_insert(e);
        }
        if let Some(w) = self.window() {
            w.note_mappings(pid, text);
        }
    }

    /// A COMMAND section; in ring mode, kept for the start of every snapshot and not
    /// written among the records: read last, it would take the place of the process a
    /// snapshot is about.
    pub(crate) fn command(&mut self, pid: u32, args: &[String]) {
        if let Some(w) = self.window() {
            w.note_command(pid, args);
        } else if let Err(e) = self.writer.command(pid, args) {
            self.error.get_or_insert(e);
        }
    }

    /// The process of `tid`, naming the thread in the file the first time it is seen.
    fn pid_of(&mut self, tid: u32) -> u32 {
        if tid == 0 {
            return 0;
        }
        if let Some(&pid) = self.pids.get(&tid) {
            return pid;
        }
        let (pid, comm) = proc_thread(tid).unwrap_or((tid, String::new()));
        if !comm.is_empty() {
            self.thread(pid, tid, &comm);
        }
        self.pids.insert(tid, pid);
        pid
    }

    /// Forgets the threads (and processes) that exited long enough ago.
    pub(crate) fn forget_exited(&mut self, now: Instant) {
        while let Some(&(at, tid)) = self.exited.front() {
            if now.duration_since(at) < EXITED_KEPT {
                break;
            }
            self.exited.pop_front();
            if self.pids.remove(&tid) == Some(tid) {
                self.mapped.remove(&tid);
                self.young.remove(&tid);
                self.exec_maps.remove(&tid);
            }
        }
    }

    pub(crate) fn on_record(&mut self, data: &[u8]) -> i32 {
        if self.error.is_some() {
            return -1;
        }
        if let Some((id, kernel, addrs)) = decode_sent_stack(data) {
            self.sent_stack(id, kernel, addrs);
            return if self.error.is_some() { -1 } else { 0 };
        }
        let decoded = decode_record(data).map(|(r, _)| r);
        if let Some(r) = &decoded {
            match r.kind {
                RecordKind::Fork => {
                    self.pids.insert(r.a, r.b);
                }
                RecordKind::Exec => {
                    self.pids.insert(r.tid, r.a);
                    // The new image and its loader, read while the process is young (the
                    // exec woke the drain): a process gone before its later user stacks
                    // come has its own code named at least.
                    self.mapped.remove(&r.a);
                    self.maps(r.a);
                    self.young.insert(r.a, (r.time_ns, r.time_ns));
                }
                RecordKind::Exit => self.exited.push_back((Instant::now(), r.tid)),
                RecordKind::Switch | RecordKind::Waking => {
                    self.pid_of(r.a);
                }
                RecordKind::Sample => {
                    self.pids.entry(r.tid).or_insert(r.a);
                }
                _ => {}
            }
            let pid = self.pid_of(r.tid);
            if r.ustack.is_some() && pid != 0 && !self.mapped.contains(&pid) {
                self.user_stack_of(pid, r.time_ns);
            }
        }
        if let Err(e) = self.writer.record(data) {
            self.error.get_or_insert(e);
            return -1;
        }
        let flushed = !self.writer.has_pending_events();
        if let (Some(r), Some(w)) = (decoded, self.window()) {
            w.note_record(&r);
            // An EVENTS section just ended: what was written since the last cut is whole.
            if flushed {
                if let Err(e) = w.cut() {
                    self.error.get_or_insert(e);
                    return -1;
                }
            }
        }
        0
    }

    /// A stack the kernel's map could not take, sent in the ring: kept as the map's are,
    /// written into the file (or a spilling window's chunks) now, or learned by the ring's
    /// window.
    fn sent_stack(&mut self, id: u32, kernel: bool, addrs: Vec<u64>) {
        self.stacks_in_ring += 1;
        if let Some(book) = self.stack_book() {
            book.note_sent(id, kernel, &addrs);
            return;
        }
        if let Err(e) = self.writer.stack(id, kernel, &addrs) {
            self.error.get_or_insert(e);
        }
    }
}

/// Stacks read from the kernel's map per batch syscall.
const STACK_BATCH: u32 = 1024;

/// Decodes one `struct stack` of the map: its id, whether it is a kernel stack, and its
/// addresses, innermost first.
fn decode_stack(value: &[u8]) -> Option<(u32, bool, Vec<u64>)> {
    // struct stack: id u32, frames u32, then STACK_DEPTH addresses.
    let head = value.get(..8)?;
    let id = u32::from_ne_bytes([head[0], head[1], head[2], head[3]]);
    let frames = u32::from_ne_bytes([head[4], head[5], head[6], head[7]]) as usize;
    let addrs = value[8..]
        .chunks_exact(8)
        .take(frames.min(STACK_DEPTH))
        .map(|c| {
            let mut a = [0u8; 8];
            a.copy_from_slice(c);
            u64::from_ne_bytes(a)
        })
        .take_while(|&a| a != 0)
        .collect::<Vec<u64>>();
    let kernel = addrs.first().is_some_and(|&a| a >= 0xffff_8000_0000_0000);
    Some((id, kernel, addrs))
}

/// The `kind` of a STACK record: a stack the kernel's map could not take, sent in the ring
/// instead (sched.bpf.c's send_stack). The drain keeps it as it keeps the map's stacks; it
/// never reaches a file's EVENTS, so the file format has no such record.
const KIND_STACK: u8 = 15;

/// A STACK record of the ring (the record's head, then the `struct stack` the map could not
/// take): the stack's id, whether it is a kernel stack, and its addresses; `None` for any
/// other record.
fn decode_sent_stack(data: &[u8]) -> Option<(u32, bool, Vec<u64>)> {
    if *data.get(..RECORD_LEN)?.get(22)? != KIND_STACK {
        return None;
    }
    decode_stack(&data[RECORD_LEN..])
}

/// Every stack in the kernel's stack map, with its key.
pub(crate) fn read_stack_map(map: &dyn MapCore) -> Vec<MapStack> {
    read_stacks_but(map, |_| false)
}

/// The stacks in the kernel's stack map but those whose keys are `known`, with their keys.
/// Each stack looked up copies its whole slot (~1 KiB), so an eviction pass reads only
/// the stacks the window has not learned yet.
fn read_stacks_but(map: &dyn MapCore, known: impl Fn(u64) -> bool) -> Vec<MapStack> {
    map.keys()
        .filter_map(|bytes| {
            let key = u64::from_ne_bytes(bytes.as_slice().try_into().ok()?);
            if known(key) {
                return None;
            }
            let value = map.lookup(&bytes, MapFlags::ANY).ok()??;
            let (id, kernel, addrs) = decode_stack(&value)?;
            Some((key, id, kernel, addrs))
        })
        .collect()
}

/// Most batches one flush takes (the programs may add stacks while it runs).
const MAX_FLUSH_BATCHES: usize = 1024;

/// File mode, and a spilling window: moves every stack now in the kernel's map into the
/// file (the window's chunks) and out of the map, so that the map never fills however
/// long the recording (a thread that reuses an id from its last site names a stack the
/// file already has; a stack walked again is added again, under a new id), and tells the
/// programs the map has room. Returns how many were written.
///
/// Each round starts a batch lookup-and-delete anew, until one finds nothing: a batch of
/// a hash map stops at a bucket that does not fit, so it can hold fewer stacks than asked
/// while more are left, and libbpf-rs's iterator takes that for the end (a recording
/// lost every stack past the first 1,023 of a flush that way).
pub(crate) fn flush_stacks(
    skel: &mut crate::sched_skel::SchedSkel,
    drain: &mut Drain,
) -> std::io::Result<u64> {
    let moved = move_stacks(&skel.maps.stacks, drain);
    stack_map_has_room(skel);
    moved
}

/// `flush_stacks`'s batches.
fn move_stacks(map: &dyn MapCore, drain: &mut Drain) -> std::io::Result<u64> {
    let mut written = 0;
    for _ in 0..MAX_FLUSH_BATCHES {
        let batch: Vec<(Vec<u8>, Vec<u8>)> = map
            .lookup_and_delete_batch(STACK_BATCH, MapFlags::ANY, MapFlags::ANY)
            .map_err(std::io::Error::other)?
            .collect();
        if batch.is_empty() {
            break;
        }
        for (_, value) in batch {
            if let Some((id, kernel, addrs)) = decode_stack(&value) {
                drain.writer.stack(id, kernel, &addrs)?;
                written += 1;
            }
        }
    }
    Ok(written)
}

/// Ring mode: the stacks nothing in the window names leave the kernel's map, after the
/// generation is bumped so that no thread reuses their ids from its last site; with
/// `read_map`, the stacks added to the map since the last such pass are learned first
/// (without, only those the window learned already can leave it).
pub(crate) fn evict_stacks(
    skel: &mut crate::sched_skel::SchedSkel,
    drain: &mut Drain,
    read_map: bool,
) {
    new_stack_generation(skel);
    let Some(book) = drain.stack_book() else {
        return;
    };
    let new = if read_map {
        read_stacks_but(&skel.maps.stacks, |key| book.knows_key(key))
    } else {
        Vec::new()
    };
    for key in book.eviction_pass(new) {
        let _ = skel.maps.stacks.delete(&key.to_ne_bytes());
    }
    stack_map_has_room(skel);
}

/// Bumps the stacks' generation: no thread reuses a stack id from its last site after
/// this (each walks its stack again, and the map gives it the id the map has for it now).
pub(crate) fn new_stack_generation(skel: &mut crate::sched_skel::SchedSkel) {
    if let Some(bss) = skel.maps.bss_data.as_deref_mut() {
        let generation = &mut bss.stack_generation;
        globals::store(generation, globals::load(generation).wrapping_add(1));
    }
}

/// Tells the programs the stack map may have room again (`stack_map_full`): stacks left
/// it. A program that finds it full again sets the flag again.
fn stack_map_has_room(skel: &mut crate::sched_skel::SchedSkel) {
    if let Some(bss) = skel.maps.bss_data.as_deref_mut() {
        globals::store(&mut bss.stack_map_full, 0);
    }
}

/// Ring mode: writes the window into `path` (what was gathered first), with the losses
/// counted since the last snapshot (`lost` now, `before` at the last one). A window that
/// keeps its stacks learns those in the kernel's map; a spilling one has the map's stacks
/// moved into its chunks first.
pub(crate) fn write_window(
    skel: &mut crate::sched_skel::SchedSkel,
    drain: &mut Drain,
    path: &Path,
    lost: (u64, u64),
    before: (u64, u64),
    about: Option<&(u32, Vec<String>)>,
) -> Result<SnapshotInfo, BpfError> {
    drain
        .writer
        .flush_events()
        .map_err(|e| BpfError::io(path, e))?;
    let (in_map, moved) = if drain.stack_book().is_some() {
        (read_stack_map(&skel.maps.stacks), 0)
    } else {
        let moved = flush_stacks(skel, drain).map_err(|e| BpfError::io(path, e))?;
        (Vec::new(), moved)
    };
    let Some(window) = drain.window() else {
        return Err(BpfError::Options {
            reason: "snapshots are taken only in ring mode".into(),
        });
    };
    window.cut().map_err(|e| BpfError::io(path, e))?;
    let end = SchedEnd {
        stop_ns: sys::monotonic_ns(),
        dropped: lost.0.saturating_sub(before.0),
        stacks_lost: lost.1.saturating_sub(before.1),
        records: 0,
    };
    let mut info = window
        .write(path, in_map, end, about, sys::cpu_times_now())
        .map_err(|e| BpfError::io(path, e))?;
    info.stacks += moved;
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_sent_in_the_ring_is_told_from_the_records() {
        // The head, then the stack as the map holds it: id, frames, addresses.
        let sent = |id: u32, addrs: &[u64]| {
            let mut r = vec![0u8; RECORD_LEN];
            r[22] = KIND_STACK;
            r.extend(id.to_le_bytes());
            r.extend((addrs.len() as u32).to_le_bytes());
            r.extend(addrs.iter().flat_map(|a| a.to_le_bytes()));
            r
        };
        let user = sent(77, &[0x4011, 0x4022, 0x4033]);
        assert_eq!(
            decode_sent_stack(&user),
            Some((77, false, vec![0x4011, 0x4022, 0x4033]))
        );
        let kernel = sent(78, &[0xffff_ffff_8100_0000]);
        assert_eq!(
            decode_sent_stack(&kernel),
            Some((78, true, vec![0xffff_ffff_8100_0000]))
        );
        // Any other record (a switch), or one cut short, is not a stack.
        let mut switch = user.clone();
        switch[22] = 1;
        assert_eq!(decode_sent_stack(&switch), None);
        assert_eq!(decode_sent_stack(&user[..RECORD_LEN - 1]), None);
    }
}
