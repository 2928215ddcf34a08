//! An [`Etl`] into slowlab's trace model: processes and threads with their
//! lifetimes and names (start, stop and rundown events; the rows kept with
//! [`slowlab_model::lifetimes`], as perf.data's are), modules from image
//! events, CPU samples (`PerfInfo/Sample`) with their stacks, context
//! switches (`Thread/CSwitch` → `Switch`), wake-ups (`Dispatcher/ReadyThread`
//! → `Waking`, from the readying thread), hard faults (`MajorFault`) and disk
//! I/O (`BlockRequest`, the issue placed at completion minus the response
//! time); file operations with their paths, soft page faults by kind and
//! VirtualAlloc/VirtualFree ([`io`]'s doc says how). Times are nanoseconds
//! from the trace's start.
//!
//! Conventions where Windows differs from Linux:
//! - a switch's `prev_state` is the Linux-like state the analysis reads (0
//!   preempted/ready, 1 waiting, 2 waiting in a paging or pool wait, the
//!   "uninterruptible" kind); the Windows `KTHREAD_STATE` and wait reason
//!   (`KWAIT_REASON`) themselves are its `windows` field;
//! - a switch's `next_prio` maps Windows priority 8 (normal) to 120, higher
//!   priorities lower, real-time ones (16–31) below 100;
//! - samples on the idle thread (thread 0, not in a DPC or an interrupt) are
//!   dropped, as TraceEvent does: they are idle time, not CPU use.
//!
//! - a context switch's stack, walked on the thread switched *in* (where it
//!   had blocked), goes to the `Switch` that switched that thread out, as
//!   perf's switch stacks are the blocking thread's.
//!
//! Not read into the model: registry, network, system calls, CLR events and
//! TraceLogging payloads (they are counted by name, see
//! [`Etl::event_counts`]).

pub mod io;

use std::collections::HashMap;

use slowlab_model::bundle::CapturedPath;
use slowlab_model::lifetimes::Lifetimes;
use slowlab_model::trace::{
    Event, EventKind, ProcIdx, ReadStats, ThreadIdx, Trace, TraceMeta, WindowsSwitchOut,
    WindowsThreadState, WindowsWaitReason,
};

use crate::header::Source;
use crate::kernel;
use crate::names::{group, kernel_group};
use crate::stacks::{StackBuilder, StackIndex};
use crate::symbols::SymbolPath;
use crate::Etl;

/// Kernel paths to DOS paths, from the `SysConfig/VolumeMapping` events
/// (`\Device\HarddiskVolume2\` → `C:\`, `\SystemRoot\` → `C:\Windows\`).
#[derive(Clone, Debug, Default)]
pub struct VolumeMap {
    /// `(NT prefix lower-cased, DOS prefix)`, longest first.
    maps: Vec<(String, String)>,
}

impl VolumeMap {
    pub fn from_etl(etl: &Etl) -> VolumeMap {
        let mut maps = Vec::new();
        for e in etl.events() {
            if kernel_group(e.header.source, e.header.opcode) == Some(group::SYS_CONFIG)
                && e.header.opcode == 35
            {
                let p = etl.payload(e);
                if let Some((nt, next)) = p.utf16(0) {
                    let dos = p.utf16(next).map(|(s, _)| s).unwrap_or_default();
                    if !nt.is_empty() {
                        maps.push((nt.to_lowercase(), dos));
                    }
                }
            }
        }
        maps.sort_by_key(|(nt, _)| std::cmp::Reverse(nt.len()));
        VolumeMap { maps }
    }

