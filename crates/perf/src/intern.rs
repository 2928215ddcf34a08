//! Small helpers for interning: a fast non-cryptographic hasher (the
//! Firefox/rustc "Fx" hash) and a string table. No I/O, no parsing.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use slowlab_model::trace::StrIdx;

/// The FxHash function: one multiply and rotate per word. Good for integer
/// keys; not resistant to adversarial input (not needed here).
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut a = [0u8; 8];
            a[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(a));
        }
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(SEED);
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.write_u64(i as u64);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

pub type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// Interns strings into a `Vec<String>` (the trace's string table).
#[derive(Default)]
pub struct Strings {
    map: FxMap<String, StrIdx>,
}

impl Strings {
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
}
