//! Helpers for the lab's unit tests: ready-made sweep results.
//!
//! What it does not do: run anything; it only builds fixtures.

use slowlab_model::results::{Point, SizeRow, SweepResult, Verdict};

/// A sweep result with one run per size (`(n, seconds)`), the given verdict
/// and exponent (interval ±0.1).
pub fn sweep_result(verdict: Verdict, exponent: f64, times: &[(u64, f64)]) -> SweepResult {
    SweepResult {
        command: vec![],
        sizes: times.iter().map(|t| t.0).collect(),
        skipped_sizes: vec![],
        points: times
            .iter()
            .map(|&(n, t)| Point {
                n,
                cpu_s: vec![t],
                wall_s: vec![t],
            })
            .collect(),
        baseline: None,
        rows: times
            .iter()
            .map(|&(n, t)| SizeRow {
                n,
                reps: 1,
                median_cpu_s: t,
                net_cpu_s: t,
                min_wall_s: t,
                median_wall_s: t,
                local_exponent: None,
            })
            .collect(),
        local_exponents: vec![],
        exponent: Some(exponent),
        exponent_ci: Some([exponent - 0.1, exponent + 0.1]),
        verdict,
        reason: String::new(),
        model: None,
        last_ratio: None,
        projected_next_s: None,
        warnings: vec![],
        seed: 0,
        elapsed_s: 0.0,
        interrupted: false,
        profile_period_s: None,
        functions: Vec::new(),
        cause_groups: Vec::new(),
        causes: Vec::new(),
    }
}