    /// `path` with its kernel prefix replaced by the DOS one, if one matches.
    pub fn to_dos(&self, path: &str) -> String {
        let lower = path.to_lowercase();
        for (nt, dos) in &self.maps {
            if lower.starts_with(nt.as_str()) && path.is_char_boundary(nt.len()) {
                return format!("{dos}{}", &path[nt.len()..]);
            }
        }
        let drive = self
            .maps
            .iter()
            .find(|(nt, _)| nt == "\\systemroot\\")
            .and_then(|(_, dos)| dos.get(..2))
            .unwrap_or("C:");
        if let Some(rest) = lower
            .starts_with("\\systemroot\\")
            .then(|| path.get("\\SystemRoot".len()..))
            .flatten()
        {
            return format!("{drive}\\Windows{rest}");
        }
        // A path from the root of the system volume (`\Windows\…`).
        if path.starts_with('\\')
            && !path.starts_with("\\\\")
            && !lower.starts_with("\\device\\")
            && !lower.starts_with("\\??\\")
        {
            return format!("{drive}{path}");
        }
        path.to_string()
    }
}

/// The Linux-like task state (`prev_state`) of a switched-out thread (see
/// the module doc): 0 ready or preempted, 2 in a paging wait, else 1.
pub fn switch_state(out: WindowsSwitchOut) -> u64 {
    match out.state {
        WindowsThreadState::WAITING if out.wait_reason.is_paging() => 2,
        // Ready, or running or standby when switched out: preempted.
        WindowsThreadState::READY | WindowsThreadState::RUNNING | WindowsThreadState::STANDBY => 0,
        _ => 1,
    }
}

/// A Windows thread priority (0–31) on Linux's scale (120 = normal).
pub fn linux_priority(windows: i8) -> i32 {
    let p = windows as i32;
    if p >= 16 {
        99 - p
    } else {
        128 - p
    }
}

struct Builder {
    t: Trace,
    sb: StackBuilder,
    /// The current process and thread of each pid and tid.
    lifetimes: Lifetimes,
    /// `(raw time, tid, pid, ip)` per sample, to find its stack.
    sample_keys: Vec<(i64, u32, u32, u64)>,
    /// `(raw time, tids to try, pid)` per event that may have a stack.
    event_keys: Vec<Option<(i64, [u32; 2], u32)>>,
    undecoded: u64,
    sample_period_ns: u64,
    /// The process of each thread id as the thread events say (the first
    /// seen), for threads met in a sample before their rundown event.
    tid_pid: HashMap<u32, u32>,
    io: io::IoState,
}

impl Builder {
    fn process(&mut self, pid: u32) -> ProcIdx {
        if let Some(p) = self.lifetimes.process(pid as i32) {
            return p;
        }
        let name = match pid {
            0 => "Idle".to_string(),
            u32::MAX => "[unknown]".to_string(),
            _ => format!("Process({pid})"),
        };
        self.new_process(pid, None, &name, None)
    }

    fn new_process(
        &mut self,
        pid: u32,
        ppid: Option<u32>,
        name: &str,
        start: Option<u64>,
    ) -> ProcIdx {
        let comm = self.sb.string(&mut self.t, name);
        let ppid = ppid.map(|p| p as i32);
        self.lifetimes
            .start_process(&mut self.t, pid as i32, ppid, comm, start)
    }

    /// The current lifetime of `tid`; created in process `pid` (or an
    /// unknown one) when not seen before.
    fn thread(&mut self, tid: u32, pid: Option<u32>) -> ThreadIdx {
        if let Some(th) = self.lifetimes.thread(tid as i32) {
            return th;
        }
        let pid = pid.or_else(|| self.tid_pid.get(&tid).copied());
        let p = self.process(pid.unwrap_or(u32::MAX));
        self.new_thread(p, tid, None, "")
    }

    fn new_thread(&mut self, p: ProcIdx, tid: u32, start: Option<u64>, name: &str) -> ThreadIdx {
        let comm = if name.is_empty() {
            self.t.processes[p.ix()].comm
        } else {
            self.sb.string(&mut self.t, name)
        };
        self.lifetimes
            .start_thread(&mut self.t, p, tid as i32, comm, start)
    }

