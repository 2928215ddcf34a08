//! How each cause of a command's critical path grows across the sizes of
//! a sweep (`sweep --critical-path`): every run's path is cut into seconds
//! by cause as `slowlab diff` cuts it (`path_diff::causes_of`: state, wait
//! kind, process and thread names, function or resource), and each
//! cause's seconds per run are fitted against n with the sweep's own
//! statistics (`slowlab_sweep::fit_series`: the exponent over the top
//! three sizes with its bootstrap interval, the local exponents, the same
//! verdict rules), its seconds in the baseline runs (n = 0) subtracted.
//!
//! Two levels are fitted: each cause, and each group (state, kind,
//! process, thread: every function or resource of it together). The
//! answer speaks of groups, as `slowlab diff`'s does: a sleep's or a disk
//! wait's `blocked_in` changes from one wait to the next, and a CPU
//! stretch's top function too, so no single one of them is the cause.
//!
//! A cause with less than [`MIN_SECONDS_AT_MAX`] per run at the largest
//! size (median), or less than [`MIN_SHARE_AT_MAX`] of the path there, is
//! not fitted (verdict `too-few-samples`: too little time to say).
//!
//! Order (of both lists): the causes that grow super-linearly first, the
//! largest share at the largest size first; then the other fitted ones,
//! the largest share first; then those too small to fit, the largest
//! first.
//!
//! Pure: no I/O.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use slowlab_analyze::path_diff::{what_of, CauseKey, FLOOR_SHARE};
use slowlab_model::critical_path::SegmentState;
use slowlab_model::results::{CauseGrowth, CausePoint, FunctionVerdict};
use slowlab_sweep::{fit_series, stats::median};

/// Less than this many seconds per run at the largest size (median) and
/// a cause is not fitted: the scheduler's and the recording's own jitter
/// (a few milliseconds a run) would be most of it.
pub const MIN_SECONDS_AT_MAX: f64 = 0.010;

/// Less than this share of the path's wall time at the largest size and a
/// cause is not fitted (`slowlab diff`'s floor).
pub const MIN_SHARE_AT_MAX: f64 = FLOOR_SHARE;

/// One run: its size and its critical path's seconds by cause, in key
/// order, so that sums over a run add in the same order every time (a
/// hash map's order changed the last bit of a share from one call to the
/// next).
pub type PathRun = (u64, BTreeMap<CauseKey, f64>);

/// The fits of a sweep's runs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CauseFits {
    /// By (state, kind, process, thread).
    pub groups: Vec<CauseGrowth>,
    /// By cause.
    pub causes: Vec<CauseGrowth>,
}

/// Fits every cause and group seen in `runs` (in the order they ran; n = 0
/// marks baseline runs), skipping the first `warmup` runs. `seed` fixes
/// the bootstrap.
pub fn fit_causes(runs: &[PathRun], warmup: usize, seed: u64) -> CauseFits {
    let runs = &runs[warmup.min(runs.len())..];
    let Some(max_n) = runs.iter().map(|r| r.0).max().filter(|&n| n > 0) else {
        return CauseFits::default();
    };
    let wall_at_max = median_or_zero(
        runs.iter()
            .filter(|r| r.0 == max_n)
            .map(|r| r.1.values().sum::<f64>())
            .collect(),
    );
    let groups: Vec<PathRun> = runs
        .iter()
        .map(|(n, causes)| {
            let mut by: BTreeMap<CauseKey, f64> = BTreeMap::new();
            for (k, v) in causes {
                *by.entry(group_of(k)).or_default() += v;
            }
            (*n, by)
        })
        .collect();
    let causes = fit_level(runs, max_n, wall_at_max, seed, |_| None);
    // A group's `mostly`: its cause with the most time at the largest size.
    let mut mostly: HashMap<CauseKey, (f64, String)> = HashMap::new();
    for c in &causes {
        let Some(name) = c.function.clone().or_else(|| c.resource.clone()) else {
            continue;
        };
        let key = group_of(&key_of(c));
        let best = mostly
            .entry(key)
            .or_insert((f64::NEG_INFINITY, String::new()));
        if c.median_at_max_s > best.0 {
            *best = (c.median_at_max_s, name);
        }
    }
    let groups = fit_level(&groups, max_n, wall_at_max, seed, |k| {
        mostly.get(k).map(|(_, name)| name.clone())
    });
    CauseFits { groups, causes }
}

/// The group a cause belongs to: its key without function or resource.
fn group_of(k: &CauseKey) -> CauseKey {
    CauseKey {
        function: None,
        resource: None,
        ..k.clone()
    }
}

fn key_of(c: &CauseGrowth) -> CauseKey {
    CauseKey {
        state: c.state,
        kind: c.kind,
        process: c.process.clone(),
        thread: c.thread.clone(),
        function: c.function.clone(),
        resource: c.resource.clone(),
    }
}

