//! One pass over a perf.data file's records, in time order, building the
//! trace model: process and thread lifetimes (fork/comm/exec/exit), memory
//! maps per process, CPU samples as columns, decoded tracepoint events, and
//! the frame and stack tables (each unique address and each unique stack
//! prefix stored once).
//!
//! It does not name functions: frames come out pointing at a placeholder
//! function, and `symbolize` fills them in.

use std::collections::hash_map::Entry;

use linux_perf_data::linux_perf_event_reader::{
    CpuMode, EventRecord, PerfEventType, RawDataU64, RecordType, SamplingPolicy,
    SoftwareCounterType,
};
use linux_perf_data::{Feature, PerfFileReader, PerfFileRecord};
use slowlab_model::trace::{
    Event, EventKind, Frame, FrameIdx, FuncIdx, Module, ModuleIdx, ModuleKind, ProcIdx, Process,
    StackIdx, StackNode, StrIdx, Thread, ThreadIdx, Trace,
};

use crate::file;
use crate::intern::{FxMap, Strings};
use crate::tracepoint::Format;
use crate::{Error, ProgressFn};

/// Placeholder until symbolization.
pub(crate) const NO_FUNC: FuncIdx = FuncIdx(u32::MAX);

const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;
const PERF_CONTEXT_KERNEL: u64 = -128i64 as u64;
const PERF_CONTEXT_USER: u64 = -512i64 as u64;

/// How the records of one event (attribute) are turned into the model.
enum AttrKind {
    Cpu,
    Switch(Format),
    Waking(Format),
    PageFault { user: bool, format: Format },
    MajorFault,
    SysEnter(StrIdx),
    SysExit(StrIdx),
    Other(StrIdx),
}

#[derive(Clone, Copy, Debug)]
struct Map {
    start: u64,
    end: u64,
    pgoff: u64,
    module: ModuleIdx,
}

/// Inserts `new` into sorted, non-overlapping `maps`, cutting what it covers.
fn insert_map(maps: &mut Vec<Map>, new: Map) {
    let i = maps.partition_point(|m| m.end <= new.start);
    let mut j = i;
    while j < maps.len() && maps[j].start < new.end {
        j += 1;
    }
    let mut repl = Vec::with_capacity(3);
    for m in &maps[i..j] {
        if m.start < new.start {
            repl.push(Map {
                end: new.start,
                ..*m
            });
        }
    }
    repl.push(new);
    for m in &maps[i..j] {
        if m.end > new.end {
            repl.push(Map {
                start: new.end,
                pgoff: m.pgoff + (new.end - m.start),
                ..*m
            });
        }
    }
    maps.splice(i..j, repl);
}

fn find_map(maps: &[Map], addr: u64) -> Option<&Map> {
    let i = maps.partition_point(|m| m.start <= addr);
    let m = maps.get(i.checked_sub(1)?)?;
    (addr < m.end).then_some(m)
}

struct Builder {
    t: Trace,
    strings: Strings,
    pid_map: FxMap<i32, ProcIdx>,
    tid_map: FxMap<i32, ThreadIdx>,
    maps: FxMap<i32, Vec<Map>>,
    kernel_maps: Vec<Map>,
    module_by_path: FxMap<StrIdx, ModuleIdx>,
    frame_map: FxMap<(u32, u64), FrameIdx>,
    stack_map: FxMap<(u32, u32), StackIdx>,
    scratch: Vec<(u64, bool)>,
    /// (address space << 32 | caller node, raw address) → stack node.
    raw_cache: FxMap<(u64, u64), StackIdx>,
    space: FxMap<i32, u32>,
    next_space: u32,
    kernel_space: u32,
    kernel_module: ModuleIdx,
    unknown_module: ModuleIdx,
    first_ns: u64,
    last_ns: u64,
    big_endian: bool,
    /// Build ids from the file's build-id table, by recorded path.
    build_ids: FxMap<Vec<u8>, String>,
    /// Recorded on another architecture: do not symbolize locally.
    foreign: bool,
    /// Paths of user binaries whose first frame was seen since the caller
    /// last looked.
    new_binaries: Vec<String>,
    /// Per module: already reported in `new_binaries`.
    requested: Vec<bool>,
}