    fn on_process(&mut self, opcode: u8, now: u64, ev: kernel::ProcessEvent) {
        let name = if ev.image_file_name.is_empty() {
            format!("Process({})", ev.pid)
        } else {
            ev.image_file_name.clone()
        };
        match opcode {
            1 => {
                self.new_process(ev.pid, Some(ev.parent_pid), &name, Some(now));
            }
            3 | 4 => {
                let p = self.process(ev.pid);
                let comm = self.sb.string(&mut self.t, &name);
                let row = &mut self.t.processes[p.ix()];
                let old = std::mem::replace(&mut row.comm, comm);
                // Threads met before the rundown carry the placeholder name.
                for &th in &row.threads {
                    let thread = &mut self.t.threads[th.ix()];
                    if thread.comm == old {
                        thread.comm = comm;
                    }
                }
                row.ppid = row.ppid.or(Some(ev.parent_pid as i32));
            }
            2 => {
                let p = self.process(ev.pid);
                self.t.processes[p.ix()].end_ns = Some(now);
            }
            _ => {}
        }
    }

    fn on_thread(&mut self, opcode: u8, now: u64, ev: kernel::ThreadEvent) {
        match opcode {
            1 | 3 => {
                let p = self.process(ev.pid);
                let existing = self.lifetimes.thread(ev.tid as i32);
                let same = existing.filter(|&th| {
                    let row = &self.t.threads[th.ix()];
                    row.process == p && row.end_ns.is_none()
                });
                match same {
                    Some(th) if opcode == 3 => {
                        if !ev.name.is_empty() {
                            self.t.threads[th.ix()].comm = self.sb.string(&mut self.t, &ev.name);
                        }
                    }
                    _ => {
                        let start = (opcode == 1).then_some(now);
                        self.new_thread(p, ev.tid, start, &ev.name);
                    }
                }
            }
            2 => {
                let th = self.thread(ev.tid, Some(ev.pid));
                self.t.threads[th.ix()].end_ns = Some(now);
            }
            _ => {}
        }
    }

    fn push_event(
        &mut self,
        time_ns: u64,
        cpu: u16,
        thread: ThreadIdx,
        kind: EventKind,
        key: Option<(i64, [u32; 2], u32)>,
    ) {
        self.t.events.push(Event {
            time_ns,
            cpu: cpu as u32,
            thread,
            stack: None,
            kind,
        });
        self.event_keys.push(key);
    }
}

/// Builds the trace model from a read ETL file.
pub fn to_trace(etl: &Etl) -> Trace {
    to_trace_and_paths(etl).0
}

/// Builds the trace model and the paths of its file operations (see
/// [`io`]), which slowlab's views read as they read the eBPF path capture
/// of a perf.data trace.
pub fn to_trace_and_paths(etl: &Etl) -> (Trace, Vec<CapturedPath>) {
    to_trace_with_symbols(etl, None)
}

