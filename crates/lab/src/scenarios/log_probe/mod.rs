//! log-probe: a program that names its per-process log `name.N.dat` by
//! probing N = 0, 1, 2, … for a free name makes N launches cost O(N²).
//!
//! Reproduced exactly as in the Windows original: N sequential launches of a
//! child (slowlab itself) that checks `name.0.dat`, `name.1.dat`, … with
//! `stat` until one is missing and creates it; control: the same launches
//! with a name that is unique from the start. The launcher (`__child
//! log-launcher`) times its launch loop — CPU of itself and every child, and
//! elapsed time — prints the elapsed time per batch of 10 launches like the
//! original, and removes its log directory before it exits.
//!
//! What the sweeps measure is the time the launches spend finding their log
//! name: each writer times its own search (CPU and elapsed, from its first
//! check to its created file) and the launcher adds them up. That is where
//! the quadratic is. The launches' total time is reported too, but it is no
//! good for telling growth apart here: a check costs ~0.4 µs on Linux
//! (80 µs on the original Windows machine) against ~1 ms to launch a
//! process, so probing only overtakes launching after several thousand
//! launches; the scenario prints where. It also measures what one existence
//! check costs.
//!
//! What it does not do: leave log files behind (the launcher removes its
//! run directory, and the log directory is a `TempDir`) or name files
//! anywhere but there.
//!
//! The files: `child` (the children, `log-launcher` and `log-writer`),
//! `verdict`, `tests`; this one holds the scenario, its sizes, the
//! children's arguments and the check-cost measurement.

mod child;
#[cfg(test)]
mod tests;
mod verdict;

use std::path::{Path, PathBuf};
use std::time::Instant;

use slowlab_model::results::{Role, ScenarioResult};

use crate::measure::{run_child, sweep_variant, VariantSweep};
use crate::runner::Scenario;
use crate::{system, LabContext, LabError, Profile};

pub use child::{launcher_main, writer_main};

use verdict::judge;

pub struct LogProbe;

/// How a writer finds its log name.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Naming {
    /// Check name.0.dat, name.1.dat, … until one is free.
    Probe,
    /// Use a name that is unique from the start.
    Unique,
}

impl Naming {
    fn arg(self) -> &'static str {
        match self {
            Naming::Probe => "probe",
            Naming::Unique => "unique",
        }
    }
}

/// Launches per batch in the original program's progress lines.
const BATCH: u64 = 10;
/// Launches of the original experiment, for the projection line.
const ORIGINAL_LAUNCHES: u64 = 7000;
/// Per-check cost reported for the original Windows machine.
const ORIGINAL_CHECK_S: f64 = 80e-6;

impl Scenario for LogProbe {
    fn id(&self) -> &'static str {
        "log-probe"
    }

    fn summary(&self) -> &'static str {
        "log names found by probing name.0, name.1, … for a free one: N launches cost O(N²)"
    }

    fn needs_root(&self) -> bool {
        false
    }

    fn detector(&self) -> &'static str {
        "linear-probe-names"
    }

    fn run_for_trace(&self, ctx: &mut LabContext, role: Role) -> Result<(), LabError> {
        let logs = crate::context::TempDir::new_in(&log_root(ctx), "log-probe")?;
        let naming = match role {
            Role::Pathological => Naming::Probe,
            Role::Control => Naming::Unique,
        };
        let n = ctx.profile.pick(60, 150, 400).to_string();
        run_child(ctx, &launcher_args(naming, &n, logs.path())).map(|_| ())
    }

    fn preflight(&self, ctx: &LabContext) -> Result<(), LabError> {
        let largest = *sizes(ctx.profile).last().unwrap_or(&0);
        let root = log_root(ctx);
        if let Some(free) = system::free_inodes(&root) {
            if free < largest * 2 + 1000 {
                return Err(LabError::Unsuitable(format!(
                    "{} has only {free} free inodes; {largest} log files need more: use --work-dir",
                    root.display()
                )));
            }
        }
        if let Some(headroom) = system::process_headroom() {
            if headroom < 100 {
                return Err(LabError::Unsuitable(format!(
                    "only {headroom} more processes may be started here (pid or pids-cgroup limit)"
                )));
            }
        }
        Ok(())
    }

    fn run(&self, ctx: &mut LabContext) -> Result<ScenarioResult, LabError> {
        let logs = crate::context::TempDir::new_in(&log_root(ctx), "log-probe")?;
        ctx.line(format!("Log files go to {}.", logs.path().display()));
        let check_s = measure_check_cost(logs.path())?;
        ctx.line(format!(
            "One existence check takes {:.2} µs here ({:.0} µs on the original Windows machine).",
            check_s * 1e6,
            ORIGINAL_CHECK_S * 1e6
        ));

        let sizes = sizes(ctx.profile);
        let mut swept = Vec::new();
        let mut launch_totals = Vec::new();
        for (naming, name, role) in [
            (Naming::Probe, "probe-names", Role::Pathological),
            (Naming::Unique, "unique-names", Role::Control),
        ] {
            ctx.check_cancel()?;
            let spec = VariantSweep {
                name,
                role,
                child_args: launcher_args(naming, "{n}", logs.path()),
                sizes: sizes.clone(),
                reps: ctx.profile.pick(2, 3, 3),
                budget_s: ctx.profile.pick(30.0, 90.0, 900.0),
                early_stop: ctx.profile != Profile::Full && role == Role::Pathological,
            };
            let (result, outputs) = sweep_variant(ctx, &spec)?;
            // The original's progress lines, from the last run at the largest size.
            if let Some((_, output)) = outputs
                .iter()
                .rev()
                .find(|(n, _)| Some(n) == result.sizes.last())
            {
                ctx.line(format!("{name}:"));
                for line in sample_lines(&output.lines, 5) {
                    ctx.line(format!("  {line}"));
                }
            }
            let totals = median_launch_totals(&outputs)?;
            for row in &result.rows {
                let Some(total) = totals.iter().find(|t| t.n == row.n) else {
                    continue;
                };
                ctx.line(format!(
                    "  {name}: {} launches took {:.2} s of CPU, {:.2} s elapsed; finding a log name {:.3} s of CPU",
                    row.n, total.cpu_s, total.wall_s, row.median_cpu_s
                ));
            }
            launch_totals.push(totals);
            for warning in &result.warnings {
                ctx.line(format!("  ({name}: {warning})"));
            }
            swept.push((name, role, result));
        }
        let checks = ORIGINAL_LAUNCHES * (ORIGINAL_LAUNCHES + 1) / 2;
        ctx.line(format!(
            "{ORIGINAL_LAUNCHES} launches would make {checks} existence checks: {:.0} s here, {:.0} min on the original machine.",
            checks as f64 * check_s,
            checks as f64 * ORIGINAL_CHECK_S / 60.0
        ));
        Ok(judge(&swept, &launch_totals, check_s))
    }
}

