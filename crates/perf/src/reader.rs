//! One pass over a perf.data file's records, in time order, building the
//! trace model: process and thread lifetimes (fork/comm/exec/exit), memory
//! maps per process, CPU samples as columns, decoded tracepoint events, and
//! the frame and stack tables (each unique address and each unique stack
//! prefix stored once).
//!
//! `linux-perf-data` reads the header, attributes and feature sections; the
//! records themselves come from [`crate::records`] (in place, time-ordered),
//! or, for pipe-mode files, from `linux-perf-data`'s own record iterator.
//! Both feed the same [`Builder`].
//!
//! Interning the stacks is most of the work on a big trace (a build yields
//! hundreds of thousands of distinct stack prefixes, many from frame-pointer
//! walks through code without frame pointers), and it is bound by cache
//! misses in tables of megabytes, not by instructions: see [`Builder::stack`]
//! (frame keys and a cache of whole caller chains), `intern_chain` (new
//! nodes looked up only when needed) and `flush` (CPU samples in batches, so
//! that their table probes wait for memory together).
//!
//! It does not name functions: frames come out pointing at a placeholder
//! function, and `symbolize` fills them in.

use linux_perf_data::linux_perf_event_reader::{
    CpuMode, EventRecord, PerfEventType, RawData, RawEventRecord, RecordParseInfo, RecordType,
    SamplingPolicy, SoftwareCounterType,
};
use linux_perf_data::{AttributeDescription, Endianness, Feature, PerfFileReader, PerfFileRecord};
use slowlab_model::trace::{
    Event, EventKind, Frame, FrameIdx, FuncIdx, Module, ModuleIdx, ModuleKind, ProcIdx, Process,
    StackIdx, StackNode, StrIdx, Thread, ThreadIdx, Trace,
};

use crate::file;
use crate::intern::{FxMap, IdTable, Strings};
use crate::records::{self, rtype, AttrOf, Endian, Layout, Record, Records};
use crate::tracepoint::{Field, Format};
use crate::{guard, Error, ProgressFn};

/// No pending child (see `Builder::pending_child`).
const NO_CHILD: u32 = u32::MAX;

/// Placeholder until symbolization.
pub(crate) const NO_FUNC: FuncIdx = FuncIdx(u32::MAX);

const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;
const PERF_CONTEXT_KERNEL: u64 = -128i64 as u64;
const PERF_CONTEXT_USER: u64 = -512i64 as u64;
/// `PERF_RECORD_MISC_CPUMODE_MASK` and `PERF_RECORD_MISC_KERNEL`.
const MISC_CPUMODE_MASK: u16 = 7;
const MISC_KERNEL: u16 = 1;

/// How the records of one event (attribute) are turned into the model.
/// Tracepoint fields are looked up once here, not per record.
enum AttrKind {
    Cpu,
    Switch {
        prev_pid: Option<Field>,
        prev_state: Option<Field>,
        next_pid: Option<Field>,
        next_prio: Option<Field>,
    },
    Waking {
        pid: Option<Field>,
        target_cpu: Option<Field>,
    },
    PageFault {
        user: bool,
        address: Option<Field>,
        ip: Option<Field>,
        error_code: Option<Field>,
    },
    MajorFault,
    Block {
        complete: bool,
        dev: Option<Field>,
        sector: Option<Field>,
        nr_sector: Option<Field>,
        rwbs: Option<Field>,
    },
    SysEnter(StrIdx),
    SysExit(StrIdx),
    Other(StrIdx),
}

/// What every record needs to be decoded: byte order, where each
/// attribute's fields lie, and what each attribute means.
struct Ctx {
    e: Endian,
    attrs: AttrOf,
    parse_infos: Vec<RecordParseInfo>,
    kinds: Vec<AttrKind>,
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

/// A caller chain seen before: a second, independent hash of its frame
/// keys and its length (to tell it from another chain with the same cache
/// key), and its node.
struct Chain {
    check: u64,
    len: u32,
    node: StackIdx,
}

/// A CPU sample waiting in the batch; its frame keys are
/// `batch_keys[start..start + len]`.
#[derive(Clone, Copy)]
struct Pending {
    time: u64,
    period: u64,
    thread: ThreadIdx,
    cpu: u32,
    start: u32,
    len: u32,
}

/// CPU samples interned together.
const BATCH: usize = 16;

/// `stack_map`'s key of the node of `frame` under `parent`.
#[inline]
fn node_key(parent: Option<StackIdx>, frame: FrameIdx) -> u64 {
    (parent.map_or(u32::MAX, |p| p.0) as u64) << 32 | frame.0 as u64
}

/// A frame before interning: its module (high bit: a kernel frame) and
/// module-relative address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FrameKey {
    rel: u64,
    tag: u32,
}

const KERNEL_TAG: u32 = 1 << 31;

impl FrameKey {
    fn module(self) -> ModuleIdx {
        ModuleIdx(self.tag & !KERNEL_TAG)
    }
    fn kernel(self) -> bool {
        self.tag & KERNEL_TAG != 0
    }
}

