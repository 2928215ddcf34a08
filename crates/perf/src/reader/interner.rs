//! Frames and stack nodes, apart from the decoding: each CPU sample's and
//! event's stack, as frame keys and caller chains found by the `Builder`
//! (see `stacks`), becomes frames (see `frames`) and stack nodes, each
//! unique (caller, frame) pair stored once; each CPU sample gets its stack
//! in the sample columns, in record order (the `Builder` makes the others).
//!
//! The work comes in [`Work`] batches, and the [`Interner`] can take them on
//! a thread of its own ([`Sink::Thread`]): interning is most of a big
//! trace's record pass, so it then runs beside the decoding (which also
//! makes the frame keys and finds caller chains seen before) instead of
//! after it, on a second core. Run inline ([`Sink::Inline`]) or on its
//! thread, it does the same steps in the same order, so the trace is the
//! same (`SLOWLAB_THREADS=1` must give identical results).
//!
//! Interning is bound by cache misses in tables of megabytes, not by
//! instructions: see `frames` (a group's keys looked up together),
//! `intern_chain` (new nodes looked up only when needed) and `samples`
//! (CPU samples in groups, so that their table probes wait for memory
//! together). It does not decode records nor name frames.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};

use slowlab_model::trace::{FrameIdx, ModuleIdx, StackIdx, StackNode};

use super::frames::{FrameIds, FrameKey};
use crate::intern::{by_square_root, huge_pages, Bits, IdTable};

/// Stacks whose table probes are issued together (here and in `stacks`).
pub(super) const GROUP: usize = 16;

/// Samples and events sent to the interner's thread at a time.
pub(super) const WORK_ITEMS: usize = 512;

/// Work batches in flight to the interner's thread: bounds the memory
/// they take when the interner falls behind.
const WORK_IN_FLIGHT: usize = 8;

/// A frame as the interner gets it: its index, with the top bit set for a
/// frame outside every mapping (counted when a node is made for it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct WorkFrame(u32);

const UNMAPPED: u32 = 1 << 31;

impl WorkFrame {
    /// Frame indices stay below 2^31 (a frame table of 2^31 frames would
    /// take 32 GB).
    pub(super) fn new(frame: FrameIdx, unmapped: bool) -> Self {
        debug_assert!(frame.0 < UNMAPPED);
        WorkFrame(frame.0 | if unmapped { UNMAPPED } else { 0 })
    }

    fn frame(self) -> FrameIdx {
        FrameIdx(self.0 & !UNMAPPED)
    }

    fn unmapped(self) -> bool {
        self.0 & UNMAPPED != 0
    }
}

/// Where a stack's callers (all its frames but the innermost) come from.
#[derive(Clone, Copy, Debug)]
pub(super) enum Callers {
    /// None: the innermost frame is the only one (or there is none).
    None,
    /// A caller chain interned before, by its number.
    Known(u32),
    /// A chain seen for the first time: `Work::keys[start..][..len]`,
    /// outermost first; its node becomes the next chain number.
    New { start: u32, len: u32 },
    /// A chain whose hash is a known chain's: interned, not remembered.
    Uncached { start: u32, len: u32 },
}

impl Callers {
    /// Where a new chain's keys are in `Work::keys` (and its frames in
    /// `Work::frames`); empty for no new chain.
    fn new_keys(self) -> std::ops::Range<usize> {
        match self {
            Callers::New { start, len } | Callers::Uncached { start, len } => {
                start as usize..(start + len) as usize
            }
            Callers::None | Callers::Known(_) => 0..0,
        }
    }
}

/// A CPU sample's or an event's stack, waiting to be interned. (A CPU
/// sample's other columns are the `Builder`'s: see `stacks::Pending`.)
#[derive(Clone, Copy, Debug)]
pub(super) struct Item {
    /// An event's stack (given back in order), not a CPU sample's.
    pub(super) event: bool,
    /// The innermost frame; `None` for no stack at all. Made by the
    /// interner from `Work::leaves`.
    pub(super) leaf: Option<WorkFrame>,
    pub(super) callers: Callers,
}

/// Samples and events to intern, in record order, with the key of each
/// one's innermost frame and the keys of the new caller chains they bring
/// (in a first pass of two: keys alone).
#[derive(Default)]
pub(super) struct Work {
    pub(super) items: Vec<Item>,
    /// Per item: the key of its innermost frame.
    pub(super) leaves: Vec<Option<FrameKey>>,
    pub(super) keys: Vec<FrameKey>,
    /// `keys` as frames (made by the interner).
    frames: Vec<WorkFrame>,
}

impl Work {
    fn clear(&mut self) {
        self.items.clear();
        self.leaves.clear();
        self.keys.clear();
        self.frames.clear();
    }
}

