//! Caller chains: a sample's or event's callchain becomes frame keys
//! (module and module-relative address, from the process's maps as they
//! are at that record), and its callers a caller chain, found as a whole
//! by the hash of their keys when seen before. What is left (the keys of
//! new chains and of the innermost frames, and the stacks) is queued as
//! work for the [`interner`](super::interner), on another thread when
//! there are two cores, which makes the keys frames (see `frames`) and
//! the stacks nodes.
//!
//! It does not number frames (`frames` does), make nodes (`interner`
//! does), name frames (`symbolize` does) nor decode records.

use slowlab_model::trace::{ModuleIdx, ModuleKind, ThreadIdx};

use super::frames::{FrameIds, FrameKey, FrameMap};
use super::interner::{Callers, Interner, Item, Sink, GROUP, WORK_ITEMS};
use super::procs::{find_map_near, Map};
use super::Builder;
use crate::intern::{by_square_root, huge_pages, IdTable};
use crate::records::Endian;

const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;
const PERF_CONTEXT_KERNEL: u64 = -128i64 as u64;
const PERF_CONTEXT_USER: u64 = -512i64 as u64;

/// Frame keys sent to the interner at a time in a first pass of two
/// (which sends no stacks: see `flush_frames_only`).
const WORK_KEYS: usize = WORK_ITEMS * 16;

/// Where the last frame of a callchain was found, in the kernel's maps and
/// in the process's (see `procs::find_map_near`).
#[derive(Default)]
struct Near {
    kernel: usize,
    user: usize,
}

/// A caller chain seen before: a second, independent hash of its frame
/// keys and its length (to tell it from another chain with the same cache
/// key). Its number is its place in `FrameTable::chains`.
struct Chain {
    check: u64,
    len: u32,
}

/// A CPU sample, or an event's stack, queued (until its batch is flushed).
#[derive(Clone, Copy, Debug)]
pub(super) struct Pending {
    pub(super) time: u64,
    pub(super) period: u64,
    pub(super) thread: ThreadIdx,
    pub(super) cpu: u32,
    /// An event's stack (only the stack is wanted), not a CPU sample.
    pub(super) event: bool,
}

impl Pending {
    /// A CPU sample.
    pub(super) fn sample(time: u64, period: u64, thread: ThreadIdx, cpu: u32) -> Self {
        Pending {
            time,
            period,
            thread,
            cpu,
            event: false,
        }
    }
}

/// The caller chains seen so far, and the modules frames were seen in.
#[derive(Default)]
pub(super) struct FrameTable {
    /// Hash of a caller chain's frame keys → its number.
    chain_cache: IdTable<u64>,
    chains: Vec<Chain>,
    /// Per module: a frame key in it was sent to the interner.
    seen_module: Vec<bool>,
    /// Modules whose first frame was seen since the `Builder` last looked.
    new_modules: Vec<ModuleIdx>,
    /// The second pass of a read by function: its modules were announced
    /// by the first.
    fixed: bool,
    /// After a first pass of two: its frame table, for the second.
    first_pass: Option<FrameMap>,
}

impl FrameTable {
    /// Sizes the chain tables for `samples` samples (see
    /// [`by_square_root`]: 30 thousand chains for 712 thousand samples on a
    /// 96 MB build trace).
    pub(super) fn reserve(&mut self, samples: usize, frames_only: bool) {
        if frames_only {
            return;
        }
        let chains = by_square_root(samples, 64);
        self.chain_cache = IdTable::with_capacity(chains);
        self.chains.reserve(chains);
        huge_pages(&self.chains);
    }

    /// Notes the module of a key about to be sent to the interner: its
    /// first is announced (its binary's symbols are needed).
    #[inline]
    fn note(&mut self, key: FrameKey) {
        if self.fixed {
            return;
        }
        let module = key.module();
        if self.seen_module.len() <= module.ix() {
            self.seen_module.resize(module.ix() + 1, false);
        }
        if !self.seen_module[module.ix()] {
            self.seen_module[module.ix()] = true;
            self.new_modules.push(module);
        }
    }

