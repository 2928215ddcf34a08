//! Stack interning, apart from the decoding: the frame keys of each CPU
//! sample's and event's callchain (computed by the `Builder` as it decodes
//! the records) become frames and stack nodes, each unique address and each
//! unique (caller, frame) pair stored once, and CPU samples become rows of
//! the sample columns, in record order.
//!
//! The work comes in [`Work`] batches, and the [`Interner`] can take them on
//! a thread of its own ([`Sink::Thread`]): interning is most of a big
//! trace's record pass, so it then runs beside the decoding instead of
//! after it, on a second core. Run inline ([`Sink::Inline`]) or on its
//! thread, it does the same steps in the same order, so the trace is the
//! same (`SLOWLAB_THREADS=1` must give identical results).
//!
//! Interning is bound by cache misses in tables of megabytes, not by
//! instructions: see `callers` (a cache of whole caller chains),
//! `intern_chain` (new nodes looked up only when needed) and `samples`
//! (CPU samples in groups, so that their table probes wait for memory
//! together). It does not decode records nor name frames.

use std::sync::mpsc;

use slowlab_model::trace::{Frame, FrameIdx, ModuleIdx, Samples, StackIdx, StackNode};

use super::stacks::{FrameKey, Pending};
use super::NO_FUNC;
use crate::intern::{huge_pages, Bits, IdTable};

/// CPU samples whose table probes are issued together.
const GROUP: usize = 16;

/// Samples and events sent to the interner's thread at a time.
pub(super) const WORK_ITEMS: usize = 512;

/// Work batches in flight to the interner's thread: bounds the memory
/// they take when the interner falls behind.
const WORK_IN_FLIGHT: usize = 8;

/// Samples and events to intern, in record order; the frame keys of item
/// `i` are `keys[items[i].start..][..items[i].len]`, innermost first.
#[derive(Default)]
pub(super) struct Work {
    pub(super) items: Vec<Pending>,
    pub(super) keys: Vec<FrameKey>,
}

impl Work {
    fn clear(&mut self) {
        self.items.clear();
        self.keys.clear();
    }
}

/// A caller chain seen before: a second, independent hash of its frame
/// keys and its length (to tell it from another chain with the same cache
/// key), and its node.
struct Chain {
    check: u64,
    len: u32,
    node: StackIdx,
}

/// The interning tables and what they produce.
pub(super) struct Interner {
    /// (module, address) → frame. During the pass a frame is only its
    /// entry here (the key is all a frame is before symbolization);
    /// [`Interner::frames`] makes the trace's frames from it at the end.
    frame_map: IdTable<FrameKey>,
    /// caller node << 32 | frame → node. A chain of new nodes enters it
    /// lazily, see `pending_child`.
    stack_map: IdTable<u64>,
    /// The nodes whose one child (the node after them, created in the same
    /// chain of new nodes) is not yet in `stack_map`.
    pending_child: Bits,
    /// Hash of a caller chain's frame keys → index into `chains`.
    chain_cache: IdTable<u64>,
    chains: Vec<Chain>,
    scratch_frames: Vec<FrameIdx>,
    unknown_module: ModuleIdx,
    /// Per module: a frame in it was seen.
    seen_module: Vec<bool>,
    /// Modules whose first frame was seen since the owner last looked.
    pub(super) new_modules: Vec<ModuleIdx>,
    /// The stack nodes, the CPU samples, and each event's stack, in the
    /// order the events came.
    pub(super) stacks: Vec<StackNode>,
    pub(super) samples: Samples,
    pub(super) event_stacks: Vec<Option<StackIdx>>,
    pub(super) unmapped_frames: u64,
    pub(super) samples_without_stack: u64,
}

/// `stack_map`'s key of the node of `frame` under `parent`.
#[inline]
fn node_key(parent: Option<StackIdx>, frame: FrameIdx) -> u64 {
    (parent.map_or(u32::MAX, |p| p.0) as u64) << 32 | frame.0 as u64
}

