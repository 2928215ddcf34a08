//! `slowlab lab --trace DIR`: the [`Tracer`] that records the whole system
//! around one run of a scenario's variant, with perf (`slowlab-record`'s
//! [`Recording`]) or the eBPF recorder ([`BpfRecording`]), and runs the
//! detectors on it ([`analyze_into`]). Each run gets `DIR/LABEL/` with its
//! trace, `findings.json` and `report.html`.
//! It does not print (the lab's runner reports the runs).

use std::path::{Path, PathBuf};

use slowlab_bpf::sched::SchedOptions;
use slowlab_lab::runner::{Tracer, TracerError};
use slowlab_model::results::TracedRun;
use slowlab_record::{BpfRecording, Recording};

use crate::bpf_recording::{bpf_options, outcome_of};
use crate::{analyze_into, recording, Target, TraceOpener};

pub struct LabTracer<'o> {
    opener: &'o dyn TraceOpener,
    dir: PathBuf,
    freq: u32,
    bpf: bool,
    running: Option<(Running, PathBuf)>,
}

/// The recording of the run going on, by either backend.
enum Running {
    Perf(Recording),
    Bpf(BpfRecording),
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
            freq,
            bpf,
            running: None,
        })
    }
}

impl Tracer for LabTracer<'_> {
    fn start(&mut self, label: &str) -> Result<(), TracerError> {
        let run_dir = self.dir.join(label);
        std::fs::create_dir_all(&run_dir)
            .map_err(|e| format!("cannot create {}: {e}", run_dir.display()))?;
        let cfg = recording(run_dir.join("trace.data"), self.freq, Vec::new());
        let running = if self.bpf {
            // The scenarios' work is partly this process's own (a thread that times the
            // teardown lock, the namespaces it makes): recorded as any other's.
            let options = SchedOptions {
                record_own_process: true,
                ..bpf_options(&cfg)
            };
            Running::Bpf(BpfRecording::start(&cfg.output, &options)?)
        } else {
            Running::Perf(Recording::start(&cfg)?)
        };
        self.running = Some((running, run_dir));
        Ok(())
    }

    fn discard(&mut self) {
        if let Some((running, run_dir)) = self.running.take() {
            match running {
                Running::Perf(recording) => drop(recording.stop()),
                Running::Bpf(recording) => drop(recording.stop()),
            }
            let _ = std::fs::remove_dir_all(run_dir);
        }
    }

    fn stop(&mut self) -> Result<TracedRun, TracerError> {
        let (running, run_dir) = self.running.take().ok_or("no recording is running")?;
        let outcome = match running {
            Running::Perf(recording) => recording.stop()?,
            Running::Bpf(recording) => outcome_of(&recording.stop()?),
        };
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