impl Builder {
    fn new() -> Self {
        let mut b = Builder {
            t: Trace::default(),
            strings: Strings::default(),
            pid_map: FxMap::default(),
            tid_map: FxMap::default(),
            maps: FxMap::default(),
            kernel_maps: Vec::new(),
            module_by_path: FxMap::default(),
            frame_map: FxMap::default(),
            stack_map: FxMap::default(),
            scratch: Vec::new(),
            raw_cache: FxMap::default(),
            space: FxMap::default(),
            next_space: 1,
            kernel_space: 0,
            kernel_module: ModuleIdx(0),
            unknown_module: ModuleIdx(0),
            first_ns: u64::MAX,
            last_ns: 0,
            big_endian: false,
            build_ids: FxMap::default(),
            foreign: false,
            new_binaries: Vec::new(),
            requested: Vec::new(),
        };
        b.kernel_module = b.module("[kernel.kallsyms]");
        b.unknown_module = b.module("[unknown]");
        b
    }

    fn s(&mut self, s: &str) -> StrIdx {
        self.strings.intern(&mut self.t.strings, s)
    }

    /// The module for a mapped path, created on first use.
    fn module(&mut self, path: &str) -> ModuleIdx {
        let p = self.s(path);
        if let Some(&m) = self.module_by_path.get(&p) {
            return m;
        }
        let (name, kind) = classify_path(path);
        let name = self.s(&name);
        let m = ModuleIdx(self.t.modules.len() as u32);
        self.t.modules.push(Module {
            name,
            path: p,
            kind,
            build_id: None,
            symbol_error: None,
        });
        self.module_by_path.insert(p, m);
        m
    }

    fn see_time(&mut self, t: u64) {
        if t != 0 {
            self.first_ns = self.first_ns.min(t);
            self.last_ns = self.last_ns.max(t);
        }
    }

    fn new_process(
        &mut self,
        pid: i32,
        ppid: Option<i32>,
        comm: StrIdx,
        start: Option<u64>,
    ) -> ProcIdx {
        let p = ProcIdx(self.t.processes.len() as u32);
        self.t.processes.push(Process {
            pid,
            ppid,
            comm,
            start_ns: start,
            exec_ns: None,
            end_ns: None,
            threads: Vec::new(),
        });
        self.pid_map.insert(pid, p);
        p
    }

    fn new_thread(
        &mut self,
        proc_: ProcIdx,
        tid: i32,
        comm: StrIdx,
        start: Option<u64>,
    ) -> ThreadIdx {
        let th = ThreadIdx(self.t.threads.len() as u32);
        self.t.threads.push(Thread {
            tid,
            process: proc_,
            comm,
            start_ns: start,
            end_ns: None,
        });
        self.t.processes[proc_.ix()].threads.push(th);
        self.tid_map.insert(tid, th);
        th
    }

    fn process(&mut self, pid: i32) -> ProcIdx {
        if let Some(&p) = self.pid_map.get(&pid) {
            return p;
        }
        let comm = if pid == 0 {
            self.s("swapper")
        } else {
            self.s(&format!(":{pid}"))
        };
        self.new_process(pid, None, comm, None)
    }

    fn thread(&mut self, pid: i32, tid: i32) -> ThreadIdx {
        if let Some(&th) = self.tid_map.get(&tid) {
            let p = self.t.threads[th.ix()].process;
            if self.t.processes[p.ix()].pid == pid {
                return th;
            }
        }
        let p = self.process(pid);
        let comm = self.t.processes[p.ix()].comm;
        self.new_thread(p, tid, comm, None)
    }

    fn on_fork(&mut self, pid: i32, ppid: i32, tid: i32, ptid: i32, time: u64) {
        let parent_comm = self
            .tid_map
            .get(&ptid)
            .map(|&th| self.t.threads[th.ix()].comm)
            .or_else(|| {
                self.pid_map
                    .get(&ppid)
                    .map(|&p| self.t.processes[p.ix()].comm)
            });
        if pid == tid {
            let comm = match parent_comm {
                Some(c) => c,
                None => self.s(&format!(":{pid}")),
            };
            let p = self.new_process(pid, Some(ppid), comm, Some(time));
            let inherited = self.maps.get(&ppid).cloned().unwrap_or_default();
            self.maps.insert(pid, inherited);
            self.bump_space(pid);
            self.new_thread(p, tid, comm, Some(time));
        } else {
            let p = self.process(pid);
            let comm = parent_comm.unwrap_or(self.t.processes[p.ix()].comm);
            self.new_thread(p, tid, comm, Some(time));
        }
    }

