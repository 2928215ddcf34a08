//! Small, pure statistics helpers: median, percentiles, least-squares lines
//! and a seeded percentile bootstrap.
//!
//! Method notes:
//! - Percentiles interpolate linearly between order statistics (the "type 7"
//!   definition of Hyndman & Fan, 1996, the default of R and NumPy).
//! - The bootstrap is the plain percentile bootstrap (Efron & Tibshirani,
//!   "An Introduction to the Bootstrap", 1993, ch. 13): resample each group's
//!   observations with replacement, recompute the statistic, take the 2.5th
//!   and 97.5th percentiles. Resampling within each size keeps the design
//!   (which sizes were measured) fixed.
//! - The random generator is ChaCha8 seeded explicitly, whose output the
//!   `rand_chacha` crate promises not to change between versions, so the same
//!   data and seed give the same interval on every machine.
//!
//! Nothing here knows about sweeps or verdicts.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Median of the values; NaN for an empty slice.
pub fn median(values: &[f64]) -> f64 {
    percentile(values, 50.0)
}

/// The smallest value; NaN for an empty slice.
pub fn min(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::NAN, f64::min)
}

/// The `p`-th percentile (0–100) with linear interpolation; NaN when empty.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    percentile_of_sorted(&sorted, p)
}

/// Like `percentile` for data already sorted ascending.
pub fn percentile_of_sorted(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p / 100.0).clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    let frac = rank - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

/// Ordinary least squares line `y = intercept + slope·x`; `None` with fewer
/// than two distinct x values.
pub fn least_squares(xs: &[f64], ys: &[f64]) -> Option<(f64, f64)> {
    if xs.len() != ys.len() || xs.len() < 2 {
        return None;
    }
    let n = xs.len() as f64;
    let mean_x = xs.iter().sum::<f64>() / n;
    let mean_y = ys.iter().sum::<f64>() / n;
    let sxx: f64 = xs.iter().map(|x| (x - mean_x).powi(2)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let sxy: f64 = xs
        .iter()
        .zip(ys)
        .map(|(x, y)| (x - mean_x) * (y - mean_y))
        .sum();
    let slope = sxy / sxx;
    Some((slope, mean_y - slope * mean_x))
}

/// Slope of `ln y` against `ln x`: the exponent k of `y ∝ x^k`.
/// `None` when any value is not positive or the fit is undefined.
pub fn log_log_slope(xs: &[f64], ys: &[f64]) -> Option<f64> {
    if xs
        .iter()
        .chain(ys)
        .any(|v| v.is_nan() || *v <= 0.0 || !v.is_finite())
    {
        return None;
    }
    let lx: Vec<f64> = xs.iter().map(|x| x.ln()).collect();
    let ly: Vec<f64> = ys.iter().map(|y| y.ln()).collect();
    least_squares(&lx, &ly).map(|(slope, _)| slope)
}

/// A seeded random source for resampling, stable across crate versions.
pub struct Resampler {
    rng: ChaCha8Rng,
}

impl Resampler {
    pub fn new(seed: u64) -> Self {
        Resampler {
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    /// Median of a resample (with replacement, same size) of `values`.
    pub fn resampled_median(&mut self, values: &[f64], scratch: &mut Vec<f64>) -> f64 {
        scratch.clear();
        for _ in 0..values.len() {
            let i = self.rng.random_range(0..values.len());
            scratch.push(values[i]);
        }
        scratch.sort_by(f64::total_cmp);
        percentile_of_sorted(scratch, 50.0)
    }

    /// Shuffles in place (Fisher–Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.rng.random_range(0..=i);
            items.swap(i, j);
        }
    }
}

/// Percentile-bootstrap 95% interval of `statistic`, which is called
/// `resamples` times with the resampler and must return a finite value for
/// the draw to count. `None` when fewer than half of the draws were finite.
pub fn bootstrap_interval<F>(seed: u64, resamples: usize, mut statistic: F) -> Option<[f64; 2]>
where
    F: FnMut(&mut Resampler) -> Option<f64>,
{
    let mut resampler = Resampler::new(seed);
    let mut draws: Vec<f64> = (0..resamples)
        .filter_map(|_| statistic(&mut resampler))
        .filter(|v| v.is_finite())
        .collect();
    if draws.len() * 2 < resamples.max(1) {
        return None;
    }
    draws.sort_by(f64::total_cmp);
    Some([
        percentile_of_sorted(&draws, 2.5),
        percentile_of_sorted(&draws, 97.5),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn percentile_interpolates_like_numpy() {
        // numpy.percentile([1,2,3,4,5], 10) == 1.4
        assert!((percentile(&[5.0, 4.0, 3.0, 2.0, 1.0], 10.0) - 1.4).abs() < 1e-12);
    }

    #[test]
    fn least_squares_recovers_an_exact_line() {
        let (slope, intercept) = least_squares(&[1.0, 2.0, 3.0], &[5.0, 7.0, 9.0]).unwrap();
        assert!((slope - 2.0).abs() < 1e-12);
        assert!((intercept - 3.0).abs() < 1e-12);
        assert!(least_squares(&[1.0, 1.0], &[2.0, 3.0]).is_none());
    }

    #[test]
    fn log_log_slope_of_a_power_law() {
        let xs = [1000.0, 2000.0, 4000.0];
        let ys: Vec<f64> = xs.iter().map(|x: &f64| 3e-9 * x.powf(2.0)).collect();
        assert!((log_log_slope(&xs, &ys).unwrap() - 2.0).abs() < 1e-9);
        assert!(log_log_slope(&xs, &[1.0, 0.0, 2.0]).is_none());
    }

    #[test]
    fn bootstrap_is_reproducible_for_a_seed_and_varies_across_seeds() {
        let data = [1.0, 2.0, 3.0, 4.0, 10.0];
        let stat = |r: &mut Resampler| {
            let mut scratch = Vec::new();
            Some(r.resampled_median(&data, &mut scratch))
        };
        let a = bootstrap_interval(7, 500, stat).unwrap();
        let b = bootstrap_interval(7, 500, stat).unwrap();
        assert_eq!(a, b);
        assert!(a[0] <= 3.0 && a[1] >= 3.0);
    }

    #[test]
    fn shuffle_is_a_permutation() {
        let mut items: Vec<u32> = (0..50).collect();
        Resampler::new(1).shuffle(&mut items);
        let mut sorted = items.clone();
        sorted.sort();
        assert_eq!(sorted, (0..50).collect::<Vec<_>>());
        assert_ne!(items, sorted);
    }
}
