//! How a command's cost grows with n, from measured points: per-size summary
//! rows, local exponents, the exponent over the top three sizes with its
//! bootstrap interval, and the best-fitting complexity class.
//!
//! Method (see README.md, `slowlab sweep`, "How it measures"):
//! - The cost of a size is the median CPU time of its runs, minus the median
//!   CPU time of the baseline runs (the command at n=0 by default): what is
//!   left is the cost that depends on n. Without this, a fixed start-up cost
//!   flattens every slope towards 0.
//! - Local exponent between consecutive sizes: ln(t₂/t₁) / ln(n₂/n₁), which is
//!   log2(t(2N)/t(N)) for doubling sizes.
//! - The headline exponent is the least-squares slope of ln t on ln n over the
//!   three largest sizes only: growth is what happens at the top, and small
//!   sizes are dominated by noise and constant costs.
//! - Its 95% interval is a percentile bootstrap (see `stats`) that resamples
//!   the runs within each of those sizes and within the baseline.
//! - The complexity class is chosen by weighted least squares of
//!   `t = a + b·f(n)` (a ≥ 0, b > 0, weights 1/t² so that every size counts by
//!   its relative error) over all sizes, for f in 1, n, n log n, n², n³.
//!
//! This module decides nothing; `verdict` does.

use slowlab_model::results::{Model, Point, SizeRow};

use crate::stats;

/// Costs at or below this many seconds are treated as unmeasurable when
/// taking logarithms.
const MIN_MEASURABLE_S: f64 = 1e-6;
/// Bootstrap draws for the exponent's interval.
const BOOTSTRAP_RESAMPLES: usize = 2000;
/// How many of the largest sizes the headline exponent is fitted on.
const TOP_SIZES: usize = 3;

/// Everything computed from the points, before any verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct Growth {
    pub rows: Vec<SizeRow>,
    /// Median CPU seconds of the baseline runs (0 without a baseline).
    pub baseline_cpu_s: f64,
    /// `local_exponents[i]` between `rows[i]` and `rows[i+1]`.
    pub local_exponents: Vec<Option<f64>>,
    pub exponent: Option<f64>,
    pub exponent_ci: Option<[f64; 2]>,
    pub model: Option<Model>,
    /// Net cost ratio between the two largest sizes.
    pub last_ratio: Option<f64>,
    /// Size ratio between the two largest sizes (2 for doubling steps).
    pub last_size_ratio: Option<f64>,
    /// Projected CPU seconds (baseline included) at twice the largest size.
    pub projected_next_s: Option<f64>,
}

/// Per-size rows (sorted by n) and the local exponents between them; the
/// cheap part of `analyze`, without bootstrap or model selection.
pub fn summarize(points: &[Point], baseline: Option<&Point>) -> (Vec<SizeRow>, Vec<Option<f64>>) {
    let mut points: Vec<&Point> = points.iter().filter(|p| p.reps() > 0).collect();
    points.sort_by_key(|p| p.n);
    let baseline_cpu_s = baseline
        .filter(|b| b.reps() > 0)
        .map_or(0.0, |b| stats::median(&b.cpu_s));
    let mut rows: Vec<SizeRow> = points
        .iter()
        .map(|p| {
            let median_cpu_s = stats::median(&p.cpu_s);
            SizeRow {
                n: p.n,
                reps: p.reps(),
                median_cpu_s,
                net_cpu_s: median_cpu_s - baseline_cpu_s,
                min_wall_s: stats::min(&p.wall_s),
                median_wall_s: stats::median(&p.wall_s),
                local_exponent: None,
            }
        })
        .collect();
    let local_exponents: Vec<Option<f64>> = rows
        .windows(2)
        .map(|w| local_exponent(w[0].n, w[0].net_cpu_s, w[1].n, w[1].net_cpu_s))
        .collect();
    for (i, e) in local_exponents.iter().enumerate() {
        rows[i + 1].local_exponent = *e;
    }
    (rows, local_exponents)
}