impl Interner {
    /// Empty tables for frames of `unknown_module` counted as unmapped.
    pub(super) fn new(unknown_module: ModuleIdx) -> Self {
        Interner {
            frame_map: IdTable::default(),
            stack_map: IdTable::default(),
            pending_child: Bits::default(),
            chain_cache: IdTable::default(),
            chains: Vec::new(),
            scratch_frames: Vec::new(),
            unknown_module,
            seen_module: Vec::new(),
            new_modules: Vec::new(),
            stacks: Vec::new(),
            samples: Samples::default(),
            event_stacks: Vec::new(),
            unmapped_frames: 0,
            samples_without_stack: 0,
        }
    }

    /// Sizes the tables for `samples` samples in `bytes` of records. The
    /// ratios are those of system-wide traces of builds (frame-pointer
    /// stacks, many of them deep), rounded up: growing a table later copies
    /// it. Vectors get room to spare (untouched memory costs nothing); the
    /// hash tables, whose every slot is written when made, do not. Distinct
    /// frames grow slower than the trace (the code that runs is finite: one
    /// frame per 12 words on 96 MB of a build, per 21 on 1.17 GB), so the
    /// frame table gets room for one per 16 words and grows (by copying) on
    /// a small trace rather than holding hundreds of megabytes of empty
    /// slots on a big one. `stack_map` holds only the nodes that something
    /// was looked up under (725,012 of 3.8 M on the 96 MB trace, about one
    /// per 16 words).
    pub(super) fn reserve(&mut self, samples: usize, bytes: usize) {
        let words = bytes / 8;
        self.stacks.reserve(words / 2);
        self.pending_child.reserve(words / 2);
        // Read at random while interning (parents): huge pages.
        huge_pages(&self.stacks);
        self.chains.reserve(samples / 3);
        self.chain_cache = IdTable::with_capacity(samples / 3);
        self.frame_map = IdTable::with_capacity(words / 16);
        self.stack_map = IdTable::with_capacity(words / 16);
        self.samples = Samples {
            time_ns: Vec::with_capacity(samples),
            thread: Vec::with_capacity(samples),
            cpu: Vec::with_capacity(samples),
            stack: Vec::with_capacity(samples),
            period: Vec::with_capacity(samples),
        };
    }

    /// Interns a batch, in order: runs of CPU samples in groups, each
    /// event's stack where it comes.
    pub(super) fn take(&mut self, work: &Work) {
        let mut run = 0;
        while run < work.items.len() {
            if work.items[run].event {
                let p = &work.items[run];
                let stack = self.stack(&work.keys[p.keys()], p.hashes);
                self.event_stacks.push(stack);
                run += 1;
                continue;
            }
            let end = work.items[run..]
                .iter()
                .take(GROUP)
                .position(|p| p.event)
                .map_or((run + GROUP).min(work.items.len()), |n| run + n);
            self.samples(&work.items[run..end], &work.keys);
            run = end;
        }
    }

    /// The trace's frames, unnamed, made from the frame table, which is
    /// emptied (call once, after the last batch).
    pub(super) fn frames(&mut self) -> Vec<Frame> {
        let table = std::mem::take(&mut self.frame_map);
        let mut frames = vec![
            Frame {
                module: ModuleIdx(0),
                address: 0,
                function: NO_FUNC,
                kernel: false,
            };
            table.len()
        ];
        for (key, id) in table.entries() {
            frames[id as usize] = Frame {
                module: key.module(),
                address: key.rel,
                function: NO_FUNC,
                kernel: key.kernel(),
            };
        }
        frames
    }

    /// Frees the stack tables (before the frames are made from theirs:
    /// the pass's memory peaks there).
    pub(super) fn free_stack_tables(&mut self) {
        drop(std::mem::take(&mut self.stack_map));
        drop(std::mem::take(&mut self.chain_cache));
        drop(std::mem::take(&mut self.chains));
        drop(std::mem::take(&mut self.pending_child));
    }