struct Builder {
    t: Trace,
    strings: Strings,
    pid_map: FxMap<i32, ProcIdx>,
    tid_map: FxMap<i32, ThreadIdx>,
    maps: FxMap<i32, Vec<Map>>,
    kernel_maps: Vec<Map>,
    module_by_path: FxMap<StrIdx, ModuleIdx>,
    /// (module, address) → frame.
    frame_map: IdTable<(u64, u64)>,
    /// caller node << 32 | frame → node. A chain of new nodes enters it
    /// lazily, see `pending_child`.
    stack_map: IdTable<u64>,
    /// Per node: its one child not yet in `stack_map` (created in a chain
    /// of new nodes), or `NO_CHILD`.
    pending_child: Vec<u32>,
    /// The frames of the sample being interned, innermost first.
    scratch: Vec<FrameKey>,
    /// The frames of a chain being interned.
    scratch_frames: Vec<FrameIdx>,
    /// CPU samples decoded but not yet interned, and their frame keys.
    batch: Vec<Pending>,
    batch_keys: Vec<FrameKey>,
    /// Hash of a caller chain's frame keys → index into `chains`.
    chain_cache: IdTable<u64>,
    chains: Vec<Chain>,
    kernel_module: ModuleIdx,
    unknown_module: ModuleIdx,
    first_ns: u64,
    last_ns: u64,
    /// The last thread looked up by (pid, tid): consecutive samples are
    /// often from the same thread.
    last_thread: Option<(i32, i32, ThreadIdx)>,
    /// Build ids from the file's build-id table, by recorded path.
    build_ids: FxMap<Vec<u8>, String>,
    /// Recorded on another architecture: do not symbolize locally.
    foreign: bool,
    /// User binaries whose first frame was seen since the caller last
    /// looked (so their symbols can be fetched while records are read).
    new_binaries: Vec<ModuleIdx>,
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
            frame_map: IdTable::default(),
            stack_map: IdTable::default(),
            pending_child: Vec::new(),
            scratch: Vec::new(),
            scratch_frames: Vec::new(),
            batch: Vec::with_capacity(BATCH),
            batch_keys: Vec::new(),
            chain_cache: IdTable::default(),
            chains: Vec::new(),
            kernel_module: ModuleIdx(0),
            unknown_module: ModuleIdx(0),
            first_ns: u64::MAX,
            last_ns: 0,
            last_thread: None,
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
        let build_id = self.build_ids.get(path.as_bytes()).cloned();
        self.t.modules.push(Module {
            name,
            path: p,
            kind,
            build_id,
            symbol_error: None,
        });
        self.module_by_path.insert(p, m);
        m
    }

    #[inline]
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
        self.last_thread = None;
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

    #[inline]
    fn thread(&mut self, pid: i32, tid: i32) -> ThreadIdx {
        if let Some((p, t, th)) = self.last_thread {
            if (p, t) == (pid, tid) {
                return th;
            }
        }
        let th = self.thread_slow(pid, tid);
        self.last_thread = Some((pid, tid, th));
        th
    }

    fn thread_slow(&mut self, pid: i32, tid: i32) -> ThreadIdx {
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
        // perf synthesizes records for what already ran when it started,
        // with time 0: no fork time is known for those.
        let time = (time != 0).then_some(time);
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
            let p = self.new_process(pid, Some(ppid), comm, time);
            let inherited = self.maps.get(&ppid).cloned().unwrap_or_default();
            self.maps.insert(pid, inherited);
            self.new_thread(p, tid, comm, time);
        } else {
            let p = self.process(pid);
            let comm = parent_comm.unwrap_or(self.t.processes[p.ix()].comm);
            self.new_thread(p, tid, comm, time);
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
            proc_.exec_ns = (time != 0).then_some(time);
            if let Some(m) = self.maps.get_mut(&pid) {
                m.clear();
            }
        }
    }

    fn on_mmap(&mut self, pid: i32, start: u64, len: u64, pgoff: u64, path: &str, kernel: bool) {
        if len == 0 {
            return;
        }
        if kernel || pid == -1 {
            let module = if path.starts_with("[kernel.kallsyms]") {
                // perf's kernel map `[kernel.kallsyms]_text` carries the
                // address of `_text` at recording time as its page offset.
                if path == "[kernel.kallsyms]_text" {
                    self.t.meta.kernel_text = Some(pgoff);
                }
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
    }

    /// The frame key of a raw address in a process with `maps`.
    #[inline]
    fn frame_key(&self, maps: &[Map], addr: u64, kernel: bool) -> FrameKey {
        if kernel {
            // Kernel frames are named from kallsyms by absolute address.
            let module = find_map(&self.kernel_maps, addr)
                .map(|m| m.module)
                .filter(|m| self.t.modules[m.ix()].kind == ModuleKind::KernelModule)
                .unwrap_or(self.kernel_module);
            return FrameKey {
                rel: addr,
                tag: module.0 | KERNEL_TAG,
            };
        }
        match find_map(maps, addr) {
            Some(m) => {
                let user = self.t.modules[m.module.ix()].kind == ModuleKind::User;
                FrameKey {
                    rel: if user { addr - m.start + m.pgoff } else { addr },
                    tag: m.module.0,
                }
            }
            None => FrameKey {
                rel: addr,
                tag: self.unknown_module.0,
            },
        }
    }

    /// The frame of a key, created on first use.
    #[inline]
    fn intern_frame(&mut self, key: FrameKey) -> FrameIdx {
        let next = FrameIdx(self.t.frames.len() as u32);
        let (module, kernel) = (key.module(), key.kernel());
        let (f, new) = self
            .frame_map
            .get_or_insert_with((key.tag as u64, key.rel), || next.0);
        if new {
            self.t.frames.push(Frame {
                module,
                address: key.rel,
                function: NO_FUNC,
                kernel,
            });
            // The first frame in a binary: its symbols are needed.
            if self.requested.len() <= module.ix() {
                self.requested.resize(module.ix() + 1, false);
            }
            if !self.requested[module.ix()] {
                self.requested[module.ix()] = true;
                if self.t.modules[module.ix()].kind == ModuleKind::User && !self.foreign {
                    self.new_binaries.push(module);
                }
            }
        }
        FrameIdx(f)
    }

    /// Interns a sample's callchain (`chain`: raw `u64` addresses in the
    /// file's byte order) and returns its innermost node.
    ///
    /// Each address is first turned into its frame key (module and offset,
    /// from the process's maps: a search in a short sorted list). The
    /// callers (every frame but the innermost) are then looked up as a whole
    /// by the hash of their keys: a build has tens of thousands of distinct
    /// caller chains for over a hundred thousand samples, and the same code
    /// in another process (another load address) has the same keys. Only a
    /// chain not seen before is interned frame by frame.
    fn stack(
        &mut self,
        e: Endian,
        pid: i32,
        chain: Option<&[u8]>,
        ip: Option<u64>,
        kernel_mode: bool,
    ) -> Option<StackIdx> {
        let mut keys = std::mem::take(&mut self.scratch);
        keys.clear();
        self.frame_keys(e, pid, chain, ip, kernel_mode, &mut keys);
        let leaf = match keys.split_first() {
            None => None,
            Some((&leaf, callers)) => {
                let parent = self.callers(callers, chain_hashes(callers));
                let depth = callers.len() as u32;
                Some(self.intern_chain(parent, depth, &[leaf]))
            }
        };
        self.scratch = keys;
        leaf
    }

    /// Appends the frame keys of a sample's callchain (or of its `ip`
    /// when it has none) to `keys`, innermost first.
    fn frame_keys(
        &self,
        e: Endian,
        pid: i32,
        chain: Option<&[u8]>,
        ip: Option<u64>,
        kernel_mode: bool,
        keys: &mut Vec<FrameKey>,
    ) {
        let no_maps = Vec::new();
        let maps = self.maps.get(&pid).unwrap_or(&no_maps);
        let mut kernel = kernel_mode;
        match chain {
            Some(chain) if !chain.is_empty() => {
                let mut first = true;
                let mut skip = false;
                for word in chain.chunks_exact(8) {
                    let Some(a) = e.u64(word, 0) else { break };
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
                    keys.push(self.frame_key(maps, lookup, kernel));
                }
            }
            _ => {
                if let Some(ip) = ip {
                    keys.push(self.frame_key(maps, ip, kernel));
                }
            }
        }
    }

    /// The node of a sample's callers (innermost first), from the chain
    /// cache or by interning them.
    fn callers(&mut self, callers: &[FrameKey], (key, check): (u64, u64)) -> Option<StackIdx> {
        if callers.is_empty() {
            return None;
        }
        let next = self.chains.len() as u32;
        let (id, new) = self.chain_cache.get_or_insert_with(key, || next);
        if !new {
            let c = &self.chains[id as usize];
            if c.check == check && c.len as usize == callers.len() {
                return Some(c.node);
            }
            // A different chain with the same key: intern without caching.
            return Some(self.intern_chain(None, 0, callers));
        }
        let node = self.intern_chain(None, 0, callers);
        self.chains.push(Chain {
            check,
            len: callers.len() as u32,
            node,
        });
        Some(node)
    }

    /// Interns `keys` (innermost first) under `parent`, whose depth is
    /// `depth - 1`; returns the innermost node. `keys` must not be empty.
    ///
    /// Memory latency is the cost here (tables of megabytes, probed at
    /// random), so the frame table's slots for all the keys are touched
    /// first, together, and the probes that follow find them in cache. The
    /// node lookups depend on each other (a node's key holds its parent);
    /// but once a node is new, every node under it is new, and those are
    /// not looked up at all, nor entered in `stack_map` until something
    /// under their parent is looked up (`pending_child`): most chains are
    /// never walked again.
    fn intern_chain(
        &mut self,
        mut parent: Option<StackIdx>,
        mut depth: u32,
        keys: &[FrameKey],
    ) -> StackIdx {
        let mut touched = 0u32;
        for k in keys {
            touched ^= self.frame_map.touch(&(k.tag as u64, k.rel));
        }
        std::hint::black_box(touched);
        let mut frames = std::mem::take(&mut self.scratch_frames);
        frames.clear();
        for &k in keys.iter().rev() {
            frames.push(self.intern_frame(k));
        }
        let mut fresh = false;
        for (&f, &k) in frames.iter().zip(keys.iter().rev()) {
            let node = self.node(parent, depth, f, k, &mut fresh);
            parent = Some(node);
            depth += 1;
        }
        self.scratch_frames = frames;
        // `keys` is not empty, so the loop set `parent`.
        parent.unwrap_or(StackIdx(0))
    }

    /// The node of frame `f` (key `k`) under `parent` at `depth`, created
    /// if new. `fresh`: `parent` was created by this chain just before (so
    /// this node is new too, and not looked up); set when the node is new.
    #[inline]
    fn node(
        &mut self,
        parent: Option<StackIdx>,
        depth: u32,
        f: FrameIdx,
        k: FrameKey,
        fresh: &mut bool,
    ) -> StackIdx {
        let new = StackIdx(self.t.stacks.len() as u32);
        let node = match parent {
            // Under a new node: new too, and left out of `stack_map`.
            Some(p) if *fresh => {
                self.pending_child.resize(new.ix() + 1, NO_CHILD);
                self.pending_child[p.ix()] = new.0;
                new
            }
            _ => {
                if let Some(p) = parent {
                    self.index_pending_child(p);
                }
                let (node, inserted) = self
                    .stack_map
                    .get_or_insert_with(node_key(parent, f), || new.0);
                *fresh = inserted;
                StackIdx(node)
            }
        };
        if node == new {
            if k.module() == self.unknown_module {
                self.t.stats.unmapped_frames += 1;
            }
            self.t.stacks.push(StackNode {
                parent,
                frame: f,
                depth,
            });
        }
        node
    }

    /// Takes in a CPU sample; it is interned with the next few (see
    /// `flush`).
    fn batch_sample(
        &mut self,
        e: Endian,
        pid: i32,
        s: &records::Sample<'_>,
        kernel: bool,
        p: Pending,
    ) {
        let mut keys = std::mem::take(&mut self.batch_keys);
        let start = keys.len() as u32;
        self.frame_keys(e, pid, s.callchain, s.ip, kernel, &mut keys);
        let len = keys.len() as u32 - start;
        self.batch_keys = keys;
        self.batch.push(Pending { start, len, ..p });
        if self.batch.len() == BATCH {
            self.flush();
        }
    }

    /// Interns the batched CPU samples and appends them to the sample
    /// columns, in order. The table probes of one sample depend on each
    /// other (callers, then the innermost frame, then its node) and each
    /// misses the cache; across the batch they do not, so each step is
    /// first taken for all samples, touching the table slots the next step
    /// needs, and the misses of a batch are waited for together.
    fn flush(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.batch);
        let keys = std::mem::take(&mut self.batch_keys);
        let sample_keys = |p: &Pending| &keys[p.start as usize..(p.start + p.len) as usize];
        let mut touched = 0u32;
        let mut hashes = [(0u64, 0u64); BATCH];
        for (h, p) in hashes.iter_mut().zip(&batch) {
            if let Some((_, callers)) = sample_keys(p).split_first() {
                *h = chain_hashes(callers);
                touched ^= self.chain_cache.touch(&h.0);
            }
        }
        let mut parents = [None; BATCH];
        for ((parent, p), &h) in parents.iter_mut().zip(&batch).zip(&hashes) {
            if let Some((leaf, callers)) = sample_keys(p).split_first() {
                *parent = self.callers(callers, h);
                touched ^= self.frame_map.touch(&(leaf.tag as u64, leaf.rel));
            }
        }
        let mut leaves = [FrameIdx(0); BATCH];
        for ((f, p), &parent) in leaves.iter_mut().zip(&batch).zip(&parents) {
            if let Some(&leaf) = sample_keys(p).first() {
                *f = self.intern_frame(leaf);
                touched ^= self.stack_map.touch(&node_key(parent, *f));
            }
        }
        std::hint::black_box(touched);
        for ((p, parent), f) in batch.iter().zip(parents).zip(leaves) {
            let stack = sample_keys(p).first().map(|&leaf| {
                let mut fresh = false;
                self.node(parent, p.len - 1, f, leaf, &mut fresh)
            });
            if stack.is_none() {
                self.t.stats.samples_without_stack += 1;
            }
            let smp = &mut self.t.samples;
            smp.time_ns.push(p.time);
            smp.thread.push(p.thread);
            smp.cpu.push(p.cpu);
            smp.stack.push(stack);
            smp.period.push(p.period);
        }
        self.batch = batch;
        self.batch.clear();
        self.batch_keys = keys;
        self.batch_keys.clear();
    }

    /// Puts the child of `node` that a new chain left out of `stack_map`
    /// into it, before anything under `node` is looked up there.
    #[inline]
    fn index_pending_child(&mut self, node: StackIdx) {
        let Some(c) = self.pending_child.get_mut(node.ix()) else {
            return;
        };
        if *c != NO_CHILD {
            let child = std::mem::replace(c, NO_CHILD);
            let f = self.t.stacks[child as usize].frame;
            self.stack_map
                .insert_new((node.0 as u64) << 32 | f.0 as u64, child);
        }
    }

    /// Sizes the interning tables for `samples` samples in `bytes` of
    /// records. The ratios are those of system-wide traces of builds
    /// (frame-pointer stacks, many of them deep), rounded up: growing a
    /// table later copies it. Vectors get room to spare (untouched memory
    /// costs nothing); the hash tables, whose every slot is written when
    /// made, do not.
    fn reserve(&mut self, samples: usize, bytes: usize) {
        let words = bytes / 8;
        self.t.stacks.reserve(words / 2);
        self.pending_child.reserve(words / 2);
        self.t.frames.reserve(words / 8);
        self.chains.reserve(samples / 3);
        self.chain_cache = IdTable::with_capacity(samples / 3);
        self.frame_map = IdTable::with_capacity(words / 12);
        self.stack_map = IdTable::with_capacity(words / 14);
        self.t.samples = reserve_samples(samples);
    }

    /// Turns one record into the model.
    fn on_record(&mut self, ctx: &Ctx, attr: usize, rec: Record<'_>) {
        if rec.ty != rtype::SAMPLE {
            // Bookkeeping changes maps and threads: batched samples first.
            self.flush();
        }
        match rec.ty {
            rtype::SAMPLE => self.on_sample(ctx, attr, rec),
            rtype::LOST_SAMPLES => {
                self.t.stats.lost_events += ctx.e.u64(rec.body, 0).unwrap_or(0);
            }
            rtype::MMAP | rtype::MMAP2 | rtype::COMM | rtype::FORK | rtype::EXIT | rtype::LOST => {
                self.on_rare(ctx, attr, rec)
            }
            _ => {}
        }
    }

    /// Records that are few (process and mapping bookkeeping), decoded by
    /// `linux-perf-event-reader`.
    fn on_rare(&mut self, ctx: &Ctx, attr: usize, rec: Record<'_>) {
        let Some(&info) = ctx.parse_infos.get(attr) else {
            self.t.stats.unparsed_records += 1;
            return;
        };
        let raw = RawEventRecord::new(
            RecordType(rec.ty),
            rec.misc,
            RawData::Single(rec.body),
            info,
        );
        let time = ctx
            .attrs
            .layout(attr)
            .and_then(|l| l.time(ctx.e, rec.ty, rec.body))
            .unwrap_or(0);
        let parsed = match guard(|| raw.parse()) {
            Some(Ok(p)) => p,
            _ => {
                self.t.stats.unparsed_records += 1;
                return;
            }
        };
        match parsed {
            EventRecord::Comm(c) => {
                let name = String::from_utf8_lossy(&c.name.as_slice()).into_owned();
                self.on_comm(c.pid, c.tid, &name, c.is_execve, time);
            }
            EventRecord::Fork(f) => self.on_fork(f.pid, f.ppid, f.tid, f.ptid, f.timestamp),
            EventRecord::Exit(f) => self.on_exit(f.pid, f.tid, f.timestamp),
            EventRecord::Mmap(m) if m.is_executable => {
                let path = String::from_utf8_lossy(&m.path.as_slice()).into_owned();
                let kernel = matches!(m.cpu_mode, CpuMode::Kernel);
                self.on_mmap(m.pid, m.address, m.length, m.page_offset, &path, kernel);
            }
            EventRecord::Mmap2(m) if m.protection & PROT_EXEC != 0 => {
                let path = String::from_utf8_lossy(&m.path.as_slice()).into_owned();
                let kernel = matches!(m.cpu_mode, CpuMode::Kernel);
                self.on_mmap(m.pid, m.address, m.length, m.page_offset, &path, kernel);
            }
            EventRecord::Lost(l) => self.t.stats.lost_events += l.count,
            _ => {}
        }
    }

    /// A sample: a CPU sample, or a tracepoint or software event with the
    /// stack where it happened. Decoded in place by [`records::parse_sample`].
    fn on_sample(&mut self, ctx: &Ctx, attr: usize, rec: Record<'_>) {
        let (Some(layout), Some(kind)) = (ctx.attrs.layout(attr), ctx.kinds.get(attr)) else {
            self.t.stats.unparsed_records += 1;
            return;
        };
        let Some(s) = records::parse_sample(ctx.e, layout, rec.body) else {
            self.t.stats.unparsed_records += 1;
            return;
        };
        let time = s.time.unwrap_or(0);
        self.see_time(time);
        let pid = s.pid.unwrap_or(-1);
        let tid = s.tid.unwrap_or(pid);
        let thread = self.thread(pid, tid);
        let cpu = s.cpu.unwrap_or(0);
        let kernel = rec.misc & MISC_CPUMODE_MASK == MISC_KERNEL;
        if let AttrKind::Cpu = kind {
            let p = Pending {
                time,
                period: s.period.unwrap_or(1),
                thread,
                cpu,
                start: 0,
                len: 0,
            };
            self.batch_sample(ctx.e, pid, &s, kernel, p);
            return;
        }
        // Events keep their place among the samples.
        self.flush();
        let stack = self.stack(ctx.e, pid, s.callchain, s.ip, kernel);
        let raw = s.raw.unwrap_or(&[]);
        let be = ctx.e.big;
        let get = |f: &Option<Field>| f.and_then(|f| f.read(raw, be));
        let kind = match kind {
            // Batched above.
            AttrKind::Cpu => return,
            AttrKind::Switch {
                prev_pid,
                prev_state,
                next_pid,
                next_prio,
            } => EventKind::Switch {
                prev_tid: get(prev_pid).map_or(-1, |v| v as i32),
                prev_state: get(prev_state).unwrap_or(0),
                next_tid: get(next_pid).map_or(-1, |v| v as i32),
                next_prio: get(next_prio).map_or(120, |v| v as i32),
            },
            AttrKind::Waking { pid, target_cpu } => EventKind::Waking {
                tid: get(pid).map_or(-1, |v| v as i32),
                target_cpu: get(target_cpu).map_or(-1, |v| v as i32),
            },
            AttrKind::PageFault {
                user,
                address,
                ip,
                error_code,
            } => EventKind::PageFault {
                address: get(address).unwrap_or(0),
                ip: get(ip).unwrap_or(0),
                error_code: get(error_code).unwrap_or(0),
                user: *user,
            },
            AttrKind::MajorFault => EventKind::MajorFault { address: s.addr },
            AttrKind::Block {
                complete,
                dev,
                sector,
                nr_sector,
                rwbs,
            } => EventKind::BlockRequest {
                dev: get(dev).unwrap_or(0) as u32,
                sector: get(sector).unwrap_or(0),
                bytes: get(nr_sector).unwrap_or(0).saturating_mul(512),
                write: rwbs.is_some_and(|f| {
                    raw.get(f.offset..f.offset.saturating_add(f.size))
                        .is_some_and(|b| b.contains(&b'W'))
                }),
                complete: *complete,
            },
            AttrKind::SysEnter(name) => {
                let mut args = [0u64; 6];
                for (i, a) in args.iter_mut().enumerate() {
                    *a = ctx.e.u64(raw, 16 + 8 * i).unwrap_or(0);
                }
                EventKind::SyscallEnter { name: *name, args }
            }
            AttrKind::SysExit(name) => EventKind::SyscallExit {
                name: *name,
                ret: ctx.e.u64(raw, 16).unwrap_or(0) as i64,
            },
            AttrKind::Other(name) => EventKind::Other { name: *name },
        };
        self.t.events.push(Event {
            time_ns: time,
            cpu,
            thread,
            stack,
            kind,
        });
    }
}

