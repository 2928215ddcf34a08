//! [`BpfRuns`]: one eBPF recording cut into a trace for each of several runs (`slowlab
//! lab --trace` records both variants of every scenario, `diagnose --repeat` each run of
//! its command). The recorder runs in ring mode from the first run to the last, so its
//! programs are loaded, attached and detached once, where a recording of each run's own
//! spent ~2 s a run on them. [`BpfRuns::begin`] lets go of what the recorder holds (the
//! time between runs), [`BpfRuns::end`] writes what came since as the run's trace, with
//! the run's cgroup notes beside it.
//!
//! A run's records and stacks wait for its end in a spill file beside the runs (unlinked:
//! nothing is left of it however slowlab ends), not in memory: a run of minutes keeps all
//! of its trace, as a recording of its own would. It does not analyze the traces.

use std::path::{Path, PathBuf};

use slowlab_bpf::sched::{RingOptions, SchedOptions, SchedRecorder, SchedStats};

use crate::bpf_session::BpfRecorded;
use crate::companions::{Companions, NO_AGE_LIMIT};
use crate::{Outcome, RecordError, RunRecorder};

/// The run going on: its trace and its cgroup notes.
struct Run {
    output: PathBuf,
    companions: Companions,
    warnings: Vec<String>,
}

/// One eBPF recording, cut into a trace per run (see the module documentation). Start
/// and stop it on one thread; dropping it stops the recorder and discards a run going on.
pub struct BpfRuns {
    recorder: Option<SchedRecorder>,
    /// Where the ring's last window goes at the stop: emptied first, then removed.
    scratch: PathBuf,
    run: Option<Run>,
}

impl BpfRuns {
    /// Starts the recorder, its runs' records spilled into `dir` (on the runs' file
    /// system: give the directory their traces go to); nothing is written until a run
    /// ends.
    pub fn start(options: &SchedOptions, dir: &Path) -> Result<BpfRuns, RecordError> {
        let scratch = dir.join(".recording.data");
        let ring = RingOptions {
            window: NO_AGE_LIMIT,
            max_bytes: u64::MAX,
            spill: true,
        };
        let options = crate::bpf_session::of_commands(options);
        let recorder =
            SchedRecorder::start_ring(&scratch, &options, ring).map_err(RecordError::from_bpf)?;
        Ok(BpfRuns {
            recorder: Some(recorder),
            scratch,
            run: None,
        })
    }

    fn recorder(&self) -> Result<&SchedRecorder, RecordError> {
        match &self.recorder {
            Some(r) if !r.has_failed() => Ok(r),
            _ => Err(stopped(
                "the recorder has stopped (an earlier run's error says why)",
            )),
        }
    }
}

impl RunRecorder for BpfRuns {
    /// Begins a run whose trace goes into `output`: what was recorded before is let go.
    fn begin(&mut self, output: &Path) -> Result<(), RecordError> {
        self.discard();
        let recorder = self.recorder()?;
        recorder.forget().map_err(RecordError::from_bpf)?;
        let mut warnings = Vec::new();
        // The paths are in the recording itself; the cgroup notes are beside it.
        let companions = Companions::start(output, false, &mut warnings);
        self.run = Some(Run {
            output: output.to_owned(),
            companions,
            warnings,
        });
        Ok(())
    }

    /// Ends the run: writes what was recorded since its begin into its trace (through
    /// `OUTPUT.partial`), and its cgroup notes; the recording goes on.
    fn end(&mut self) -> Result<Outcome, RecordError> {
        let Run {
            output,
            companions,
            mut warnings,
        } = self.run.take().ok_or_else(|| stopped("no run was begun"))?;
        let written = self
            .recorder()
            .and_then(|r| r.snapshot(&output).map_err(RecordError::from_bpf));
        if let Err(e) = written {
            companions.discard();
            return Err(e);
        }
        let companions = companions.stop(&mut warnings);
        Ok(Outcome::written(output, companions, warnings))
    }

    /// Ends the run going on, if any, writing nothing (it was interrupted).
    fn discard(&mut self) {
        if let Some(run) = self.run.take() {
            run.companions.discard();
        }
    }

    /// Stops the recorder; what it says of the whole recording (tracepoints it could not
    /// attach, programs that missed runs) as warning lines.
    fn stop(mut self: Box<Self>) -> Vec<String> {
        self.stop_recorder()
    }

    fn note_command(&self, pid: u32, args: &[String]) {
        if let Some(recorder) = &self.recorder {
            recorder.note_command(pid, args);
        }
    }

    fn has_failed(&self) -> bool {
        self.recorder.as_ref().is_none_or(SchedRecorder::has_failed)
    }
}

impl BpfRuns {
    /// Discards the run going on and stops the recorder, if not yet: its warnings.
    fn stop_recorder(&mut self) -> Vec<String> {
        self.discard();
        let Some(recorder) = self.recorder.take() else {
            return Vec::new();
        };
        // Only what came after the last run is left: a small file, removed.
        let _ = recorder.forget();
        let stopped = recorder.stop();
        let _ = std::fs::remove_file(&self.scratch);
        match stopped {
            Ok(stats) => recording_warnings(stats),
            Err(e) => vec![format!("the recorder failed at its stop: {e}")],
        }
    }
}

impl Drop for BpfRuns {
    fn drop(&mut self) {
        self.stop_recorder();
    }
}

/// A run that cannot be recorded: `why`.
fn stopped(why: &str) -> RecordError {
    RecordError::Run(why.to_string())
}

/// The whole recording's warnings; its losses and the host's steal time are each run's,
/// in each run's trace.
fn recording_warnings(stats: SchedStats) -> Vec<String> {
    let stats = SchedStats {
        dropped: 0,
        stacks_lost: 0,
        cpu_times: None,
        ..stats
    };
    BpfRecorded::of(stats).warnings()
}