/// Summarizes points (any order; the result is sorted by n) against an
/// optional baseline. `seed` fixes the bootstrap.
pub fn analyze(points: &[Point], baseline: Option<&Point>, seed: u64) -> Growth {
    let baseline = baseline.filter(|b| b.reps() > 0);
    let baseline_cpu_s = baseline.map_or(0.0, |b| stats::median(&b.cpu_s));
    let (rows, local_exponents) = summarize(points, baseline);
    let mut points: Vec<&Point> = points.iter().filter(|p| p.reps() > 0).collect();
    points.sort_by_key(|p| p.n);

    let top: Vec<&Point> = points[points.len().saturating_sub(TOP_SIZES)..].to_vec();
    let (exponent, exponent_ci) = if top.len() >= 2 {
        top_exponent(&top, baseline, seed)
    } else {
        (None, None)
    };

    let (last_ratio, last_size_ratio) = match rows.as_slice() {
        [.., a, b] if a.net_cpu_s > MIN_MEASURABLE_S && b.net_cpu_s > MIN_MEASURABLE_S => (
            Some(b.net_cpu_s / a.net_cpu_s),
            Some(b.n as f64 / a.n as f64),
        ),
        _ => (None, None),
    };

    let projected_next_s = match (rows.last(), exponent) {
        (Some(last), Some(k)) if last.net_cpu_s > MIN_MEASURABLE_S => {
            Some(baseline_cpu_s + last.net_cpu_s * 2f64.powf(k.max(0.0)))
        }
        _ => None,
    };

    Growth {
        model: select_model(&rows),
        rows,
        baseline_cpu_s,
        local_exponents,
        exponent,
        exponent_ci,
        last_ratio,
        last_size_ratio,
        projected_next_s,
    }
}

/// ln(t₂/t₁) / ln(n₂/n₁); `None` when a cost is not measurable or n₁ = 0.
pub fn local_exponent(n1: u64, t1: f64, n2: u64, t2: f64) -> Option<f64> {
    if n1 == 0 || n2 <= n1 || t1 <= MIN_MEASURABLE_S || t2 <= MIN_MEASURABLE_S {
        return None;
    }
    Some((t2 / t1).ln() / (n2 as f64 / n1 as f64).ln())
}

/// Slope over the top sizes of ln(median − baseline) against ln n, and its
/// bootstrap interval: none when a top size has one run (resampling one value gives it
/// back every time, an interval of zero width that says nothing of the noise).
fn top_exponent(
    top: &[&Point],
    baseline: Option<&Point>,
    seed: u64,
) -> (Option<f64>, Option<[f64; 2]>) {
    let xs: Vec<f64> = top.iter().map(|p| p.n as f64).collect();
    let base = baseline.map_or(0.0, |b| stats::median(&b.cpu_s));
    let ys: Vec<f64> = top.iter().map(|p| stats::median(&p.cpu_s) - base).collect();
    if ys.iter().any(|&t| t <= MIN_MEASURABLE_S) {
        return (None, None);
    }
    let exponent = stats::log_log_slope(&xs, &ys);
    if top.iter().any(|p| p.cpu_s.len() < 2) {
        return (exponent, None);
    }

    let mut scratch = Vec::new();
    let mut resampled = vec![0.0; top.len()];
    let ci = stats::bootstrap_interval(seed, BOOTSTRAP_RESAMPLES, |r| {
        let base = baseline.map_or(0.0, |b| r.resampled_median(&b.cpu_s, &mut scratch));
        for (slot, p) in resampled.iter_mut().zip(top) {
            *slot = (r.resampled_median(&p.cpu_s, &mut scratch) - base).max(MIN_MEASURABLE_S);
        }
        stats::log_log_slope(&xs, &resampled)
    });
    (exponent, ci)
}