    fn on_exit(&mut self, pid: i32, tid: i32, time: u64) {
        let th = self.thread(pid, tid);
        self.t.threads[th.ix()].end_ns = Some(time);
        if pid == tid {
            let p = self.t.threads[th.ix()].process;
            self.t.processes[p.ix()].end_ns = Some(time);
        }
    }

    fn on_comm(&mut self, pid: i32, tid: i32, name: &str, exec: bool, time: u64) {
        let th = self.thread(pid, tid);
        let name = self.s(name);
        self.t.threads[th.ix()].comm = name;
        let p = self.t.threads[th.ix()].process;
        let proc_ = &mut self.t.processes[p.ix()];
        if pid == tid || exec {
            proc_.comm = name;
        }
        if exec {
            proc_.exec_ns = Some(time);
            if let Some(m) = self.maps.get_mut(&pid) {
                m.clear();
            }
            self.bump_space(pid);
        }
    }

    fn on_mmap(&mut self, pid: i32, start: u64, len: u64, pgoff: u64, path: &str, kernel: bool) {
        if len == 0 {
            return;
        }
        if kernel || pid == -1 {
            let module = if path.starts_with("[kernel.kallsyms]") {
                self.kernel_module
            } else {
                self.module(path)
            };
            let m = Map {
                start,
                end: start.saturating_add(len),
                pgoff,
                module,
            };
            insert_map(&mut self.kernel_maps, m);
            self.next_space += 1;
            self.kernel_space = self.next_space;
            return;
        }
        let module = self.module(path);
        let m = Map {
            start,
            end: start.saturating_add(len),
            pgoff,
            module,
        };
        insert_map(self.maps.entry(pid).or_default(), m);
        self.bump_space(pid);
    }

    fn frame(&mut self, maps: &[Map], addr: u64, kernel: bool) -> FrameIdx {
        let (module, rel) = if kernel {
            // Kernel frames are named from kallsyms by absolute address.
            let module = find_map(&self.kernel_maps, addr)
                .map(|m| m.module)
                .filter(|m| self.t.modules[m.ix()].kind == ModuleKind::KernelModule)
                .unwrap_or(self.kernel_module);
            (module, addr)
        } else {
            match find_map(maps, addr) {
                Some(m) => {
                    let kind = self.t.modules[m.module.ix()].kind;
                    let rel = if kind == ModuleKind::User {
                        addr - m.start + m.pgoff
                    } else {
                        addr
                    };
                    (m.module, rel)
                }
                None => {
                    self.t.stats.unmapped_frames += 1;
                    (self.unknown_module, addr)
                }
            }
        };
        match self.frame_map.entry((module.0, rel)) {
            Entry::Occupied(e) => *e.get(),
            Entry::Vacant(e) => {
                let f = FrameIdx(self.t.frames.len() as u32);
                self.t.frames.push(Frame {
                    module,
                    address: rel,
                    function: NO_FUNC,
                    kernel,
                });
                e.insert(f);
                // The first frame in a binary: its symbols are needed.
                if self.requested.len() <= module.ix() {
                    self.requested.resize(module.ix() + 1, false);
                }
                if !self.requested[module.ix()] {
                    self.requested[module.ix()] = true;
                    let m = &self.t.modules[module.ix()];
                    if m.kind == ModuleKind::User {
                        self.new_binaries.push(self.t.strings[m.path.ix()].clone());
                    }
                }
                f
            }
        }
    }

    /// A fresh address-space id for `pid` (its maps changed), so cached
    /// raw-address lookups of the old layout are not reused.
    fn bump_space(&mut self, pid: i32) {
        self.next_space += 1;
        self.space.insert(pid, self.next_space);
    }

    fn space_of(&mut self, pid: i32) -> u32 {
        if let Some(&s) = self.space.get(&pid) {
            return s;
        }
        self.bump_space(pid);
        self.next_space
    }