    /// The frame of a key, created on first use.
    #[inline]
    fn intern_frame(&mut self, key: FrameKey) -> FrameIdx {
        let next = FrameIdx(self.frame_map.len() as u32);
        let (f, new) = self.frame_map.get_or_insert_with(key, || next.0);
        if new {
            // The first frame in a module: its symbols are needed.
            let module = key.module();
            if self.seen_module.len() <= module.ix() {
                self.seen_module.resize(module.ix() + 1, false);
            }
            if !self.seen_module[module.ix()] {
                self.seen_module[module.ix()] = true;
                self.new_modules.push(module);
            }
        }
        FrameIdx(f)
    }

    /// The innermost node of a stack (`keys` innermost first, `hashes`
    /// those of its callers), or `None` for no frames.
    pub(super) fn stack(&mut self, keys: &[FrameKey], hashes: (u64, u64)) -> Option<StackIdx> {
        let (&leaf, callers) = keys.split_first()?;
        let parent = self.callers(callers, hashes);
        Some(self.intern_chain(parent, &[leaf]))
    }

    /// The node of a sample's callers (innermost first), from the chain
    /// cache or by interning them: a build has tens of thousands of
    /// distinct caller chains for over a hundred thousand samples, and the
    /// same code in another process (another load address) has the same
    /// keys. Only a chain not seen before is interned frame by frame.
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
            return Some(self.intern_chain(None, callers));
        }
        let node = self.intern_chain(None, callers);
        self.chains.push(Chain {
            check,
            len: callers.len() as u32,
            node,
        });
        Some(node)
    }

    /// Interns `keys` (innermost first) under `parent`; returns the
    /// innermost node. `keys` must not be empty.
    ///
    /// Memory latency is the cost here (tables of megabytes, probed at
    /// random), so the frame table's slots for all the keys are touched
    /// first, together, and the probes that follow find them in cache. The
    /// node lookups depend on each other (a node's key holds its parent);
    /// but once a node is new, every node under it is new, and those are
    /// not looked up at all, nor entered in `stack_map` until something
    /// under their parent is looked up (`pending_child`): most chains are
    /// never walked again.
    fn intern_chain(&mut self, mut parent: Option<StackIdx>, keys: &[FrameKey]) -> StackIdx {
        let mut touched = 0u32;
        for k in keys {
            touched ^= self.frame_map.touch(k);
        }
        std::hint::black_box(touched);
        let mut frames = std::mem::take(&mut self.scratch_frames);
        frames.clear();
        for &k in keys.iter().rev() {
            frames.push(self.intern_frame(k));
        }
        let mut fresh = false;
        for (&f, &k) in frames.iter().zip(keys.iter().rev()) {
            let node = self.node(parent, f, k, &mut fresh);
            parent = Some(node);
        }
        self.scratch_frames = frames;
        // `keys` is not empty, so the loop set `parent`.
        parent.unwrap_or(StackIdx(0))
    }

    /// The node of frame `f` (key `k`) under `parent`, created if new.
    /// `fresh`: `parent` was created by this chain just before (so this
    /// node is new too, and not looked up); set when the node is new.
    #[inline]
    fn node(
        &mut self,
        parent: Option<StackIdx>,
        f: FrameIdx,
        k: FrameKey,
        fresh: &mut bool,
    ) -> StackIdx {
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
                    .get_or_insert_with(node_key(parent, f), || new.0);
                *fresh = inserted;
                StackIdx(node)
            }
        };
        if node == new {
            if k.module() == self.unknown_module {
                self.unmapped_frames += 1;
            }
            self.stacks.push(StackNode::new(parent, f));
        }
        node
    }

    /// Interns a group of CPU samples (at most [`GROUP`]) and appends them
    /// to the sample columns, in order. The table probes of one sample
    /// depend on each other (callers, then the innermost frame, then its
    /// node) and each misses the cache; across the group they do not, so
    /// each step is first taken for all samples, touching the table slots
    /// the next step needs, and the misses of a group are waited for
    /// together.
    fn samples(&mut self, group: &[Pending], keys: &[FrameKey]) {
        debug_assert!(group.len() <= GROUP);
        let mut touched = 0u32;
        for p in group {
            if p.len > 1 {
                touched ^= self.chain_cache.touch(&p.hashes.0);
            }
        }
        let mut parents = [None; GROUP];
        for (parent, p) in parents.iter_mut().zip(group) {
            if let Some((leaf, callers)) = keys[p.keys()].split_first() {
                *parent = self.callers(callers, p.hashes);
                touched ^= self.frame_map.touch(leaf);
            }
        }
        let mut leaves = [FrameIdx(0); GROUP];
        for ((f, p), &parent) in leaves.iter_mut().zip(group).zip(&parents) {
            if let Some(&leaf) = keys[p.keys()].first() {
                *f = self.intern_frame(leaf);
                touched ^= self.stack_map.touch(&node_key(parent, *f));
            }
        }
        std::hint::black_box(touched);
        for ((p, parent), f) in group.iter().zip(parents).zip(leaves) {
            let stack = keys[p.keys()].first().map(|&leaf| {
                let mut fresh = false;
                self.node(parent, f, leaf, &mut fresh)
            });
            if stack.is_none() {
                self.samples_without_stack += 1;
            }
            let smp = &mut self.samples;
            smp.time_ns.push(p.time);
            smp.thread.push(p.thread);
            smp.cpu.push(p.cpu);
            smp.stack.push(stack);
            smp.period.push(p.period);
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
            self.stack_map
                .insert_new((node.0 as u64) << 32 | f.0 as u64, child);
        }
    }
}