/// `PROT_EXEC` on every Linux architecture.
const PROT_EXEC: u32 = 4;

/// Two independent 64-bit hashes of a chain of frame keys: the chain
/// cache's key, and a check that tells two chains with the same key apart.
/// (Chains are not stored to be compared: on a build they are millions of
/// frames. A wrong match needs both hashes to collide at once, about one
/// chance in 2^128 per pair of the few tens of thousands of chains.)
fn chain_hashes(chain: &[FrameKey]) -> (u64, u64) {
    // Two multiply-rotate chains with different constants, one multiply
    // per frame each, mixed to the end once.
    let mut a: u64 = 0x243f_6a88_85a3_08d3;
    let mut b: u64 = 0x1319_8a2e_0370_7344 ^ chain.len() as u64;
    for k in chain {
        a = (a.rotate_left(5) ^ k.rel ^ (k.tag as u64).rotate_left(40))
            .wrapping_mul(0x517c_c1b7_2722_0a95);
        b = ((b ^ k.rel).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ k.tag as u64).rotate_left(29);
    }
    (fmix(a), fmix(b))
}

/// murmur3's 64-bit finalizer: every input bit affects every output bit.
fn fmix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
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
                "sched_switch" => {
                    let f = fmt(tp);
                    AttrKind::Switch {
                        prev_pid: f.field("prev_pid"),
                        prev_state: f.field("prev_state"),
                        next_pid: f.field("next_pid"),
                        next_prio: f.field("next_prio"),
                    }
                }
                "sched_waking" | "sched_wakeup" => {
                    let f = fmt(tp);
                    AttrKind::Waking {
                        pid: f.field("pid"),
                        target_cpu: f.field("target_cpu"),
                    }
                }
                "block_rq_issue" | "block_rq_complete" => {
                    let f = fmt(tp);
                    AttrKind::Block {
                        complete: tp == "block_rq_complete",
                        dev: f.field("dev"),
                        sector: f.field("sector"),
                        nr_sector: f.field("nr_sector"),
                        rwbs: f.field("rwbs"),
                    }
                }
                "page_fault_user" | "page_fault_kernel" => {
                    let f = fmt(tp);
                    AttrKind::PageFault {
                        user: tp == "page_fault_user",
                        address: f.field("address"),
                        ip: f.field("ip"),
                        error_code: f.field("error_code"),
                    }
                }
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

