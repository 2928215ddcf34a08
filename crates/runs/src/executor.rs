//! `PathExecutor`: an `Executor` for the sweep engine whose every run is a
//! `slowlab diagnose` run of the command at that size — recorded and
//! analyzed by the `Diagnoser` the caller gives (the binary gives the
//! recording and the analysis `diagnose` itself makes) — and which keeps
//! each run's critical path as seconds by cause (`path_diff::causes_of`)
//! for `growth::fit_causes`.
//!
//! A run's cost (both the `cpu_s` and the `wall_s` the engine fits and
//! budgets by) is its critical path's wall time: the sum of its segments,
//! which the causes add up to, so the command's exponent and its causes'
//! compare directly. Each run gets a directory of its own under the work
//! directory, removed after the run unless asked to keep it.
//!
//! What it does not do: record or analyze (the `Diagnoser` does), or fit.

use std::path::{Path, PathBuf};

use slowlab_analyze::path_diff::{causes_of, Run};
use slowlab_model::critical_path::CriticalPath;
use slowlab_sweep::executor::substitute;
use slowlab_sweep::{Cancel, Executor, Measurement, RunError};

/// What one diagnose run gave.
#[derive(Debug, Clone)]
pub struct Diagnosed {
    /// The command's critical path; `None` when it could not be followed.
    pub path: Option<CriticalPath>,
    /// The command's exit code.
    pub exit_code: i32,
    /// The recording was stopped by a signal (Ctrl-C).
    pub interrupted: bool,
}

/// Records a command and computes its critical path, as `slowlab
/// diagnose -o DIR -- CMD` does; a fake in tests.
pub trait Diagnoser {
    /// Diagnoses `command` into `dir` (which exists); `Err` is one line.
    fn diagnose(&mut self, command: &[String], dir: &Path) -> Result<Diagnosed, String>;
}

pub struct PathExecutor<D> {
    template: Vec<String>,
    diagnoser: D,
    work_dir: PathBuf,
    keep: bool,
    cancel: Cancel,
    /// Every run's seconds by cause with its size, in the order they ran
    /// (warm-up runs included: `fit_causes` is told how many to skip).
    pub runs: Vec<crate::growth::PathRun>,
}

impl<D: Diagnoser> PathExecutor<D> {
    /// `template` is the command, `{n}` where the size goes; each run's
    /// directory is `work_dir/run-K-nN` (kept with `keep`).
    pub fn new(
        template: Vec<String>,
        diagnoser: D,
        work_dir: &Path,
        keep: bool,
        cancel: Cancel,
    ) -> Self {
        PathExecutor {
            template,
            diagnoser,
            work_dir: work_dir.to_owned(),
            keep,
            cancel,
            runs: Vec::new(),
        }
    }
}

impl<D> PathExecutor<D> {
    /// The diagnoser, to read what it gathered.
    pub fn diagnoser(&self) -> &D {
        &self.diagnoser
    }

    pub fn diagnoser_mut(&mut self) -> &mut D {
        &mut self.diagnoser
    }
}

impl<D: Diagnoser> Executor for PathExecutor<D> {
    fn run(&mut self, n: u64) -> Result<Measurement, RunError> {
        if self.cancel.is_cancelled() {
            return Err(RunError::Interrupted);
        }
        let failed = |status: String, stderr_tail: String| RunError::Failed {
            n,
            status,
            stderr_tail,
        };
        let dir = self
            .work_dir
            .join(format!("run-{}-n{n}", self.runs.len() + 1));
        std::fs::create_dir_all(&dir)
            .map_err(|e| failed(format!("cannot create {}", dir.display()), e.to_string()))?;
        let command = substitute(&self.template, n);
        let diagnosed = self.diagnoser.diagnose(&command, &dir);
        if !self.keep {
            let _ = std::fs::remove_dir_all(&dir);
        }
        let d = diagnosed.map_err(|e| failed("it could not be diagnosed".into(), e))?;
        if d.interrupted {
            self.cancel.cancel();
            return Err(RunError::Interrupted);
        }
        if d.exit_code != 0 {
            return Err(failed(format!("exit code {}", d.exit_code), String::new()));
        }
        let path = d.path.ok_or_else(|| {
            failed(
                "its critical path could not be followed".into(),
                String::new(),
            )
        })?;
        let causes: std::collections::BTreeMap<_, _> =
            causes_of(&Run::new(path)).into_iter().collect();
        let wall_s: f64 = causes.values().sum();
        self.runs.push((n, causes));
        Ok(Measurement {
            cpu_s: wall_s,
            wall_s,
            stdout: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Never records; says what it was asked.
    struct Fake {
        asked: Vec<Vec<String>>,
        answer: fn() -> Result<Diagnosed, String>,
    }
    impl Diagnoser for Fake {
        fn diagnose(&mut self, command: &[String], dir: &Path) -> Result<Diagnosed, String> {
            assert!(dir.is_dir());
            self.asked.push(command.to_vec());
            (self.answer)()
        }
    }

    fn exec(
        answer: fn() -> Result<Diagnosed, String>,
        cancel: Cancel,
    ) -> (PathExecutor<Fake>, tempfile::TempDir) {
        let work = tempfile::tempdir().unwrap();
        let fake = Fake {
            asked: Vec::new(),
            answer,
        };
        let template = vec!["prog".to_string(), "--items={n}".to_string()];
        (
            PathExecutor::new(template, fake, work.path(), false, cancel),
            work,
        )
    }

    #[test]
    fn the_size_goes_into_the_command_and_the_run_dir_is_removed() {
        let (mut e, work) = exec(|| Err("no perf".into()), Cancel::new());
        let err = e.run(8).unwrap_err().to_string();
        assert!(err.contains("n=8") && err.contains("no perf"), "{err}");
        assert_eq!(e.diagnoser.asked, [["prog", "--items=8"]]);
        assert_eq!(std::fs::read_dir(work.path()).unwrap().count(), 0);
    }

    #[test]
    fn an_interrupted_recording_cancels_the_sweep() {
        let cancel = Cancel::new();
        let (mut e, _work) = exec(
            || {
                Ok(Diagnosed {
                    path: None,
                    exit_code: 130,
                    interrupted: true,
                })
            },
            cancel.clone(),
        );
        assert!(matches!(e.run(1), Err(RunError::Interrupted)));
        assert!(cancel.is_cancelled());
        // And nothing more is recorded.
        assert!(matches!(e.run(2), Err(RunError::Interrupted)));
        assert_eq!(e.diagnoser.asked.len(), 1);
    }

    #[test]
    fn a_failing_command_or_a_missing_path_fails_the_run() {
        let (mut e, _w) = exec(
            || {
                Ok(Diagnosed {
                    path: None,
                    exit_code: 3,
                    interrupted: false,
                })
            },
            Cancel::new(),
        );
        assert!(e.run(4).unwrap_err().to_string().contains("exit code 3"));
        let (mut e, _w) = exec(
            || {
                Ok(Diagnosed {
                    path: None,
                    exit_code: 0,
                    interrupted: false,
                })
            },
            Cancel::new(),
        );
        let err = e.run(4).unwrap_err().to_string();
        assert!(err.contains("critical path"), "{err}");
        assert!(e.runs.is_empty());
    }
}
