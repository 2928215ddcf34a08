//! From the samples per function of every profiled run to how each
//! function's cost grows: its cost per run is samples × the sampling
//! period (CPU seconds), fitted with the sweep's own statistics
//! (`slowlab_sweep::fit_series`: exponent over the top three sizes with its
//! bootstrap interval, local exponents, the same verdict rules), against
//! its cost in the baseline runs (n = 0), for its inclusive and its self
//! cost.
//!
//! A function with fewer than `MIN_SAMPLES_AT_MAX` samples per run at the
//! largest size (median) is not fitted: its verdict is `too-few-samples`.
//!
//! The order of the result is the report's: first the functions whose own
//! (self) cost grows super-linearly, the largest self share at the largest
//! size first — the first of them is where the growth lives; then every
//! other fitted function, the fastest-growing inclusive cost first; then
//! those with too few samples, the most sampled first.
//!
//! Pure: no I/O.

use std::collections::BTreeMap;

use slowlab_model::results::{FunctionGrowth, FunctionPoint, FunctionVerdict};
use slowlab_sweep::{fit_series, stats::median};

use crate::counts::{FunctionKey, RunProfile};

/// Fewer samples per run than this (median) at the largest size and a
/// function is listed as having too few samples instead of being fitted:
/// below it, the counting noise of the smaller top sizes (±1/√samples)
/// alone moves an exponent by tenths.
pub const MIN_SAMPLES_AT_MAX: u64 = 50;

/// Per function, per run: (size, inclusive samples, self samples).
type Series = Vec<(u64, u64, u64)>;

/// Fits every function seen in `runs` (`(n, profile)` in the order they
/// ran; n = 0 marks baseline runs), skipping the first `warmup` runs.
pub fn fit_functions(
    runs: &[(u64, RunProfile)],
    warmup: usize,
    period_s: f64,
    seed: u64,
) -> Vec<FunctionGrowth> {
    let runs = &runs[warmup.min(runs.len())..];
    let Some(max_n) = runs.iter().map(|r| r.0).max().filter(|&n| n > 0) else {
        return Vec::new();
    };
    let total_at_max = median_of(runs.iter().filter(|r| r.0 == max_n).map(|r| r.1.total));

    let mut series: BTreeMap<&FunctionKey, Series> = BTreeMap::new();
    for (i, (_, run)) in runs.iter().enumerate() {
        for c in &run.functions {
            let s = series.entry(&c.key).or_insert_with(|| {
                // Zero in every run before this one.
                runs.iter().map(|r| (r.0, 0, 0)).collect()
            });
            s[i].1 += c.samples;
            s[i].2 += c.self_samples;
        }
    }

    let mut fitted: Vec<(FunctionGrowth, f64)> = series
        .into_iter()
        .map(|(key, s)| fit_one(key, &s, max_n, total_at_max, period_s, seed))
        .collect();
    fitted.sort_by(|(a, a_max), (b, b_max)| {
        let rank = |f: &FunctionGrowth| match (f.self_verdict, f.verdict) {
            (FunctionVerdict::Superlinear, _) => 0,
            (_, FunctionVerdict::TooFewSamples) => 2,
            _ => 1,
        };
        let by_rank = rank(a).cmp(&rank(b));
        let within = match rank(a) {
            0 => b.self_share_at_max.total_cmp(&a.self_share_at_max),
            1 => b
                .exponent
                .unwrap_or(f64::NEG_INFINITY)
                .total_cmp(&a.exponent.unwrap_or(f64::NEG_INFINITY))
                .then(b.share_at_max.total_cmp(&a.share_at_max)),
            _ => b_max.total_cmp(a_max),
        };
        by_rank.then(within).then_with(|| a.name.cmp(&b.name))
    });
    fitted.into_iter().map(|(f, _)| f).collect()
}

/// One function's fit, and its median inclusive samples at the largest size.
fn fit_one(
    key: &FunctionKey,
    s: &Series,
    max_n: u64,
    total_at_max: f64,
    period_s: f64,
    seed: u64,
) -> (FunctionGrowth, f64) {
    let at_max =
        |pick: fn(&(u64, u64, u64)) -> u64| median_of(s.iter().filter(|r| r.0 == max_n).map(pick));
    let (incl_max, self_max) = (at_max(|r| r.1), at_max(|r| r.2));
    let share = |m: f64| {
        if total_at_max > 0.0 {
            m / total_at_max
        } else {
            0.0
        }
    };
    let fit = |pick: fn(&(u64, u64, u64)) -> u64, samples_at_max: f64| {
        if samples_at_max < MIN_SAMPLES_AT_MAX as f64 {
            return None;
        }
        let obs: Vec<(u64, f64)> = s
            .iter()
            .filter(|r| r.0 > 0)
            .map(|r| (r.0, pick(r) as f64 * period_s))
            .collect();
        let base: Vec<f64> = s
            .iter()
            .filter(|r| r.0 == 0)
            .map(|r| pick(r) as f64 * period_s)
            .collect();
        Some(fit_series(&obs, &base, seed))
    };
    let inclusive = fit(|r| r.1, incl_max);
    let own = fit(|r| r.2, self_max);

    let mut points: Vec<FunctionPoint> = Vec::new();
    let mut sizes: Vec<u64> = s.iter().map(|r| r.0).collect();
    sizes.sort_unstable();
    sizes.dedup();
    for n in sizes {
        let at = s.iter().filter(|r| r.0 == n);
        points.push(FunctionPoint {
            n,
            samples: at.clone().map(|r| r.1).collect(),
            self_samples: at.map(|r| r.2).collect(),
        });
    }
    let too_few = |m: f64| {
        format!(
            "{m:.0} samples per run at n={max_n} (median), fewer than the \
             {MIN_SAMPLES_AT_MAX} a fit needs"
        )
    };
    let growth = FunctionGrowth {
        name: key.name.clone(),
        module: key.module.clone(),
        kernel: key.kernel,
        exponent: inclusive.as_ref().and_then(|f| f.exponent),
        exponent_ci: inclusive.as_ref().and_then(|f| f.exponent_ci),
        verdict: inclusive
            .as_ref()
            .map_or(FunctionVerdict::TooFewSamples, |f| f.verdict.into()),
        share_at_max: share(incl_max),
        local_exponents: inclusive
            .as_ref()
            .map(|f| f.local_exponents.clone())
            .unwrap_or_default(),
        self_exponent: own.as_ref().and_then(|f| f.exponent),
        self_exponent_ci: own.as_ref().and_then(|f| f.exponent_ci),
        self_verdict: own
            .as_ref()
            .map_or(FunctionVerdict::TooFewSamples, |f| f.verdict.into()),
        self_share_at_max: share(self_max),
        reason: inclusive
            .as_ref()
            .map_or_else(|| too_few(incl_max), |f| f.reason.clone()),
        points,
    };
    (growth, incl_max)
}

