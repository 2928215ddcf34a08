//! The sweep driver: decides which runs to make, in which order, when to stop
//! and when to measure more, and assembles the `SweepResult`.
//!
//! Schedule:
//! 1. warm-up runs at the smallest size (discarded);
//! 2. the baseline size and the three smallest sizes, every repetition of
//!    each, in one shuffled order (so that a drift in machine speed does not
//!    line up with n);
//! 3. the remaining sizes, smallest first, each only if its projected cost
//!    fits in what is left of the budget; after each, the verdict is
//!    re-evaluated and, when super-linear growth is already certain, the
//!    larger (and most expensive) sizes are skipped (`early_stop`);
//!    without early stop, stages 2 and 3 run one repetition per size and
//!    the other repetitions of all sizes follow in one shuffled batch;
//! 4. while the verdict is inconclusive and the budget allows: more
//!    repetitions of the top sizes and the baseline (shuffled), or one more
//!    size, twice the largest, as `verdict::decide` suggests.
//!
//! Time is accounted as the sum of the runs' wall times, so a fake executor
//! makes the whole schedule exact. A cancelled sweep (Ctrl-C) returns what
//! it measured with `interrupted` set. This module never prints; progress
//! goes to a `Progress` callback.

use std::collections::BTreeMap;

use slowlab_model::results::{Point, SweepResult, Verdict};
use slowlab_model::units::seconds;

use crate::cancel::Cancel;
use crate::executor::{has_placeholder, Executor, Measurement, RunError};
use crate::growth::{analyze, summarize, Growth};
use crate::stats::{self, Resampler};
use crate::verdict::{decide, Decision, NextStep};

/// How a sweep is run. `Default` gives the documented defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepConfig {
    /// Planned sizes, strictly ascending, all > 0.
    pub sizes: Vec<u64>,
    /// Repetitions per size.
    pub reps: usize,
    /// Discarded runs at the smallest size before measuring.
    pub warmup: usize,
    /// Size whose cost is subtracted as fixed start-up cost; `None` for none.
    pub baseline_size: Option<u64>,
    /// Seconds of run time the sweep may spend, adaptivity included.
    pub budget_s: f64,
    /// Seed of the shuffling and of the bootstrap.
    pub seed: u64,
    /// Skip the remaining planned sizes once growth is certainly super-linear.
    pub early_stop: bool,
    /// Add repetitions or a size while the verdict is inconclusive.
    pub adaptive: bool,
    /// Repetitions per size never exceed this when adding more.
    pub max_reps: usize,
    /// Below this many CPU seconds above the baseline the top size is
    /// "too small to measure": a warning, and no early stop. 50 ms suits
    /// whole-process timing; a child that times itself can go far lower.
    pub min_net_cost_s: f64,
}

impl Default for SweepConfig {
    fn default() -> Self {
        SweepConfig {
            sizes: Vec::new(),
            reps: 3,
            warmup: 1,
            baseline_size: Some(0),
            budget_s: 300.0,
            seed: 0x510_1ab,
            early_stop: true,
            adaptive: true,
            max_reps: 12,
            min_net_cost_s: 0.050,
        }
    }
}

/// Repetitions added per size in one adaptive round.
const EXTRA_REPS: usize = 2;
/// Adaptive rounds at most, whatever the budget.
const MAX_ADAPTIVE_ROUNDS: usize = 8;
/// Wall time this many times the CPU time means waiting or a busy machine.
const WALL_CPU_WARNING: f64 = 1.3;
/// Sizes processed in the first, shuffled stage.
const FIRST_STAGE_SIZES: usize = 3;

/// Receives progress as the sweep goes; every method has a silent default.
pub trait Progress {
    /// A run finished. `spent_s` is run time so far; `remaining_s` the
    /// projected run time of what is still planned (0 when unknown).
    fn run_finished(&mut self, _n: u64, _m: &Measurement, _spent_s: f64, _remaining_s: f64) {}
    /// Something worth telling the user while the sweep runs.
    fn message(&mut self, _text: &str) {}
}

/// Progress that goes nowhere.
pub struct NoProgress;
impl Progress for NoProgress {}

#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("the baseline run at n={n} failed: {source}; choose another --baseline-size or use --no-baseline")]
    Baseline {
        n: u64,
        #[source]
        source: RunError,
    },
    #[error(transparent)]
    Run(#[from] RunError),
    #[error("{0}")]
    Config(String),
}

/// Which size a scheduled run is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Job {
    Baseline(u64),
    Size(u64),
}

struct Sweep<'a, E: Executor + ?Sized> {
    exec: &'a mut E,
    cfg: &'a SweepConfig,
    progress: &'a mut dyn Progress,
    cancel: &'a Cancel,
    rng: Resampler,
    points: BTreeMap<u64, Point>,
    baseline: Option<Point>,
    spent_s: f64,
    /// Wall seconds of the warm-up, a scale for projections before any point.
    warmup_wall_s: Option<f64>,
    warnings: Vec<String>,
    skipped: Vec<u64>,
    interrupted: bool,
}

