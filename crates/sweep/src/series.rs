//! The growth of any measured series, not only a command's CPU time: give
//! observations `(n, value)` (one per run, several per size), optionally
//! the observations of a baseline, and get the same statistics and verdict
//! as a sweep gets for the command itself — the exponent over the top three
//! sizes with its bootstrap interval, the local exponents, the best model
//! and the verdict of `verdict::decide`. `sweep --profile` fits each
//! function's sampled cost with it.
//!
//! Pure: it groups the observations into `Point`s and calls `growth` and
//! `verdict`; it does not know what the values are.

use std::collections::BTreeMap;

use slowlab_model::results::{Model, Point, Verdict};

use crate::growth::analyze;
use crate::verdict::decide;

/// The fit of one series.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesFit {
    /// Sizes with at least one observation, ascending.
    pub sizes: Vec<u64>,
    /// Median value per size, minus the baseline's median.
    pub net_medians: Vec<f64>,
    /// `local_exponents[i]` between `sizes[i]` and `sizes[i+1]`.
    pub local_exponents: Vec<Option<f64>>,
    pub exponent: Option<f64>,
    pub exponent_ci: Option<[f64; 2]>,
    pub model: Option<Model>,
    pub verdict: Verdict,
    /// One sentence with the numbers behind the verdict.
    pub reason: String,
}

/// Fits observations `(n, value)` (any order, several per size; a size of 0
/// is ignored) against the baseline's observations (none: nothing is
/// subtracted). `seed` fixes the bootstrap.
pub fn fit_series(observations: &[(u64, f64)], baseline: &[f64], seed: u64) -> SeriesFit {
    let mut by_size: BTreeMap<u64, Point> = BTreeMap::new();
    for &(n, value) in observations.iter().filter(|o| o.0 > 0) {
        let point = by_size.entry(n).or_insert_with(|| Point::new(n));
        point.cpu_s.push(value);
        point.wall_s.push(value);
    }
    let points: Vec<Point> = by_size.into_values().collect();
    let baseline = (!baseline.is_empty()).then(|| Point {
        n: 0,
        cpu_s: baseline.to_vec(),
        wall_s: baseline.to_vec(),
    });
    let growth = analyze(&points, baseline.as_ref(), seed);
    let decision = decide(&growth);
    SeriesFit {
        sizes: growth.rows.iter().map(|r| r.n).collect(),
        net_medians: growth.rows.iter().map(|r| r.net_cpu_s).collect(),
        local_exponents: growth.local_exponents,
        exponent: growth.exponent,
        exponent_ci: growth.exponent_ci,
        model: growth.model,
        verdict: decision.verdict,
        reason: decision.reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIZES: [u64; 4] = [1000, 2000, 4000, 8000];

    /// Three observations per size of `cost(n)`, each off by `jitter`.
    fn observations(cost: impl Fn(f64) -> f64, jitter: &[f64]) -> Vec<(u64, f64)> {
        SIZES
            .iter()
            .flat_map(|&n| jitter.iter().map(move |j| (n, j)))
            .map(|(n, j)| (n, cost(n as f64) * (1.0 + j)))
            .collect()
    }

    #[test]
    fn a_quadratic_series_is_fitted_at_two_and_called_superlinear() {
        let fit = fit_series(&observations(|n| 3e-9 * n * n, &[0.0; 3]), &[], 1);
        assert_eq!(format!("{:.2}", fit.exponent.unwrap()), "2.00");
        assert_eq!(fit.verdict, Verdict::Superlinear, "{}", fit.reason);
        assert_eq!(fit.model, Some(Model::Quadratic));
        assert_eq!(fit.sizes, SIZES.to_vec());
        for e in &fit.local_exponents {
            assert!((e.unwrap() - 2.0).abs() < 1e-9);
        }
    }

    #[test]
    fn a_linear_series_is_fitted_at_one_and_called_linear() {
        let fit = fit_series(&observations(|n| 2e-5 * n, &[0.01, -0.01, 0.0]), &[], 1);
        assert_eq!(format!("{:.2}", fit.exponent.unwrap()), "1.00");
        assert_eq!(fit.verdict, Verdict::Linear, "{}", fit.reason);
    }

    #[test]
    fn the_baseline_is_subtracted_like_the_commands() {
        // A fixed 0.5 on top of a quadratic: flat without the baseline.
        let obs = observations(|n| 0.5 + 1e-8 * n * n, &[0.0; 3]);
        let with = fit_series(&obs, &[0.5, 0.5], 1);
        assert!((with.exponent.unwrap() - 2.0).abs() < 1e-9);
        let without = fit_series(&obs, &[], 1);
        assert!(without.exponent.unwrap() < 1.5);
    }

    #[test]
    fn a_series_that_is_zero_at_the_top_has_no_exponent() {
        let obs: Vec<(u64, f64)> = SIZES.iter().map(|&n| (n, 0.0)).collect();
        let fit = fit_series(&obs, &[], 1);
        assert_eq!(fit.exponent, None);
        assert_eq!(fit.verdict, Verdict::Inconclusive);
    }
}