/// The frame and node tables and what they produce.
pub(super) struct Interner {
    pub(super) frames: FrameIds,
    /// The first pass of two: frames only, no nodes nor samples.
    frames_only: bool,
    /// caller node << 32 | frame → node. A chain of new nodes enters it
    /// lazily, see `pending_child`.
    stack_map: IdTable<u64>,
    /// The nodes whose one child (the node after them, created in the same
    /// chain of new nodes) is not yet in `stack_map`.
    pending_child: Bits,
    /// Per caller chain number: its node.
    chain_nodes: Vec<StackIdx>,
    /// The stack nodes, each CPU sample's stack and each event's, in the
    /// order they came.
    pub(super) stacks: Vec<StackNode>,
    pub(super) sample_stacks: Vec<Option<StackIdx>>,
    pub(super) event_stacks: Vec<Option<StackIdx>>,
    pub(super) unmapped_frames: u64,
    pub(super) samples_without_stack: u64,
    /// How many nodes and frames there are, after each batch (read by the
    /// decoding thread to project the trace's memory, see `driver`).
    counts: Arc<Counts>,
}

/// Stack nodes and frames made so far.
#[derive(Default)]
pub(super) struct Counts {
    nodes: AtomicUsize,
    frames: AtomicUsize,
}

impl Counts {
    /// (nodes, frames).
    pub(super) fn get(&self) -> (usize, usize) {
        (
            self.nodes.load(Ordering::Relaxed),
            self.frames.load(Ordering::Relaxed),
        )
    }
}

/// `stack_map`'s key of the node of `frame` under `parent`.
#[inline]
fn node_key(parent: Option<StackIdx>, frame: FrameIdx) -> u64 {
    (parent.map_or(u32::MAX, |p| p.0) as u64) << 32 | frame.0 as u64
}

impl Interner {
    /// An interner whose frames outside every mapping are in `unknown`.
    pub(super) fn new(unknown: ModuleIdx) -> Self {
        Interner {
            frames: FrameIds::new(unknown),
            frames_only: false,
            stack_map: IdTable::default(),
            pending_child: Bits::default(),
            chain_nodes: Vec::new(),
            stacks: Vec::new(),
            sample_stacks: Vec::new(),
            event_stacks: Vec::new(),
            unmapped_frames: 0,
            samples_without_stack: 0,
            counts: Arc::default(),
        }
    }

    /// Sizes the tables for `samples` samples in `bytes` of records (see
    /// [`by_square_root`]); in a first pass of two (`frames_only`), the
    /// frame table alone. Vectors get room to spare (untouched memory costs
    /// nothing); the hash tables, whose every slot is written when made,
    /// less: `stack_map` holds only the nodes that something was looked up
    /// under (337 thousand of 382 thousand on a 96 MB build trace: 97 per
    /// square root of its words, 115 on a 2.28 GB one).
    ///
    /// Stacks made of one frame per function (the second pass of a big
    /// trace) have fewer nodes: 313 thousand instead of 1.7 million on a
    /// 1.23 GB build trace, 251 thousand of them looked up (20 per square
    /// root of its words; 18 on a 2.28 GB one).
    pub(super) fn reserve(&mut self, samples: usize, bytes: usize, frames_only: bool) {
        self.frames.reserve(bytes);
        self.frames_only = frames_only;
        if frames_only {
            return;
        }
        let per_root = if self.frames.fixed() { 32 } else { 160 };
        let looked_up = by_square_root(bytes / 8, per_root);
        self.stacks.reserve(looked_up * 2);
        self.pending_child.reserve(looked_up * 2);
        // Read at random while interning (parents): huge pages.
        huge_pages(&self.stacks);
        self.chain_nodes.reserve(by_square_root(samples, 64));
        self.stack_map = IdTable::with_capacity(looked_up);
        self.sample_stacks = Vec::with_capacity(samples);
        huge_pages(&self.sample_stacks);
    }

