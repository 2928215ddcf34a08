//! The verdict rule: from the growth statistics, decide `linear`,
//! `superlinear`, `step` or `inconclusive`, say why in one sentence, and say
//! what measurement would settle an inconclusive case.
//!
//! The rule (README.md, `slowlab sweep`, "How it measures"):
//! - superlinear: the exponent's 95% interval lies at or above
//!   `SUPERLINEAR_LOWER` *and* the last two local exponents both stay at or
//!   above `HIGH_LOCAL` *and* agree: the smaller one's excess over 1 is at
//!   least `CONSISTENT_EXCESS` of the larger one's. A single high local
//!   exponent is not enough: a cache or memory-size step makes one doubling
//!   expensive and the next cheap, and noise can lift the cheap one a little
//!   above `HIGH_LOCAL` (2.6 then 1.3 is a step, not growth; 1.5 then 1.6 is
//!   growth). When only the agreement is missing, more repetitions decide.
//! - linear: the interval's upper bound is at most `LINEAR_UPPER` and the last
//!   local exponent is not itself a jump (below `JUMP_LOCAL`).
//! - step: not linear by the rule above, some local exponent is a jump
//!   (≥ `JUMP_LOCAL`), and the last local exponent is back at or below
//!   `LINEAR_UPPER`: cost jumped once and then grew linearly again.
//! - otherwise inconclusive, with a suggestion: a larger size when the only
//!   jump is at the top (it may be a step or the start of growth) or the
//!   interval is already narrow, more repetitions when the interval is wide.
//!
//! Pure: no I/O, no measurement.

use slowlab_model::results::Verdict;

use crate::growth::Growth;

/// Lower bound of the 95% interval needed to call growth super-linear.
pub const SUPERLINEAR_LOWER: f64 = 1.25;
/// Upper bound of the 95% interval below which growth is called linear.
pub const LINEAR_UPPER: f64 = 1.3;
/// A local exponent that "stays high" for the super-linear rule.
pub const HIGH_LOCAL: f64 = 1.25;
/// The last two local exponents agree when the smaller excess over linear
/// is at least this fraction of the larger one.
pub const CONSISTENT_EXCESS: f64 = 1.0 / 3.0;
/// A local exponent this high between two sizes is a jump.
pub const JUMP_LOCAL: f64 = 1.5;
/// An interval wider than this is worth narrowing with more repetitions.
pub const WIDE_INTERVAL: f64 = 0.3;

/// What would help an inconclusive verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextStep {
    /// Nothing: the verdict is settled.
    Done,
    /// Repeat the top sizes to narrow the interval.
    MoreRepetitions,
    /// Measure a larger size.
    LargerSize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub verdict: Verdict,
    /// One sentence with the numbers behind the verdict.
    pub reason: String,
    pub next: NextStep,
}

pub fn decide(g: &Growth) -> Decision {
    let locals: Vec<Option<f64>> = g.local_exponents.clone();
    let last = locals.last().copied().flatten();
    let second_last = locals.iter().rev().nth(1).copied().flatten();
    let sizes = g.rows.len();

    // One run per size: the exponent, but no interval; the verdict then rests on the
    // exponent alone, and its reason says so.
    let single_runs = g.exponent.is_some() && g.exponent_ci.is_none();
    let (Some(k), Some([lo, hi])) = (g.exponent, g.exponent_ci.or(g.exponent.map(|k| [k, k])))
    else {
        let reason = if sizes < 2 {
            "fewer than two sizes were measured".to_string()
        } else {
            "the costs of the top sizes are not measurable above the baseline".to_string()
        };
        return inconclusive(reason, NextStep::LargerSize);
    };

    let measured = if single_runs {
        format!("exponent {k:.2} from one run per size (no interval: run each size at least twice)")
    } else {
        format!("exponent {k:.2} with 95% interval [{lo:.2}–{hi:.2}]")
    };

    let jump = locals
        .iter()
        .enumerate()
        .filter_map(|(i, e)| e.map(|e| (i, e)))
        .filter(|&(_, e)| e >= JUMP_LOCAL)
        .max_by(|a, b| a.1.total_cmp(&b.1));

    let both_high =
        last.is_some_and(|e| e >= HIGH_LOCAL) && second_last.is_some_and(|e| e >= HIGH_LOCAL);
    let agree = match (last, second_last) {
        (Some(a), Some(b)) => (a.min(b) - 1.0) >= CONSISTENT_EXCESS * (a.max(b) - 1.0),
        _ => false,
    };
    if sizes >= 3 && lo >= SUPERLINEAR_LOWER && both_high && agree {
        return settled(
            Verdict::Superlinear,
            format!(
                "{measured} above {SUPERLINEAR_LOWER}, \
                 and the last two doublings stay high ({:.2}, {:.2})",
                second_last.unwrap_or(f64::NAN),
                last.unwrap_or(f64::NAN)
            ),
        );
    }

    if hi <= LINEAR_UPPER && last.is_none_or(|e| e < JUMP_LOCAL) {
        let mut reason = format!("{measured} at most {LINEAR_UPPER}");
        if let Some((i, e)) = jump {
            reason.push_str(&format!(
                "; a one-off step between n={} and n={} (local exponent {e:.2}) lies below the top sizes",
                g.rows[i].n,
                g.rows[i + 1].n
            ));
        }
        return settled(Verdict::Linear, reason);
    }

    if let (Some((i, e)), Some(l)) = (jump, last) {
        if l <= LINEAR_UPPER {
            return settled(
                Verdict::Step,
                format!(
                    "cost jumped once between n={} and n={} (local exponent {e:.2}) \
                     and grew at {l:.2} after it: a one-off step, not growth",
                    g.rows[i].n,
                    g.rows[i + 1].n
                ),
            );
        }
    }

    let jump_only_at_top =
        last.is_some_and(|e| e >= JUMP_LOCAL) && second_last.is_none_or(|e| e < HIGH_LOCAL);
    let disagree = both_high && !agree;
    let next = if disagree {
        NextStep::MoreRepetitions
    } else if jump_only_at_top || hi - lo <= WIDE_INTERVAL {
        NextStep::LargerSize
    } else {
        NextStep::MoreRepetitions
    };
    let why = if disagree {
        "the last two doublings disagree, as after a one-off step; repetitions tell which"
    } else if jump_only_at_top {
        "only the last doubling is steep, which a larger size tells apart from a one-off step"
    } else if hi - lo > WIDE_INTERVAL {
        "the interval is too wide to decide"
    } else {
        "the interval straddles the thresholds"
    };
    inconclusive(format!("{measured}: {why}"), next)
}