/// As [`to_trace_and_paths`], naming frames from the PDBs found on
/// `symbols` (see [`crate::symbols`]; its warnings join the trace's).
/// Either way, modules keep their PDB identity ([`crate::pdb_ids`]).
pub fn to_trace_with_symbols(
    etl: &Etl,
    symbols: Option<&SymbolPath>,
) -> (Trace, Vec<CapturedPath>) {
    let pointer_size = etl.header.as_ref().map_or(8, |h| h.pointer_size as u8);
    let paths = VolumeMap::from_etl(etl);
    let mut b = Builder {
        t: Trace::default(),
        sb: StackBuilder::new(pointer_size),
        lifetimes: Lifetimes::default(),
        sample_keys: Vec::new(),
        event_keys: Vec::new(),
        undecoded: 0,
        sample_period_ns: 1_000_000,
        tid_pid: thread_processes(etl),
        io: io::IoState::new(etl, &paths),
    };
    let stacks = collect_stacks(etl);
    for e in etl.events() {
        let h = &e.header;
        let Some(grp) = kernel_group(h.source, h.opcode) else {
            continue;
        };
        let now = etl.ns(h.time);
        let p = etl.payload(e);
        let op = h.opcode;
        let decoded = match (grp, op) {
            (group::PROCESS, 1..=4) => {
                kernel::process(p, h.version).map(|ev| b.on_process(op, now, ev))
            }
            (group::THREAD, 1..=4) => {
                kernel::thread(p, h.version).map(|ev| b.on_thread(op, now, ev))
            }
            (group::IMAGE, 3 | 10) => kernel::image(p, h.version).map(|img| {
                let pid = if img.pid == 0 {
                    h.pid.unwrap_or(0)
                } else {
                    img.pid
                };
                let path = paths.to_dos(&img.file_name);
                b.sb.load_image(&mut b.t, pid, img.base, img.size, &path);
            }),
            (group::PERF_INFO, 73) => p.u32(4).map(|interval| {
                if p.u32(0) == Some(0) && interval > 0 {
                    b.sample_period_ns = interval as u64 * 100;
                }
            }),
            (group::PERF_INFO, 46) => kernel::sample(p).map(|s| {
                if s.tid == 0 && !s.in_dpc_or_isr {
                    return;
                }
                let th = b.thread(s.tid, None);
                let pid = b.t.processes[b.t.threads[th.ix()].process.ix()].pid as u32;
                b.t.samples.time_ns.push(now);
                b.t.samples.thread.push(th);
                b.t.samples.cpu.push(e.cpu as u32);
                b.t.samples.stack.push(None);
                b.t.samples.period.push(b.sample_period_ns);
                b.sample_keys.push((h.time, s.tid, pid, s.ip));
            }),
            (group::THREAD, 36) => kernel::cswitch(p).map(|c| {
                let th = b.thread(c.old_tid, None);
                let pid = b.t.processes[b.t.threads[th.ix()].process.ix()].pid as u32;
                let out = WindowsSwitchOut {
                    state: WindowsThreadState(c.old_state),
                    wait_reason: WindowsWaitReason(c.old_wait_reason),
                };
                let kind = EventKind::Switch {
                    prev_tid: c.old_tid as i32,
                    prev_state: switch_state(out),
                    next_tid: c.new_tid as i32,
                    next_prio: linux_priority(c.new_priority),
                    windows: Some(out),
                };
                b.push_event(
                    now,
                    e.cpu,
                    th,
                    kind,
                    Some((h.time, [c.old_tid, c.new_tid], pid)),
                );
            }),
            (group::THREAD, 50) => kernel::ready_thread(p).map(|tid| {
                let th = b.thread(h.tid.unwrap_or(u32::MAX), h.pid);
                let kind = EventKind::Waking {
                    tid: tid as i32,
                    target_cpu: -1,
                };
                let key = h.tid.map(|t| (h.time, [t, t], h.pid.unwrap_or(0)));
                b.push_event(now, e.cpu, th, kind, key);
            }),
            (group::MEMORY, 32) => kernel::hard_fault(p).map(|f| {
                let th = b.thread(f.tid, h.pid);
                let pid = b.t.processes[b.t.threads[th.ix()].process.ix()].pid as u32;
                let kind = EventKind::MajorFault {
                    address: Some(f.virtual_address),
                };
                b.push_event(now, e.cpu, th, kind, Some((h.time, [f.tid, f.tid], pid)));
            }),
            (group::DISK_IO, 10 | 11) => kernel::disk_io(p).map(|d| {
                let tid = d.issuing_tid.or(h.tid).unwrap_or(u32::MAX);
                let th = b.thread(tid, h.pid);
                let issue = now.saturating_sub(etl.ticks_ns(d.response_time));
                for (time, complete) in [(issue, false), (now, true)] {
                    let kind = EventKind::BlockRequest {
                        dev: d.disk,
                        sector: d.byte_offset / 512,
                        bytes: d.transfer_size as u64,
                        write: op == 11,
                        complete,
                    };
                    b.push_event(time, e.cpu, th, kind, None);
                }
            }),
            (group::FILE_IO, _) => io::on_file_event(&mut b, etl, e, &paths),
            (group::MEMORY, 10..=13 | 15 | 98 | 99) => io::on_memory_event(&mut b, etl, e),
            _ => Some(()),
        };
        if decoded.is_none() {
            b.undecoded += 1;
        }
    }
    attach_stacks(&mut b, &stacks);
    let pdbs = crate::pdb_ids::attach(etl, &b.sb, &mut b.t);
    let paths = std::mem::take(&mut b.io.paths);
    let mut t = finish(b, etl);
    if let Some(path) = symbols {
        let warnings = crate::symbols::symbolize(&mut t, &pdbs, path);
        t.stats.warnings.extend(warnings);
    }
    (t, paths)
}