    /// Makes frames of a batch's keys, in the order the one-threaded
    /// reader always made them (per group of [`GROUP`] items, as the
    /// `Builder` sends them: the new chains' keys, then the innermost
    /// frames), so that frames are numbered the same however the work is
    /// split. A key's lookup misses the cache; across a group the lookups
    /// do not depend on each other, so the group's slots are touched
    /// first, and its misses waited for together.
    fn frames(&mut self, work: &mut Work) {
        let Work {
            items,
            leaves,
            keys,
            frames,
        } = work;
        if self.frames_only {
            // Keys alone (in the order sent), their slots touched a group
            // of 256 at a time.
            for group in keys.chunks(GROUP * 16) {
                let touched = group.iter().fold(0, |t, k| t ^ self.frames.touch(k));
                std::hint::black_box(touched);
                for &k in group {
                    self.frames.frame(k);
                }
            }
            return;
        }
        for (group, group_leaves) in items.chunks_mut(GROUP).zip(leaves.chunks(GROUP)) {
            let mut touched = 0u32;
            for (p, leaf) in group.iter().zip(group_leaves) {
                for k in &keys[p.callers.new_keys()] {
                    touched ^= self.frames.touch(k);
                }
                if let Some(k) = leaf {
                    touched ^= self.frames.touch(k);
                }
            }
            std::hint::black_box(touched);
            for p in group.iter() {
                let range = p.callers.new_keys();
                debug_assert!(range.is_empty() || range.start == frames.len());
                frames.extend(keys[range].iter().map(|&k| self.frames.frame(k)));
            }
            for (p, leaf) in group.iter_mut().zip(group_leaves) {
                p.leaf = leaf.map(|k| self.frames.frame(k));
            }
        }
    }

    /// Interns a batch, in order: its frames, then runs of CPU samples in
    /// groups, each event's stack where it comes.
    pub(super) fn take(&mut self, work: &mut Work) {
        self.intern(work);
        self.counts
            .nodes
            .store(self.stacks.len(), Ordering::Relaxed);
        self.counts
            .frames
            .store(self.frames.len(), Ordering::Relaxed);
    }

    fn intern(&mut self, work: &mut Work) {
        self.frames(work);
        if self.frames_only {
            return;
        }
        let mut run = 0;
        while run < work.items.len() {
            if work.items[run].event {
                let stack = self.stack(&work.items[run], &work.frames);
                self.event_stacks.push(stack);
                run += 1;
                continue;
            }
            let end = work.items[run..]
                .iter()
                .take(GROUP)
                .position(|p| p.event)
                .map_or((run + GROUP).min(work.items.len()), |n| run + n);
            self.samples(&work.items[run..end], &work.frames);
            run = end;
        }
    }

    /// Frees the tables (before the trace's frames are made: the pass's
    /// memory peaks there).
    pub(super) fn free_tables(&mut self) {
        drop(std::mem::take(&mut self.stack_map));
        drop(std::mem::take(&mut self.chain_nodes));
        drop(std::mem::take(&mut self.pending_child));
    }

    /// The innermost node of a stack, or `None` for no frames.
    fn stack(&mut self, p: &Item, frames: &[WorkFrame]) -> Option<StackIdx> {
        let leaf = p.leaf?;
        let parent = self.callers(p.callers, frames);
        Some(self.intern_chain(parent, &[leaf]))
    }

    /// The node of a stack's callers.
    fn callers(&mut self, callers: Callers, frames: &[WorkFrame]) -> Option<StackIdx> {
        match callers {
            Callers::None => None,
            Callers::Known(n) => self.chain_nodes.get(n as usize).copied(),
            Callers::New { .. } => {
                let node = self.intern_chain(None, &frames[callers.new_keys()]);
                self.chain_nodes.push(node);
                Some(node)
            }
            Callers::Uncached { .. } => Some(self.intern_chain(None, &frames[callers.new_keys()])),
        }
    }

    /// Interns `frames` (outermost first) under `parent`; returns the
    /// innermost node. `frames` must not be empty.
    ///
    /// The node lookups depend on each other (a node's key holds its
    /// parent); but once a node is new, every node under it is new, and
    /// those are not looked up at all, nor entered in `stack_map` until
    /// something under their parent is looked up (`pending_child`): most
    /// chains are never walked again.
    fn intern_chain(&mut self, mut parent: Option<StackIdx>, frames: &[WorkFrame]) -> StackIdx {
        let mut fresh = false;
        for &f in frames {
            parent = Some(self.node(parent, f, &mut fresh));
        }
        // `frames` is not empty, so the loop set `parent`.
        parent.unwrap_or(StackIdx(0))
    }

    /// The node of frame `f` under `parent`, created if new. `fresh`:
    /// `parent` was created by this chain just before (so this node is new
    /// too, and not looked up); set when the node is new.
    #[inline]
    fn node(&mut self, parent: Option<StackIdx>, f: WorkFrame, fresh: &mut bool) -> StackIdx {
        let new = StackIdx(self.stacks.len() as u32);
        let node = match parent {
            // Under a new node (created just before, so at `new - 1`): new
            // too, and left out of `stack_map`.
            Some(p) if *fresh => {
                debug_assert_eq!(p.0 + 1, new.0);
                self.pending_child.set(p.ix());
                new
            }
            _ => {
                if let Some(p) = parent {
                    self.index_pending_child(p);
                }
                let (node, inserted) = self
                    .stack_map
                    .get_or_insert_with(node_key(parent, f.frame()), || new.0);
                *fresh = inserted;
                StackIdx(node)
            }
        };
        if node == new {
            if f.unmapped() {
                self.unmapped_frames += 1;
            }
            self.stacks.push(StackNode::new(parent, f.frame()));
        }
        node
    }