/// Reads a whole perf.data image (already in memory) into a trace whose
/// frames are not yet symbolized.
pub fn read_bytes(data: &[u8], progress: ProgressFn) -> Result<Trace, Error> {
    read_bytes_with(data, progress, &mut |_, _| {}, &mut |_| {})
}

/// The build id of the kernel a perf.data file was recorded on, from its
/// build-id table (without reading its records); `None` when the file has
/// none or its header cannot be read.
pub(crate) fn kernel_build_id(data: &[u8]) -> Option<String> {
    let (patched, repair) = file::open(data).ok()?;
    if repair.pipe {
        return None;
    }
    let reader = guard(move || PerfFileReader::parse_file(patched))?.ok()?;
    let ids = guard(|| reader.perf_file.build_ids())?.ok()?;
    ids.into_values()
        .find(|info| info.path.as_slice() == b"[kernel.kallsyms]")
        .map(|info| crate::symbolize::hex(&info.build_id))
}

/// Like [`read_bytes`], calling `on_binary(path, recorded build id)` for
/// each user binary when its first frame is read (so its symbols can be
/// fetched meanwhile), and `checkpoint(trace so far)` when half and when
/// four fifths of the records are read (so the frames so far can be named
/// meanwhile).
pub(crate) fn read_bytes_with(
    data: &[u8],
    progress: ProgressFn,
    on_binary: &mut dyn FnMut(&str, Option<&str>),
    checkpoint: &mut dyn FnMut(&Trace),
) -> Result<Trace, Error> {
    let (patched, repair) = file::open(data)?;
    let parsed = guard(move || {
        if repair.pipe {
            PerfFileReader::parse_pipe(patched)
        } else {
            PerfFileReader::parse_file(patched)
        }
    })
    .ok_or_else(|| Error::Header("malformed header".into()))?;
    let PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = parsed.map_err(|e| Error::Header(e.to_string()))?;

    let mut b = Builder::new();
    let endian = perf_file.endian();
    let e = Endian {
        big: matches!(endian, Endianness::BigEndian),
    };
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
    // Parsed here, not by `linux-perf-data`: a damaged count there makes it
    // reserve gigabytes, an abort no `catch_unwind` can stop.
    meta.cmdline = perf_file
        .feature_section_data(Feature::CMDLINE)
        .map(|d| string_list(d, e))
        .unwrap_or_default();
    meta.nr_cpus = perf_file.nr_cpus().ok().flatten().map(|n| n.nr_cpus_online);

    // Build ids by path.
    if let Ok(ids) = perf_file.build_ids() {
        b.build_ids = ids
            .into_values()
            .map(|info| (info.path, crate::symbolize::hex(&info.build_id)))
            .collect();
    }

    let ctx = event_kinds(&mut b, &perf_file, e, endian);
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
    if repair.pipe {
        read_pipe(&mut b, &ctx, &mut record_iter, &mut perf_file);
        b.new_binaries.clear();
    } else {
        let start = usize::try_from(repair.data_offset).unwrap_or(usize::MAX);
        let end = usize::try_from(repair.data_offset.saturating_add(repair.data_size))
            .unwrap_or(usize::MAX);
        let recs = Records::index(data, start, end, e, &ctx.attrs);
        b.t.stats.records = recs.walked;
        let n = recs.entries.len() as u64;
        b.reserve(recs.entries.len(), end.saturating_sub(start));
        let checkpoints = [recs.entries.len() / 2, recs.entries.len() * 4 / 5];
        for (i, &entry) in recs.entries.iter().enumerate() {
            if i % (1 << 15) == 0 {
                progress("read", i as u64, n);
            }
            if checkpoints.contains(&i) {
                b.flush();
                checkpoint(&b.t);
            }
            if let Some(rec) = recs.get(entry) {
                b.on_record(&ctx, entry.attr(), rec);
                if !b.new_binaries.is_empty() {
                    for m in b.new_binaries.drain(..) {
                        let m = &b.t.modules[m.ix()];
                        on_binary(&b.t.strings[m.path.ix()], m.build_id.as_deref());
                    }
                }
            }
        }
        progress("read", n, n);
        if let Some(why) = recs.stopped {
            b.t.stats.warnings.push(format!(
                "stopped reading at a corrupt record after {} records ({why}); the analysis covers the part before it",
                recs.walked
            ));
        }
    }
    Ok(finish(b))
}