/// The process of each thread id, from the first thread event naming it.
fn thread_processes(etl: &Etl) -> HashMap<u32, u32> {
    let mut map = HashMap::new();
    for e in etl.events() {
        if e.header.source
            == (Source::Kernel {
                group: group::THREAD,
            })
            && (1..=4).contains(&e.header.opcode)
        {
            if let Some(t) = kernel::thread(etl.payload(e), e.header.version) {
                map.entry(t.tid).or_insert(t.pid);
            }
        }
    }
    map
}

/// Every stack event of the trace, by (event time, thread).
fn collect_stacks(etl: &Etl) -> StackIndex {
    // Stack-key definitions, by key: (time of the definition, frames).
    let mut defs: HashMap<u64, Vec<(i64, Vec<u64>)>> = HashMap::new();
    for e in etl.events() {
        if e.header.source
            == (Source::Kernel {
                group: group::STACK_WALK,
            })
            && matches!(e.header.opcode, 35 | 36)
        {
            if let Some((key, frames)) = kernel::stack_key_def(etl.payload(e)) {
                defs.entry(key).or_default().push((e.header.time, frames));
            }
        }
    }
    let mut index = StackIndex::default();
    for e in etl.events() {
        if e.header.source
            != (Source::Kernel {
                group: group::STACK_WALK,
            })
        {
            continue;
        }
        let p = etl.payload(e);
        let ptr = e.header.pointer_size;
        match e.header.opcode {
            32 => {
                if let Some(s) = kernel::stack(p) {
                    index.add(s.event_time, s.tid, &s.frames, ptr);
                }
            }
            37 | 38 => {
                let Some(r) = kernel::stack_key_ref(p) else {
                    continue;
                };
                let Some(versions) = defs.get(&r.key) else {
                    continue;
                };
                // The first definition at or after the reference (a key is
                // defined when it leaves the cache, and may be reused later).
                let at = versions.partition_point(|(t, _)| *t < e.header.time);
                if let Some((_, frames)) = versions.get(at).or(versions.last()) {
                    index.add(r.event_time, r.tid, frames, ptr);
                }
            }
            _ => {}
        }
    }
    index
}

fn attach_stacks(b: &mut Builder, stacks: &StackIndex) {
    let keys = std::mem::take(&mut b.sample_keys);
    for (i, &(time, tid, pid, ip)) in keys.iter().enumerate() {
        let stack = match stacks.get(time, tid) {
            Some(frames) if !frames.is_empty() => b.sb.stack(&mut b.t, pid, frames),
            _ => {
                b.t.stats.samples_without_stack += 1;
                b.sb.stack(&mut b.t, pid, &[ip])
            }
        };
        b.t.samples.stack[i] = stack;
    }
    let keys = std::mem::take(&mut b.event_keys);
    // Per thread id: the last switch that switched it out.
    let mut switched_out: HashMap<i32, usize> = HashMap::new();
    for (i, key) in keys.iter().enumerate() {
        let switch = match b.t.events[i].kind {
            EventKind::Switch {
                prev_tid, next_tid, ..
            } => Some((prev_tid, next_tid)),
            _ => None,
        };
        if let Some((prev_tid, _)) = switch {
            switched_out.insert(prev_tid, i);
        }
        let Some((time, tids, pid)) = *key else {
            continue;
        };
        if let Some(frames) = stacks.get(time, tids[0]) {
            b.t.events[i].stack = b.sb.stack(&mut b.t, pid, frames);
            continue;
        }
        let Some(frames) = stacks.get(time, tids[1]) else {
            continue;
        };
        match switch {
            // The switched-in thread's stack is where it blocked.
            Some((_, next_tid)) => {
                let Some(&at) = switched_out.get(&next_tid) else {
                    continue;
                };
                let th = b.t.events[at].thread;
                let pid = b.t.processes[b.t.threads[th.ix()].process.ix()].pid as u32;
                b.t.events[at].stack = b.sb.stack(&mut b.t, pid, frames);
            }
            None => b.t.events[i].stack = b.sb.stack(&mut b.t, pid, frames),
        }
    }
}