    /// The callers of a stack (`keys`, innermost first): a chain seen
    /// before, by number; or, new, its keys appended to `out` (outermost
    /// first) for the interner to make frames and nodes of. A build has
    /// tens of thousands of distinct caller chains for over a hundred
    /// thousand samples, and the same code in another process (another
    /// load address) has the same keys: only a chain not seen before goes
    /// frame by frame.
    fn chain(
        &mut self,
        keys: &[FrameKey],
        (key, check): (u64, u64),
        out: &mut Vec<FrameKey>,
    ) -> Callers {
        if keys.is_empty() {
            return Callers::None;
        }
        let next = self.chains.len() as u32;
        let (n, new) = self.chain_cache.get_or_insert_with(key, || next);
        if !new {
            let c = &self.chains[n as usize];
            if c.check == check && c.len as usize == keys.len() {
                return Callers::Known(n);
            }
        } else {
            self.chains.push(Chain {
                check,
                len: keys.len() as u32,
            });
        }
        let start = out.len() as u32;
        for &k in keys.iter().rev() {
            self.note(k);
            out.push(k);
        }
        let len = keys.len() as u32;
        if new {
            Callers::New { start, len }
        } else {
            // A different chain with the same key: interned, not cached.
            Callers::Uncached { start, len }
        }
    }

    /// Frees the caller-chain tables (at the end of the pass).
    fn free_chains(&mut self) {
        drop(std::mem::take(&mut self.chain_cache));
        drop(std::mem::take(&mut self.chains));
    }
}

impl Builder {
    /// The frame key of a raw address in a process with `maps`; `near`:
    /// where in the kernel's maps and in `maps` the frame before was found
    /// (see [`find_map_near`]).
    #[inline]
    fn frame_key(&self, maps: &[Map], addr: u64, kernel: bool, near: &mut Near) -> FrameKey {
        if kernel {
            // Kernel frames are named from kallsyms by absolute address.
            let module = find_map_near(&self.kernel_maps, addr, &mut near.kernel)
                .filter(|m| m.kind == ModuleKind::KernelModule)
                .map_or(self.kernel_module, |m| m.module);
            return FrameKey::kernel(module, addr);
        }
        match find_map_near(maps, addr, &mut near.user) {
            Some(m) => {
                let user = m.kind == ModuleKind::User;
                // Wrapping: a damaged file's page offset may overflow (a
                // meaningless frame, not a panic).
                let rel = if user {
                    (addr - m.start).wrapping_add(m.pgoff)
                } else {
                    addr
                };
                FrameKey::user(m.module, rel)
            }
            // Outside every mapping: no binary can name the address, so all
            // of them are one frame (`[unknown]`, as each would be named).
            // Kept apart, they multiply the stack tree: code built without
            // frame pointers (rustc, LLVM) ends its callchains in stack
            // garbage, a different address in nearly every chain. On a
            // 96 MB build trace they were 733 thousand of 975 thousand
            // frames and 3.19 M of 3.79 M stack nodes; merged, the trace
            // has 382 thousand nodes and every view is the same.
            None => FrameKey::user(self.unknown_module, 0),
        }
    }

    /// Queues a sample's callchain (`chain`: raw `u64` addresses in the
    /// file's byte order; or its `ip` when it has none) for interning, as
    /// a CPU sample (`p`) or as an event's stack (`p.event`; the interner
    /// gives event stacks back in order, see `finish_interning`).
    ///
    /// Each address becomes its frame key here (module and offset, from
    /// the process's maps as they are now: a search in a short sorted
    /// list); the innermost becomes a frame, and the others a caller chain
    /// (see [`FrameTable::chain`]).
    pub(super) fn queue_stack(
        &mut self,
        e: Endian,
        pid: i32,
        chain: Option<&[u8]>,
        ip: Option<u64>,
        kernel: bool,
        p: Pending,
    ) {
        let mut keys = std::mem::take(&mut self.batch_keys);
        let start = keys.len();
        self.frame_keys(e, pid, chain, ip, kernel, &mut keys);
        self.batch.push((p, start..keys.len()));
        self.batch_keys = keys;
        if self.batch.len() == GROUP {
            self.flush();
        }
    }