    /// Interns a sample's callchain. A cache keyed by (address space,
    /// caller node, raw address) skips the map lookup and frame interning
    /// for every stack prefix seen before, which is most of them.
    fn stack(
        &mut self,
        pid: i32,
        chain: Option<RawDataU64<'_>>,
        ip: Option<u64>,
        mode: CpuMode,
    ) -> Option<StackIdx> {
        let mut raw = std::mem::take(&mut self.scratch);
        raw.clear();
        let mut kernel = matches!(mode, CpuMode::Kernel);
        match chain {
            Some(chain) if !chain.is_empty() => {
                let mut first = true;
                let mut skip = false;
                for i in 0..chain.len() {
                    let Some(a) = chain.get(i) else { break };
                    if a >= PERF_CONTEXT_MAX {
                        match a {
                            PERF_CONTEXT_KERNEL => (kernel, skip) = (true, false),
                            PERF_CONTEXT_USER => (kernel, skip) = (false, false),
                            // Hypervisor and guest frames: not ours to name.
                            _ => skip = true,
                        }
                        continue;
                    }
                    if skip {
                        continue;
                    }
                    // Return addresses point after the call; look up the
                    // call instruction instead.
                    let lookup = if first { a } else { a.saturating_sub(1) };
                    first = false;
                    raw.push((lookup, kernel));
                }
            }
            _ => {
                if let Some(ip) = ip {
                    raw.push((ip, kernel));
                }
            }
        }
        let user_space = self.space_of(pid);
        let mut maps: Option<Vec<Map>> = None;
        let mut parent: Option<StackIdx> = None;
        for (depth, &(addr, kernel)) in raw.iter().rev().enumerate() {
            let space = if kernel {
                self.kernel_space
            } else {
                user_space
            };
            let ctx = ((space as u64) << 32) | parent.map_or(u32::MAX, |p| p.0) as u64;
            if let Some(&n) = self.raw_cache.get(&(ctx, addr)) {
                parent = Some(n);
                continue;
            }
            if maps.is_none() {
                // The process's maps, taken out for the walk (put back below).
                maps = Some(
                    self.maps
                        .get_mut(&pid)
                        .map(std::mem::take)
                        .unwrap_or_default(),
                );
            }
            let f = self.frame(maps.as_deref().unwrap_or(&[]), addr, kernel);
            let key = (parent.map_or(u32::MAX, |p| p.0), f.0);
            let node = match self.stack_map.entry(key) {
                Entry::Occupied(e) => *e.get(),
                Entry::Vacant(e) => {
                    let s = StackIdx(self.t.stacks.len() as u32);
                    self.t.stacks.push(StackNode {
                        parent,
                        frame: f,
                        depth: depth as u32,
                    });
                    e.insert(s);
                    s
                }
            };
            self.raw_cache.insert((ctx, addr), node);
            parent = Some(node);
        }
        if let Some(m) = maps {
            if let Some(slot) = self.maps.get_mut(&pid) {
                *slot = m;
            }
        }
        self.scratch = raw;
        parent
    }
}

/// Short name and kind of a mapped path.
fn classify_path(path: &str) -> (String, ModuleKind) {
    if path == "[kernel.kallsyms]" || path.starts_with("[kernel.kallsyms]") {
        return ("[kernel.kallsyms]".into(), ModuleKind::Kernel);
    }
    if path == "[unknown]" {
        return (path.into(), ModuleKind::Other);
    }
    if path.starts_with('[') || path.starts_with("//") || path.starts_with("/memfd:") {
        return (path.into(), ModuleKind::Other);
    }
    let base = path.rsplit('/').next().unwrap_or(path);
    if let Some(m) = base
        .strip_suffix(".ko")
        .or_else(|| base.strip_suffix(".ko.xz"))
        .or_else(|| base.strip_suffix(".ko.zst"))
    {
        return (format!("[{m}]"), ModuleKind::KernelModule);
    }
    if path.starts_with('/') {
        (base.into(), ModuleKind::User)
    } else {
        (path.into(), ModuleKind::Other)
    }
}