/// Where the `Builder` sends its work: the interner itself, or the thread
/// it runs on.
pub(super) enum Sink {
    Inline(Box<Interner>),
    Thread {
        work: mpsc::SyncSender<Work>,
        /// Batches the interner is done with, emptied, to be filled again
        /// (a new batch's buffers would be fresh pages from the kernel,
        /// zeroed: hundreds of megabytes over a big trace).
        spare: mpsc::Receiver<Work>,
        /// Modules whose first frame the interner saw.
        modules: mpsc::Receiver<ModuleIdx>,
        done: std::thread::JoinHandle<Interner>,
    },
    /// Between `Builder::finish_interning` and the end.
    Gone,
}

impl Sink {
    /// Moves `interner` to a thread of its own.
    pub(super) fn spawn(mut interner: Interner) -> Sink {
        let (work_tx, work_rx) = mpsc::sync_channel::<Work>(WORK_IN_FLIGHT);
        let (spare_tx, spare_rx) = mpsc::channel();
        let (module_tx, module_rx) = mpsc::channel();
        let done = std::thread::spawn(move || {
            for mut work in work_rx {
                interner.take(&work);
                for m in interner.new_modules.drain(..) {
                    let _ = module_tx.send(m);
                }
                work.clear();
                let _ = spare_tx.send(work);
            }
            interner
        });
        Sink::Thread {
            work: work_tx,
            spare: spare_rx,
            modules: module_rx,
            done,
        }
    }

    /// Interns `work` (on the thread: sends it there); returns an empty
    /// batch to fill next.
    pub(super) fn send(&mut self, mut work: Work) -> Work {
        match self {
            Sink::Inline(i) => {
                i.take(&work);
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

    /// Modules whose first frame was interned since the last call.
    pub(super) fn new_modules(&mut self, out: &mut Vec<ModuleIdx>) {
        match self {
            Sink::Inline(i) => out.append(&mut i.new_modules),
            Sink::Thread { modules, .. } => out.extend(modules.try_iter()),
            Sink::Gone => {}
        }
    }

    /// The interner, after all its work (waits for its thread), with the
    /// modules whose first frame it saw since the last look; `None` when
    /// that thread panicked.
    pub(super) fn finish(self) -> Option<Interner> {
        match self {
            Sink::Inline(i) => Some(*i),
            Sink::Thread {
                work,
                done,
                modules,
                ..
            } => {
                drop(work);
                let mut interner = done.join().ok()?;
                interner.new_modules.extend(modules.try_iter());
                Some(interner)
            }
            Sink::Gone => None,
        }
    }
}