    /// Turns the stacks queued in `batch` into caller chains, and their
    /// items into work for the interner. A chain's lookup misses the cache;
    /// across the batch the lookups do not depend on each other, so the
    /// table slots are touched for every stack first, and the misses of a
    /// batch are waited for together.
    fn flush(&mut self) {
        if self.frames_only {
            self.flush_frames_only();
            return;
        }
        let batch = std::mem::take(&mut self.batch);
        let keys = std::mem::take(&mut self.batch_keys);
        let table = &mut self.frame_table;
        let mut touched = 0u32;
        let mut hashes = [(0u64, 0u64); GROUP];
        for (h, (_, range)) in hashes.iter_mut().zip(&batch) {
            if let Some((_, callers)) = keys[range.clone()].split_first() {
                *h = chain_hashes(callers);
                touched ^= table.chain_cache.touch(&h.0);
            }
        }
        std::hint::black_box(touched);
        for ((p, range), h) in batch.iter().zip(hashes) {
            let (leaf, callers) = match keys[range.clone()].split_first() {
                Some((&leaf, rest)) => {
                    table.note(leaf);
                    let callers = table.chain(rest, h, &mut self.work.keys);
                    (Some(leaf), callers)
                }
                None => (None, Callers::None),
            };
            self.work.items.push(Item {
                event: p.event,
                leaf: None,
                callers,
            });
            self.work.leaves.push(leaf);
            if !p.event {
                // The sample's other columns, made here (its stack comes
                // from the interner, in the same order).
                let samples = &mut self.t.samples;
                samples.time_ns.push(p.time);
                samples.thread.push(p.thread);
                samples.cpu.push(p.cpu);
                samples.period.push(p.period);
            }
        }
        self.batch = batch;
        self.batch.clear();
        self.batch_keys = keys;
        self.batch_keys.clear();
        if self.work.items.len() >= WORK_ITEMS {
            self.send_work();
        }
        self.announce();
    }

    /// The first pass of two: the queued stacks' keys go to the interner to
    /// become frames, and that is all.
    fn flush_frames_only(&mut self) {
        for &k in &self.batch_keys {
            self.frame_table.note(k);
        }
        self.work.keys.extend_from_slice(&self.batch_keys);
        self.batch.clear();
        self.batch_keys.clear();
        if self.work.keys.len() >= WORK_KEYS {
            self.send_work();
        }
        self.announce();
    }

    /// Sends the work queued to the interner.
    fn send_work(&mut self) {
        let work = std::mem::take(&mut self.work);
        self.work = self.sink.send(work);
    }

    /// Puts in `new_binaries` each user binary among the modules whose
    /// first frame was seen since the last call, if any (so that its
    /// symbols can be fetched while records are read).
    fn announce(&mut self) {
        for m in self.frame_table.new_modules.drain(..) {
            if self.t.modules[m.ix()].kind == ModuleKind::User && !self.foreign {
                self.new_binaries.push(m);
            }
        }
    }

    /// Sizes the tables for `samples` samples in `bytes` of records and
    /// moves the interner to a thread of its own if `thread` (call before
    /// the first record). On its thread, the interner makes its tables
    /// there (writing every slot of megabytes): started before the
    /// records are indexed, with `samples` a guess, that runs beside the
    /// index instead of after it.
    pub(super) fn intern_on_thread(&mut self, samples: usize, bytes: usize, thread: bool) {
        let frames_only = self.frames_only;
        if let Sink::Inline(interner) = &mut self.sink {
            if thread {
                let interner =
                    std::mem::replace(interner, Box::new(Interner::new(self.unknown_module)));
                self.sink = Sink::spawn(*interner, move |i| i.reserve(samples, bytes, frames_only));
            } else {
                interner.reserve(samples, bytes, frames_only);
            }
        }
    }

    /// Sizes the caller-chain tables and the sample columns for `samples`
    /// samples (call before the first record).
    pub(super) fn reserve_samples(&mut self, samples: usize) {
        self.frame_table.reserve(samples, self.frames_only);
        if !self.frames_only {
            // Tens of megabytes on a big trace, written once in order:
            // faulted in 2 MiB at a time instead of 4 KiB.
            let columns = &mut self.t.samples;
            columns.time_ns.reserve(samples);
            huge_pages(&columns.time_ns);
            columns.thread.reserve(samples);
            huge_pages(&columns.thread);
            columns.cpu.reserve(samples);
            huge_pages(&columns.cpu);
        }
    }