fn finish(mut b: Builder, etl: &Etl) -> Trace {
    // Disk issues were placed before their completion: restore time order.
    b.t.events.sort_by_key(|e| e.time_ns);
    let counts = etl.event_counts();
    let header = etl.header.as_ref();
    let last = etl.events().last().map_or(0, |e| etl.ns(e.header.time));
    b.t.meta = TraceMeta {
        os_release: header.map(|h| format!("Windows {}", h.os_version)),
        arch: header.map(|h| if h.pointer_size == 4 { "x86" } else { "x86_64" }.to_string()),
        nr_cpus: header.map(|h| h.number_of_processors),
        start_ns: 0,
        end_ns: last,
        sample_event: Some("Windows Kernel/PerfInfo/Sample".to_string()),
        sample_freq: Some(1_000_000_000 / b.sample_period_ns.max(1)),
        events: counts.keys().cloned().collect(),
        ..TraceMeta::default()
    };
    let stats = etl.stats();
    b.t.stats = ReadStats {
        records: etl.events().len() as u64,
        lost_events: header.map_or(0, |h| h.events_lost as u64),
        unparsed_records: stats.unknown_header_events + b.undecoded,
        truncated_bytes: stats.unreadable_bytes,
        unfinished_file: stats.unreadable_bytes > 0,
        unmapped_frames: b.sb.unmapped,
        samples_without_stack: b.t.stats.samples_without_stack,
        warnings: etl.warnings(),
    };
    if b.undecoded > 0 {
        b.t.stats.warnings.push(format!(
            "{} kernel events were too short for their documented layout and were skipped",
            b.undecoded
        ));
    }
    b.t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_switched_out_windows_thread_gets_the_linux_state_alone() {
        let state = |s: WindowsThreadState, r: WindowsWaitReason| {
            switch_state(WindowsSwitchOut {
                state: s,
                wait_reason: r,
            })
        };
        let (queue, page_in) = (WindowsWaitReason::WR_QUEUE, WindowsWaitReason::PAGE_IN);
        // Runnable as Linux says it (`prev_state & 0xff == 0`): ready, or
        // running or standby when switched out, whatever the reason field.
        assert_eq!(state(WindowsThreadState::READY, page_in), 0);
        assert_eq!(state(WindowsThreadState::RUNNING, queue), 0);
        assert_eq!(state(WindowsThreadState::STANDBY, queue), 0);
        // Waiting: uninterruptible in a paging wait, else interruptible.
        assert_eq!(state(WindowsThreadState::WAITING, page_in), 2);
        assert_eq!(
            state(
                WindowsThreadState::WAITING,
                WindowsWaitReason::WR_POOL_ALLOCATION
            ),
            2
        );
        assert_eq!(state(WindowsThreadState::WAITING, queue), 1);
        assert_eq!(state(WindowsThreadState::TERMINATED, queue), 1);
        assert_eq!(state(WindowsThreadState(200), WindowsWaitReason(200)), 1);
    }
}
