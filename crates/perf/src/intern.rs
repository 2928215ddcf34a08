//! Small helpers for interning: maps with a fast non-cryptographic hash (the
//! Firefox/rustc "Fx" hash, from `rustc-hash`), a string table, and [`IdTable`], the
//! open-addressing map from small keys to `u32` ids that stack interning
//! uses. No I/O, no parsing.

use std::collections::HashMap;

use slowlab_model::trace::StrIdx;

/// A map with FxHash (the `rustc-hash` crate): fast for integer keys, not
/// resistant to adversarial input (not needed here).
pub type FxMap<K, V> = HashMap<K, V, rustc_hash::FxBuildHasher>;

/// Interns strings into a `Vec<String>` (the trace's string table).
#[derive(Default)]
pub struct Strings {
    map: FxMap<String, StrIdx>,
}

impl Strings {
    /// The strings of an existing table, each known by its first index (the table is not
    /// changed: what points into it stays right, duplicates and all).
    pub fn of_table(table: &[String]) -> Strings {
        let mut map = FxMap::default();
        for (i, s) in table.iter().enumerate() {
            map.entry(s.clone()).or_insert(StrIdx(i as u32));
        }
        Strings { map }
    }

    pub fn intern(&mut self, table: &mut Vec<String>, s: &str) -> StrIdx {
        if let Some(&i) = self.map.get(s) {
            return i;
        }
        let i = StrIdx(table.len() as u32);
        table.push(s.to_owned());
        self.map.insert(s.to_owned(), i);
        i
    }
}

/// Asks the kernel to back the not yet touched memory of `v`'s buffer with
/// transparent huge pages (2 MiB), where the system leaves that to each
/// program (`/sys/kernel/mm/transparent_hugepage/enabled` = `madvise`, the
/// usual default). The interning tables are megabytes to tens of megabytes
/// probed at random: with 4 KiB pages nearly every probe also misses the
/// TLB (on a 90 MB trace: 43% fewer page faults, and 0 to 18% less user
/// time in A/B runs on a noisy machine; see bench/analyze/README.md).
/// Buffers of megabytes written once (the record index, the sample
/// columns, the frames) are faulted in 2 MiB at a time instead of 4 KiB.
/// Call it before filling `v`: pages already touched stay small. Only the
/// whole 2 MiB blocks inside the buffer are advised (the allocator's
/// header sits in the first page of a big allocation, so its first block
/// and its last partial one stay small); a buffer with none is left
/// alone. A refusal changes nothing but speed.
pub(crate) fn huge_pages<T>(v: &Vec<T>) {
    const HUGE: usize = 2 << 20;
    let bytes = v.capacity().saturating_mul(std::mem::size_of::<T>());
    if bytes < HUGE {
        return;
    }
    let start = v.as_ptr() as usize;
    let (from, to) = (start.next_multiple_of(HUGE), (start + bytes) / HUGE * HUGE);
    if to > from {
        // SAFETY: `from..to` lies inside `v`'s allocation, which this
        // process owns; MADV_HUGEPAGE changes how it is backed, never its
        // contents.
        unsafe { libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_HUGEPAGE) };
    }
}

/// A guess of how many distinct stacks, frames or caller chains a trace of
/// `n` words or samples has: `per_root` times the square root of `n`. They
/// grow far slower than the trace (the code that runs is finite, and
/// frames outside every mapping are one: see `reader::stacks`). On
/// system-wide traces of builds of 10 MB, 96 MB, 1.23 GB and 2.28 GB, the
/// distinct frames were 40, 70, 72 and 64 times the square root of the
/// words, the looked-up stack nodes 56, 97, 123 and 115 times, and the
/// caller chains 28, 36, 55 and 51 times the square root of the samples.
/// A table sized by it is made once on those, with room to spare; on a
/// trace with more it grows (by half, a copy).
pub(crate) fn by_square_root(n: usize, per_root: usize) -> usize {
    ((n as f64).sqrt() as usize).saturating_mul(per_root)
}