/// A perf header string list: `u32 count`, then `count` times `u32 len`
/// and `len` bytes (NUL-padded). Stops at the first entry that does not fit.
fn string_list(data: &[u8], e: Endian) -> Vec<String> {
    let count = e.u32(data, 0).unwrap_or(0) as usize;
    let mut out = Vec::new();
    let mut p = 4;
    for _ in 0..count {
        let Some(len) = e.u32(data, p).map(|l| l as usize) else {
            break;
        };
        let Some(s) = p.checked_add(4 + len).and_then(|end| data.get(p + 4..end)) else {
            break;
        };
        let s = &s[..s.iter().position(|&c| c == 0).unwrap_or(s.len())];
        out.push(String::from_utf8_lossy(s).into_owned());
        p += 4 + len;
    }
    out
}

/// Sample columns with room for about `records` samples.
fn reserve_samples(records: usize) -> slowlab_model::trace::Samples {
    slowlab_model::trace::Samples {
        time_ns: Vec::with_capacity(records),
        thread: Vec::with_capacity(records),
        cpu: Vec::with_capacity(records),
        stack: Vec::with_capacity(records),
        period: Vec::with_capacity(records),
    }
}

/// Pipe-mode files (`perf record -o -`): their attributes and features come
/// as records, which `linux-perf-data`'s iterator understands; this path is
/// not the fast one.
fn read_pipe<R: std::io::Read>(
    b: &mut Builder,
    ctx: &Ctx,
    record_iter: &mut linux_perf_data::PerfRecordIter<R>,
    perf_file: &mut linux_perf_data::PerfFile,
) {
    loop {
        let (it, pf) = (&mut *record_iter, &mut *perf_file);
        let next = guard(move || it.next_record(pf));
        let rec = match next {
            None => {
                b.t.stats.warnings.push(format!(
                    "stopped reading at malformed data after {} records; the analysis covers the part before it",
                    b.t.stats.records
                ));
                break;
            }
            Some(Ok(Some(r))) => r,
            Some(Ok(None)) => break,
            Some(Err(err)) => {
                b.t.stats.warnings.push(format!(
                    "stopped reading at a corrupt record after {} records ({err}); the analysis covers the part before it",
                    b.t.stats.records
                ));
                break;
            }
        };
        b.t.stats.records += 1;
        if let PerfFileRecord::EventRecord { attr_index, record } = rec {
            let body = record.data.as_slice();
            let rec = Record {
                ty: record.record_type.0,
                misc: record.misc,
                body: &body,
            };
            b.on_record(ctx, attr_index, rec);
        }
    }
}

