//! `slowlab record`: a system-wide trace with `perf record` (sampled stacks,
//! scheduler switches and wake-ups with stacks, process lifetimes, page
//! faults, disk requests, the syscalls the detectors use) and what is
//! recorded beside it, with errors that say what to do.
//!
//! - [`run`] records until the command exits or a signal stops it; in ring
//!   mode it keeps only the last seconds, sized from the event rate
//!   measured (`ring`), and saves a snapshot on SIGUSR2 (`session`).
//! - [`Recording`] is started and stopped by the caller (`lab --trace`);
//!   [`PerfRuns`] and [`BpfRuns`] are one recording cut into a trace per run,
//!   and [`run_command`] runs a command as one of them.
//! - [`perf_args`] is the command line, a pure function of [`Config`] and
//!   the tracepoints this kernel has (`args`); [`preflight`] the checks.
//! - [`run_bpf`]: `--backend bpf`, the eBPF scheduler recorder instead of perf
//!   (`bpf_session`); [`run_bpf_ring`] in ring mode, with the same snapshots,
//!   `--save`, triggers and bounds (`bpf_ring`).
//! - [`companions`]: the eBPF path capture and the cgroup notes.
//! - Always on ([`run_with`] and [`AlwaysOn`]): in ring mode, snapshots on
//!   `slowlab record --save` from another shell ([`save`], through the
//!   control socket of `control`), on `--trigger` conditions (`triggers`),
//!   at most [`AlwaysOn::keep_snapshots`] kept, and a full disk that stops
//!   a snapshot, not the recording.
//!
//! perf can never outlive slowlab (`perf_process`): no exit path, signal or
//! panic leaves it, or the eBPF capture, recording. This crate does not
//! read the trace; that is `slowlab-perf`.

mod args;
mod bpf_ring;
mod bpf_runs;
mod bpf_session;
mod command_run;
pub mod companions;
mod control;
mod group_guard;
mod overrides;
mod perf_process;
mod perf_runs;
mod recording;
mod ring;
mod session;
mod signals;
mod triggers;
mod wake;

use std::path::PathBuf;
use std::time::Duration;

pub use args::{
    command_found, find_program, perf_args, preflight, ring_pages, tracepoint_exists, STREAM_PAGES,
    SYSCALLS, TRACEPOINTS,
};
pub use bpf_ring::{run_bpf_ring, RING_MAX_BYTES};
pub use bpf_runs::BpfRuns;
pub use bpf_session::{run_bpf, BpfRecorded, BpfRecording};
pub use command_run::{run_command, CommandRun};
pub use companions::{memory_cgroup, side_file, CgroupNotes, Companions};
pub use control::{absolute_output, recorders, save, RecorderInfo};
pub use perf_process::kill_running;
pub use perf_runs::PerfRuns;
pub use recording::Recording;
pub use triggers::{parse_psi_some_avg10, Pressure, Trigger, TRIGGER_SYNTAX};

/// One recording cut into a trace per run, by either backend ([`PerfRuns`], [`BpfRuns`]):
/// what `lab --trace` records its runs with, and `diagnose --repeat` and `sweep
/// --critical-path` their command's runs ([`run_command`]).
pub trait RunRecorder {
    /// Begins a run whose trace goes into `output`: what was recorded before is let go.
    fn begin(&mut self, output: &std::path::Path) -> Result<(), RecordError>;
    /// Ends the run: what was recorded since its begin becomes its trace, with its side
    /// files; the recording goes on.
    fn end(&mut self) -> Result<Outcome, RecordError>;
    /// Ends the run going on, if any, keeping nothing of it (it was interrupted).
    fn discard(&mut self);
    /// Stops the recording; what it says of the whole recording, as warning lines.
    fn stop(self: Box<Self>) -> Vec<String>;
    /// The run's command has started as process `pid` (the eBPF recorder names it in
    /// the run's trace, the root of its analysis).
    fn note_command(&self, _pid: u32, _args: &[String]) {}
    /// Whether the recording has failed by itself (a full disk) and records no more.
    fn has_failed(&self) -> bool {
        false
    }
}