/// Median totals of the launches at one size: CPU of the launcher and all
/// its children, and elapsed time.
#[derive(Debug, Clone, Copy, PartialEq)]
struct LaunchTotals {
    n: u64,
    cpu_s: f64,
    wall_s: f64,
}

/// Per size (ascending), the median launch totals of the launcher runs.
fn median_launch_totals(
    outputs: &[(u64, crate::measure::ChildOutput)],
) -> Result<Vec<LaunchTotals>, LabError> {
    let mut by_size: std::collections::BTreeMap<u64, (Vec<f64>, Vec<f64>)> = Default::default();
    for (n, output) in outputs {
        let e = by_size.entry(*n).or_default();
        e.0.push(output.number("launch_cpu_s")?);
        e.1.push(output.number("launch_wall_s")?);
    }
    Ok(by_size
        .into_iter()
        .map(|(n, (cpu, wall))| LaunchTotals {
            n,
            cpu_s: slowlab_sweep::stats::median(&cpu),
            wall_s: slowlab_sweep::stats::median(&wall),
        })
        .collect())
}

/// Where the log directories go: a memory filesystem when there is one with
/// room, so that the disk filesystem's own costs of creating and deleting
/// thousands of files (ext4 scans for recently deleted inodes on every
/// create) do not blur the probing; else the lab's work directory.
pub fn log_root(ctx: &LabContext) -> PathBuf {
    let shm = Path::new("/dev/shm");
    let roomy = system::free_disk(shm).is_some_and(|free| free >= 64 << 20);
    if system::is_memory_filesystem(shm) && roomy {
        shm.to_path_buf()
    } else {
        ctx.work_root.clone()
    }
}

pub fn sizes(profile: Profile) -> Vec<u64> {
    match profile {
        Profile::Tiny => vec![50, 100, 200],
        Profile::Quick => vec![250, 500, 1000, 2000],
        // Halvings of the original 7,000 launches.
        Profile::Full => vec![875, 1750, 3500, 7000],
    }
}

/// Arguments of the launcher child; `n` may be `{n}`.
pub fn launcher_args(naming: Naming, n: &str, dir: &Path) -> Vec<String> {
    vec![
        "log-launcher".into(),
        "--naming".into(),
        naming.arg().into(),
        "--n".into(),
        n.into(),
        "--dir".into(),
        dir.to_string_lossy().into_owned(),
    ]
}

/// Arguments of one writer child.
pub fn writer_args(naming: Naming, dir: &Path) -> Vec<String> {
    vec![
        "log-writer".into(),
        "--naming".into(),
        naming.arg().into(),
        "--dir".into(),
        dir.to_string_lossy().into_owned(),
    ]
}

/// At most `count` lines, evenly spread and always including the last.
fn sample_lines(lines: &[String], count: usize) -> Vec<String> {
    if lines.len() <= count {
        return lines.to_vec();
    }
    (1..=count)
        .map(|k| lines[k * lines.len() / count - 1].clone())
        .collect()
}

/// The original's progress line.
pub fn batch_line(seconds: f64, total: u64) -> String {
    format!("{seconds:.2} seconds elapsed for {BATCH} launches ({total} total)")
}

/// Seconds per `stat` of an existing file, over 1,000 files and 100,000
/// checks in this process.
fn measure_check_cost(dir: &Path) -> Result<f64, LabError> {
    let probe_dir = dir.join("check-cost");
    std::fs::create_dir(&probe_dir)
        .map_err(|e| LabError::io("cannot create the check directory", e))?;
    const FILES: usize = 1000;
    const CHECKS: usize = 100_000;
    let paths: Vec<PathBuf> = (0..FILES)
        .map(|i| probe_dir.join(format!("name.{i}.dat")))
        .collect();
    for p in &paths {
        std::fs::write(p, b"x")
            .map_err(|e| LabError::io(format!("cannot write {}", p.display()), e))?;
    }
    let start = Instant::now();
    let mut found = 0usize;
    for i in 0..CHECKS {
        if std::fs::metadata(&paths[i % FILES]).is_ok() {
            found += 1;
        }
    }
    let per_check = start.elapsed().as_secs_f64() / CHECKS as f64;
    std::fs::remove_dir_all(&probe_dir)
        .map_err(|e| LabError::io("cannot remove the check directory", e))?;
    if found != CHECKS {
        return Err(LabError::Failed(format!(
            "only {found} of {CHECKS} checks found their file"
        )));
    }
    Ok(per_check)
}
