//! notify-buffer: does a file-change watcher with a large notification
//! buffer slow down every file operation on the system?
//!
//! On Windows a ReadDirectoryChangesW watcher with a 2 MiB buffer made every
//! file create/delete ~10× slower (the kernel zeroes the buffer per event).
//! On Linux the buffer is only the size of the watcher's `read`, so the
//! scenario measures what the question really is here: creating and deleting
//! n files with no watcher, with an inotify watcher reading through a 16 KiB
//! and a 2 MiB buffer, and with a fanotify *permission* watcher (how on-access
//! scanners work: every open waits for the watcher's answer) — the real Linux
//! hazard of this family. Two verdicts: the buffer size (affected only if the
//! 2 MiB buffer costs ≥ 2× the 16 KiB one) and the permission watcher.
//!
//! The child (`__child notify`) runs in a private mount namespace on a tmpfs
//! of its own, so neither the files nor the watcher's marks ever touch the
//! rest of the machine, and everything vanishes with the child even when it
//! is killed. It times only its create/delete loop.
//!
//! What it does not do: mount, watch or create files anywhere but in the
//! child's private mount namespace (the parent only makes the empty mount
//! point, a `TempDir`).
//!
//! The files: `child` (the child program: private tmpfs, watcher, the
//! timed loop), `watch` (the watchers), `verdict` (the two verdicts),
//! `tests`.

mod child;
#[cfg(test)]
mod tests;
mod verdict;
mod watch;

use std::path::Path;

use slowlab_model::results::{Role, ScenarioResult};

use crate::measure::run_child;
use crate::runner::Scenario;
use crate::{LabContext, LabError};

pub use child::child_main;

use verdict::judge;

pub struct NotifyBuffer;

/// The watcher running while files are created and deleted.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Watcher {
    None,
    Inotify,
    FanotifyPerm,
}

impl Watcher {
    fn arg(self) -> &'static str {
        match self {
            Watcher::None => "none",
            Watcher::Inotify => "inotify",
            Watcher::FanotifyPerm => "fanotify-perm",
        }
    }
}

/// One configuration measured. The file creator is pinned to one CPU and
/// the watcher to another (`same_cpu` false) or to the same one: a
/// permission watcher's cost is a round trip of wake-ups, and a wake-up
/// across CPUs (an inter-processor interrupt) can cost ten times one on the
/// same CPU, so the two placements are measured apart instead of leaving
/// the result to where the scheduler happens to put the watcher.
struct Config {
    name: &'static str,
    watcher: Watcher,
    buffer: usize,
    same_cpu: bool,
}

const CONFIGS: [Config; 5] = [
    Config {
        name: "no watcher",
        watcher: Watcher::None,
        buffer: 0,
        same_cpu: false,
    },
    Config {
        name: "inotify, 16 KiB buffer",
        watcher: Watcher::Inotify,
        buffer: 16 << 10,
        same_cpu: false,
    },
    Config {
        name: "inotify, 2 MiB buffer",
        watcher: Watcher::Inotify,
        buffer: 2 << 20,
        same_cpu: false,
    },
    Config {
        name: "fanotify permission, other CPU",
        watcher: Watcher::FanotifyPerm,
        buffer: 4096,
        same_cpu: false,
    },
    Config {
        name: "fanotify permission, same CPU",
        watcher: Watcher::FanotifyPerm,
        buffer: 4096,
        same_cpu: true,
    },
];
/// Indexes into `CONFIGS`.
const NONE: usize = 0;
const INOTIFY_SMALL: usize = 1;
const INOTIFY_LARGE: usize = 2;
const PERMISSION_OTHER_CPU: usize = 3;
const PERMISSION_SAME_CPU: usize = 4;

/// The 2 MiB buffer must cost this many times the 16 KiB one to count.
const BUFFER_AFFECTED_RATIO: f64 = 2.0;
/// A watcher this many times slower than none is a hazard worth naming.
const WATCHER_HAZARD_RATIO: f64 = 2.0;

