//! `slowlab lab --trace DIR`: the [`Tracer`] that records the whole system
//! around one run of a scenario's variant (`slowlab-record`'s
//! [`Recording`]) and runs the detectors on it (`diagnose::analyze_into`),
//! and the table of the checks. Each run gets `DIR/LABEL/` with its
//! trace, `findings.json` and `report.html`. Glue only.

use std::path::{Path, PathBuf};

use slowlab_lab::runner::{Tracer, TracerError};
use slowlab_model::results::TracedRun;
use slowlab_record::Recording;

use super::diagnose::{analyze_into, Target};

pub struct LabTracer {
    dir: PathBuf,
    freq: u32,
    running: Option<(Recording, PathBuf)>,
}

impl LabTracer {
    pub fn new(dir: &Path, freq: u32) -> anyhow::Result<LabTracer> {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("cannot create --trace {}: {e}", dir.display()))?;
        Ok(LabTracer {
            dir: dir.to_owned(),
            freq,
            running: None,
        })
    }
}

impl Tracer for LabTracer {
    fn start(&mut self, label: &str) -> Result<(), TracerError> {
        let run_dir = self.dir.join(label);
        std::fs::create_dir_all(&run_dir)
            .map_err(|e| format!("cannot create {}: {e}", run_dir.display()))?;
        let cfg = slowlab_record::Config {
            output: run_dir.join("trace.data"),
            freq: self.freq,
            ring_seconds: None,
            call_graph: slowlab_record::CallGraph::Fp,
            command: Vec::new(),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
            capture_paths: true,
        };
        let recording = Recording::start(&cfg)?;
        self.running = Some((recording, run_dir));
        Ok(())
    }

    fn stop(&mut self) -> Result<TracedRun, TracerError> {
        let (recording, run_dir) = self.running.take().ok_or("no recording is running")?;
        let outcome = recording.stop()?;
        let mut warnings = outcome.warnings;
        let label = run_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // The whole chain of causes, as the binary prints errors.
        let diagnosis = analyze_into(
            &outcome.output,
            &run_dir,
            &[label],
            Target::Command,
            &[],
            &mut warnings,
        )
        .map_err(|e| format!("{e:#}"))?;
        let (findings, titles) = diagnosis.findings.into_iter().unzip();
        Ok(TracedRun {
            trace: outcome.output.display().to_string(),
            findings,
            titles,
            error: None,
        })
    }
}