fn classify_attr(
    b: &mut Builder,
    name: &str,
    ty: PerfEventType,
    tracing: Option<&[u8]>,
) -> AttrKind {
    let fmt = |tp: &str| -> Format {
        tracing
            .and_then(|blob| Format::find_in_tracing_data(blob, tp))
            .or_else(|| local_format(name))
            .unwrap_or_default()
    };
    match ty {
        PerfEventType::Tracepoint(_) => {
            let (_, tp) = name.split_once(':').unwrap_or(("", name));
            match tp {
                "sched_switch" => AttrKind::Switch(fmt(tp)),
                "sched_waking" | "sched_wakeup" => AttrKind::Waking(fmt(tp)),
                "page_fault_user" => AttrKind::PageFault {
                    user: true,
                    format: fmt(tp),
                },
                "page_fault_kernel" => AttrKind::PageFault {
                    user: false,
                    format: fmt(tp),
                },
                _ => {
                    if let Some(sc) = tp.strip_prefix("sys_enter_") {
                        AttrKind::SysEnter(b.s(sc))
                    } else if let Some(sc) = tp.strip_prefix("sys_exit_") {
                        AttrKind::SysExit(b.s(sc))
                    } else {
                        AttrKind::Other(b.s(name))
                    }
                }
            }
        }
        PerfEventType::Software(SoftwareCounterType::PageFaultsMaj) => AttrKind::MajorFault,
        PerfEventType::Software(
            SoftwareCounterType::PageFaults
            | SoftwareCounterType::PageFaultsMin
            | SoftwareCounterType::ContextSwitches
            | SoftwareCounterType::CpuMigrations,
        ) => AttrKind::Other(b.s(name)),
        _ => AttrKind::Cpu,
    }
}

/// Format of a tracepoint from this machine's tracefs, for files without
/// a tracing-data section.
fn local_format(name: &str) -> Option<Format> {
    let (sys, tp) = name.split_once(':')?;
    for root in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        if let Ok(text) = std::fs::read_to_string(format!("{root}/events/{sys}/{tp}/format")) {
            return Some(Format::parse(&text));
        }
    }
    None
}

/// Name of an event for a file without event names (an unfinished file).
fn fallback_name(ty: PerfEventType, config_id: u64) -> String {
    match ty {
        PerfEventType::Software(SoftwareCounterType::CpuClock) => "cpu-clock".into(),
        PerfEventType::Software(SoftwareCounterType::TaskClock) => "task-clock".into(),
        PerfEventType::Software(SoftwareCounterType::PageFaultsMaj) => "major-faults".into(),
        PerfEventType::Software(SoftwareCounterType::PageFaultsMin) => "minor-faults".into(),
        PerfEventType::Software(SoftwareCounterType::PageFaults) => "page-faults".into(),
        PerfEventType::Hardware(..) => "cycles".into(),
        PerfEventType::Tracepoint(id) => {
            tracepoint_name_by_id(id).unwrap_or_else(|| format!("tracepoint:{id}"))
        }
        _ => format!("event:{config_id}"),
    }
}

/// Looks a tracepoint id up in this machine's tracefs (only right when the
/// file was recorded on this machine since its last boot).
fn tracepoint_name_by_id(id: u64) -> Option<String> {
    let root = std::path::Path::new("/sys/kernel/tracing/events");
    let want = id.to_string();
    for sys in std::fs::read_dir(root).ok()?.flatten() {
        let Ok(events) = std::fs::read_dir(sys.path()) else {
            continue;
        };
        for ev in events.flatten() {
            if let Ok(s) = std::fs::read_to_string(ev.path().join("id")) {
                if s.trim() == want {
                    return Some(format!(
                        "{}:{}",
                        sys.file_name().to_string_lossy(),
                        ev.file_name().to_string_lossy()
                    ));
                }
            }
        }
    }
    None
}

fn bytes_of(
    raw: linux_perf_data::linux_perf_event_reader::RawData<'_>,
) -> std::borrow::Cow<'_, [u8]> {
    raw.as_slice()
}

/// Reads a whole perf.data image (already in memory) into a trace whose
/// frames are not yet symbolized.
pub fn read_bytes(data: &[u8], progress: ProgressFn) -> Result<Trace, Error> {
    read_bytes_with(data, progress, &mut |_| {})
}

