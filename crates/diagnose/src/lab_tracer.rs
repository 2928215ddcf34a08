//! `slowlab lab --trace DIR`: the [`Tracer`] that records the whole system
//! around one run of a scenario's variant, with perf (`slowlab-record`'s
//! [`PerfRuns`]) or the eBPF recorder ([`BpfRuns`]): one recording for all
//! the runs, cut into a trace for each. It runs the detectors on each trace
//! ([`analyze_into`]). Each run gets `DIR/LABEL/` with its
//! trace, `findings.json` and `report.html`.
//! It does not print (the lab's runner reports the runs, the binary what
//! [`LabTracer::finish`] says of the whole recording).

use std::path::{Path, PathBuf};

use slowlab_lab::runner::{Tracer, TracerError};
use slowlab_model::results::TracedRun;
#[cfg(doc)]
use slowlab_record::{BpfRuns, PerfRuns};

use crate::command_runs::RunsRecording;
use crate::{analyze_into, Target, TraceOpener};

pub struct LabTracer<'o> {
    opener: &'o dyn TraceOpener,
    dir: PathBuf,
    /// The recording, from the first run on.
    recording: RunsRecording,
    /// The directory of the run going on.
    running: Option<PathBuf>,
}

impl<'o> LabTracer<'o> {
    /// Creates `dir`; each run goes into a directory of its own under it,
    /// recorded by the eBPF recorder when `bpf`, else by perf.
    pub fn new(
        opener: &'o dyn TraceOpener,
        dir: &Path,
        freq: u32,
        bpf: bool,
    ) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        Ok(LabTracer {
            opener,
            dir: dir.to_owned(),
            // The scenarios' work is partly this process's own (a thread that times the
            // teardown lock, the namespaces it makes): recorded as any other's.
            recording: RunsRecording::new(dir, freq, bpf, true),
            running: None,
        })
    }
}

impl Tracer for LabTracer<'_> {
    fn start(&mut self, label: &str) -> Result<(), TracerError> {
        let run_dir = self.dir.join(label);
        std::fs::create_dir_all(&run_dir)
            .map_err(|e| format!("cannot create {}: {e}", run_dir.display()))?;
        let output = run_dir.join("trace.data");
        self.recording.get()?.begin(&output)?;
        self.running = Some(run_dir);
        Ok(())
    }

    fn discard(&mut self) {
        if let Some(run_dir) = self.running.take() {
            if let Some(runs) = self.recording.started() {
                runs.discard();
            }
            let _ = std::fs::remove_dir_all(run_dir);
        }
    }

    fn stop(&mut self) -> Result<TracedRun, TracerError> {
        let run_dir = self.running.take().ok_or("no recording is running")?;
        let outcome = self
            .recording
            .started()
            .ok_or("no recording is running")?
            .end()?;
        let mut warnings = outcome.warnings;
        let label = run_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let diagnosis = analyze_into(
            self.opener,
            &outcome.output,
            &run_dir,
            &[label],
            Target::Command,
            &[],
            &mut warnings,
        )?;
        let (findings, titles) = diagnosis.findings.into_iter().unzip();
        Ok(TracedRun {
            trace: outcome.output.display().to_string(),
            findings,
            titles,
            error: None,
        })
    }
}

impl LabTracer<'_> {
    /// Stops the recording; what the eBPF recorder says of the whole recording
    /// (tracepoints it could not attach, programs that missed runs), as warning lines.
    pub fn finish(mut self) -> Vec<String> {
        self.stop_recording()
    }

    fn stop_recording(&mut self) -> Vec<String> {
        self.discard();
        self.recording.finish()
    }
}

impl Drop for LabTracer<'_> {
    /// Stops the recording, if [`LabTracer::finish`] did not.
    fn drop(&mut self) {
        self.stop_recording();
    }
}
