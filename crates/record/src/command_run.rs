//! [`run_command`]: a command run as one run of a [`RunRecorder`] (`diagnose --repeat` and
//! `sweep --critical-path` record all their runs so, in one recording). The command is
//! started and waited for as `run_bpf` does: in a process group of its own, a stop signal
//! passed on to it, a second one killing it. A run a signal stopped is discarded: its
//! caller keeps the runs before it. It does not start or stop the recording.

use std::path::Path;

use crate::bpf_session::run_until_stopped;
use crate::signals::StopSignals;
use crate::{Outcome, RecordError, RunRecorder};

/// A command's run.
#[derive(Debug)]
pub struct CommandRun {
    /// Its trace, with its exit code (or 128 + the stop signal), and the stop signal
    /// that came, if one did: then nothing was written.
    pub outcome: Outcome,
    /// The command's process.
    pub pid: Option<u32>,
}

/// Runs `command` while `runs` records it into `output`; a stop signal (SIGINT, SIGTERM,
/// SIGHUP) is passed on to the command and the run is discarded once it exits, and a
/// second one kills it. The caller checks that the command exists
/// ([`command_found`](crate::command_found)) before it starts the recording.
pub fn run_command(
    runs: &mut dyn RunRecorder,
    command: &[String],
    output: &Path,
) -> Result<CommandRun, RecordError> {
    let mut signals = StopSignals::install();
    runs.begin(output)?;
    let ran = run_until_stopped(
        command,
        &mut signals,
        &|pid| runs.note_command(pid, command),
        &|| runs.has_failed(),
        &|_, child| child.kill_group(),
    );
    let (exit_code, pid, stopped_by) = match ran {
        Ok(ran) => ran,
        Err(e) => {
            runs.discard();
            return Err(e);
        }
    };
    if stopped_by.is_some() {
        runs.discard();
        let mut outcome = Outcome::written(output.to_owned(), Vec::new(), Vec::new());
        outcome.exit_code = exit_code;
        outcome.stopped_by = stopped_by;
        return Ok(CommandRun { outcome, pid });
    }
    let mut outcome = runs.end()?;
    outcome.exit_code = exit_code;
    Ok(CommandRun { outcome, pid })
}