/// Like [`read_bytes`], calling `on_binary(path)` for each user binary when
/// its first mapping is read (so its symbols can load in the background).
pub fn read_bytes_with(
    data: &[u8],
    progress: ProgressFn,
    on_binary: &mut dyn FnMut(&str),
) -> Result<Trace, Error> {
    let (patched, repair) = file::open(data)?;
    let total = data.len() as u64;
    let parsed = if repair.pipe {
        PerfFileReader::parse_pipe(patched)
    } else {
        PerfFileReader::parse_file(patched)
    };
    let PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = parsed.map_err(|e| Error::Header(e.to_string()))?;

    let mut b = Builder::new();
    b.big_endian = matches!(perf_file.endian(), linux_perf_data::Endianness::BigEndian);
    if repair.unfinished {
        b.t.stats.unfinished_file = true;
        b.t.stats.truncated_bytes = repair.truncated_bytes;
        b.t.stats.warnings.push(format!(
            "the file was not finished (perf record was killed before it wrote its header); read every complete record, {} trailing bytes skipped; stop perf with Ctrl-C or SIGINT next time",
            repair.truncated_bytes
        ));
    }
    if repair.dropped_features {
        b.t.stats.warnings.push(
            "the file's feature sections point outside the file (truncated copy?); host, event names and build ids are unavailable".into(),
        );
    }

    // Metadata.
    let meta = &mut b.t.meta;
    meta.hostname = perf_file.hostname().ok().flatten().map(str::to_owned);
    meta.os_release = perf_file.os_release().ok().flatten().map(str::to_owned);
    meta.arch = perf_file.arch().ok().flatten().map(str::to_owned);
    meta.perf_version = perf_file.perf_version().ok().flatten().map(str::to_owned);
    meta.cmdline = perf_file
        .cmdline()
        .ok()
        .flatten()
        .map(|v| v.into_iter().map(str::to_owned).collect())
        .unwrap_or_default();
    meta.nr_cpus = perf_file.nr_cpus().ok().flatten().map(|n| n.nr_cpus_online);

    // Build ids by path.
    if let Ok(ids) = perf_file.build_ids() {
        let by_path: FxMap<Vec<u8>, String> = ids
            .into_values()
            .map(|info| {
                let hex: String = info.build_id.iter().map(|b| format!("{b:02x}")).collect();
                (info.path, hex)
            })
            .collect();
        b.build_ids = by_path;
    }

    // Event kinds.
    let tracing = perf_file
        .feature_section_data(Feature::TRACING_DATA)
        .map(<[u8]>::to_vec);
    let attrs: Vec<_> = perf_file
        .event_attributes()
        .iter()
        .map(|a| {
            let config = match a.attributes().type_ {
                PerfEventType::Tracepoint(id) => id,
                _ => 0,
            };
            let name = a
                .name()
                .map(str::to_owned)
                .unwrap_or_else(|| fallback_name(a.attributes().type_, config));
            (name, a.attributes().type_, a.attributes().sampling_policy)
        })
        .collect();
    let mut kinds = Vec::with_capacity(attrs.len());
    let mut cpu_attr = None;
    for (i, (name, ty, policy)) in attrs.iter().enumerate() {
        let kind = classify_attr(&mut b, name, *ty, tracing.as_deref());
        if matches!(kind, AttrKind::Cpu) {
            if cpu_attr.is_none() {
                cpu_attr = Some(i);
                b.t.meta.sample_event = Some(name.clone());
                if let SamplingPolicy::Frequency(f) = policy {
                    b.t.meta.sample_freq = Some(*f);
                }
            } else {
                // Only the first sampling event feeds the CPU samples.
                let s = b.s(name);
                kinds.push(AttrKind::Other(s));
                continue;
            }
        }
        kinds.push(kind);
        b.t.meta.events.push(name.clone());
    }
    if let Some(arch) = &b.t.meta.arch {
        let here = std::env::consts::ARCH;
        if arch != here {
            b.t.stats.warnings.push(format!(
                "the trace was recorded on {arch}, this machine is {here}: its binaries and kernel symbols are not here, so functions will be unnamed; analyze it on an {arch} machine"
            ));
            b.foreign = true;
        }
    }

    // The records.
    let mut last_progress = 0u64;
    let data_len = total;
    let mut read_bytes = 0u64;
    loop {
        // The parser crates can panic on malformed input (arithmetic
        // overflow on absurd sizes); treat that like a corrupt record.
        let (it, pf) = (&mut record_iter, &mut perf_file);
        let next = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            let (it, pf) = (it, pf);
            it.next_record(pf)
        }));
        let Ok(next) = next else {
            b.t.stats.warnings.push(format!(
                "stopped reading at malformed data after {} records; the analysis covers the part before it",
                b.t.stats.records
            ));
            break;
        };
        let rec = match next {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                b.t.stats.warnings.push(format!(
                    "stopped reading at a corrupt record after {} records ({e}); the analysis covers the part before it",
                    b.t.stats.records
                ));
                break;
            }
        };
        b.t.stats.records += 1;
        if !b.new_binaries.is_empty() {
            for p in b.new_binaries.drain(..) {
                on_binary(&p);
            }
        }
        let PerfFileRecord::EventRecord { attr_index, record } = rec else {
            continue;
        };
        read_bytes += record.data.len() as u64 + 8;
        if read_bytes - last_progress > (1 << 22) {
            last_progress = read_bytes;
            progress("read", read_bytes.min(data_len), data_len);
        }
        let rtype = record.record_type;
        let time = if rtype == RecordType::SAMPLE {
            0
        } else {
            record.timestamp().unwrap_or(0)
        };
        if rtype == RecordType::LOST_SAMPLES {
            let raw = bytes_of(record.data);
            if raw.len() >= 8 {
                let mut a = [0u8; 8];
                a.copy_from_slice(&raw[..8]);
                b.t.stats.lost_events += if b.big_endian {
                    u64::from_be_bytes(a)
                } else {
                    u64::from_le_bytes(a)
                };
            }
            continue;
        }
        let parsed = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| record.parse()))
        {
            Ok(Ok(p)) => p,
            _ => {
                b.t.stats.unparsed_records += 1;
                continue;
            }
        };
        match parsed {
            EventRecord::Sample(s) => {
                let time = s.timestamp.unwrap_or(time);
                b.see_time(time);
                let pid = s.pid.unwrap_or(-1);
                let tid = s.tid.unwrap_or(pid);
                let thread = b.thread(pid, tid);
                let cpu = s.cpu.unwrap_or(0);
                let stack = b.stack(pid, s.callchain, s.ip, s.cpu_mode);
                let Some(kind) = kinds.get(attr_index) else {
                    b.t.stats.unparsed_records += 1;
                    continue;
                };
                let raw = s.raw.map(bytes_of);
                let raw = raw.as_deref().unwrap_or(&[]);
                let be = b.big_endian;
                let kind = match kind {
                    AttrKind::Cpu => {
                        if stack.is_none() {
                            b.t.stats.samples_without_stack += 1;
                        }
                        let smp = &mut b.t.samples;
                        smp.time_ns.push(time);
                        smp.thread.push(thread);
                        smp.cpu.push(cpu);
                        smp.stack.push(stack);
                        smp.period.push(s.period.unwrap_or(1));
                        continue;
                    }
                    AttrKind::Switch(f) => EventKind::Switch {
                        prev_tid: f.get_i64(raw, "prev_pid", be).unwrap_or(-1) as i32,
                        prev_state: f.get_u64(raw, "prev_state", be).unwrap_or(0),
                        next_tid: f.get_i64(raw, "next_pid", be).unwrap_or(-1) as i32,
                    },
                    AttrKind::Waking(f) => EventKind::Waking {
                        tid: f.get_i64(raw, "pid", be).unwrap_or(-1) as i32,
                        target_cpu: f.get_i64(raw, "target_cpu", be).unwrap_or(-1) as i32,
                    },
                    AttrKind::PageFault { user, format } => EventKind::PageFault {
                        address: format.get_u64(raw, "address", be).unwrap_or(0),
                        ip: format.get_u64(raw, "ip", be).unwrap_or(0),
                        error_code: format.get_u64(raw, "error_code", be).unwrap_or(0),
                        user: *user,
                    },
                    AttrKind::MajorFault => EventKind::MajorFault { address: s.addr },
                    AttrKind::SysEnter(name) => {
                        let mut args = [0u64; 6];
                        for (i, a) in args.iter_mut().enumerate() {
                            *a = read_u64_at(raw, 16 + 8 * i, be).unwrap_or(0);
                        }
                        EventKind::SyscallEnter { name: *name, args }
                    }
                    AttrKind::SysExit(name) => EventKind::SyscallExit {
                        name: *name,
                        ret: read_u64_at(raw, 16, be).unwrap_or(0) as i64,
                    },
                    AttrKind::Other(name) => EventKind::Other { name: *name },
                };
                b.t.events.push(Event {
                    time_ns: time,
                    cpu,
                    thread,
                    stack,
                    kind,
                });
            }
            EventRecord::Comm(c) => {
                let name = String::from_utf8_lossy(&c.name.as_slice()).into_owned();
                b.on_comm(c.pid, c.tid, &name, c.is_execve, time);
            }
            EventRecord::Fork(f) => b.on_fork(f.pid, f.ppid, f.tid, f.ptid, f.timestamp),
            EventRecord::Exit(f) => b.on_exit(f.pid, f.tid, f.timestamp),
            EventRecord::Mmap(m) if m.is_executable => {
                let path = String::from_utf8_lossy(&m.path.as_slice()).into_owned();
                let kernel = matches!(m.cpu_mode, CpuMode::Kernel);
                b.on_mmap(m.pid, m.address, m.length, m.page_offset, &path, kernel);
            }
            EventRecord::Mmap2(m) if m.protection & libc_prot_exec() != 0 => {
                let path = String::from_utf8_lossy(&m.path.as_slice()).into_owned();
                let kernel = matches!(m.cpu_mode, CpuMode::Kernel);
                b.on_mmap(m.pid, m.address, m.length, m.page_offset, &path, kernel);
            }
            EventRecord::Lost(l) => b.t.stats.lost_events += l.count,
            _ => {}
        }
    }
    progress("read", data_len, data_len);

    if b.t.stats.lost_events > 0 {
        b.t.stats.warnings.push(format!(
            "the kernel dropped {} events because perf could not keep up; record with a lower --freq or a bigger buffer (perf record -m)",
            b.t.stats.lost_events
        ));
    }
    if b.t.stats.unparsed_records > 0 {
        b.t.stats.warnings.push(format!(
            "skipped {} records that could not be parsed",
            b.t.stats.unparsed_records
        ));
    }
    if b.first_ns == u64::MAX {
        b.first_ns = 0;
    }
    b.t.meta.start_ns = b.first_ns;
    b.t.meta.end_ns = b.last_ns.max(b.first_ns);

    // Attach build ids to modules.
    for m in &mut b.t.modules {
        let path = b.t.strings[m.path.ix()].as_bytes();
        if let Some(id) = b.build_ids.get(path) {
            m.build_id = Some(id.clone());
        }
    }
    if b.foreign {
        for m in &mut b.t.modules {
            m.symbol_error = Some("recorded on another architecture".into());
        }
    }
    Ok(b.t)
}