/// Fits every key of `runs`; `mostly` names a group's main cause.
fn fit_level(
    runs: &[PathRun],
    max_n: u64,
    wall_at_max: f64,
    seed: u64,
    mostly: impl Fn(&CauseKey) -> Option<String>,
) -> Vec<CauseGrowth> {
    let keys: BTreeSet<&CauseKey> = runs.iter().flat_map(|r| r.1.keys()).collect();
    let mut out: Vec<CauseGrowth> = keys
        .into_iter()
        .map(|k| {
            // Zero in a run that did not have it.
            let series: Vec<(u64, f64)> = runs
                .iter()
                .map(|(n, m)| (*n, m.get(k).copied().unwrap_or(0.0)))
                .collect();
            fit_one(k, &series, max_n, wall_at_max, seed, mostly(k))
        })
        .collect();
    out.sort_by(|a, b| {
        let rank = |c: &CauseGrowth| match c.verdict {
            FunctionVerdict::Superlinear => 0,
            FunctionVerdict::TooFewSamples => 2,
            _ => 1,
        };
        rank(a)
            .cmp(&rank(b))
            .then(b.median_at_max_s.total_cmp(&a.median_at_max_s))
            .then_with(|| key_of(a).cmp(&key_of(b)))
    });
    out
}

fn fit_one(
    k: &CauseKey,
    series: &[(u64, f64)],
    max_n: u64,
    wall_at_max: f64,
    seed: u64,
    mostly: Option<String>,
) -> CauseGrowth {
    let at_max = median_or_zero(
        series
            .iter()
            .filter(|r| r.0 == max_n)
            .map(|r| r.1)
            .collect(),
    );
    let share = if wall_at_max > 0.0 {
        at_max / wall_at_max
    } else {
        0.0
    };
    let fit = (at_max >= MIN_SECONDS_AT_MAX && share >= MIN_SHARE_AT_MAX).then(|| {
        let obs: Vec<(u64, f64)> = series.iter().copied().filter(|r| r.0 > 0).collect();
        let base: Vec<f64> = series.iter().filter(|r| r.0 == 0).map(|r| r.1).collect();
        fit_series(&obs, &base, seed)
    });
    let mut sizes: Vec<u64> = series.iter().map(|r| r.0).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let points = sizes
        .into_iter()
        .map(|n| CausePoint {
            n,
            seconds: series.iter().filter(|r| r.0 == n).map(|r| r.1).collect(),
        })
        .collect();
    // A group is said with its main function or resource, as diff says it.
    let named = CauseKey {
        function: k
            .function
            .clone()
            .or_else(|| mostly.clone().filter(|_| k.state == SegmentState::Cpu)),
        resource: k
            .resource
            .clone()
            .or_else(|| mostly.clone().filter(|_| k.state == SegmentState::Blocked)),
        ..k.clone()
    };
    CauseGrowth {
        state: k.state,
        kind: k.kind,
        process: k.process.clone(),
        thread: k.thread.clone(),
        function: k.function.clone(),
        resource: k.resource.clone(),
        mostly,
        words: what_of(&named),
        exponent: fit.as_ref().and_then(|f| f.exponent),
        exponent_ci: fit.as_ref().and_then(|f| f.exponent_ci),
        verdict: fit
            .as_ref()
            .map_or(FunctionVerdict::TooFewSamples, |f| f.verdict.into()),
        median_at_max_s: at_max,
        share_at_max: share,
        local_exponents: fit
            .as_ref()
            .map(|f| f.local_exponents.clone())
            .unwrap_or_default(),
        reason: fit.as_ref().map_or_else(
            || {
                format!(
                    "{:.1} ms per run at n={max_n} (median, {:.1}% of the path): too little \
                     to fit (at least {:.0} ms and {:.0}%)",
                    at_max * 1e3,
                    share * 100.0,
                    MIN_SECONDS_AT_MAX * 1e3,
                    MIN_SHARE_AT_MAX * 100.0
                )
            },
            |f| f.reason.clone(),
        ),
        points,
    }
}