/// The complexity class with the smallest weighted residual, or `None` with
/// fewer than three measurable sizes.
fn select_model(rows: &[SizeRow]) -> Option<Model> {
    let data: Vec<(f64, f64)> = rows
        .iter()
        .filter(|r| r.net_cpu_s > MIN_MEASURABLE_S && r.n > 0)
        .map(|r| (r.n as f64, r.net_cpu_s))
        .collect();
    if data.len() < 3 {
        return None;
    }
    Model::ALL
        .iter()
        .filter_map(|&m| fit_model(m, &data).map(|rss| (m, rss)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(m, _)| m)
}

/// Weighted residual sum of squares of the best `t = a + b·f(n)` with a ≥ 0
/// and b > 0 (b free for the constant model); `None` when no such fit exists.
fn fit_model(model: Model, data: &[(f64, f64)]) -> Option<f64> {
    // Weights 1/t²: minimize Σ ((t − a − b f)/t)².
    let rss = |a: f64, b: f64| -> f64 {
        data.iter()
            .map(|&(n, t)| ((t - a - b * model.eval(n)) / t).powi(2))
            .sum()
    };
    if model == Model::Constant {
        // Weighted mean: a = Σ(1/t) / Σ(1/t²).
        let a = data.iter().map(|&(_, t)| 1.0 / t).sum::<f64>()
            / data.iter().map(|&(_, t)| 1.0 / (t * t)).sum::<f64>();
        return Some(rss(a, 0.0));
    }
    // Normal equations of the weighted problem with u = 1/t, v = f/t, target 1.
    let (mut suu, mut suv, mut svv, mut su, mut sv) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(n, t) in data {
        let u = 1.0 / t;
        let v = model.eval(n) / t;
        suu += u * u;
        suv += u * v;
        svv += v * v;
        su += u;
        sv += v;
    }
    let det = suu * svv - suv * suv;
    let (mut a, mut b) = if det.abs() > f64::MIN_POSITIVE {
        ((su * svv - sv * suv) / det, (sv * suu - su * suv) / det)
    } else {
        (-1.0, 0.0)
    };
    if a < 0.0 {
        // Refit through the origin: b = Σv / Σv².
        a = 0.0;
        b = sv / svv;
    }
    (b > 0.0 && b.is_finite()).then(|| rss(a, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(n: u64, cpu: &[f64]) -> Point {
        Point {
            n,
            cpu_s: cpu.to_vec(),
            wall_s: cpu.to_vec(),
        }
    }

    fn exact(n: u64, cost: impl Fn(f64) -> f64) -> Point {
        let t = cost(n as f64);
        point(n, &[t, t, t])
    }

    #[test]
    fn baseline_is_subtracted_before_exponents() {
        // 0.5 s start-up plus a quadratic part.
        let cost = |n: f64| 0.5 + 1e-8 * n * n;
        let points: Vec<Point> = [1000, 2000, 4000, 8000]
            .iter()
            .map(|&n| exact(n, cost))
            .collect();
        let base = exact(0, cost);
        let g = analyze(&points, Some(&base), 1);
        assert!((g.exponent.unwrap() - 2.0).abs() < 1e-9);
        for e in &g.local_exponents {
            assert!((e.unwrap() - 2.0).abs() < 1e-9);
        }
        assert_eq!(g.model, Some(Model::Quadratic));
        assert!((g.last_ratio.unwrap() - 4.0).abs() < 1e-9);
        // Projection: 0.5 + net(8000)·4.
        let expected = 0.5 + 1e-8 * 8000f64.powi(2) * 4.0;
        assert!((g.projected_next_s.unwrap() - expected).abs() < 1e-6);
    }

    #[test]
    fn without_baseline_a_start_up_cost_flattens_the_slope() {
        // Documents why the baseline exists.
        let cost = |n: f64| 0.5 + 1e-8 * n * n;
        let points: Vec<Point> = [1000, 2000, 4000].iter().map(|&n| exact(n, cost)).collect();
        let g = analyze(&points, None, 1);
        assert!(g.exponent.unwrap() < 1.0);
    }

    #[test]
    fn model_selection_tells_the_classes_apart_on_exact_data() {
        let sizes = [1000u64, 2000, 4000, 8000, 16000];
        type Cost = fn(f64) -> f64;
        let cases: [(Model, Cost); 4] = [
            (Model::Linear, |n| 1e-4 * n),
            (Model::NLogN, |n| 1e-5 * n * n.ln()),
            (Model::Quadratic, |n| 1e-8 * n * n),
            (Model::Cubic, |n| 1e-12 * n * n * n),
        ];
        for (model, cost) in cases {
            let points: Vec<Point> = sizes.iter().map(|&n| exact(n, cost)).collect();
            assert_eq!(analyze(&points, None, 1).model, Some(model), "{model:?}");
        }
    }

    #[test]
    fn interval_contains_the_estimate_and_is_reproducible() {
        let points = vec![
            point(1000, &[1.0, 1.1, 0.9]),
            point(2000, &[4.1, 3.9, 4.0]),
            point(4000, &[16.0, 15.5, 16.8]),
        ];
        let a = analyze(&points, None, 42);
        let b = analyze(&points, None, 42);
        let [lo, hi] = a.exponent_ci.unwrap();
        assert!(lo <= a.exponent.unwrap() && a.exponent.unwrap() <= hi);
        assert_eq!(a.exponent_ci, b.exponent_ci);
    }

    #[test]
    fn unmeasurable_costs_give_no_exponent_instead_of_nonsense() {
        let points = vec![point(1, &[0.001]), point(2, &[0.001])];
        let base = point(0, &[0.001]);
        let g = analyze(&points, Some(&base), 1);
        assert_eq!(g.local_exponents, vec![None]);
        assert_eq!(g.model, None);
    }
}
