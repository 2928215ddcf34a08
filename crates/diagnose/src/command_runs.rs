//! `diagnose --repeat` and `sweep --critical-path`: every run of a command recorded in one
//! recording ([`CommandRuns`]: perf's [`PerfRuns`] or the eBPF recorder's [`BpfRuns`],
//! started at the first run and stopped after the last, so that its start and stop, ~2 s
//! with the eBPF recorder and ~4 s with perf, are paid once), each run's trace analyzed
//! into the run's directory as `diagnose` does ([`analyze_into`]). [`CommandDiagnoser`] is
//! that for `sweep --critical-path`. [`RunsRecording`] is the recording started at the
//! first run, for `lab --trace` too. It does not print.

use std::path::{Path, PathBuf};

use slowlab_bpf::sched::SchedOptions;
use slowlab_record::{BpfRuns, CommandRun, Outcome, PerfRuns, RecordError, RunRecorder};

use crate::bpf_recording::bpf_options;
use crate::{analyze_into, recording, DiagnoseError, Diagnosis, Target, TraceOpener};

/// One recording for runs whose directories are in `dir` (where it keeps what it has not
/// written yet), started at the first run: with the eBPF recorder when `bpf` (recording
/// this process's own threads too when `own_process`), else with perf, sampling at `freq`
/// Hz. Dropping it stops the recording.
pub(crate) struct RunsRecording {
    dir: PathBuf,
    freq: u32,
    bpf: bool,
    own_process: bool,
    runs: Option<Box<dyn RunRecorder>>,
}

impl RunsRecording {
    pub(crate) fn new(dir: &Path, freq: u32, bpf: bool, own_process: bool) -> Self {
        RunsRecording {
            dir: dir.to_owned(),
            freq,
            bpf,
            own_process,
            runs: None,
        }
    }

    /// The recording, started now if it was not.
    pub(crate) fn get(&mut self) -> Result<&mut (dyn RunRecorder + 'static), RecordError> {
        let runs: Box<dyn RunRecorder> = match self.runs.take() {
            Some(runs) => runs,
            None => {
                let cfg = recording(self.dir.join(".recording.data"), self.freq, Vec::new());
                if self.bpf {
                    let options = SchedOptions {
                        record_own_process: self.own_process,
                        ..bpf_options(&cfg)
                    };
                    Box::new(BpfRuns::start(&options, &self.dir)?)
                } else {
                    Box::new(PerfRuns::start(&cfg)?)
                }
            }
        };
        Ok(self.runs.insert(runs).as_mut())
    }

    /// The recording, if it has started.
    pub(crate) fn started(&mut self) -> Option<&mut (dyn RunRecorder + 'static)> {
        self.runs.as_deref_mut()
    }

    /// Stops the recording, if it has started: what it says of the whole of it
    /// (tracepoints it could not attach, programs that missed runs), as warning lines.
    pub(crate) fn finish(&mut self) -> Vec<String> {
        self.runs.take().map(|runs| runs.stop()).unwrap_or_default()
    }
}

/// The runs of a command in one recording (see the module documentation).
pub struct CommandRuns<'o> {
    opener: &'o dyn TraceOpener,
    recording: RunsRecording,
}

/// A run of the command: how it ended, its diagnosis (none when a stop signal ended it:
/// nothing of it was kept), and the warnings of its recording and analysis.
pub struct CommandRunDiagnosed {
    pub outcome: Outcome,
    pub diagnosis: Option<Diagnosis>,
    pub warnings: Vec<String>,
}

impl<'o> CommandRuns<'o> {
    /// Runs to come, in directories under `dir`, recorded with the eBPF recorder when
    /// `bpf`, else perf, sampling at `freq` Hz.
    pub fn new(opener: &'o dyn TraceOpener, dir: &Path, freq: u32, bpf: bool) -> Self {
        CommandRuns {
            opener,
            recording: RunsRecording::new(dir, freq, bpf, false),
        }
    }

    /// Records `command` into `run_dir/trace.data` (the recording starts at the first
    /// run) and makes its analysis into `run_dir`.
    pub fn run(
        &mut self,
        command: &[String],
        run_dir: &Path,
    ) -> Result<CommandRunDiagnosed, DiagnoseError> {
        // Before the recording starts: a command not found is said at once.
        slowlab_record::command_found(command)?;
        let trace = run_dir.join("trace.data");
        let CommandRun { outcome, pid } =
            slowlab_record::run_command(self.recording.get()?, command, &trace)?;
        if outcome.stopped_by.is_some() {
            return Ok(CommandRunDiagnosed {
                outcome,
                diagnosis: None,
                warnings: Vec::new(),
            });
        }
        let mut warnings = outcome.warnings.clone();
        let diagnosis = analyze_into(
            self.opener,
            &trace,
            run_dir,
            command,
            Target::command(pid),
            &[],
            &mut warnings,
        )?;
        Ok(CommandRunDiagnosed {
            outcome,
            diagnosis: Some(diagnosis),
            warnings,
        })
    }

    /// Stops the recording (dropping it does too); what it says of the whole of it
    /// (tracepoints it could not attach, programs that missed runs), as warning lines.
    pub fn finish(&mut self) -> Vec<String> {
        self.recording.finish()
    }
}

/// `sweep --critical-path`'s runs: each one recorded and analyzed as `diagnose` does, in
/// one recording ([`CommandRuns`]).
pub struct CommandDiagnoser<'o> {
    runs: CommandRuns<'o>,
    /// The warnings of every run, once per kind.
    pub warnings: Vec<String>,
}

impl<'o> CommandDiagnoser<'o> {
    pub fn new(runs: CommandRuns<'o>) -> Self {
        CommandDiagnoser {
            runs,
            warnings: Vec::new(),
        }
    }

    /// Stops the recording; its warnings join the runs'.
    pub fn finish(&mut self) {
        let stopped = self.runs.finish();
        self.note(stopped);
    }

    fn note(&mut self, warnings: Vec<String>) {
        for w in warnings {
            if !self.warnings.iter().any(|seen| same_kind(seen, &w)) {
                self.warnings.push(w);
            }
        }
    }
}

impl slowlab_runs::Diagnoser for CommandDiagnoser<'_> {
    fn diagnose(
        &mut self,
        command: &[String],
        dir: &Path,
    ) -> Result<slowlab_runs::Diagnosed, String> {
        let run = self.runs.run(command, dir).map_err(|e| e.to_string())?;
        self.note(run.warnings);
        Ok(slowlab_runs::Diagnosed {
            path: run.diagnosis.and_then(|d| d.path),
            exit_code: run.outcome.exit_code,
            interrupted: run.outcome.stopped_by.is_some(),
        })
    }
}

/// Two warnings of one kind: "3 binaries could not be…" and "4 binaries…".
fn same_kind(a: &str, b: &str) -> bool {
    let shape = |w: &str| w.replace(|c: char| c.is_ascii_digit(), "");
    shape(a) == shape(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_that_differ_only_in_their_numbers_are_one_kind() {
        assert!(same_kind(
            "3 binaries could not be symbolized",
            "14 binaries could not be symbolized"
        ));
        assert!(!same_kind(
            "3 binaries could not be symbolized",
            "3 events were lost"
        ));
    }
}