fn median_of(values: impl Iterator<Item = u64>) -> f64 {
    let v: Vec<f64> = values.map(|x| x as f64).collect();
    if v.is_empty() {
        0.0
    } else {
        median(&v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counts::FunctionCount;

    const PERIOD_S: f64 = 0.001;

    fn key(name: &str) -> FunctionKey {
        FunctionKey {
            name: name.into(),
            module: "prog".into(),
            kernel: false,
        }
    }

    /// A run at `n` of a program whose `main` calls `quad` (c·n² samples)
    /// and `lin` (c·n), both leaves, plus `rare` (3 samples at any size).
    fn run(n: u64) -> (u64, RunProfile) {
        let quad = n * n / 1000;
        let lin = 10 * n;
        let rare = 3;
        let leaf = |name: &str, s: u64| FunctionCount {
            key: key(name),
            self_samples: s,
            samples: s,
        };
        let mut functions = vec![FunctionCount {
            key: key("main"),
            self_samples: 0,
            samples: quad + lin + rare,
        }];
        for (name, s) in [("quad", quad), ("lin", lin), ("rare", rare)] {
            if s > 0 {
                functions.push(leaf(name, s));
            }
        }
        (
            n,
            RunProfile {
                total: quad + lin + rare,
                functions,
                warnings: Vec::new(),
            },
        )
    }

    fn sweep() -> Vec<(u64, RunProfile)> {
        let mut runs = vec![run(1000)]; // the warm-up
        for n in [0, 1000, 2000, 4000, 8000] {
            runs.extend([run(n), run(n), run(n)]);
        }
        runs
    }

    fn find<'a>(fs: &'a [FunctionGrowth], name: &str) -> &'a FunctionGrowth {
        fs.iter().find(|f| f.name == name).unwrap()
    }

    #[test]
    fn quadratic_linear_and_rare_functions_are_told_apart() {
        let fs = fit_functions(&sweep(), 1, PERIOD_S, 7);
        let quad = find(&fs, "quad");
        assert_eq!(format!("{:.2}", quad.exponent.unwrap()), "2.00");
        assert_eq!(
            quad.verdict,
            FunctionVerdict::Superlinear,
            "{}",
            quad.reason
        );
        assert_eq!(quad.self_verdict, FunctionVerdict::Superlinear);
        // 64000 of 64000 + 80000 + 3 samples at n=8000.
        assert!((quad.share_at_max - 64000.0 / 144003.0).abs() < 1e-9);

        let lin = find(&fs, "lin");
        assert_eq!(format!("{:.2}", lin.exponent.unwrap()), "1.00");
        assert_eq!(lin.verdict, FunctionVerdict::Linear, "{}", lin.reason);

        let rare = find(&fs, "rare");
        assert_eq!(rare.verdict, FunctionVerdict::TooFewSamples);
        assert_eq!(rare.self_verdict, FunctionVerdict::TooFewSamples);
        assert_eq!(rare.exponent, None);
        assert!(rare.reason.contains("fewer than the 50"), "{}", rare.reason);

        // main: inclusive, fitted; its own cost is nothing.
        let main = find(&fs, "main");
        assert_ne!(main.verdict, FunctionVerdict::TooFewSamples);
        assert_eq!(main.self_verdict, FunctionVerdict::TooFewSamples);
        assert!((main.share_at_max - 1.0).abs() < 1e-9);
    }

    #[test]
    fn the_growing_leaf_comes_first_and_the_rare_last() {
        let fs = fit_functions(&sweep(), 1, PERIOD_S, 7);
        let names: Vec<&str> = fs.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["quad", "main", "lin", "rare"]);
    }

    #[test]
    fn points_hold_every_run_and_the_warm_up_is_skipped() {
        let fs = fit_functions(&sweep(), 1, PERIOD_S, 7);
        let quad = find(&fs, "quad");
        let sizes: Vec<u64> = quad.points.iter().map(|p| p.n).collect();
        assert_eq!(sizes, [0, 1000, 2000, 4000, 8000]);
        assert!(quad.points.iter().all(|p| p.samples.len() == 3));
        assert_eq!(quad.points[4].samples, [64000; 3]);
        assert_eq!(quad.points[0].samples, [0; 3]);
    }

    #[test]
    fn no_runs_no_functions() {
        assert!(fit_functions(&[], 0, PERIOD_S, 1).is_empty());
        assert!(fit_functions(&[run(0)], 0, PERIOD_S, 1).is_empty());
    }
}
