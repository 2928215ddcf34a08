//! `diagnose --backend bpf`: the recording of [`crate::recording`] made by the eBPF
//! scheduler recorder (`slowlab_record::run_bpf`) instead of perf, as the same
//! [`Outcome`], so that the analysis (`analyze_into`) is the same. Its warnings (records
//! lost to a full ring buffer, stacks to a full stack map, tracepoints not attached) are
//! `slowlab record --backend bpf`'s, word for word.
//!
//! The recorded command's process is known by its pid ([`Recorded::target`]): a bpf
//! recording has no `perf` parent for `Root::Command` to find the command under, and the
//! longest process started in a system-wide recording (the fallback) can be anyone's.
//!
//! The paths are in the recording; the cgroup notes beside it, as with perf. It has no
//! ring mode and does not print. `lab --trace`, `diagnose --repeat` and `sweep
//! --critical-path` record all their runs in one recording (`command_runs`), with the
//! options made here.

use slowlab_bpf::sched::SchedOptions;
use slowlab_record::{Config, Outcome};

use crate::{DiagnoseError, Target};

/// A recording made by either backend.
pub struct Recorded {
    pub outcome: Outcome,
    /// The command's process, when the backend knows it (bpf).
    pub command_pid: Option<u32>,
}

impl Recorded {
    /// Whose critical path to answer for when the target is the command: its process by
    /// pid when known, else the command as `Root::Command` finds it.
    pub fn target(&self) -> Target {
        Target::command(self.command_pid)
    }
}

/// Records `cfg` with perf (`slowlab_record::run`), or with the eBPF recorder when `bpf`
/// (its sampling frequency and whether it records paths; no ring).
pub fn record_with(cfg: &Config, bpf: bool) -> Result<Recorded, DiagnoseError> {
    if !bpf {
        return Ok(Recorded {
            outcome: slowlab_record::run(cfg)?,
            command_pid: None,
        });
    }
    let out = slowlab_record::run_bpf(cfg.output.clone(), &bpf_options(cfg), &cfg.command)?;
    Ok(Recorded {
        outcome: outcome_of(&out),
        command_pid: out.command_pid,
    })
}

/// The eBPF recorder's options for `cfg`: its sampling frequency and whether it records
/// paths.
pub(crate) fn bpf_options(cfg: &Config) -> SchedOptions {
    SchedOptions {
        sample_freq: cfg.freq,
        paths: cfg.capture_paths,
        ..SchedOptions::default()
    }
}

/// A bpf recording's result as perf's [`Outcome`].
pub(crate) fn outcome_of(out: &slowlab_record::BpfRecorded) -> Outcome {
    Outcome {
        exit_code: out.exit_code,
        output: out.stats.output.clone(),
        companions: out.companions.clone(),
        warnings: out.warnings(),
        stopped_by: out.stopped_by,
        snapshots: Vec::new(),
        ring_seconds: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slowlab_bpf::sched::SchedStats;
    use slowlab_record::BpfRecorded;

    #[test]
    fn a_bpf_recording_keeps_its_losses_and_names_its_command_by_pid() {
        let out = BpfRecorded {
            stats: SchedStats {
                dropped: 7,
                output: "/x/trace.data".into(),
                ..SchedStats::default()
            },
            companions: vec!["/x/trace.data.cgroups.json".into()],
            companion_warnings: vec!["cannot write the cgroup notes".into()],
            exit_code: 3,
            command_pid: Some(4242),
            snapshots: Vec::new(),
            ring_seconds: None,
            stopped_by: Some(2), // SIGINT
        };
        let o = outcome_of(&out);
        assert_eq!((o.exit_code, o.stopped_by), (3, Some(2)));
        assert_eq!(o.output, std::path::PathBuf::from("/x/trace.data"));
        assert_eq!(
            o.warnings,
            [
                "cannot write the cgroup notes",
                "7 events lost: the BPF ring buffer was full"
            ]
        );
        assert_eq!(o.companions, out.companions);
        let r = Recorded {
            outcome: o,
            command_pid: out.command_pid,
        };
        assert!(matches!(r.target(), Target::Pid(4242)));
        let perf = Recorded {
            command_pid: None,
            ..r
        };
        assert!(matches!(perf.target(), Target::Command));
    }
}