    /// Interns what is queued and puts the results into the trace: the
    /// stack nodes, the frames (unnamed), the sample columns, and each
    /// event's stack. `false` when the interner's thread panicked (the
    /// trace then has no stacks nor samples).
    pub(super) fn finish_interning(&mut self) -> bool {
        self.flush();
        self.send_work();
        let sink = std::mem::replace(&mut self.sink, Sink::Gone);
        let Some(mut interner) = sink.finish() else {
            return false;
        };
        interner.free_tables();
        self.frame_table.free_chains();
        let unknown = self.unknown_module;
        let mut frames = std::mem::replace(&mut interner.frames, FrameIds::new(unknown));
        if frames.fixed() {
            // The frames are the first pass's.
            if frames.unseen > 0 {
                self.t.stats.warnings.push(format!(
                    "{} frames were missing from the first of the two passes over the records and show as another function (a bug in slowlab; set SLOWLAB_MEMORY higher than the trace to read it in one pass)",
                    frames.unseen
                ));
            }
        } else {
            if self.frames_only {
                // Kept for the second pass, made smaller before the frames
                // are made.
                frames.shrink_to_fit();
            }
            self.t.frames = frames.frames();
            if self.frames_only {
                self.frame_table.first_pass = Some(frames.into_first_pass());
            }
        }
        let t = &mut self.t;
        t.stacks = std::mem::take(&mut interner.stacks);
        t.samples.stack = std::mem::take(&mut interner.sample_stacks);
        debug_assert_eq!(t.samples.stack.len(), t.samples.time_ns.len());
        t.stats.unmapped_frames += interner.unmapped_frames;
        t.stats.samples_without_stack += interner.samples_without_stack;
        for (event, stack) in t.events.iter_mut().zip(interner.event_stacks.drain(..)) {
            event.stack = stack;
        }
        true
    }

    /// Sets up the second pass of two, with the first's frame table (call
    /// before the first record).
    pub(super) fn use_first_pass_frames(&mut self, map: FrameMap) {
        if let Sink::Inline(interner) = &mut self.sink {
            interner.frames = FrameIds::from_first_pass(map, self.unknown_module);
        }
        self.frame_table.fixed = true;
    }