impl Scenario for NotifyBuffer {
    fn id(&self) -> &'static str {
        "notify-buffer"
    }

    fn summary(&self) -> &'static str {
        "file-change watchers: does a 2 MiB buffer, or a permission watcher, slow every file operation?"
    }

    fn needs_root(&self) -> bool {
        true
    }

    fn detector(&self) -> &'static str {
        "notify-permission"
    }

    fn run_for_trace(&self, ctx: &mut LabContext, role: Role) -> Result<(), LabError> {
        let mount_point = ctx.temp_dir("notify")?;
        let files = ctx.profile.pick(1000, 2000, 5000);
        let cpus = crate::system::allowed_cpus();
        let placement = cpus
            .first()
            .map(|&first| (first, cpus.get(1).copied().unwrap_or(first)));
        let watcher = match role {
            Role::Pathological => Watcher::FanotifyPerm,
            Role::Control => Watcher::None,
        };
        let args = child_args(watcher, 4096, files, mount_point.path(), placement);
        run_child(ctx, &args).map(|_| ())
    }

    fn run(&self, ctx: &mut LabContext) -> Result<ScenarioResult, LabError> {
        let mount_point = ctx.temp_dir("notify")?;
        let files = ctx.profile.pick(500, 5000, 20000);
        let cpus = crate::system::allowed_cpus();
        let (creator_cpu, other_cpu) = match cpus.as_slice() {
            [a, b, ..] => (Some(*a), Some(*b)),
            [a] => (Some(*a), None),
            [] => (None, None),
        };
        let rounds = ctx.profile.pick(2, 3, 5);
        // Per configuration: seconds per file of every repetition.
        let mut per_file: Vec<Vec<f64>> = vec![Vec::new(); CONFIGS.len()];
        let mut failures: Vec<Option<String>> = vec![None; CONFIGS.len()];
        let mut events = vec![0u64; CONFIGS.len()];
        for round in 0..rounds {
            // Interleave the configurations so drift hits them all alike.
            for (i, config) in CONFIGS.iter().enumerate() {
                ctx.check_cancel()?;
                if failures[i].is_some() {
                    continue;
                }
                let watcher_cpu = if config.same_cpu {
                    creator_cpu
                } else {
                    other_cpu
                };
                if config.watcher != Watcher::None && !config.same_cpu && other_cpu.is_none() {
                    failures[i] = Some("needs a second CPU".into());
                    continue;
                }
                ctx.status(&format!(
                    "notify-buffer: {} (round {}/{rounds})",
                    config.name,
                    round + 1
                ));
                let placement = creator_cpu.zip(watcher_cpu);
                let args = child_args(
                    config.watcher,
                    config.buffer,
                    files,
                    mount_point.path(),
                    placement,
                );
                match run_child(ctx, &args) {
                    Ok(out) => {
                        let reps = out.report["reps_wall_s"]
                            .as_array()
                            .cloned()
                            .unwrap_or_default();
                        per_file[i].extend(
                            reps.iter()
                                .filter_map(|v| v.as_f64())
                                .map(|s| s / files as f64),
                        );
                        events[i] += out.report["events"].as_u64().unwrap_or(0);
                    }
                    Err(LabError::Interrupted) => return Err(LabError::Interrupted),
                    Err(e) => failures[i] = Some(e.to_string()),
                }
            }
        }
        if let Some(reason) = &failures[NONE] {
            return Err(LabError::Failed(format!(
                "the run without a watcher failed: {reason}"
            )));
        }
        let costs: Vec<Option<f64>> = per_file
            .iter()
            .zip(&failures)
            .map(|(v, f)| (f.is_none() && !v.is_empty()).then(|| slowlab_sweep::stats::median(v)))
            .collect();
        let base = costs[NONE].unwrap_or(f64::NAN);
        for (i, config) in CONFIGS.iter().enumerate() {
            let line = match (costs[i], &failures[i]) {
                (Some(c), _) if i == NONE => {
                    format!(
                        "{:<31} {:7.2} µs per file created and deleted.",
                        config.name,
                        c * 1e6
                    )
                }
                (Some(c), _) => format!(
                    "{:<31} {:7.2} µs per file. Tracked files take {:.1} times as long.",
                    config.name,
                    c * 1e6,
                    c / base
                ),
                (None, Some(reason)) => format!("{:<31} could not run: {reason}", config.name),
                (None, None) => format!("{:<31} no measurement", config.name),
            };
            ctx.line(line);
        }
        Ok(judge(&costs, &failures, &events, files))
    }
}

/// Arguments of the child; `placement` is (creator CPU, watcher CPU).
pub fn child_args(
    watcher: Watcher,
    buffer: usize,
    files: u64,
    mount_point: &Path,
    placement: Option<(usize, usize)>,
) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "notify".into(),
        "--watcher".into(),
        watcher.arg().into(),
        "--buffer".into(),
        buffer.to_string(),
        "--files".into(),
        files.to_string(),
        "--mount-point".into(),
        mount_point.to_string_lossy().into_owned(),
    ];
    if let Some((creator, watcher)) = placement {
        args.extend([
            "--creator-cpu".into(),
            creator.to_string(),
            "--watcher-cpu".into(),
            watcher.to_string(),
        ]);
    }
    args
}

/// Arguments of the permission-watcher process.
pub fn watcher_args(buffer: usize, mount_point: &Path, cpu: Option<usize>) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "notify-watcher".into(),
        "--buffer".into(),
        buffer.to_string(),
        "--mount-point".into(),
        mount_point.to_string_lossy().into_owned(),
    ];
    if let Some(cpu) = cpu {
        args.extend(["--cpu".into(), cpu.to_string()]);
    }
    args
}

/// The permission-watcher process (`__child notify-watcher`).
pub fn watcher_main(buffer: usize, mount_point: &Path, cpu: Option<usize>) -> Result<(), LabError> {
    if let Some(cpu) = cpu {
        crate::system::pin_to_cpu(cpu)?;
    }
    watch::permission_watcher_main(mount_point, buffer)
}