/// What each attribute's records mean and where their fields lie.
fn event_kinds(
    b: &mut Builder,
    perf_file: &linux_perf_data::PerfFile,
    e: Endian,
    endian: Endianness,
) -> Ctx {
    let tracing = perf_file
        .feature_section_data(Feature::TRACING_DATA)
        .map(<[u8]>::to_vec);
    let descs: &[AttributeDescription] = perf_file.event_attributes();
    let mut kinds = Vec::with_capacity(descs.len());
    let mut layouts = Vec::with_capacity(descs.len());
    let mut parse_infos = Vec::with_capacity(descs.len());
    let mut cpu_attr = None;
    for (i, d) in descs.iter().enumerate() {
        let a = &d.attr;
        let config = match a.type_ {
            PerfEventType::Tracepoint(id) => id,
            _ => 0,
        };
        let name = d
            .name
            .clone()
            .unwrap_or_else(|| fallback_name(a.type_, config));
        layouts.push((
            Layout::new(
                a.sample_format.bits(),
                a.read_format.bits(),
                a.flags
                    .contains(linux_perf_data::linux_perf_event_reader::AttrFlags::SAMPLE_ID_ALL),
            ),
            d.event_ids.clone(),
        ));
        parse_infos.push(RecordParseInfo::new(a, endian));
        let mut kind = classify_attr(b, &name, a.type_, tracing.as_deref());
        if matches!(kind, AttrKind::Cpu) {
            if cpu_attr.is_none() {
                cpu_attr = Some(i);
                // `cpu-clock/freq=1000/` (slowlab record's spelling) is `cpu-clock`.
                let event = name.split('/').next().unwrap_or(&name);
                b.t.meta.sample_event = Some(event.to_string());
                if let SamplingPolicy::Frequency(f) = a.sampling_policy {
                    b.t.meta.sample_freq = Some(f);
                }
            } else {
                // Only the first sampling event feeds the CPU samples.
                kind = AttrKind::Other(b.s(&name));
            }
        }
        kinds.push(kind);
        b.t.meta.events.push(name);
    }
    Ctx {
        e,
        attrs: AttrOf::new(layouts),
        parse_infos,
        kinds,
    }
}

