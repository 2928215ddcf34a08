//! `slowlab record --backend bpf`: the scheduler flight recorder of `slowlab_bpf::sched`
//! instead of perf. Starts the recorder, runs the command (or waits for SIGINT, SIGTERM or
//! SIGHUP when there is none), stops the recorder and reports what it wrote, lost records
//! included.
//!
//! It records what the critical path needs (CPU samples, switches and wake-ups with
//! stacks, lifetimes) and the waiting syscalls that name a wait's resource (futex, wait4,
//! waitid, flock); not the page faults, disk requests, other syscalls or paths of the perf
//! backend, and no ring mode yet.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use slowlab_bpf::sched::{SchedOptions, SchedRecorder, SchedStats};

use crate::signals::StopSignals;
use crate::RecordError;

/// What a BPF recording did.
#[derive(Debug)]
pub struct BpfRecorded {
    pub stats: SchedStats,
    /// The command's exit code (0 without a command).
    pub exit_code: i32,
}

impl BpfRecorded {
    /// What was lost, as warnings for the user (none when nothing was): records lost to a
    /// full ring buffer, events without a stack because the stack map was full, and
    /// tracepoints that could not be attached. (What
    /// `slowlab record` prints; for `diagnose --backend bpf` to say the same.)
    pub fn warnings(&self) -> Vec<String> {
        let s = &self.stats;
        let mut w = Vec::new();
        if s.dropped > 0 {
            w.push(format!(
                "{} events lost: the BPF ring buffer was full",
                s.dropped
            ));
        }
        if s.stacks_lost > 0 {
            w.push(format!(
                "{} events have no stack: the stack map was full",
                s.stacks_lost
            ));
        }
        for what in &s.unattached {
            w.push(format!("not recorded: {what}"));
        }
        w
    }
}

/// Records into `output` while `command` runs (until a stop signal without one).
pub fn run_bpf(
    output: PathBuf,
    options: &SchedOptions,
    command: &[String],
) -> Result<BpfRecorded, RecordError> {
    let mut signals = StopSignals::install();
    let recorder = SchedRecorder::start(&output, options).map_err(RecordError::Bpf)?;
    let exit_code = match command.split_first() {
        Some((program, args)) => {
            let mut child =
                Command::new(program)
                    .args(args)
                    .spawn()
                    .map_err(|e| RecordError::Command {
                        program: program.clone(),
                        source: e,
                    })?;
            loop {
                if let Some(status) = child.try_wait().map_err(|e| RecordError::Command {
                    program: program.clone(),
                    source: e,
                })? {
                    break status.code().unwrap_or(1);
                }
                // The command gets the signal from the terminal too; wait for it.
                let _ = signals.take();
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        None => loop {
            let got = signals.take();
            if got.iter().any(|&s| s != libc::SIGUSR2) {
                break 0;
            }
            std::thread::sleep(Duration::from_millis(50));
        },
    };
    let stats = recorder.stop().map_err(RecordError::Bpf)?;
    Ok(BpfRecorded { stats, exit_code })
}

#[cfg(test)]
mod tests {
    use super::*;
    use slowlab_bpf::sched::SchedStats;

    #[test]
    fn losses_become_warnings() {
        let mut r = BpfRecorded {
            stats: SchedStats::default(),
            exit_code: 0,
        };
        assert!(r.warnings().is_empty());
        r.stats.dropped = 3;
        r.stats.stacks_lost = 5;
        r.stats.unattached = vec!["syscalls:sys_enter_flock: no such tracepoint".into()];
        assert_eq!(
            r.warnings(),
            [
                "3 events lost: the BPF ring buffer was full",
                "5 events have no stack: the stack map was full",
                "not recorded: syscalls:sys_enter_flock: no such tracepoint"
            ]
        );
    }
}
