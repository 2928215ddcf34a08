//! The stacks of a ring's window ([`super::Window`]): the frames of each stack its records
//! name, how many of its chunks name each, and which are in the kernel's stack map under
//! which key. An eviction pass looks only at the stacks that may be named by nothing now,
//! not at every stack of a window that may hold a million.
//!
//! A stack nothing names leaves the kernel's map at one pass (the recorder deletes the keys
//! [`StackBook::eviction_pass`] gives) and memory at the next, since a record already in the
//! ring buffer may still name it; one the map could not take, which came through the ring
//! ([`StackBook::note_sent`]), leaves memory only. The stacks are kept by id in pages
//! (`ring/ids.rs`), as are their counts of chunks, and the frames of all of them in one
//! arena, packed again when half of it is holes. It does not talk to the kernel, and of
//! the window's chunks it knows only the ids each names.

use rustc_hash::FxHashSet as HashSet;

use super::ids::IdTable;

/// A stack as read from the kernel's map: its key, id, whether it is a kernel stack, and
/// its addresses.
pub(crate) type MapStack = (u64, u32, bool, Vec<u64>);

/// One stack: where its frames are in the book's arena, and its key in the kernel's map
/// while it is there (16 bytes: a window under process churn holds millions of stacks of
/// ~3 frames, and a `Vec` and an `Option` each took more than the frames).
struct Stack {
    key: u64,
    at: u32,
    frames: u16,
    kernel: bool,
    in_map: bool,
}

/// The frames of every stack of the book, one after the other; those of stacks forgotten
/// are holes until the arena is packed again ([`StackBook::pack_frames`]).
#[derive(Default)]
struct Arena {
    frames: Vec<u64>,
    holes: usize,
}

impl Arena {
    fn add(&mut self, addrs: &[u64]) -> (u32, u16) {
        let at = self.frames.len();
        let n = addrs.len().min(usize::from(u16::MAX));
        self.frames.extend_from_slice(&addrs[..n]);
        (at as u32, n as u16)
    }

    fn get(&self, s: &Stack) -> &[u64] {
        let at = s.at as usize;
        &self.frames[at..at + usize::from(s.frames)]
    }
}

/// The arena is packed again once it holds more holes than frames, and this many at least.
const PACK_FROM_HOLES: usize = 1 << 16;

/// The window's stacks (see the module documentation).
#[derive(Default)]
pub(crate) struct StackBook {
    stacks: IdTable<Stack>,
    arena: Arena,
    /// The stacks the records since the window's last cut name.
    current: HashSet<u32>,
    /// How many of the window's chunks name each stack they name (the current one's are
    /// in `current`).
    chunks_naming: IdTable<u32>,
    /// Stacks that may be named by nothing now, for the next pass: learned since the
    /// last, or let go of by the chunks that named them.
    maybe_unnamed: Vec<u32>,
    /// Stacks the last pass found unnamed (and evicted from the kernel's map): kept in
    /// memory a pass longer, since a record already in the ring buffer may name them.
    spared: Vec<u32>,
    /// The keys of the stacks learned from the kernel's map and still there: only this
    /// window deletes from the map, and the kernel adds a stack under a new id, so a key
    /// here still names the stack learned under it.
    keys_in_map: HashSet<u64>,
}

impl StackBook {
    /// A record names stack `id`.
    pub(super) fn name(&mut self, id: Option<u32>) {
        self.current.extend(id);
    }

    /// The window cut a chunk: the stacks its records name, in order, each counted as
    /// named by one chunk more.
    pub(super) fn cut(&mut self) -> Vec<u32> {
        let mut stacks: Vec<u32> = self.current.drain().collect();
        stacks.sort_unstable();
        for &id in &stacks {
            *self.chunks_naming.get_or_insert_with(id, || 0) += 1;
        }
        stacks
    }

    /// Stacks a record kept outside the chunks names (a blocked thread's switch), each
    /// counted as named by one chunk more until [`StackBook::let_go`] of them.
    pub(super) fn hold(&mut self, stacks: &[u32]) {
        for &id in stacks {
            *self.chunks_naming.get_or_insert_with(id, || 0) += 1;
        }
    }

    /// The stacks a chunk that left the window named, named once less; those named no
    /// more may go.
    pub(super) fn let_go(&mut self, stacks: &[u32]) {
        for id in stacks {
            if let Some(n) = self.chunks_naming.get_mut(*id) {
                *n -= 1;
                if *n == 0 {
                    self.chunks_naming.remove(*id);
                    self.maybe_unnamed.push(*id);
                }
            }
        }
    }

    /// Whether a record of the window names stack `id`.
    fn is_named(&self, id: u32) -> bool {
        self.chunks_naming.get(id).is_some() || self.current.contains(&id)
    }

