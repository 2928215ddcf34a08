//! Frames and stacks: a sample's callchain becomes frame keys (module and
//! module-relative address, from the process's maps), then frames and
//! stack nodes, each unique address and each unique (caller, frame) pair
//! stored once; CPU samples are interned in batches and appended to the
//! sample columns here.
//!
//! Interning the stacks is most of the work on a big trace (a build yields
//! hundreds of thousands of distinct stack prefixes, many from frame-pointer
//! walks through code without frame pointers), and it is bound by cache
//! misses in tables of megabytes, not by instructions: see [`Builder::stack`]
//! (frame keys and a cache of whole caller chains), `intern_chain` (new
//! nodes looked up only when needed) and `flush` (CPU samples in batches, so
//! that their table probes wait for memory together).
//!
//! It does not name frames (`symbolize` does) nor decode records.

use slowlab_model::trace::{
    Frame, FrameIdx, ModuleIdx, ModuleKind, StackIdx, StackNode, ThreadIdx,
};

use super::procs::{find_map, Map};
use super::{Builder, NO_FUNC};
use crate::intern::{huge_pages, IdTable, TableKey};
use crate::records::{self, Endian};

const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;
const PERF_CONTEXT_KERNEL: u64 = -128i64 as u64;
const PERF_CONTEXT_USER: u64 = -512i64 as u64;

/// A caller chain seen before: a second, independent hash of its frame
/// keys and its length (to tell it from another chain with the same cache
/// key), and its node.
pub(super) struct Chain {
    check: u64,
    len: u32,
    node: StackIdx,
}

/// A CPU sample waiting in the batch; its frame keys are
/// `batch_keys[start..start + len]`.
#[derive(Clone, Copy)]
pub(super) struct Pending {
    pub(super) time: u64,
    pub(super) period: u64,
    pub(super) thread: ThreadIdx,
    pub(super) cpu: u32,
    pub(super) start: u32,
    pub(super) len: u32,
}

/// CPU samples interned together.
pub(super) const BATCH: usize = 16;

/// `stack_map`'s key of the node of `frame` under `parent`.
#[inline]
fn node_key(parent: Option<StackIdx>, frame: FrameIdx) -> u64 {
    (parent.map_or(u32::MAX, |p| p.0) as u64) << 32 | frame.0 as u64
}

/// A frame before interning: its module (high bit: a kernel frame) and
/// module-relative address. Packed to 12 bytes: it is the frame table's
/// key (a slot of 16 bytes with the id, instead of 20 with padding; the
/// table has millions of slots on a big trace) and fills the batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(C, packed(4))]
pub(super) struct FrameKey {
    rel: u64,
    tag: u32,
}

impl TableKey for FrameKey {
    #[inline]
    fn hash(&self) -> u64 {
        (self.tag as u64, self.rel).hash()
    }
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

impl Builder {
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
                    // Wrapping: a damaged file's page offset may
                    // overflow (a meaningless frame, not a panic).
                    rel: if user {
                        (addr - m.start).wrapping_add(m.pgoff)
                    } else {
                        addr
                    },
                    tag: m.module.0,
                }
            }
            None => FrameKey {
                rel: addr,
                tag: self.unknown_module.0,
            },
        }
    }

    /// The frame of a key, created on first use. During the record pass
    /// a frame is only its entry in `frame_map` (its key holds all a frame
    /// is before symbolization); [`Builder::frames_from_table`] makes the
    /// trace's frames from it at the end, so that they are not held twice
    /// while the pass's memory peaks.
    #[inline]
    fn intern_frame(&mut self, key: FrameKey) -> FrameIdx {
        let next = FrameIdx(self.frame_map.len() as u32);
        let module = key.module();
        let (f, new) = self.frame_map.get_or_insert_with(key, || next.0);
        if new {
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
    pub(super) fn stack(
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
                Some(self.intern_chain(parent, &[leaf]))
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
        let new = StackIdx(self.t.stacks.len() as u32);
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
                self.t.stats.unmapped_frames += 1;
            }
            self.t.stacks.push(StackNode::new(parent, f));
        }
        node
    }

    /// Takes in a CPU sample; it is interned with the next few (see
    /// `flush`).
    pub(super) fn batch_sample(
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
    pub(super) fn flush(&mut self) {
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
                touched ^= self.frame_map.touch(leaf);
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
                self.node(parent, f, leaf, &mut fresh)
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
    /// (the node just after it) into it, before anything under `node` is
    /// looked up there.
    #[inline]
    fn index_pending_child(&mut self, node: StackIdx) {
        if self.pending_child.take(node.ix()) {
            let child = node.0 + 1;
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
    /// made, do not. Distinct frames grow slower than the trace (the code
    /// that runs is finite: one frame per 10 words on 13 MB of a build, per
    /// 15 on 90 MB, per 27 on 1.1 GB), so the frame table gets room for one
    /// per 28 words and grows (once, by copying) on a small trace rather
    /// than holding hundreds of megabytes of empty slots on a big one.
    /// `stack_map` holds only the nodes that something was looked up under
    /// (725,012 of 3.8 M on a 96 MB build trace, about one per 16 words);
    /// room for one per 14 words made its table twice as big there (2 M
    /// slots, 24 MB, instead of 1 M).
    pub(super) fn reserve(&mut self, samples: usize, bytes: usize) {
        let words = bytes / 8;
        self.t.stacks.reserve(words / 2);
        self.pending_child.reserve(words / 2);
        // Read at random while interning (parents): huge pages.
        huge_pages(&self.t.stacks);
        self.chains.reserve(samples / 3);
        self.chain_cache = IdTable::with_capacity(samples / 3);
        self.frame_map = IdTable::with_capacity(words / 28);
        self.stack_map = IdTable::with_capacity(words / 16);
        self.t.samples = reserve_samples(samples);
    }
}

impl Builder {
    /// Puts the frames interned in `frame_map` into the trace, unnamed,
    /// and empties the table (call once, after the last record).
    pub(super) fn frames_from_table(&mut self) {
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
        self.t.frames = frames;
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

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
        let depth = |n: StackIdx| t.stack_frames(Some(n)).count() - 1;
        assert_eq!(depth(deep), 5);
        assert_eq!(depth(fork_mid), 4);
        assert_eq!(depth(fork_top), 1);
        assert_eq!(depth(leaf_only), 0);
        // Shared callers share nodes: fork_mid's parent is deep's
        // grandparent (the node of 0x1300's call site).
        let parent = |n: StackIdx| t.stacks[n.ix()].parent().unwrap();
        assert_eq!(parent(fork_mid), parent(parent(deep)));
        assert_eq!(
            parent(fork_top),
            parent(parent(parent(parent(parent(deep)))))
        );
        // No (parent, frame) pair twice: 6 + 1 + 1 + 1 nodes.
        let mut seen = std::collections::HashSet::new();
        for n in &t.stacks {
            assert!(seen.insert((n.parent(), n.frame)), "duplicate node");
        }
        assert_eq!(t.stacks.len(), 9);
    }
}
