//! [`PerfRuns`]: one `perf record` cut into a trace for each of several runs (`slowlab lab
//! --trace --backend perf` records both variants of every scenario), as [`crate::BpfRuns`]
//! is the eBPF recorder's. perf starts once and stops once: each start took ~1 s and each
//! stop ~2.5 s (the kernel lets each tracepoint go after a grace period) when every run
//! had a `perf record` of its own.
//!
//! perf runs with `--switch-output=signal`: on SIGUSR2 it finishes the file it writes (a
//! complete perf.data, named `SCRATCH.partial.TIMESTAMP`) and goes on in a new one, which
//! begins with the processes alive then. [`PerfRuns::begin`] switches and removes what
//! came before the run; [`PerfRuns::end`] switches and renames what came since to the
//! run's trace. The path capture keeps its paths in memory from one run's begin to its
//! end; each run has cgroup notes of its own. It does not analyze the traces.

use std::path::{Path, PathBuf};

use crate::companions::Companions;
use crate::recording::Recording;
use crate::{Config, Outcome, RecordError, RunRecorder};

/// The run going on: its trace and its cgroup notes.
struct Run {
    output: PathBuf,
    notes: Companions,
    warnings: Vec<String>,
}

/// One `perf record`, cut into a trace per run (see the module documentation). Start and
/// stop it on one thread that outlives it; dropping it stops perf and removes what it
/// wrote that no run took.
pub struct PerfRuns {
    recording: Option<Recording>,
    run: Option<Run>,
}

impl PerfRuns {
    /// Starts perf, writing into `cfg.output`'s partial file until the first run; the
    /// runs' traces should be on its file system (each is renamed from a file of perf's).
    /// `cfg`'s command and ring mode are ignored.
    pub fn start(cfg: &Config) -> Result<PerfRuns, RecordError> {
        Ok(PerfRuns {
            recording: Some(Recording::start_with(cfg, true)?),
            run: None,
        })
    }

    fn recording(&mut self) -> Result<&mut Recording, RecordError> {
        self.recording
            .as_mut()
            .ok_or_else(|| RecordError::PerfFailed {
                code: 0,
                last_line: "perf is not running".into(),
            })
    }
}

impl RunRecorder for PerfRuns {
    /// Begins a run whose trace goes into `output`: what perf and the path capture
    /// recorded before is let go.
    fn begin(&mut self, output: &Path) -> Result<(), RecordError> {
        self.discard();
        let recording = self.recording()?;
        let before = recording.switch_file()?;
        let _ = std::fs::remove_file(before);
        // perf's work for the new file comes before the run's, not beside it.
        recording.wait_perf_idle();
        let mut warnings = recording.warnings().to_vec();
        if let Some(paths) = recording.paths() {
            paths.forget(&mut warnings);
        }
        let notes = Companions::start(output, false, &mut warnings);
        self.run = Some(Run {
            output: output.to_owned(),
            notes,
            warnings,
        });
        Ok(())
    }

    /// Ends the run: what perf recorded since its begin becomes its trace, with the paths
    /// captured meanwhile and its cgroup notes beside it; perf goes on.
    fn end(&mut self) -> Result<Outcome, RecordError> {
        let Run {
            output,
            notes,
            mut warnings,
        } = self.run.take().ok_or_else(|| RecordError::PerfFailed {
            code: 0,
            last_line: "no run was begun".into(),
        })?;
        let recording = match self.recording() {
            Ok(r) => r,
            Err(e) => {
                notes.discard();
                return Err(e);
            }
        };
        let renamed = recording.switch_file().and_then(|file| {
            std::fs::rename(&file, &output).map_err(|source| {
                let _ = std::fs::remove_file(&file);
                RecordError::Output {
                    path: output.clone(),
                    source,
                }
            })
        });
        if let Err(e) = renamed {
            notes.discard();
            return Err(e);
        }
        // The notes first: their stop removes a side file of the output's it did not
        // write, as an earlier recording's (the paths are written after).
        let mut companions = notes.stop(&mut warnings);
        if let Some(paths) = recording.paths() {
            companions.extend(paths.snapshot(&output, &mut warnings));
        }
        Ok(Outcome::written(output, companions, warnings))
    }

    /// Ends the run going on, if any, keeping nothing of it (it was interrupted).
    fn discard(&mut self) {
        if let Some(run) = self.run.take() {
            run.notes.discard();
        }
    }

    /// Stops perf and the path capture, removing what they recorded after the last run;
    /// perf says nothing of the whole recording.
    fn stop(mut self: Box<Self>) -> Vec<String> {
        self.stop_recording();
        Vec::new()
    }
}

impl PerfRuns {
    /// Discards the run going on and stops perf and the path capture, if not yet.
    fn stop_recording(&mut self) {
        self.discard();
        if let Some(recording) = self.recording.take() {
            recording.stop_discarding();
        }
    }
}

impl Drop for PerfRuns {
    fn drop(&mut self) {
        self.stop_recording();
    }
}