/// Growth statistics and verdict of points measured elsewhere (a lab
/// variant, a Windows probe's sweep), with no baseline to subtract: the
/// programs that produce such points time only their own work.
pub fn judge_points(points: &[slowlab_model::results::Point], seed: u64) -> (Growth, Decision) {
    let growth = crate::growth::analyze(points, None, seed);
    let decision = decide(&growth);
    (growth, decision)
}

fn settled(verdict: Verdict, reason: String) -> Decision {
    Decision {
        verdict,
        reason,
        next: NextStep::Done,
    }
}

fn inconclusive(reason: String, next: NextStep) -> Decision {
    Decision {
        verdict: Verdict::Inconclusive,
        reason,
        next,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::growth::analyze;
    use slowlab_model::results::Point;

    fn sweep(sizes: &[u64], cost: impl Fn(f64) -> f64, jitter: &[f64]) -> Growth {
        let points: Vec<Point> = sizes
            .iter()
            .map(|&n| {
                let t = cost(n as f64);
                let cpu: Vec<f64> = jitter.iter().map(|j| t * (1.0 + j)).collect();
                Point {
                    n,
                    wall_s: cpu.clone(),
                    cpu_s: cpu,
                }
            })
            .collect();
        analyze(&points, None, 3)
    }

    const CALM: [f64; 3] = [0.0, 0.01, -0.01];
    const SIZES: [u64; 4] = [1000, 2000, 4000, 8000];

    #[test]
    fn quadratic_is_superlinear() {
        let d = decide(&sweep(&SIZES, |n| 1e-8 * n * n, &CALM));
        assert_eq!(d.verdict, Verdict::Superlinear, "{}", d.reason);
    }

    #[test]
    fn n_log_n_is_linear() {
        let d = decide(&sweep(&SIZES, |n| 1e-6 * n * n.ln(), &CALM));
        assert_eq!(d.verdict, Verdict::Linear, "{}", d.reason);
    }

    #[test]
    fn a_jump_followed_by_linear_growth_is_a_step() {
        // The jump lies inside the top three sizes, growth after it is linear.
        let cost = |n: f64| if n >= 8000.0 { 6e-4 * n } else { 1e-4 * n };
        let d = decide(&sweep(&[1000, 2000, 4000, 8000, 16000], cost, &CALM));
        assert_eq!(d.verdict, Verdict::Step, "{}", d.reason);
        assert!(d.reason.contains("n=4000 and n=8000"), "{}", d.reason);
    }

    #[test]
    fn a_step_far_below_the_top_is_linear_and_mentioned() {
        let cost = |n: f64| if n >= 2000.0 { 6e-4 * n } else { 1e-4 * n };
        let d = decide(&sweep(&[1000, 2000, 4000, 8000, 16000], cost, &CALM));
        assert_eq!(d.verdict, Verdict::Linear, "{}", d.reason);
        assert!(d.reason.contains("one-off step"), "{}", d.reason);
    }

    #[test]
    fn a_jump_at_the_very_top_asks_for_a_larger_size() {
        let cost = |n: f64| if n >= 8000.0 { 6e-4 * n } else { 1e-4 * n };
        let d = decide(&sweep(&SIZES, cost, &CALM));
        assert_eq!(d.verdict, Verdict::Inconclusive, "{}", d.reason);
        assert_eq!(d.next, NextStep::LargerSize);
    }

    #[test]
    fn a_jump_then_a_slightly_high_doubling_is_not_growth() {
        // Local exponents 2.58 then 1.32 (noise on the linear part after a step).
        let cost = |n: f64| match n as u64 {
            8000 => 6e-4 * n,
            16000 => 6e-4 * n * 1.25,
            _ => 1e-4 * n,
        };
        let d = decide(&sweep(&[1000, 2000, 4000, 8000, 16000], cost, &CALM));
        assert_eq!(d.verdict, Verdict::Inconclusive, "{}", d.reason);
        assert_eq!(d.next, NextStep::MoreRepetitions);
    }

    #[test]
    fn heavy_noise_asks_for_more_repetitions() {
        // n^1.3 with ±40% noise: the interval is wide.
        let d = decide(&sweep(&SIZES, |n| 1e-5 * n.powf(1.3), &[0.0, 0.4, -0.4]));
        assert_eq!(d.verdict, Verdict::Inconclusive, "{}", d.reason);
        assert_eq!(d.next, NextStep::MoreRepetitions);
    }
}