/// What a ring recording does besides keeping the ring (`--save`,
/// `--trigger`, `--after`, `--keep-snapshots`); ignored without ring mode.
#[derive(Clone, Debug, Default)]
pub struct AlwaysOn {
    /// Each saves a snapshot when its condition becomes true (once per
    /// episode).
    pub triggers: Vec<Trigger>,
    /// How long after a trigger fires its snapshot is saved; `None`:
    /// [`default_after`] of the ring's seconds.
    pub after: Option<Duration>,
    /// The snapshots kept beside OUTPUT (the oldest are removed, with their
    /// side files); 0 keeps [`DEFAULT_KEEP_SNAPSHOTS`].
    pub keep_snapshots: usize,
    /// Listen for `slowlab record --save` from other shells.
    pub control: bool,
}

/// Which recorder writes a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// `perf record` ([`run`], [`run_with`]).
    Perf,
    /// The eBPF recorder ([`run_bpf`], [`run_bpf_ring`]).
    Bpf,
}

/// The standard input of a recorded command: slowlab's own when it is a pipe or a file
/// (`slowlab record -- ./app < input`), else nothing: the command runs in a process group
/// of its own (a terminal's Ctrl-C reaches slowlab, which stops the recording in order),
/// and a terminal stops a background group that reads from it.
pub(crate) fn command_stdin() -> std::process::Stdio {
    // SAFETY: isatty only inspects the descriptor.
    if unsafe { libc::isatty(libc::STDIN_FILENO) } == 1 {
        std::process::Stdio::null()
    } else {
        std::process::Stdio::inherit()
    }
}

/// `--backend auto`: the eBPF recorder where it can run here and records what is asked
/// (user stacks by frame pointers), else perf, with the line that says why.
pub fn auto_backend(call_graph: CallGraph) -> (Backend, Option<String>) {
    if call_graph == CallGraph::Dwarf {
        return (
            Backend::Perf,
            Some("recording with perf: only perf copies user stacks for DWARF unwinding".into()),
        );
    }
    match slowlab_bpf::sched::SchedRecorder::available() {
        Ok(()) => (Backend::Bpf, None),
        Err(why) => (
            Backend::Perf,
            Some(format!(
                "recording with perf: the eBPF recorder cannot run here ({why})"
            )),
        ),
    }
}

/// The line naming a ring recording's snapshots kept, if there are any.
pub fn snapshots_line(snapshots: &[PathBuf]) -> Option<String> {
    let names: Vec<String> = snapshots.iter().map(|f| f.display().to_string()).collect();
    (!names.is_empty()).then(|| {
        format!(
            "{} snapshot(s) saved and kept: {}",
            names.len(),
            names.join(", ")
        )
    })
}

/// Snapshots kept when [`AlwaysOn::keep_snapshots`] is 0.
pub const DEFAULT_KEEP_SNAPSHOTS: usize = 10;

/// The default wait between a trigger and its snapshot for `--ring
/// SECONDS`: a third of the ring, at most 5 s, so that the snapshot holds
/// about twice as much before the moment as after it.
pub fn default_after(ring_seconds: u32) -> Duration {
    Duration::from_secs_f64((f64::from(ring_seconds) / 3.0).min(5.0))
}

/// How user-space stacks are collected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallGraph {
    /// Frame pointers (cheap; needs code built with frame pointers).
    Fp,
    /// A copy of the user stack per sample (large; `analyze` names only the
    /// sampled user frame of such stacks, `perf report` unwinds them).
    Dwarf,
}

/// What to record.
#[derive(Clone, Debug)]
pub struct Config {
    pub output: PathBuf,
    /// Sampling frequency in Hz.
    pub freq: u32,
    /// Keep only about the last this many seconds (ring-buffer mode).
    pub ring_seconds: Option<u32>,
    pub call_graph: CallGraph,
    /// Command to run; record until it exits. Empty: until Ctrl-C.
    pub command: Vec<String>,
    /// Number of CPUs (for sizing the ring buffer).
    pub cpus: u32,
    /// Capture the path strings of syscalls with eBPF into `OUTPUT.paths`.
    pub capture_paths: bool,
}

