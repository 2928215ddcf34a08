//! Frames: each unique frame key (module and module-relative address)
//! becomes a frame, numbered in the order first seen. The table lives with
//! the [`interner`](super::interner), on its thread when there are two
//! cores: looking keys up is about a third of the interner's work, bound
//! by cache misses in a table of megabytes, and the decoding thread
//! (which makes the keys, see `stacks`) is the busier of the two.
//!
//! It does not make keys (`stacks` does), nodes (`interner` does) nor
//! name frames (`symbolize` does).

use slowlab_model::trace::{Frame, FrameIdx, ModuleIdx};

use super::interner::WorkFrame;
use super::NO_FUNC;
use crate::intern::{by_square_root, huge_pages, IdTable, TableKey};

/// A frame before interning: its module (high bit: a kernel frame) and
/// module-relative address. Packed to 12 bytes: it is the frame table's
/// key (a slot of 16 bytes with the id, instead of 20 with padding; the
/// table has millions of slots on a big trace) and fills the batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(C, packed(4))]
pub(super) struct FrameKey {
    pub(super) rel: u64,
    pub(super) tag: u32,
}

impl TableKey for FrameKey {
    #[inline]
    fn hash(&self) -> u64 {
        (self.tag as u64, self.rel).hash()
    }
}

const KERNEL_TAG: u32 = 1 << 31;

impl FrameKey {
    pub(super) fn user(module: ModuleIdx, rel: u64) -> Self {
        FrameKey { rel, tag: module.0 }
    }
    pub(super) fn kernel(module: ModuleIdx, addr: u64) -> Self {
        FrameKey {
            rel: addr,
            tag: module.0 | KERNEL_TAG,
        }
    }
    pub(super) fn module(self) -> ModuleIdx {
        ModuleIdx(self.tag & !KERNEL_TAG)
    }
    fn is_kernel(self) -> bool {
        self.tag & KERNEL_TAG != 0
    }
}

/// (module, address) → frame.
pub(super) struct FrameIds {
    /// During the pass a frame is only its entry here (the key is all a
    /// frame is before symbolization); [`FrameIds::frames`] makes the
    /// trace's frames from it at the end.
    map: IdTable<FrameKey>,
    /// The module of frames outside every mapping (marked in their
    /// [`WorkFrame`]s, counted when a node is made for one).
    unknown: ModuleIdx,
    /// The second pass of a read by function: `map` is the first pass's
    /// and complete; nothing is added to it.
    fixed: bool,
    /// Keys the second pass looked up that the first did not see (a bug:
    /// both passes see the same records in the same order).
    pub(super) unseen: u64,
}

/// The frame table of a first pass ([`super::FramePass::FramesOnly`]):
/// each key with its frame's index.
pub(crate) struct FrameMap(IdTable<FrameKey>);

impl FrameMap {
    /// Makes each key's id `function_frame[id]`: the one frame that stands
    /// for all of its function's frames in the second pass.
    pub(crate) fn by_function(&mut self, function_frame: &[FrameIdx]) {
        self.0
            .remap_ids(|id| function_frame.get(id as usize).map_or(id, |f| f.0));
    }
}

impl FrameIds {
    pub(super) fn new(unknown: ModuleIdx) -> Self {
        FrameIds {
            map: IdTable::default(),
            unknown,
            fixed: false,
            unseen: 0,
        }
    }

    /// The second pass's: the first pass's table, looked up only.
    pub(super) fn from_first_pass(FrameMap(map): FrameMap, unknown: ModuleIdx) -> Self {
        FrameIds {
            map,
            unknown,
            fixed: true,
            unseen: 0,
        }
    }

    /// Sizes the table for `bytes` of records: 96 frames per square root
    /// of their words (see [`by_square_root`]; 332 thousand slots' worth
    /// for the 242 thousand frames of a 96 MB build trace, 1.6 million for
    /// the 1.07 million of a 2.28 GB one).
    pub(super) fn reserve(&mut self, bytes: usize) {
        if !self.fixed {
            self.map = IdTable::with_capacity(by_square_root(bytes / 8, 96));
        }
    }

    /// The number of frames.
    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    /// True for the second pass of a read by function.
    pub(super) fn fixed(&self) -> bool {
        self.fixed
    }

    /// Touches the slot of `key` (see [`IdTable::touch`]).
    #[inline]
    pub(super) fn touch(&self, key: &FrameKey) -> u32 {
        self.map.touch(key)
    }

    /// The frame of a key, created on first use (looked up only in the
    /// second pass).
    #[inline]
    pub(super) fn frame(&mut self, key: FrameKey) -> WorkFrame {
        let f = if self.fixed {
            self.map.get(key).unwrap_or_else(|| {
                self.unseen += 1;
                0
            })
        } else {
            let next = self.map.len() as u32;
            self.map.get_or_insert_with(key, || next).0
        };
        WorkFrame::new(FrameIdx(f), key.module() == self.unknown)
    }

    /// The trace's frames, unnamed, made from the table (call once, at the
    /// end).
    pub(super) fn frames(&self) -> Vec<Frame> {
        // Written at random (by id): huge pages (tens of megabytes on a big
        // trace, faulted in 2 MiB at a time).
        let mut frames = Vec::with_capacity(self.map.len());
        huge_pages(&frames);
        frames.resize(
            self.map.len(),
            Frame {
                module: ModuleIdx(0),
                address: 0,
                function: NO_FUNC,
                kernel: false,
            },
        );
        for (key, id) in self.map.entries() {
            frames[id as usize] = Frame {
                module: key.module(),
                address: key.rel,
                function: NO_FUNC,
                kernel: key.is_kernel(),
            };
        }
        frames
    }

    /// Gives back the table's spare room (after a first pass, before the
    /// frames are made: it was sized before the frames were known, 380 MB
    /// for the 291 MB it needed on a 2.3 GB trace).
    pub(super) fn shrink_to_fit(&mut self) {
        self.map.shrink_to_fit();
    }

    /// The table, for the second pass (after a first pass).
    pub(super) fn into_first_pass(self) -> FrameMap {
        FrameMap(self.map)
    }
}