/// Warnings from the counts, the time range, build ids.
fn finish(mut b: Builder) -> Trace {
    b.flush();
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

    if b.foreign {
        for m in &mut b.t.modules {
            m.symbol_error = Some("recorded on another architecture".into());
        }
    }
    let t = std::mem::take(&mut b.t);
    // The interning tables: tens of megabytes on a big trace.
    crate::drop_later(b);
    t
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

    /// Callchain bytes (little-endian) for user addresses, innermost first.
    fn chain(addrs: &[u64]) -> Vec<u8> {
        let mut v = PERF_CONTEXT_USER.to_le_bytes().to_vec();
        for a in addrs {
            v.extend_from_slice(&a.to_le_bytes());
        }
        v
    }

    #[test]
    fn stacks_are_interned_once_however_they_are_reached() {
        let mut b = Builder::new();
        b.on_mmap(7, 0x1000, 0x10000, 0, "/bin/app", false);
        b.on_mmap(8, 0x5000, 0x10000, 0, "/bin/app", false);
        let e = Endian::default();
        let stack = |b: &mut Builder, pid, addrs: &[u64]| {
            b.stack(e, pid, Some(&chain(addrs)), None, false).unwrap()
        };
        // A deep new chain, then chains that share its outer part and leave
        // it at different depths (pending children become indexed), the
        // same chain again (chain cache), and the same code in another
        // process at another load address (same frames, same nodes).
        let deep = stack(&mut b, 7, &[0x1100, 0x1200, 0x1300, 0x1400, 0x1500, 0x1600]);
        let fork_mid = stack(&mut b, 7, &[0x1900, 0x1300, 0x1400, 0x1500, 0x1600]);
        let fork_top = stack(&mut b, 7, &[0x1800, 0x1600]);
        let again = stack(&mut b, 7, &[0x1100, 0x1200, 0x1300, 0x1400, 0x1500, 0x1600]);
        let moved = stack(&mut b, 8, &[0x5100, 0x5200, 0x5300, 0x5400, 0x5500, 0x5600]);
        let leaf_only = stack(&mut b, 7, &[0x1700]);
        assert_eq!(deep, again);
        assert_eq!(deep, moved);
        assert_ne!(deep, fork_mid);
        let t = &b.t;
        // Depths are positions from the root.
        assert_eq!(t.stacks[deep.ix()].depth, 5);
        assert_eq!(t.stacks[fork_mid.ix()].depth, 4);
        assert_eq!(t.stacks[fork_top.ix()].depth, 1);
        assert_eq!(t.stacks[leaf_only.ix()].depth, 0);
        // Shared callers share nodes: fork_mid's parent is deep's
        // grandparent (the node of 0x1300's call site).
        let parent = |n: StackIdx| t.stacks[n.ix()].parent.unwrap();
        assert_eq!(parent(fork_mid), parent(parent(deep)));
        assert_eq!(
            parent(fork_top),
            parent(parent(parent(parent(parent(deep)))))
        );
        // No (parent, frame) pair twice: 6 + 1 + 1 + 1 nodes.
        let mut seen = std::collections::HashSet::new();
        for n in &t.stacks {
            assert!(seen.insert((n.parent, n.frame)), "duplicate node");
        }
        assert_eq!(t.stacks.len(), 9);
    }

    #[test]
    fn the_kernel_build_id_is_read_from_the_header() {
        let fixture = |name: &str| {
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
            std::fs::read(dir.join(name)).unwrap()
        };
        assert_eq!(
            kernel_build_id(&fixture("sched.perfdata")).as_deref(),
            Some("48dc540c8b76393804ca8088dbfa7d42911a9444")
        );
        // User binaries only; pipe mode has no build-id table; not perf.data.
        assert_eq!(kernel_build_id(&fixture("hot-fp.perfdata")), None);
        assert_eq!(kernel_build_id(&fixture("hot-pipe.perfdata")), None);
        assert_eq!(kernel_build_id(b"PERFILE2 and then garbage"), None);
    }

    #[test]
    fn synthesized_forks_and_comms_at_time_zero_have_no_start() {
        let mut b = Builder::new();
        // perf's records for a shell that ran before the recording began…
        b.on_fork(100, 1, 100, 1, 0);
        b.on_comm(100, 100, "sh", true, 0);
        // …and for a child it forks while recording.
        b.on_fork(101, 100, 101, 100, 5_000);
        b.on_exit(100, 100, 9_000);
        let sh = &b.t.processes[b.pid_map[&100].ix()];
        assert_eq!(
            (sh.start_ns, sh.exec_ns, sh.end_ns),
            (None, None, Some(9_000))
        );
        let child = &b.t.processes[b.pid_map[&101].ix()];
        assert_eq!(child.start_ns, Some(5_000));
        assert_eq!(child.ppid, Some(100));
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