/// Why recording failed; each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("perf is not installed: install it with `sudo apt-get install linux-perf` (Debian) or `sudo apt-get install linux-tools-$(uname -r)` (Ubuntu)")]
    PerfMissing,
    #[error("system-wide tracing is not allowed (kernel.perf_event_paranoid = {paranoid}, not root): run slowlab record with sudo, or allow it with `sudo sysctl kernel.perf_event_paranoid=-1`")]
    Permission { paranoid: i32 },
    #[error("only {free_mb} MB free in {dir}: a trace needs more; free some space or write elsewhere with -o")]
    DiskFull { dir: PathBuf, free_mb: u64 },
    #[error("the disk filled while recording into {dir} ({free_mb} MB free there now, the unfinished trace removed){stopped}: free some space or write elsewhere with -o")]
    DiskFilled {
        dir: PathBuf,
        free_mb: u64,
        /// How the recorded command ended with it, if it did ("; perf stopped `make` with it …").
        stopped: String,
    },
    #[error("command not found: {0}")]
    CommandNotFound(String),
    #[error("perf record failed (exit {code}): {last_line}")]
    PerfFailed { code: i32, last_line: String },
    #[error("cannot start perf: {0}")]
    Spawn(std::io::Error),
    #[error("stopped by {} while measuring the event rate, before recording started: nothing was written; run slowlab record again to record", signals::name(*.signal))]
    Interrupted { signal: i32 },
    #[error("perf was killed before it finished writing {} ({why}), so that trace was not written; {kept}; to keep the trace, stop slowlab with a single signal and let perf finish", .output.display())]
    PerfKilled {
        output: PathBuf,
        why: String,
        kept: String,
        /// The signal that had asked for the stop, if one did.
        stopped_by: Option<i32>,
    },
    #[error("cannot write {}: {source}; check that its directory is writable, or write elsewhere with -o", .path.display())]
    Output {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start {program}: {source}")]
    Command {
        program: String,
        source: std::io::Error,
    },
    #[error("the eBPF scheduler recorder failed: {0}; `--backend perf` records without it")]
    Bpf(slowlab_bpf::BpfError),
    /// `--save` found no recorder to ask.
    #[error("{0}")]
    NoRecorder(String),
    /// `--save`: the recorder could not save the snapshot.
    #[error("no snapshot was saved: {0}")]
    SaveFailed(String),
    /// [`BpfRuns`]: a run that cannot be recorded, and why.
    #[error("the eBPF recorder cannot record this run: {0}")]
    Run(String),
    /// A `--trigger`, `--after` or `--save` setting that cannot work here.
    #[error("{0}")]
    AlwaysOn(String),
}

impl RecordError {
    /// The disk of `output` filled while it was written: how much is free there now.
    pub(crate) fn disk_filled(output: &std::path::Path) -> RecordError {
        let dir = slowlab_model::bundle::directory_of(output).to_owned();
        RecordError::DiskFilled {
            free_mb: args::free_bytes(&dir).unwrap_or(0) / (1 << 20),
            dir,
            stopped: String::new(),
        }
    }

    /// The eBPF recorder's error `e`, said as the user can act on it: a full disk or an
    /// unwritable file as they are for perf's backend, and only the recorder's own
    /// failures (loading, attaching, the ring buffer) with perf's backend as the way out.
    pub(crate) fn from_bpf(e: slowlab_bpf::BpfError) -> RecordError {
        match e {
            slowlab_bpf::BpfError::Io { path, source }
                if source.raw_os_error() == Some(libc::ENOSPC) =>
            {
                RecordError::disk_filled(&path)
            }
            slowlab_bpf::BpfError::Io { path, source } => RecordError::Output { path, source },
            e => RecordError::Bpf(e),
        }
    }

    /// The signal that stopped the recording before a trace was written, if one did
    /// (the command line then exits with 128 + it, as a shell expects).
    pub fn stop_signal(&self) -> Option<i32> {
        match self {
            RecordError::Interrupted { signal } => Some(*signal),
            RecordError::PerfKilled { stopped_by, .. } => *stopped_by,
            _ => None,
        }
    }
}