fn median_or_zero(v: Vec<f64>) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        median(&v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slowlab_model::critical_path::WaitKind;

    fn cause(state: SegmentState, kind: Option<WaitKind>, what: &str) -> CauseKey {
        CauseKey {
            state,
            kind,
            process: "prog".into(),
            thread: "prog".into(),
            function: (state == SegmentState::Cpu).then(|| what.to_string()),
            resource: (state == SegmentState::Blocked).then(|| what.to_string()),
        }
    }

    /// A run at `n` of a program that sleeps 1 ms n² times (split between
    /// two kernel functions, as real sleeps are), computes 10 ms × n in
    /// `compute`, and spends 3 ms starting whatever n is; `jitter` scales
    /// everything.
    fn run(n: u64, jitter: f64) -> PathRun {
        let x = n as f64;
        let mut m = BTreeMap::new();
        let sleep = Some(WaitKind::Sleep);
        m.insert(
            cause(SegmentState::Blocked, sleep, "hrtimer_nanosleep"),
            0.0007 * x * x * jitter,
        );
        m.insert(
            cause(SegmentState::Blocked, sleep, "do_nanosleep"),
            0.0003 * x * x * jitter,
        );
        m.insert(
            cause(SegmentState::Cpu, None, "compute"),
            0.010 * x * jitter,
        );
        m.insert(cause(SegmentState::Cpu, None, "_start"), 0.003 * jitter);
        m.retain(|_, v| *v > 0.0);
        (n, m)
    }

    fn sweep() -> Vec<PathRun> {
        let mut runs = vec![run(8, 1.0)]; // the warm-up
        for n in [0, 8, 16, 32] {
            for j in [0.98, 1.0, 1.03] {
                runs.push(run(n, j));
            }
        }
        runs
    }

    fn group(f: &CauseFits, state: SegmentState) -> &CauseGrowth {
        f.groups.iter().find(|g| g.state == state).unwrap()
    }

    #[test]
    fn sleeping_grows_as_n_squared_and_cpu_as_n() {
        let f = fit_causes(&sweep(), 1, 7);
        let sleep = group(&f, SegmentState::Blocked);
        assert_eq!(format!("{:.2}", sleep.exponent.unwrap()), "2.00");
        assert_eq!(
            sleep.verdict,
            FunctionVerdict::Superlinear,
            "{}",
            sleep.reason
        );
        // Named by its larger part, as diff names a group.
        assert_eq!(sleep.mostly.as_deref(), Some("hrtimer_nanosleep"));
        assert_eq!(sleep.words, "sleeping in hrtimer_nanosleep");
        let cpu = group(&f, SegmentState::Cpu);
        // The start-up cost is the baseline's and is subtracted.
        assert_eq!(format!("{:.2}", cpu.exponent.unwrap()), "1.00");
        assert_eq!(cpu.verdict, FunctionVerdict::Linear, "{}", cpu.reason);
        assert_eq!(cpu.words, "on a CPU in compute");
        // The growing group first.
        assert_eq!(f.groups[0].state, SegmentState::Blocked);
    }

    #[test]
    fn shares_are_of_the_paths_wall_time_at_the_largest_size() {
        let f = fit_causes(&sweep(), 1, 7);
        let wall = 0.001 * 32.0 * 32.0 + 0.010 * 32.0 + 0.003;
        let sleep = group(&f, SegmentState::Blocked);
        assert!((sleep.median_at_max_s - 0.001 * 1024.0).abs() < 1e-9);
        assert!((sleep.share_at_max - 1.024 / wall).abs() < 1e-9);
        let total: f64 = f.groups.iter().map(|g| g.share_at_max).sum();
        assert!((total - 1.0).abs() < 1e-9, "{total}");
    }

    #[test]
    fn each_cause_is_fitted_too_and_a_constant_one_is_too_small() {
        let f = fit_causes(&sweep(), 1, 7);
        let find = |what: &str| {
            f.causes
                .iter()
                .find(|c| {
                    c.function.as_deref() == Some(what) || c.resource.as_deref() == Some(what)
                })
                .unwrap()
        };
        assert_eq!(
            format!("{:.2}", find("do_nanosleep").exponent.unwrap()),
            "2.00"
        );
        assert_eq!(format!("{:.2}", find("compute").exponent.unwrap()), "1.00");
        // 3 ms a run: below the 10 ms a fit needs, not guessed.
        let start = find("_start");
        assert_eq!(start.verdict, FunctionVerdict::TooFewSamples);
        assert_eq!(start.exponent, None);
        assert!(start.reason.contains("too little"), "{}", start.reason);
        assert_eq!(f.causes.last().unwrap().function.as_deref(), Some("_start"));
    }

    #[test]
    fn points_hold_every_run_with_zero_where_a_cause_was_absent() {
        let f = fit_causes(&sweep(), 1, 7);
        let sleep = group(&f, SegmentState::Blocked);
        let sizes: Vec<u64> = sleep.points.iter().map(|p| p.n).collect();
        assert_eq!(sizes, [0, 8, 16, 32]);
        assert_eq!(sleep.points[0].seconds, [0.0; 3]);
        assert!(sleep.points.iter().all(|p| p.seconds.len() == 3));
    }

    #[test]
    fn the_warm_up_is_skipped() {
        // A warm-up ten times slower changes nothing.
        let mut runs = sweep();
        runs[0] = run(8, 10.0);
        assert_eq!(fit_causes(&runs, 1, 7), fit_causes(&sweep(), 1, 7));
    }

    #[test]
    fn no_sized_runs_no_fits() {
        assert_eq!(fit_causes(&[], 0, 1), CauseFits::default());
        assert_eq!(fit_causes(&[run(0, 1.0)], 0, 1), CauseFits::default());
    }
}