/// Runs a whole sweep of `command` (only used for the result and the
/// placeholder check; `exec` knows how to run it).
pub fn run_sweep<E: Executor + ?Sized>(
    exec: &mut E,
    command: Vec<String>,
    cfg: &SweepConfig,
    progress: &mut dyn Progress,
    cancel: &Cancel,
) -> Result<SweepResult, SweepError> {
    validate(cfg)?;
    let mut sweep = Sweep {
        exec,
        cfg,
        progress,
        cancel,
        rng: Resampler::new(cfg.seed ^ 0x5eed_5eed),
        points: BTreeMap::new(),
        baseline: cfg.baseline_size.map(Point::new),
        spent_s: 0.0,
        warmup_wall_s: None,
        warnings: Vec::new(),
        skipped: Vec::new(),
        interrupted: false,
    };
    if !has_placeholder(&command) {
        sweep.warn(
            "the command has no {n}: every size runs the same command, so any growth is noise"
                .to_string(),
        );
    }
    sweep.schedule()?;
    Ok(sweep.finish(command))
}

fn validate(cfg: &SweepConfig) -> Result<(), SweepError> {
    if cfg.sizes.is_empty() {
        return Err(SweepError::Config("no sizes to measure".into()));
    }
    if cfg.sizes.windows(2).any(|w| w[0] >= w[1]) || cfg.sizes[0] == 0 {
        return Err(SweepError::Config(
            "sizes must be positive and strictly increasing".into(),
        ));
    }
    if cfg.reps == 0 {
        return Err(SweepError::Config("--reps must be at least 1".into()));
    }
    if let Some(b) = cfg.baseline_size {
        if b >= cfg.sizes[0] {
            return Err(SweepError::Config(format!(
                "the baseline size {b} must be smaller than the smallest size {}",
                cfg.sizes[0]
            )));
        }
    }
    if cfg.budget_s.is_nan() || cfg.budget_s <= 0.0 {
        return Err(SweepError::Config("the budget must be positive".into()));
    }
    Ok(())
}

