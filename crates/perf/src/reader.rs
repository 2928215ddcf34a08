//! One pass over a perf.data file's records, in time order, building the
//! trace model: process and thread lifetimes (fork/comm/exec/exit), memory
//! maps per process, CPU samples as columns, decoded tracepoint events, and
//! the frame and stack tables (each unique address and each unique stack
//! prefix stored once).
//!
//! `linux-perf-data` reads the header, attributes and feature sections; the
//! records themselves come from [`crate::records`] (in place, time-ordered;
//! for a pipe-mode file, those after its leading metadata records). They
//! feed the [`Builder`], defined here; its work is split by job:
//!
//! - [`driver`]: the pass itself: header and metadata, the records in
//!   order, progress and checkpoints, the closing warnings;
//! - [`attrs`]: what each event (attribute) means, and where its
//!   tracepoint fields lie;
//! - [`decode`]: one record into the model;
//! - [`procs`]: process and thread lifetimes, memory maps, modules;
//! - [`stacks`]: callchains into frame keys and caller chains, and queued
//!   for the interner;
//! - [`interner`]: frames ([`frames`]) and stack nodes, on a thread of
//!   its own when there are two cores. Most of the work on a big trace,
//!   and bound by cache misses rather than instructions.
//!
//! It does not name functions: frames come out pointing at a placeholder
//! function, and `symbolize` fills them in. A trace too big for the memory
//! budget is read twice ([`FramePass`]): first its frames alone, to be
//! named, then its stacks with every frame of a function as one.

mod attrs;
mod decode;
mod driver;
mod frames;
mod interner;
mod procs;
mod stacks;

use slowlab_model::lifetimes::Lifetimes;
use slowlab_model::trace::{FuncIdx, ModuleIdx, StrIdx, ThreadIdx, Trace};

pub(crate) use driver::read_bytes_with;
pub use driver::{kernel_build_id, read_bytes};
use frames::FrameKey;
pub(crate) use frames::FrameMap;
use interner::{Interner, Sink, Work};
use procs::Map;
use stacks::FrameTable;
use stacks::Pending;

use crate::intern::{FxMap, Strings};

/// What the first pass of two hands to the second: its frame table, and
/// its index of the records (sorted once: the second pass reads the same
/// records in the same order).
pub(crate) struct FirstPass<'a> {
    pub(crate) frames: FrameMap,
    records: crate::records::Records<'a>,
}

/// What a pass over the records makes of their stacks.
pub(crate) enum FramePass<'a> {
    /// Every unique address is a frame; stacks and samples are made (one
    /// pass, the usual way).
    Addresses,
    /// The first of two passes: the frames only, no stack nodes nor
    /// samples; the frame table and the record index are handed back
    /// ([`FirstPass`]), for the frames to be named and grouped by function.
    FramesOnly,
    /// The second: stacks and samples, with the first pass's frame table,
    /// whose every key's id is already the one frame of its function (see
    /// [`FrameMap::by_function`]), and its index; the trace comes out
    /// without frames.
    Functions(FirstPass<'a>),
}

/// Placeholder until symbolization.
pub(crate) const NO_FUNC: FuncIdx = FuncIdx(u32::MAX);

/// The trace being built and the tables that build it. Its methods are
/// spread over this module's children, by job.
struct Builder {
    t: Trace,
    strings: Strings,
    /// The current process and thread of each pid and tid.
    lifetimes: Lifetimes,
    maps: FxMap<i32, Vec<Map>>,
    kernel_maps: Vec<Map>,
    module_by_path: FxMap<StrIdx, ModuleIdx>,
    /// Frames and caller chains, interned as the records are read.
    frame_table: FrameTable,
    /// The first pass of two: frames only (see [`FramePass::FramesOnly`]).
    frames_only: bool,
    /// Stacks queued, with where their frame keys are in `batch_keys`
    /// (turned into frames in groups: see `flush`).
    batch: Vec<(Pending, std::ops::Range<usize>)>,
    batch_keys: Vec<FrameKey>,
    /// Stacks waiting to be sent to the interner.
    work: Work,
    /// The interner (inline, or on its thread).
    sink: Sink,
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
}

impl Builder {
    fn new() -> Self {
        let mut b = Builder {
            t: Trace::default(),
            strings: Strings::default(),
            lifetimes: Lifetimes::default(),
            maps: FxMap::default(),
            kernel_maps: Vec::new(),
            module_by_path: FxMap::default(),
            frame_table: FrameTable::default(),
            frames_only: false,
            batch: Vec::new(),
            batch_keys: Vec::new(),
            work: Work::default(),
            sink: Sink::Gone,
            kernel_module: ModuleIdx(0),
            unknown_module: ModuleIdx(0),
            first_ns: u64::MAX,
            last_ns: 0,
            last_thread: None,
            build_ids: FxMap::default(),
            foreign: false,
            new_binaries: Vec::new(),
        };
        b.kernel_module = b.module("[kernel.kallsyms]");
        b.unknown_module = b.module("[unknown]");
        b.sink = Sink::Inline(Box::new(Interner::new(b.unknown_module)));
        b
    }

    fn s(&mut self, s: &str) -> StrIdx {
        self.strings.intern(&mut self.t.strings, s)
    }

    #[inline]
    fn see_time(&mut self, t: u64) {
        if t != 0 {
            self.first_ns = self.first_ns.min(t);
            self.last_ns = self.last_ns.max(t);
        }
    }
}
