//! What a scenario works with: the size profile, the slowlab binary to
//! launch as child programs, where to put temporary files, the cancellation
//! token, and where its human lines and progress go.
//!
//! What it does not do: run or judge anything; it only carries them.

use std::path::PathBuf;

use slowlab_sweep::{Cancel, Progress};

/// How big the experiments are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// Seconds per scenario; for tests.
    Tiny,
    /// The default: every scenario in under 3 minutes in all.
    Quick,
    /// The sizes of the original experiments, within budgets.
    Full,
}

impl Profile {
    /// Picks a value by profile.
    pub fn pick<T>(self, tiny: T, quick: T, full: T) -> T {
        match self {
            Profile::Tiny => tiny,
            Profile::Quick => quick,
            Profile::Full => full,
        }
    }
}

/// Where a scenario's output goes while it runs.
pub trait LabOutput {
    /// A line in the spirit of the original test programs (stdout).
    fn line(&mut self, text: &str);
    /// What is being done now (progress, stderr).
    fn status(&mut self, text: &str);
    /// Progress of a sweep inside the scenario.
    fn sweep_progress(&mut self) -> &mut dyn Progress;
}

/// Output that is thrown away (tests).
#[derive(Default)]
pub struct QuietOutput {
    pub lines: Vec<String>,
}

impl Progress for QuietOutput {}

impl LabOutput for QuietOutput {
    fn line(&mut self, text: &str) {
        self.lines.push(text.to_string());
    }
    fn status(&mut self, _text: &str) {}
    fn sweep_progress(&mut self) -> &mut dyn Progress {
        self
    }
}

pub struct LabContext<'a> {
    pub profile: Profile,
    /// The slowlab binary; child programs are `self_exe __child …`.
    pub self_exe: PathBuf,
    /// Parent directory for temporary files (on a real disk filesystem
    /// where a scenario needs one).
    pub work_root: PathBuf,
    pub cancel: Cancel,
    pub out: &'a mut dyn LabOutput,
    /// The lines printed by the running scenario, for its result.
    pub lines: Vec<String>,
}

impl<'a> LabContext<'a> {
    pub fn new(
        profile: Profile,
        self_exe: PathBuf,
        cancel: Cancel,
        out: &'a mut dyn LabOutput,
    ) -> Self {
        LabContext {
            profile,
            self_exe,
            work_root: std::env::temp_dir(),
            cancel,
            out,
            lines: Vec::new(),
        }
    }

    /// Prints a human line and keeps it for the scenario's result.
    pub fn line(&mut self, text: impl Into<String>) {
        let text = text.into();
        self.out.line(&text);
        self.lines.push(text);
    }

    pub fn status(&mut self, text: &str) {
        self.out.status(text);
    }

    /// `Err(Interrupted)` once Ctrl-C was pressed.
    pub fn check_cancel(&self) -> Result<(), crate::LabError> {
        if self.cancel.is_cancelled() {
            Err(crate::LabError::Interrupted)
        } else {
            Ok(())
        }
    }

    /// A fresh temporary directory under `work_root`, removed when the
    /// returned guard drops (also on Ctrl-C).
    pub fn temp_dir(&self, prefix: &str) -> Result<TempDir, crate::LabError> {
        TempDir::new_in(&self.work_root, prefix)
    }
}

/// A temporary directory registered for cleanup.
pub struct TempDir {
    path: PathBuf,
    _cleanup: crate::cleanup::Cleanup,
}

impl TempDir {
    pub fn new_in(parent: &std::path::Path, prefix: &str) -> Result<Self, crate::LabError> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("slowlab-{prefix}-"))
            .tempdir_in(parent)
            .map_err(|e| {
                crate::LabError::io(
                    format!("cannot create a directory in {}", parent.display()),
                    e,
                )
            })?;
        let path = dir.keep();
        let removed = path.clone();
        Ok(TempDir {
            path,
            _cleanup: crate::cleanup::Cleanup::register(
                format!("remove {}", removed.display()),
                move || {
                    let _ = std::fs::remove_dir_all(&removed);
                },
            ),
        })
    }

    pub fn path(&self) -> &std::path::Path {
        &self.path
    }
}