    /// The stack ids the window's records name, in order.
    pub(super) fn named(&self) -> Vec<u32> {
        let mut named: Vec<u32> = self.chunks_naming.ids().collect();
        named.extend(
            self.current
                .iter()
                .filter(|&&id| self.chunks_naming.get(id).is_none()),
        );
        named.sort_unstable();
        named
    }

    /// Stack `id`'s frames, if known: whether it is a kernel stack, and its addresses.
    pub(super) fn frames(&self, id: u32) -> Option<(bool, &[u64])> {
        self.stacks.get(id).map(|s| (s.kernel, self.arena.get(s)))
    }

    /// A stack not known yet, with its frames, to look at in the next pass.
    fn add(&mut self, id: u32, kernel: bool, addrs: &[u64]) -> &mut Stack {
        let arena = &mut self.arena;
        self.stacks.get_or_insert_with(id, || {
            self.maybe_unnamed.push(id);
            let (at, frames) = arena.add(addrs);
            Stack {
                key: 0,
                at,
                frames,
                kernel,
                in_map: false,
            }
        })
    }

    /// Forgets stack `id`, its frames a hole of the arena.
    fn forget(&mut self, id: u32) {
        if let Some(s) = self.stacks.remove(id) {
            self.arena.holes += usize::from(s.frames);
        }
    }

    /// Packs the arena again when it holds more holes than frames: the frames of the
    /// stacks known, in a new arena.
    fn pack_frames(&mut self) {
        let arena = &self.arena;
        if arena.holes < PACK_FROM_HOLES || arena.holes * 2 < arena.frames.len() {
            return;
        }
        let mut packed = Arena {
            frames: Vec::with_capacity(arena.frames.len() - arena.holes),
            holes: 0,
        };
        for s in self.stacks.values_mut() {
            let (at, _) = packed.add(arena.get(s));
            s.at = at;
        }
        self.arena = packed;
    }

    /// Whether the stack under `key` in the kernel's map was learned (see `keys_in_map`):
    /// an eviction pass need not read it again.
    pub(crate) fn knows_key(&self, key: u64) -> bool {
        self.keys_in_map.contains(&key)
    }

    /// Stacks read from the kernel's map: their frames, and their keys to delete them by.
    pub(super) fn learn(&mut self, in_map: Vec<MapStack>) {
        for (key, id, kernel, addrs) in in_map {
            let stack = self.add(id, kernel, &addrs);
            if !stack.in_map {
                (stack.key, stack.in_map) = (key, true);
                self.keys_in_map.insert(key);
            }
        }
    }

    /// One eviction pass over the stacks added to the kernel's map since the last
    /// (`in_map`: those whose keys are not known, [`StackBook::knows_key`]; all of them
    /// will do): learns their frames, and returns the keys of the stacks nothing in the
    /// window names, for the recorder to delete from the map (the kernel's generation
    /// bumped first). Frames that left the map a pass ago and are still not named are
    /// forgotten.
    pub(crate) fn eviction_pass(&mut self, in_map: Vec<MapStack>) -> Vec<u64> {
        self.learn(in_map);
        for id in std::mem::take(&mut self.spared) {
            if !self.is_named(id) {
                self.forget(id);
            }
        }
        self.pack_frames();
        // Out of the map now, out of memory at the next pass.
        let mut evict = Vec::new();
        for id in std::mem::take(&mut self.maybe_unnamed) {
            if self.is_named(id) {
                continue;
            }
            let Some(stack) = self.stacks.get_mut(id) else {
                continue;
            };
            if std::mem::take(&mut stack.in_map) {
                self.keys_in_map.remove(&stack.key);
                evict.push(stack.key);
            }
            self.spared.push(id);
        }
        evict
    }

    /// A stack the kernel's map could not take, sent in the ring (it has no key there):
    /// kept while the window names it, and a pass longer, as the map's.
    pub(crate) fn note_sent(&mut self, id: u32, kernel: bool, addrs: &[u64]) {
        self.add(id, kernel, addrs);
    }

    /// Stacks that may be named by nothing now (learned, or let go of by the chunks that
    /// named them, since the last eviction pass): what the next pass may forget.
    pub(crate) fn maybe_unnamed(&self) -> usize {
        self.maybe_unnamed.len()
    }

    /// Stacks known (in memory).
    #[cfg(test)]
    pub(crate) fn known(&self) -> usize {
        self.stacks.len()
    }

    /// Frames held in the arena, holes included.
    #[cfg(test)]
    pub(crate) fn frames_held(&self) -> usize {
        self.arena.frames.len()
    }
}