/// What a recording produced.
#[derive(Debug)]
pub struct Outcome {
    /// CMD's exit code (0 without CMD), or 128 + the signal that stopped
    /// the recording.
    pub exit_code: i32,
    pub output: PathBuf,
    /// The companion files written beside the trace (`OUTPUT.paths`,
    /// `OUTPUT.cgroups.json`).
    pub companions: Vec<PathBuf>,
    pub warnings: Vec<String>,
    /// The signal (SIGINT, SIGTERM, SIGHUP) that stopped the recording.
    pub stopped_by: Option<i32>,
    /// Ring mode: the snapshots saved (on SIGUSR2, `--save` or a trigger)
    /// and still kept (`OUTPUT.<timestamp>`, each with its own side files),
    /// oldest first.
    pub snapshots: Vec<PathBuf>,
    /// Ring mode: about how many seconds the ring buffers hold at the event
    /// rate measured before recording.
    pub ring_seconds: Option<f64>,
}

impl Outcome {
    /// A trace written with nothing run and no signal: a run of [`PerfRuns`] or
    /// [`BpfRuns`], or the caller's [`Recording`].
    pub(crate) fn written(
        output: PathBuf,
        companions: Vec<PathBuf>,
        warnings: Vec<String>,
    ) -> Self {
        Outcome {
            exit_code: 0,
            output,
            companions,
            warnings,
            stopped_by: None,
            snapshots: Vec::new(),
            ring_seconds: None,
        }
    }

    /// The line that says what was written (and beside it) and how to analyze it.
    pub fn wrote_line(&self) -> String {
        let size = std::fs::metadata(&self.output).map_or(0, |m| m.len());
        let beside: Vec<String> = self
            .companions
            .iter()
            .map(|f| f.display().to_string())
            .collect();
        format!(
            "wrote {} ({:.1} MB){}; analyze it with: slowlab analyze {}",
            self.output.display(),
            size as f64 / 1e6,
            if beside.is_empty() {
                String::new()
            } else {
                format!(" and {}", beside.join(", "))
            },
            self.output.display()
        )
    }
}

/// Records (see [`Config`]) until CMD exits or SIGINT, SIGTERM or SIGHUP
/// stops the recording, whatever dispositions slowlab inherited; perf's
/// and CMD's stderr are passed through, minus perf's own status lines. In
/// ring mode SIGUSR2 saves a snapshot and recording goes on. A second stop
/// signal kills perf. See `session` for the details.
pub fn run(cfg: &Config) -> Result<Outcome, RecordError> {
    session::run(cfg, &AlwaysOn::default())
}

/// [`run`], and in ring mode what [`AlwaysOn`] asks: snapshots on
/// `--save` and triggers, at most so many kept.
pub fn run_with(cfg: &Config, always: &AlwaysOn) -> Result<Outcome, RecordError> {
    session::run(cfg, always)
}

#[cfg(test)]
mod tests {
    use super::*;
    use slowlab_bpf::BpfError;
    use std::path::Path;

    fn io(errno: i32) -> BpfError {
        BpfError::Io {
            path: PathBuf::from("/tmp/t.data"),
            source: std::io::Error::from_raw_os_error(errno),
        }
    }

    #[test]
    fn the_ebpf_recorders_errors_name_perf_only_when_perf_is_the_way_out() {
        let full = RecordError::from_bpf(io(libc::ENOSPC));
        assert!(
            matches!(&full, RecordError::DiskFilled { dir, .. } if dir == Path::new("/tmp")),
            "{full:?}"
        );
        let denied = RecordError::from_bpf(io(libc::EACCES)).to_string();
        assert!(
            denied.starts_with("cannot write /tmp/t.data: Permission denied")
                && !denied.contains("--backend perf"),
            "{denied}"
        );
        let load = RecordError::from_bpf(BpfError::Load {
            message: "the verifier said no".into(),
            log: String::new(),
        })
        .to_string();
        assert!(
            load.contains("`--backend perf` records without it"),
            "{load}"
        );
    }
}
