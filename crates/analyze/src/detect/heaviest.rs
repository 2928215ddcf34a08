//! Picking the heaviest entry of a tally (the top call site, stack, holder or
//! victim) so that the detectors' findings do not change from run to run: on
//! equal weights the least key wins, whatever order a hash map yields them in.
//!
//! It only compares; the detectors decide what the weights and keys are.

use std::cmp::Ordering;

/// A weight a tally adds up: sample counts or seconds.
pub trait Weight {
    /// A total order (seconds compare with `f64::total_cmp`).
    fn order(&self, other: &Self) -> Ordering;
}

impl Weight for u64 {
    fn order(&self, other: &Self) -> Ordering {
        self.cmp(other)
    }
}

impl Weight for f64 {
    fn order(&self, other: &Self) -> Ordering {
        self.total_cmp(other)
    }
}

impl<W: Weight> Weight for &W {
    fn order(&self, other: &Self) -> Ordering {
        (*self).order(*other)
    }
}

/// The `(key, weight)` pair of the greatest weight; among equal weights, the
/// one with the least key. `None` for no pairs.
pub fn heaviest<K: Ord, W: Weight>(pairs: impl IntoIterator<Item = (K, W)>) -> Option<(K, W)> {
    pairs
        .into_iter()
        .max_by(|a, b| a.1.order(&b.1).then_with(|| b.0.cmp(&a.0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn the_greatest_weight_wins() {
        assert_eq!(heaviest([("a", 1u64), ("b", 3), ("c", 2)]), Some(("b", 3)));
        assert_eq!(heaviest([(1, 0.5), (2, 0.25)]), Some((1, 0.5)));
        assert_eq!(heaviest(Vec::<(u8, u64)>::new()), None);
    }

    #[test]
    fn equal_weights_go_to_the_least_key_in_any_order() {
        let forward = [("lib.c", 2u64), ("app.c", 5), ("main.c", 5)];
        let mut backward = forward;
        backward.reverse();
        assert_eq!(heaviest(forward), Some(("app.c", 5)));
        assert_eq!(heaviest(backward), Some(("app.c", 5)));
        // From hash maps whose iteration orders differ.
        for seed in 0..20 {
            let map: HashMap<String, f64> = (0..10)
                .map(|i| (format!("site{}", (i + seed) % 10), 1.5))
                .collect();
            let (key, _) = heaviest(map.iter()).unwrap();
            assert_eq!(key, "site0");
        }
    }
}