    /// The frame table, after a first pass of two (`None` after any other
    /// pass).
    pub(super) fn take_frame_map(&mut self) -> Option<FrameMap> {
        self.frame_table.first_pass.take()
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
        let mut near = Near::default();
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
                    keys.push(self.frame_key(maps, lookup, kernel, &mut near));
                }
            }
            _ => {
                if let Some(ip) = ip {
                    keys.push(self.frame_key(maps, ip, kernel, &mut near));
                }
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use slowlab_model::trace::StackIdx;
    use slowlab_model::trace::{Event, EventKind, StrIdx, ThreadIdx};

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
        // Each stack queued as an event's: its node comes back in order.
        let stacks: [(i32, &[u64]); 6] = [
            // A deep new chain, then chains that share its outer part and
            // leave it at different depths (pending children become
            // indexed), the same chain again (chain cache), and the same
            // code in another process at another load address (same
            // frames, same nodes).
            (7, &[0x1100, 0x1200, 0x1300, 0x1400, 0x1500, 0x1600]),
            (7, &[0x1900, 0x1300, 0x1400, 0x1500, 0x1600]),
            (7, &[0x1800, 0x1600]),
            (7, &[0x1100, 0x1200, 0x1300, 0x1400, 0x1500, 0x1600]),
            (8, &[0x5100, 0x5200, 0x5300, 0x5400, 0x5500, 0x5600]),
            (7, &[0x1700]),
        ];
        for (pid, addrs) in stacks {
            let p = Pending {
                event: true,
                ..Pending::sample(0, 1, ThreadIdx(0), 0)
            };
            b.queue_stack(e, pid, Some(&chain(addrs)), None, false, p);
            b.t.events.push(Event {
                time_ns: 0,
                cpu: 0,
                thread: ThreadIdx(0),
                stack: None,
                kind: EventKind::Other { name: StrIdx(0) },
            });
        }
        assert!(b.finish_interning());
        let node = |i: usize| b.t.events[i].stack.unwrap();
        let (deep, fork_mid, fork_top, again, moved, leaf_only) =
            (node(0), node(1), node(2), node(3), node(4), node(5));
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

    #[test]
    fn addresses_outside_every_mapping_are_one_frame() {
        // Two samples whose callchains end (at the root) in different
        // addresses that no mapping holds, as stack garbage does; a third
        // with an unmapped address in the middle.
        let stacks = vec![
            vec![0x1100, 0x1200, 0xdead_0000, 0xdead_1000],
            vec![0x1100, 0x1200, 0xbeef_0000, 0xbeef_2000],
            vec![0x1100, 0x7777_0000, 0x1200],
        ];
        let t = interned(&stacks, false);
        let unknown: Vec<usize> = (0..t.frames.len())
            .filter(|&f| t.str(t.modules[t.frames[f].module.ix()].name) == "[unknown]")
            .collect();
        assert_eq!(unknown.len(), 1, "one unmapped frame: {:?}", t.frames);
        // The first two stacks differed only there: one node.
        assert_eq!(t.samples.stack[0], t.samples.stack[1]);
        assert_ne!(t.samples.stack[0], t.samples.stack[2]);
        let frames = |i: usize| {
            t.stack_frames(t.samples.stack[i])
                .map(|f| f.ix())
                .collect::<Vec<_>>()
        };
        assert_eq!(frames(0).len(), 4, "depths are kept");
        assert_eq!(frames(0)[2..], [unknown[0], unknown[0]]);
        assert_eq!(frames(2)[1], unknown[0]);
        // Nodes with an unmapped frame: the two at the root end of the
        // first two stacks (shared), one in the third.
        assert_eq!(t.stats.unmapped_frames, 3);
    }

    /// The trace of `stacks` queued as CPU samples of pid 7, with interning
    /// on a thread or not.
    fn interned(stacks: &[Vec<u64>], thread: bool) -> slowlab_model::trace::Trace {
        let mut b = Builder::new();
        b.on_mmap(7, 0x1000, 0x10000, 0, "/bin/app", false);
        b.intern_on_thread(stacks.len(), 1 << 20, thread);
        b.reserve_samples(stacks.len());
        let e = Endian::default();
        for (i, addrs) in stacks.iter().enumerate() {
            let p = Pending::sample(i as u64, 1, ThreadIdx(0), 0);
            b.queue_stack(e, 7, Some(&chain(addrs)), None, false, p);
        }
        assert!(b.finish_interning());
        std::mem::take(&mut b.t)
    }

    #[test]
    fn interning_on_a_thread_gives_the_same_trace() {
        // More than a batch of work, with chains that share callers.
        let stacks: Vec<Vec<u64>> = (0..3 * WORK_ITEMS as u64)
            .map(|i| {
                (0..(i % 7) + 1)
                    .map(|d| 0x1010 + (i * 31 + d) % 97 * 16)
                    .collect()
            })
            .collect();
        let (inline, thread) = (interned(&stacks, false), interned(&stacks, true));
        assert_eq!(inline.stacks, thread.stacks);
        assert_eq!(inline.samples.stack, thread.samples.stack);
        assert_eq!(inline.samples.time_ns, thread.samples.time_ns);
        let addresses = |t: &slowlab_model::trace::Trace| {
            t.frames.iter().map(|f| f.address).collect::<Vec<_>>()
        };
        assert_eq!(addresses(&inline), addresses(&thread));
        assert_eq!(inline.samples.len(), stacks.len());
        // Each sample's frames are its addresses (less one for callers).
        for (i, addrs) in stacks.iter().enumerate() {
            let got: Vec<u64> = thread
                .stack_frames(thread.samples.stack[i])
                .map(|f| thread.frames[f.ix()].address)
                .collect();
            let want: Vec<u64> = addrs
                .iter()
                .enumerate()
                .map(|(d, a)| if d == 0 { a - 0x1000 } else { a - 0x1000 - 1 })
                .collect();
            assert_eq!(got, want, "sample {i}");
        }
    }
}