fn libc_prot_exec() -> u32 {
    4 // PROT_EXEC on every Linux architecture
}

fn read_u64_at(raw: &[u8], off: usize, big_endian: bool) -> Option<u64> {
    let b = raw.get(off..off + 8)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    Some(if big_endian {
        u64::from_be_bytes(a)
    } else {
        u64::from_le_bytes(a)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(start: u64, end: u64, pgoff: u64, module: u32) -> Map {
        Map {
            start,
            end,
            pgoff,
            module: ModuleIdx(module),
        }
    }

    #[test]
    fn overlapping_mmap_cuts_old_mapping() {
        let mut maps = vec![m(0x1000, 0x5000, 0, 1)];
        insert_map(&mut maps, m(0x2000, 0x3000, 0x100, 2));
        let got: Vec<_> = maps
            .iter()
            .map(|x| (x.start, x.end, x.pgoff, x.module.0))
            .collect();
        assert_eq!(
            got,
            vec![
                (0x1000, 0x2000, 0, 1),
                (0x2000, 0x3000, 0x100, 2),
                (0x3000, 0x5000, 0x2000, 1)
            ]
        );
        assert_eq!(find_map(&maps, 0x2fff).unwrap().module.0, 2);
        assert_eq!(find_map(&maps, 0x4000).unwrap().module.0, 1);
        assert!(find_map(&maps, 0x5000).is_none());
        assert!(find_map(&maps, 0x10).is_none());
    }

    #[test]
    fn classifies_paths() {
        assert_eq!(classify_path("/usr/lib/libc.so.6").0, "libc.so.6");
        assert_eq!(classify_path("/usr/lib/libc.so.6").1, ModuleKind::User);
        assert_eq!(classify_path("[vdso]").1, ModuleKind::Other);
        assert_eq!(classify_path("//anon").1, ModuleKind::Other);
        assert_eq!(
            classify_path("/lib/modules/6.1/kernel/fs/ext4/ext4.ko").0,
            "[ext4]"
        );
    }
}
