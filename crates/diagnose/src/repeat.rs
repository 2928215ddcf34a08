//! `diagnose --repeat N`: the command's N runs, each recorded and analyzed into a
//! directory of its own (`run-1`, … of [`slowlab_runs::run_dir`]) in one recording
//! ([`CommandRuns`]), until a cancel between runs or a stop signal during one (that run's
//! directory is removed; the finished runs are kept). What the runs gave goes to
//! [`slowlab_runs::summarize`].
//!
//! It does not print: each step is said through the caller's `say`; nor handle signals:
//! the caller's `cancelled` says when to stop between runs (a run's recording handles its
//! own Ctrl-C, in slowlab-record).

use std::path::Path;

use slowlab_runs::RepeatRun;

use crate::{CommandRunDiagnosed, CommandRuns, DiagnoseError};

/// The runs of a `--repeat`.
pub struct Repeated {
    /// The finished runs, in order.
    pub runs: Vec<RepeatRun>,
    /// A cancel or a stop signal ended the runs early.
    pub interrupted: bool,
    /// What the recording says of the whole of it, once it stopped.
    pub warnings: Vec<String>,
}

/// Runs `command` `n` times into `output/run-I` (see the module documentation). `say`
/// gets each line of progress and each run's warnings.
pub fn repeat(
    mut recorded: CommandRuns<'_>,
    command: &[String],
    output: &Path,
    n: usize,
    cancelled: &dyn Fn() -> bool,
    say: &mut dyn FnMut(String),
) -> Result<Repeated, DiagnoseError> {
    // Before anything is made: a command not found leaves no directory behind.
    slowlab_record::command_found(command)?;
    create_dir(output)?;
    let stale = slowlab_runs::stale_runs(output, n);
    if let Some(first) = stale.first() {
        say(format!(
            "warning: {} run directories of an earlier --repeat are left in {} ({} …): \
             remove them, or a run-* pattern takes them as runs of this one",
            stale.len(),
            output.display(),
            first.display()
        ));
    }
    let mut runs = Vec::new();
    let mut interrupted = false;
    for i in 1..=n {
        if cancelled() {
            interrupted = true;
            break;
        }
        let dir = slowlab_runs::run_dir(output, i);
        say(format!("run {i} of {n} → {}", dir.display()));
        create_dir(&dir)?;
        let CommandRunDiagnosed {
            outcome,
            diagnosis,
            warnings,
        } = recorded.run(command, &dir)?;
        let Some(diagnosis) = diagnosis else {
            let _ = std::fs::remove_dir_all(&dir);
            say(format!(
                "run {i} was interrupted: removed {}; the finished runs are kept",
                dir.display()
            ));
            interrupted = true;
            break;
        };
        for w in warnings {
            say(format!("warning: run {i}: {w}"));
        }
        runs.push(RepeatRun {
            run: i,
            dir,
            wall_s: diagnosis.path.as_ref().map(|p| p.wall_s),
            exit_code: outcome.exit_code,
            answer: diagnosis.path.map(|p| p.summary),
        });
    }
    Ok(Repeated {
        runs,
        interrupted,
        warnings: recorded.finish(),
    })
}

fn create_dir(dir: &Path) -> Result<(), DiagnoseError> {
    std::fs::create_dir_all(dir).map_err(|source| DiagnoseError::CreateDir {
        dir: dir.to_owned(),
        source,
    })
}
