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
//! The children (`log-launcher`, `log-writer`) are defined here too.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::json;
use slowlab_model::results::{Headline, Role, ScenarioResult, ScenarioStatus, SweepResult};

use crate::measure::{
    emit_report, parse_child_output, process_cpu_seconds, run_child, sweep_to_variant,
    sweep_variant, VariantSweep,
};
use crate::runner::Scenario;
use crate::verdicts::{exponent_text, sweep_affected};
use crate::{system, LabContext, LabError, Profile};

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

    fn preflight(&self, ctx: &LabContext) -> Result<(), String> {
        let largest = *sizes(ctx.profile).last().unwrap_or(&0);
        let root = log_root(ctx);
        if let Some(free) = system::free_inodes(&root) {
            if free < largest * 2 + 1000 {
                return Err(format!(
                    "{} has only {free} free inodes; {largest} log files need more: use --work-dir",
                    root.display()
                ));
            }
        }
        if let Some(headroom) = system::process_headroom() {
            if headroom < 100 {
                return Err(format!(
                    "only {headroom} more processes may be started here (pid or pids-cgroup limit)"
                ));
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
fn log_root(ctx: &LabContext) -> PathBuf {
    let shm = Path::new("/dev/shm");
    let roomy = system::free_disk(shm).is_some_and(|free| free >= 64 << 20);
    if system::is_memory_filesystem(shm) && roomy {
        shm.to_path_buf()
    } else {
        ctx.work_root.clone()
    }
}

fn sizes(profile: Profile) -> Vec<u64> {
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

/// Verdict: affected when the time spent finding a log name grows
/// super-linearly with probing and not with unique names. Headline: the
/// launches' total CPU time at the largest launch count both measured (what
/// the user waits for), with the launch count where probing overtakes
/// launching.
fn judge(
    swept: &[(&str, Role, SweepResult)],
    launch_totals: &[Vec<LaunchTotals>],
    check_s: f64,
) -> ScenarioResult {
    let (probe, unique) = (&swept[0].2, &swept[1].2);
    let common = launch_totals[0]
        .iter()
        .rev()
        .find_map(|p| launch_totals[1].iter().find(|u| u.n == p.n).map(|u| (p, u)));
    let headline = common.map(|(p, u)| Headline {
        metric: format!("CPU time of {} launches", p.n),
        unit: "s".into(),
        pathological: p.cpu_s,
        control: u.cpu_s,
        ratio: p.cpu_s / u.cpu_s.max(1e-9),
    });
    // Probing N launches costs about N²/2 checks; launching them N times the
    // control's cost per launch: equal at N = 2 × launch / check.
    let overtake = common
        .filter(|_| check_s > 0.0)
        .map(|(_, u)| 2.0 * (u.cpu_s / u.n.max(1) as f64) / check_s);
    let added = common.map(|(p, u)| {
        format!(
            "; at {} launches probing adds {:.2} s to {:.2} s of launching",
            p.n,
            (p.cpu_s - u.cpu_s).max(0.0),
            u.cpu_s
        )
    });
    ScenarioResult {
        id: "log-probe".into(),
        status: ScenarioStatus::Ran,
        reason: None,
        affected: sweep_affected(probe.verdict, &[unique.verdict]),
        headline,
        variants: swept
            .iter()
            .map(|(name, role, r)| {
                let mut v = sweep_to_variant(name, *role, r);
                let what = "points: CPU time the launches spent finding their log name";
                v.note = Some(match v.note {
                    Some(warnings) => format!("{what}; {warnings}"),
                    None => what.to_string(),
                });
                v
            })
            .collect(),
        explanation: format!(
            "finding a free log name by probing grows as {} ({}), with unique names as {} ({}); one check costs {:.2} µs{}{}",
            exponent_text(probe),
            probe.verdict.as_str(),
            exponent_text(unique),
            unique.verdict.as_str(),
            check_s * 1e6,
            added.unwrap_or_default(),
            overtake.map_or(String::new(), |n| format!(
                "; probing overtakes launching after about {n:.0} launches"
            )),
        ),
        lines: Vec::new(),
        platform: "linux".into(),
    }
}

/// CPU seconds of this process plus its waited-for children.
fn cpu_with_children() -> f64 {
    let usage = |who| {
        // SAFETY: rusage is plain data that getrusage fills in.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointer.
        unsafe { libc::getrusage(who, &mut u) };
        let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
        secs(u.ru_utime) + secs(u.ru_stime)
    };
    usage(libc::RUSAGE_SELF) + usage(libc::RUSAGE_CHILDREN)
}

/// The launcher child: `n` sequential writer launches in a fresh directory
/// under `dir`, timed; the directory is removed before it returns.
pub fn launcher_main(naming: Naming, n: u64, dir: &Path) -> Result<(), String> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the slowlab binary: {e}"))?;
    let run_dir = dir.join(format!("run.{}", std::process::id()));
    std::fs::create_dir(&run_dir)
        .map_err(|e| format!("cannot create {}: {e}", run_dir.display()))?;
    let outcome = launch_all(&exe, naming, n, &run_dir);
    let removed = std::fs::remove_dir_all(&run_dir);
    let t = outcome?;
    removed.map_err(|e| format!("cannot remove {}: {e}", run_dir.display()))?;
    emit_report(&json!({
        // What the sweep measures: the writers' time finding a name.
        "cpu_s": t.naming_cpu_s,
        "wall_s": t.naming_wall_s,
        "launch_cpu_s": t.cpu_s,
        "launch_wall_s": t.wall_s,
        "n": n,
        "checks": t.checks,
    }));
    Ok(())
}

/// What a launcher measured over its launches.
#[derive(Debug, Default)]
struct Launched {
    /// CPU of the launcher and every writer, and the elapsed time.
    cpu_s: f64,
    wall_s: f64,
    /// The writers' own time finding their log name, summed.
    naming_cpu_s: f64,
    naming_wall_s: f64,
    /// Existence checks the writers made.
    checks: u64,
}

fn launch_all(exe: &Path, naming: Naming, n: u64, run_dir: &Path) -> Result<Launched, String> {
    let args = writer_args(naming, run_dir);
    let mut t = Launched::default();
    let cpu_start = cpu_with_children();
    let start = Instant::now();
    let mut batch_start = start;
    for launched in 1..=n {
        let out = Command::new(exe)
            .arg("__child")
            .args(&args)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("cannot launch {}: {e}", exe.display()))?;
        if !out.status.success() {
            return Err(format!("launch {launched} failed: {}", out.status));
        }
        let report = parse_child_output(&out.stdout)
            .and_then(|o| Ok((o.number("cpu_s")?, o.number("wall_s")?, o.number("checks")?)))
            .map_err(|e| format!("launch {launched}: {e}"))?;
        t.naming_cpu_s += report.0;
        t.naming_wall_s += report.1;
        t.checks += report.2 as u64;
        if launched % BATCH == 0 {
            let now = Instant::now();
            println!(
                "{}",
                batch_line((now - batch_start).as_secs_f64(), launched)
            );
            batch_start = now;
        }
    }
    t.cpu_s = cpu_with_children() - cpu_start;
    t.wall_s = start.elapsed().as_secs_f64();
    Ok(t)
}

/// The writer child: finds its log name and creates the file; reports the
/// CPU and elapsed time that took and how many names it checked.
pub fn writer_main(naming: Naming, dir: &Path) -> Result<(), String> {
    let cpu_start = process_cpu_seconds();
    let start = Instant::now();
    let checks = find_and_create_log(naming, dir)?;
    let wall_s = start.elapsed().as_secs_f64();
    emit_report(&json!({
        "cpu_s": process_cpu_seconds() - cpu_start,
        "wall_s": wall_s,
        "checks": checks,
    }));
    Ok(())
}

/// Creates this writer's log file; returns the existence checks it made.
fn find_and_create_log(naming: Naming, dir: &Path) -> Result<u64, String> {
    let pid = std::process::id();
    match naming {
        Naming::Unique => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            create_log(&dir.join(format!("name.{pid}.{nanos}.dat")))
                .map(|_| 0)
                .map_err(|e| format!("cannot create the log in {}: {e}", dir.display()))
        }
        Naming::Probe => {
            for index in 0u64.. {
                let path = dir.join(format!("name.{index}.dat"));
                match std::fs::metadata(&path) {
                    Ok(_) => continue,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(format!("cannot check {}: {e}", path.display())),
                }
                match create_log(&path) {
                    Ok(()) => return Ok(index + 1),
                    // Another writer took it between the check and the create.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                    Err(e) => return Err(format!("cannot create {}: {e}", path.display())),
                }
            }
            Err("no free log name".into())
        }
    }
}

fn create_log(path: &Path) -> std::io::Result<()> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    writeln!(file, "log of process {}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_batch_line_matches_the_original() {
        assert_eq!(
            batch_line(0.214, 4000),
            "0.21 seconds elapsed for 10 launches (4000 total)"
        );
    }

    #[test]
    fn sample_lines_spreads_and_keeps_the_last() {
        let lines: Vec<String> = (1..=100).map(|i| i.to_string()).collect();
        assert_eq!(sample_lines(&lines, 4), vec!["25", "50", "75", "100"]);
        assert_eq!(sample_lines(&lines[..3], 5).len(), 3);
    }

    #[test]
    fn probing_writers_take_the_first_free_name() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..3 {
            assert_eq!(find_and_create_log(Naming::Probe, dir.path()), Ok(i + 1));
        }
        // Three writers in one process all find a free name in order.
        for i in 0..3 {
            assert!(dir.path().join(format!("name.{i}.dat")).exists());
        }
        assert!(!dir.path().join("name.3.dat").exists());
    }

    #[test]
    fn affected_by_the_naming_cost_with_the_launch_totals_as_headline() {
        use crate::testutil::sweep_result;
        use slowlab_model::results::Verdict;
        // Finding names: quadratic with probing, linear with unique names.
        let probe = sweep_result(Verdict::Superlinear, 2.0, &[(500, 0.05), (1000, 0.2)]);
        let unique = sweep_result(Verdict::Linear, 1.0, &[(500, 0.01), (1000, 0.02)]);
        let totals = |per_launch: f64, extra: f64| {
            vec![
                LaunchTotals {
                    n: 500,
                    cpu_s: 500.0 * per_launch,
                    wall_s: 1.0,
                },
                LaunchTotals {
                    n: 1000,
                    cpu_s: 1000.0 * per_launch + extra,
                    wall_s: 2.0,
                },
            ]
        };
        let r = judge(
            &[
                ("probe-names", Role::Pathological, probe),
                ("unique-names", Role::Control, unique),
            ],
            &[totals(1e-3, 0.25), totals(1e-3, 0.0)],
            0.5e-6,
        );
        assert_eq!(r.affected, Some(true));
        let h = r.headline.unwrap();
        assert_eq!(h.metric, "CPU time of 1000 launches");
        assert!((h.ratio - 1.25).abs() < 1e-9, "{}", h.ratio);
        // 1 ms per launch against 0.5 µs per check: equal at 4,000 launches.
        assert!(
            r.explanation
                .contains("overtakes launching after about 4000 launches"),
            "{}",
            r.explanation
        );
        assert!(
            r.explanation.contains("probing adds 0.25 s"),
            "{}",
            r.explanation
        );
        assert!(r.variants[0]
            .note
            .as_deref()
            .unwrap()
            .contains("finding their log name"));
    }

    #[test]
    fn the_check_cost_is_a_plausible_number_of_microseconds() {
        let dir = tempfile::tempdir().unwrap();
        let cost = measure_check_cost(dir.path()).unwrap();
        assert!(cost > 1e-8 && cost < 1e-3, "{cost}");
        assert!(!dir.path().join("check-cost").exists());
    }
}