impl<E: Executor + ?Sized> Sweep<'_, E> {
    fn schedule(&mut self) -> Result<(), SweepError> {
        let sizes = self.cfg.sizes.clone();
        for _ in 0..self.cfg.warmup {
            let Some(m) = self.measure(Job::Size(sizes[0]))? else {
                return Ok(());
            };
            self.warmup_wall_s = Some(m.wall_s);
        }

        // Without early stop every planned size will run, so each is first
        // measured once (smallest first, for the budget's projections) and
        // the other repetitions of all sizes run in one shuffled batch at
        // the end: a change of machine speed during the sweep (another
        // virtual machine on the host, a build starting) then spreads over
        // every size instead of bending the curve at the sizes it hit.
        let interleave = !self.cfg.early_stop;
        let first_reps = if interleave { 1 } else { self.cfg.reps };
        let first = FIRST_STAGE_SIZES.min(sizes.len());
        let stage = |reps: usize, sizes: &[u64]| -> Vec<Job> {
            let mut jobs = Vec::new();
            for _ in 0..reps {
                jobs.extend(self.cfg.baseline_size.map(Job::Baseline));
                jobs.extend(sizes.iter().map(|&n| Job::Size(n)));
            }
            jobs
        };
        let jobs = stage(first_reps, &sizes[..first]);
        let mut deferred = stage(self.cfg.reps - first_reps, &sizes[..first]);
        if !self.run_batch(jobs)? {
            return Ok(());
        }
        if self.spent_s > self.cfg.budget_s {
            // The first sizes run whatever the budget: no verdict comes from fewer.
            self.warn(format!(
                "over the budget of {}: the first {first} sizes, which every verdict needs, took {}; \
                 raise --budget, or give smaller sizes",
                seconds(self.cfg.budget_s),
                seconds(self.spent_s)
            ));
        }

        let mut over_budget = false;
        for (index, &n) in sizes.iter().enumerate().skip(first) {
            let growth = self.growth();
            let measurable = growth
                .rows
                .last()
                .is_some_and(|r| r.net_cpu_s >= self.cfg.min_net_cost_s);
            if self.cfg.early_stop && measurable && decide(&growth).verdict == Verdict::Superlinear
            {
                self.skip_rest(
                    &sizes[index..],
                    format!(
                        "stopped early: growth is already {} super-linear at n={}; \
                     not run: {} (use --all-sizes to run every size)",
                        if growth.exponent_ci.is_some() {
                            "certainly"
                        } else {
                            "by one run per size"
                        },
                        self.largest(),
                        list(&sizes[index..])
                    ),
                );
                return Ok(());
            }
            let cost = self.cfg.reps as f64 * self.predict_wall(n);
            let pending: f64 = deferred
                .iter()
                .map(|&j| self.predict_wall(job_size(j)))
                .sum();
            if self.spent_s + pending + cost > self.cfg.budget_s {
                self.skip_rest(&sizes[index..], format!(
                    "not run: {} (projected {} for n={n} would exceed the budget of {}; raise --budget)",
                    list(&sizes[index..]),
                    seconds(cost),
                    seconds(self.cfg.budget_s)
                ));
                over_budget = true;
                break;
            }
            if !self.run_batch(vec![Job::Size(n); first_reps])? {
                return Ok(());
            }
            deferred.extend(vec![Job::Size(n); self.cfg.reps - first_reps]);
        }
        if !deferred.is_empty() {
            self.progress
                .message("measuring the other repetitions of every size, in shuffled order");
            if !self.run_batch(deferred)? {
                return Ok(());
            }
        }
        if over_budget {
            return Ok(());
        }

        if self.cfg.adaptive {
            self.adapt()?;
        }
        Ok(())
    }

    /// More repetitions or a larger size while the verdict is inconclusive.
    fn adapt(&mut self) -> Result<(), SweepError> {
        for _ in 0..MAX_ADAPTIVE_ROUNDS {
            let Decision { verdict, next, .. } = decide(&self.growth());
            if verdict != Verdict::Inconclusive || next == NextStep::Done {
                return Ok(());
            }
            let top: Vec<u64> = self.points.keys().rev().take(3).copied().collect();
            let reps_maxed = top
                .iter()
                .any(|n| self.points[n].reps() + EXTRA_REPS > self.cfg.max_reps);
            let (jobs, what) = if next == NextStep::MoreRepetitions && !reps_maxed {
                let mut jobs = Vec::new();
                for _ in 0..EXTRA_REPS {
                    jobs.extend(self.cfg.baseline_size.map(Job::Baseline));
                    jobs.extend(top.iter().map(|&n| Job::Size(n)));
                }
                (
                    jobs,
                    format!("{EXTRA_REPS} more repetitions of the top sizes"),
                )
            } else {
                let Some(n) = self.largest().checked_mul(2) else {
                    return Ok(());
                };
                (
                    vec![Job::Size(n); self.cfg.reps],
                    format!("one more size, n={n}"),
                )
            };
            let cost: f64 = jobs.iter().map(|&j| self.predict_wall(job_size(j))).sum();
            if self.spent_s + cost > self.cfg.budget_s {
                self.warn(format!(
                    "inconclusive: {what} would take about {} more, beyond the budget of {}; \
                     raise --budget or measure larger sizes",
                    seconds(cost),
                    seconds(self.cfg.budget_s)
                ));
                return Ok(());
            }
            self.progress
                .message(&format!("inconclusive so far: measuring {what}"));
            if !self.run_batch(jobs)? {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Runs the jobs in shuffled order; false when interrupted.
    fn run_batch(&mut self, mut jobs: Vec<Job>) -> Result<bool, SweepError> {
        self.rng.shuffle(&mut jobs);
        for (i, &job) in jobs.iter().enumerate() {
            let Some(m) = self.measure(job)? else {
                return Ok(false);
            };
            let point = match job {
                Job::Baseline(_) => self.baseline.get_or_insert_with(|| Point::new(0)),
                Job::Size(n) => self.points.entry(n).or_insert_with(|| Point::new(n)),
            };
            point.cpu_s.push(m.cpu_s);
            point.wall_s.push(m.wall_s);
            let remaining = jobs[i + 1..]
                .iter()
                .map(|&j| self.predict_wall(job_size(j)))
                .sum::<f64>()
                + self.planned_remaining_s();
            self.progress
                .run_finished(job_size(job), &m, self.spent_s, remaining);
        }
        Ok(true)
    }

    /// One run; `None` when interrupted.
    fn measure(&mut self, job: Job) -> Result<Option<Measurement>, SweepError> {
        if self.cancel.is_cancelled() {
            self.interrupted = true;
            return Ok(None);
        }
        let result = self.exec.run(job_size(job));
        match result {
            Ok(m) => {
                self.spent_s += m.wall_s;
                Ok(Some(m))
            }
            Err(RunError::Interrupted) => {
                self.interrupted = true;
                Ok(None)
            }
            Err(source) => Err(match job {
                Job::Baseline(n) => SweepError::Baseline { n, source },
                Job::Size(_) => SweepError::Run(source),
            }),
        }
    }

    fn growth(&self) -> Growth {
        let points: Vec<Point> = self.points.values().cloned().collect();
        analyze(&points, self.baseline.as_ref(), self.cfg.seed)
    }

    fn largest(&self) -> u64 {
        self.points.keys().next_back().copied().unwrap_or(0)
    }

    /// Projected wall seconds of one run at `n`: measured if known, else the
    /// largest measured size below scaled by the growth seen so far (at
    /// least linear, at most cubic).
    fn predict_wall(&self, n: u64) -> f64 {
        if let Some(p) = self.points.get(&n) {
            return stats::median(&p.wall_s);
        }
        let base = self
            .baseline
            .as_ref()
            .filter(|b| b.reps() > 0)
            .map_or(0.0, |b| stats::median(&b.wall_s));
        let below = self.points.range(..n).next_back();
        let Some((&n0, p0)) = below else {
            let scale = self.warmup_wall_s.unwrap_or(0.0);
            return scale * (n as f64 / self.cfg.sizes[0] as f64).max(1.0);
        };
        if n0 == 0 || n == 0 {
            return base;
        }
        let points: Vec<Point> = self.points.values().cloned().collect();
        let (_, local_exponents) = summarize(&points, self.baseline.as_ref());
        let exponent = local_exponents
            .last()
            .copied()
            .flatten()
            .unwrap_or(1.0)
            .clamp(1.0, 3.0);
        let net = (stats::median(&p0.wall_s) - base).max(0.0);
        base + net * (n as f64 / n0 as f64).powf(exponent)
    }

    /// Projected run time of the planned sizes not measured yet.
    fn planned_remaining_s(&self) -> f64 {
        self.cfg
            .sizes
            .iter()
            .filter(|n| !self.points.contains_key(n) && !self.skipped.contains(n))
            .map(|&n| self.cfg.reps as f64 * self.predict_wall(n))
            .sum()
    }

    fn skip_rest(&mut self, sizes: &[u64], note: String) {
        self.skipped.extend_from_slice(sizes);
        self.warn(note);
    }

    fn warn(&mut self, text: String) {
        self.progress.message(&text);
        self.warnings.push(text);
    }

    fn finish(mut self, command: Vec<String>) -> SweepResult {
        let growth = self.growth();
        let decision = decide(&growth);
        let mut warnings = std::mem::take(&mut self.warnings);
        warnings.extend(self.exec.take_warnings());
        warnings.extend(measurement_warnings(&growth, self.cfg.min_net_cost_s));
        if self.interrupted {
            warnings.push(format!(
                "interrupted: the result holds the {} run(s) measured before Ctrl-C",
                self.points.values().map(Point::reps).sum::<usize>()
            ));
        }
        SweepResult {
            command,
            sizes: self.points.keys().copied().collect(),
            skipped_sizes: self.skipped,
            points: self.points.into_values().collect(),
            baseline: self.baseline.filter(|b| b.reps() > 0),
            local_exponents: growth.local_exponents.clone(),
            exponent: growth.exponent,
            exponent_ci: growth.exponent_ci,
            verdict: decision.verdict,
            reason: decision.reason,
            model: growth.model,
            last_ratio: growth.last_ratio,
            projected_next_s: growth.projected_next_s,
            rows: growth.rows,
            warnings,
            seed: self.cfg.seed,
            elapsed_s: self.spent_s,
            interrupted: self.interrupted,
            profile_period_s: None,
            functions: Vec::new(),
            cause_groups: Vec::new(),
            causes: Vec::new(),
        }
    }
}

/// Warnings about the quality of the measurements themselves.
fn measurement_warnings(g: &Growth, min_net_cost_s: f64) -> Vec<String> {
    let mut warnings = Vec::new();
    let Some(top) = g.rows.last() else {
        return warnings;
    };
    if top.net_cpu_s < min_net_cost_s {
        warnings.push(format!(
            "the largest size (n={}) costs only {} of CPU above the baseline: too little to \
             measure reliably; use larger sizes (e.g. --sizes {}..{})",
            top.n,
            seconds(top.net_cpu_s.max(0.0)),
            top.n.saturating_mul(2),
            top.n.saturating_mul(16)
        ));
    }
    if top.median_cpu_s > 0.0
        && top.median_wall_s >= 0.020
        && top.median_wall_s > WALL_CPU_WARNING * top.median_cpu_s
    {
        warnings.push(format!(
            "wall time is {:.1}× the CPU time at n={}: the machine is busy or the command waits \
             (I/O, sleep, locks) rather than computes; the verdict judges CPU time only",
            top.median_wall_s / top.median_cpu_s,
            top.n
        ));
    }
    warnings
}

fn job_size(job: Job) -> u64 {
    match job {
        Job::Baseline(n) | Job::Size(n) => n,
    }
}

fn list(sizes: &[u64]) -> String {
    sizes
        .iter()
        .map(|n| format!("n={n}"))
        .collect::<Vec<_>>()
        .join(", ")
}