    /// Interns a group of CPU samples' stacks (at most [`GROUP`]) and
    /// appends them to `sample_stacks`, in order. A sample's node lookup depends on
    /// its callers' node and misses the cache; across the group the
    /// lookups do not depend on each other, so the callers are found for
    /// all samples first, touching the table slots the lookups need, and
    /// the misses of a group are waited for together.
    fn samples(&mut self, group: &[Item], frames: &[WorkFrame]) {
        debug_assert!(group.len() <= GROUP);
        let mut touched = 0u32;
        let mut parents = [None; GROUP];
        for (parent, p) in parents.iter_mut().zip(group) {
            if let Some(leaf) = p.leaf {
                *parent = self.callers(p.callers, frames);
                touched ^= self.stack_map.touch(&node_key(*parent, leaf.frame()));
            }
        }
        std::hint::black_box(touched);
        for (p, parent) in group.iter().zip(parents) {
            let stack = p.leaf.map(|leaf| {
                let mut fresh = false;
                self.node(parent, leaf, &mut fresh)
            });
            if stack.is_none() {
                self.samples_without_stack += 1;
            }
            self.sample_stacks.push(stack);
        }
    }

    /// Puts the child of `node` that a new chain left out of `stack_map`
    /// (the node just after it) into it, before anything under `node` is
    /// looked up there.
    #[inline]
    fn index_pending_child(&mut self, node: StackIdx) {
        if self.pending_child.take(node.ix()) {
            let child = node.0 + 1;
            let f = self.stacks[child as usize].frame;
            self.stack_map.insert_new(node_key(Some(node), f), child);
        }
    }
}

/// Where the `Builder` sends its work: the interner itself, or the thread
/// it runs on.
pub(super) enum Sink {
    Inline(Box<Interner>),
    Thread {
        /// The interner's counts (it is on the other thread).
        counts: Arc<Counts>,
        work: mpsc::SyncSender<Work>,
        /// Batches the interner is done with, emptied, to be filled again
        /// (a new batch's buffers would be fresh pages from the kernel,
        /// zeroed: hundreds of megabytes over a big trace).
        spare: mpsc::Receiver<Work>,
        done: std::thread::JoinHandle<Interner>,
    },
    /// Between `Builder::finish_interning` and the end.
    Gone,
}

impl Sink {
    /// Moves `interner` to a thread of its own, where `first` is done
    /// before any work.
    pub(super) fn spawn(
        mut interner: Interner,
        first: impl FnOnce(&mut Interner) + Send + 'static,
    ) -> Sink {
        let counts = interner.counts.clone();
        let (work_tx, work_rx) = mpsc::sync_channel::<Work>(WORK_IN_FLIGHT);
        let (spare_tx, spare_rx) = mpsc::channel();
        let done = std::thread::spawn(move || {
            first(&mut interner);
            for mut work in work_rx {
                interner.take(&mut work);
                work.clear();
                let _ = spare_tx.send(work);
            }
            interner
        });
        Sink::Thread {
            counts,
            work: work_tx,
            spare: spare_rx,
            done,
        }
    }

    /// The stack nodes and frames made so far (on its thread: as of the
    /// last batch it finished).
    pub(super) fn counts(&self) -> (usize, usize) {
        match self {
            Sink::Inline(i) => i.counts.get(),
            Sink::Thread { counts, .. } => counts.get(),
            Sink::Gone => (0, 0),
        }
    }

    /// Interns `work` (on the thread: sends it there); returns an empty
    /// batch to fill next.
    pub(super) fn send(&mut self, mut work: Work) -> Work {
        match self {
            Sink::Inline(i) => {
                i.take(&mut work);
                work.clear();
                work
            }
            Sink::Thread {
                work: tx, spare, ..
            } => {
                // The thread ends only when this side hangs up, or by a
                // panic, which `finish` reports.
                let _ = tx.send(work);
                spare.try_recv().unwrap_or_default()
            }
            Sink::Gone => Work::default(),
        }
    }

    /// The interner, after all its work (waits for its thread); `None` when
    /// that thread panicked.
    pub(super) fn finish(self) -> Option<Interner> {
        match self {
            Sink::Inline(i) => Some(*i),
            Sink::Thread { work, done, .. } => {
                drop(work);
                done.join().ok()
            }
            Sink::Gone => None,
        }
    }
}