/// A growable set of small integers, one bit each: which stack nodes have
/// a child not yet indexed (millions of nodes on a big trace, so a bit
/// rather than a word each). Hand-written: it needs only `set` and a
/// test-and-clear, about what a bitset crate's setup would take.
#[derive(Default)]
pub struct Bits {
    words: Vec<u64>,
}

impl Bits {
    /// Room for `n` members without growing.
    pub fn reserve(&mut self, n: usize) {
        self.words.reserve(n.div_ceil(64));
    }

    /// Adds `i`.
    #[inline]
    pub fn set(&mut self, i: usize) {
        let w = i / 64;
        if w >= self.words.len() {
            self.words.resize(w + 1, 0);
        }
        self.words[w] |= 1 << (i % 64);
    }

    /// Removes `i`; `true` when it was a member.
    #[inline]
    pub fn take(&mut self, i: usize) -> bool {
        let Some(w) = self.words.get_mut(i / 64) else {
            return false;
        };
        let bit = 1 << (i % 64);
        let was = *w & bit != 0;
        *w &= !bit;
        was
    }
}

/// A key of an [`IdTable`]: plain old data with a good-enough hash.
pub trait TableKey: Copy + Eq + Default {
    fn hash(&self) -> u64;
}

impl TableKey for u64 {
    #[inline]
    fn hash(&self) -> u64 {
        (self ^ (self >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }
}

impl TableKey for (u64, u64) {
    #[inline]
    fn hash(&self) -> u64 {
        (self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(26) ^ self.1)
            .wrapping_mul(0xbf58_476d_1ce4_e5b9)
    }
}

/// A map from keys to `u32` ids with the entries inline (linear probing,
/// at most 3/4 full, slots packed), so that a lookup usually touches one
/// cache line; `hashbrown`'s control bytes make that two, and stack
/// interning on a big trace is bound by these misses. Id 0 marks an empty
/// slot (ids are stored plus one). Ids must be below `u32::MAX`. No
/// removal.
pub struct IdTable<K: TableKey> {
    /// Any number of slots, not only a power of two: the hash's top bits
    /// pick one by a multiply (see `start`), so that a table is sized to
    /// what it holds, not rounded up. (Rounding up doubled the frame table
    /// of a 1.17 GB trace to 16.8 M slots, 268 MB, for 6.9 M frames.)
    slots: Vec<Slot<K>>,
    len: usize,
}

#[derive(Clone, Copy)]
#[repr(C, packed(4))]
struct Slot<K> {
    key: K,
    /// The id plus one; 0 for an empty slot.
    id: u32,
}

/// Where a probe for `key` starts in a table of `slots` slots: the hash as
/// a fraction of 2^64, times the number of slots (Lemire's "fastrange"):
/// the top bits decide, as they should for the multiplicative hashes of
/// `TableKey`. Never larger for fewer slots (`shrink_to_fit` relies on it).
#[inline]
fn start_in<K: TableKey>(key: &K, slots: usize) -> usize {
    ((key.hash() as u128 * slots as u128) >> 64) as usize
}

impl<K: TableKey> Default for IdTable<K> {
    fn default() -> Self {
        Self::with_capacity(0)
    }
}

impl<K: TableKey> IdTable<K> {
    /// A table that holds `n` keys before it grows.
    pub fn with_capacity(n: usize) -> Self {
        let len = Self::slots_for(n);
        // Probed at random: huge pages spare a TLB miss per probe.
        let mut slots = Vec::with_capacity(len);
        huge_pages(&slots);
        slots.resize(
            len,
            Slot {
                key: K::default(),
                id: 0,
            },
        );
        IdTable { slots, len: 0 }
    }

    /// The slots of a table that holds `n` keys (at most 3/4 full).
    fn slots_for(n: usize) -> usize {
        n.max(8) * 4 / 3 + 1
    }

    #[inline]
    fn start(&self, key: &K) -> usize {
        start_in(key, self.slots.len())
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Every key with its id, in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = (K, u32)> + '_ {
        self.slots
            .iter()
            .filter(|s| s.id != 0)
            .map(|s| (s.key, s.id - 1))
    }

    /// The slot after `i`, wrapping around.
    #[inline]
    fn next(&self, i: usize) -> usize {
        if i + 1 == self.slots.len() {
            0
        } else {
            i + 1
        }
    }

    /// Reads the slot where a probe for `key` starts, so that a later
    /// probe finds it in cache (call for many keys, then probe them: the
    /// reads wait for memory together instead of one after another). The
    /// value means nothing.
    #[inline]
    pub fn touch(&self, key: &K) -> u32 {
        self.slots[self.start(key)].id
    }

    /// Where `key` is: `Ok(id)`, or `Err(slot)` with the empty slot where
    /// it would go.
    #[inline]
    fn find(&self, key: K) -> Result<u32, usize> {
        let mut i = self.start(&key);
        loop {
            let s = self.slots[i];
            let id = s.id;
            if id == 0 {
                return Err(i);
            }
            if { s.key } == key {
                return Ok(id - 1);
            }
            i = self.next(i);
        }
    }

    /// The id of `key`, if present.
    #[inline]
    pub fn get(&self, key: K) -> Option<u32> {
        self.find(key).ok()
    }

    /// The id of `key`, or `id()` stored as its id; `true` when inserted.
    #[inline]
    pub fn get_or_insert_with(&mut self, key: K, id: impl FnOnce() -> u32) -> (u32, bool) {
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow();
        }
        match self.find(key) {
            Ok(found) => (found, false),
            Err(i) => {
                let v = id();
                debug_assert!(v != u32::MAX);
                self.slots[i] = Slot { key, id: v + 1 };
                self.len += 1;
                (v, true)
            }
        }
    }

    /// Stores `id` for `key`, which must not be present yet.
    #[inline]
    pub fn insert_new(&mut self, key: K, id: u32) {
        self.get_or_insert_with(key, || id);
    }

    /// Half again as many slots (half full after): doubling would leave a
    /// big table up to three-quarters empty at the end.
    fn grow(&mut self) {
        self.resize(self.len + self.len / 2);
    }

    /// Makes the table again with room for `n` keys (at least its own).
    pub fn resize(&mut self, n: usize) {
        let old = std::mem::replace(self, Self::with_capacity(n.max(self.len)));
        // Into a table of megabytes each insertion misses the cache: the
        // slots of a group of keys are touched first, so that their misses
        // are waited for together (a 13.6 M-key frame table: 1.2 s -> 0.5 s).
        const GROUP: usize = 16;
        let mut group = [(K::default(), 0u32); GROUP];
        let mut grouped = 0;
        let mut touched = 0u32;
        for (key, id) in old.entries() {
            group[grouped] = (key, id);
            touched ^= self.touch(&key);
            grouped += 1;
            if grouped == GROUP {
                for &(key, id) in &group {
                    self.insert_new(key, id);
                }
                grouped = 0;
            }
        }
        std::hint::black_box(touched);
        for &(key, id) in &group[..grouped] {
            self.insert_new(key, id);
        }
    }

    /// Makes the table again at the smallest size that holds its keys, in
    /// its own buffer, which is then cut to that size. (A new table beside
    /// the old would be hundreds of megabytes of fresh pages after a big
    /// trace's first pass: on a VM whose host takes back free memory, the
    /// 147 MB of a 1.23 GB trace's frame table took 220-320 ms to fault in,
    /// against about 100 ms for this whole rehash.)
    ///
    /// Why this is safe: a key's start slot in the smaller table is never
    /// after its start in this one (`start_in` is monotone in the table's
    /// size), and, but for keys that wrapped around the end, a key lies at
    /// or after its start. So, with the wrapped keys set aside first (they
    /// all lie in the run of full slots at slot 0), the slots are moved in
    /// order: the slot being moved is emptied, and a probe from the key's
    /// new start, over slots already moved or emptied, stops at that slot
    /// at the latest; once past the smaller table's end, every slot in it
    /// has been moved or emptied. Lookups need only that each key be
    /// reachable from its start over full slots, which moving in this order
    /// keeps (no slot a probe passed over is emptied later).
    pub fn shrink_to_fit(&mut self) {
        let (old, new) = (self.slots.len(), Self::slots_for(self.len));
        if new >= old {
            return;
        }
        let slots = &mut self.slots;
        // At most 3/4 full, so there is an empty slot.
        let first_empty = slots.iter().position(|s| s.id == 0).unwrap_or(old);
        let wrapped: Vec<Slot<K>> = slots[..first_empty].to_vec();
        for s in &mut slots[..first_empty] {
            s.id = 0;
        }
        let place = |slots: &mut [Slot<K>], s: Slot<K>| {
            let mut j = start_in(&{ s.key }, new);
            while slots[j].id != 0 {
                j = if j + 1 == new { 0 } else { j + 1 };
            }
            slots[j] = s;
        };
        for i in first_empty..old {
            let s = slots[i];
            if s.id != 0 {
                slots[i].id = 0;
                place(slots, s);
            }
        }
        for s in wrapped {
            place(slots, s);
        }
        slots.truncate(new);
        slots.shrink_to_fit();
    }

    /// Replaces every key's id by `new(id)` (below `u32::MAX`), in place.
    pub fn remap_ids(&mut self, mut new: impl FnMut(u32) -> u32) {
        for s in &mut self.slots {
            let id = s.id;
            if id != 0 {
                s.id = new(id - 1) + 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interns_once() {
        let mut table = Vec::new();
        let mut s = Strings::default();
        let a = s.intern(&mut table, "a");
        let b = s.intern(&mut table, "b");
        assert_eq!(s.intern(&mut table, "a"), a);
        assert_ne!(a, b);
        assert_eq!(table, vec!["a", "b"]);
    }

    #[test]
    fn bits_hold_what_was_set_until_taken() {
        let mut b = Bits::default();
        assert!(!b.take(5));
        for i in [0, 63, 64, 1000] {
            b.set(i);
        }
        assert!(!b.take(1) && !b.take(65) && !b.take(100_000));
        for i in [0, 63, 64, 1000] {
            assert!(b.take(i), "{i}");
            assert!(!b.take(i), "{i} twice");
        }
    }

    /// A key whose hash is itself: where it starts is chosen by the test.
    #[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
    struct Placed(u64);

    impl TableKey for Placed {
        fn hash(&self) -> u64 {
            self.0
        }
    }

    #[test]
    fn a_table_shrunk_in_place_finds_every_key_wrapped_or_not() {
        // Keys crowded at the end (they wrap around to slot 0), at the
        // start, and spread out, in a table four times too big; then
        // shrunk, every key is still found with its id, and no other.
        let mut keys: Vec<Placed> = Vec::new();
        keys.extend((0..40).map(|i| Placed(u64::MAX - i)));
        keys.extend((0..40).map(Placed));
        keys.extend((1..2000u64).map(|i| Placed(i.wrapping_mul(0x9e37_79b9_7f4a_7c15))));
        let mut t: IdTable<Placed> = IdTable::with_capacity(keys.len() * 4);
        for (id, &k) in keys.iter().enumerate() {
            t.insert_new(k, id as u32);
        }
        assert!(t.slots[0].id != 0, "the keys at the end should wrap");
        t.shrink_to_fit();
        assert_eq!(t.slots.len(), IdTable::<Placed>::slots_for(keys.len()));
        assert_eq!(t.len(), keys.len());
        for (id, &k) in keys.iter().enumerate() {
            assert_eq!(t.get(k), Some(id as u32), "{k:?}");
        }
        assert_eq!(t.get(Placed(12345)), None);
        assert_eq!(t.entries().count(), keys.len());
        // It still grows and takes new keys.
        for i in 0..3000u64 {
            t.insert_new(Placed(i << 40 | 7), (keys.len() as u64 + i) as u32);
        }
        assert_eq!(
            t.get(Placed(2999 << 40 | 7)),
            Some(keys.len() as u32 + 2999)
        );
        assert_eq!(t.get(Placed(u64::MAX)), Some(0));
        // Already at its smallest: unchanged.
        let before = t.slots.len();
        t.shrink_to_fit();
        t.shrink_to_fit();
        assert!(t.slots.len() <= before);
        assert_eq!(t.get(Placed(5)), Some(45));
    }

    #[test]
    fn tables_shrunk_in_place_find_every_key_whatever_the_clusters() {
        // Random tables: runs of keys crowded at random places (the end
        // included, so that they wrap), others spread, one to four times
        // more slots than needed; after shrinking, every key is found.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..300 {
            let mut keys: Vec<Placed> = Vec::new();
            for _ in 0..1 + next() % 6 {
                let at = next() | if round % 3 == 0 { 0xfff0 << 48 } else { 0 };
                let step = 1 + next() % (1 << 40);
                keys.extend((0..next() % 300).map(|i| Placed(at.wrapping_add(i * step))));
            }
            keys.extend((0..next() % 500).map(|_| Placed(next())));
            keys.sort_unstable_by_key(|k| k.0);
            keys.dedup();
            let spare = 1 + (next() % 4) as usize;
            let mut t: IdTable<Placed> = IdTable::with_capacity(keys.len() * spare);
            for (id, &k) in keys.iter().enumerate() {
                t.insert_new(k, id as u32);
            }
            t.shrink_to_fit();
            assert_eq!(t.len(), keys.len());
            for (id, &k) in keys.iter().enumerate() {
                assert_eq!(t.get(k), Some(id as u32), "round {round}, {k:?}");
            }
        }
    }

    #[test]
    fn id_table_finds_what_it_stored_across_growth() {
        let mut t: IdTable<(u64, u64)> = IdTable::with_capacity(4);
        for i in 0..10_000u64 {
            let (id, new) = t.get_or_insert_with((i % 97, i * 31), || i as u32);
            assert!(new);
            assert_eq!(id, i as u32);
        }
        assert_eq!(t.len, 10_000);
        for i in (0..10_000u64).rev() {
            assert_eq!(t.get((i % 97, i * 31)), Some(i as u32));
            assert_eq!(
                t.get_or_insert_with((i % 97, i * 31), || 0),
                (i as u32, false)
            );
        }
        assert_eq!(t.get((1, 2)), None);
        // Every key once, with its id; the table was sized to what it
        // holds, not to a power of two.
        let mut all: Vec<_> = t.entries().map(|(_, id)| id).collect();
        all.sort_unstable();
        assert_eq!(all, (0..10_000).collect::<Vec<u32>>());
        assert!(t
            .entries()
            .all(|(k, id)| k == (id as u64 % 97, id as u64 * 31)));
        assert!(!t.slots.len().is_power_of_two() && t.len() * 4 <= t.slots.len() * 3);
        // Made again at its smallest, then with other ids: the same keys.
        t.shrink_to_fit();
        assert_eq!(t.slots.len(), 10_000 * 4 / 3 + 1);
        t.remap_ids(|id| id * 2);
        for i in 0..10_000u64 {
            assert_eq!(t.get((i % 97, i * 31)), Some(2 * i as u32));
        }
        assert_eq!(t.len(), 10_000);
        let mut u: IdTable<u64> = IdTable::default();
        u.insert_new(0, 5);
        assert_eq!(u.get(0), Some(5));
        assert!(u.get(1).is_none() && u.len == 1);
    }
}
