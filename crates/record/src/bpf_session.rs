//! `slowlab record --backend bpf`: the scheduler flight recorder of `slowlab_bpf::sched`
//! instead of perf. Starts the recorder, runs the command (or waits for SIGINT, SIGTERM or
//! SIGHUP when there is none), stops the recorder and reports what it wrote, lost records
//! included. [`BpfRecording`] is the same recording started and stopped around a caller's
//! own work (`lab --trace`).
//!
//! It records what the critical path needs (CPU samples, switches and wake-ups with
//! stacks, lifetimes), the waiting syscalls that name a wait's resource (futex, wait4,
//! waitid, flock), the detectors' syscalls with their paths, page faults, major faults
//! and disk requests, all in the one file; beside it, the cgroup notes
//! (`OUTPUT.cgroups.json`, as with perf). Ring mode is `bpf_ring`'s.

use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use slowlab_bpf::sched::{SchedOptions, SchedRecorder, SchedStats};

use crate::companions::Companions;
use crate::group_guard::{GroupGuard, Lifeline};
use crate::signals::StopSignals;
use crate::{wake, RecordError};

/// What a BPF recording did.
#[derive(Debug)]
pub struct BpfRecorded {
    pub stats: SchedStats,
    /// The side files written beside the trace (the cgroup notes).
    pub companions: Vec<PathBuf>,
    /// What the side files could not do.
    pub companion_warnings: Vec<String>,
    /// The command's exit code (0 without a command).
    pub exit_code: i32,
    /// The command's process (its pid), when there was a command: the root of what was
    /// recorded, for an analysis to start from.
    pub command_pid: Option<u32>,
    /// The signal (SIGINT, SIGTERM, SIGHUP) that stopped the recording, or that came
    /// while the command ran (it is passed on to the command).
    pub stopped_by: Option<i32>,
    /// Ring mode: the snapshots saved and still kept (`OUTPUT.<timestamp>`), oldest first.
    pub snapshots: Vec<PathBuf>,
    /// Ring mode: the seconds kept.
    pub ring_seconds: Option<u32>,
}

impl BpfRecorded {
    /// What a recording of no command wrote: `stats`, and nothing beside.
    pub(crate) fn of(stats: SchedStats) -> BpfRecorded {
        BpfRecorded {
            stats,
            companions: Vec::new(),
            companion_warnings: Vec::new(),
            exit_code: 0,
            command_pid: None,
            stopped_by: None,
            snapshots: Vec::new(),
            ring_seconds: None,
        }
    }

    /// The line that says what was written (and beside it) and how to analyze it.
    pub fn wrote_line(&self) -> String {
        let s = &self.stats;
        let beside: String = self
            .companions
            .iter()
            .map(|c| format!(" and {}", c.display()))
            .collect();
        // Stacks the map could not take came through the ring. One now and then is the
        // kernel's allocator of map entries, empty for a moment; many, a map too small for
        // the work (`--bpf-stack-entries`), each such stack taking up to 1 KiB of the ring.
        let in_ring = if s.stacks_in_ring > 0 && s.stacks_in_ring * 100 >= s.stacks {
            format!(
                ", {} of them through the ring: the stack map could not take them",
                s.stacks_in_ring
            )
        } else {
            String::new()
        };
        format!(
            "wrote {} ({:.1} MB, {} events, {} lost, {} stacks{in_ring}){beside}; analyze it with: slowlab analyze {}",
            s.output.display(),
            s.bytes as f64 / 1e6,
            s.records,
            s.dropped,
            s.stacks,
            s.output.display()
        )
    }

    /// What was lost, as warnings for the user (none when nothing was): records lost to a
    /// full ring buffer, events without a stack because neither the stack map nor the ring
    /// could take it, tracepoints that could not be attached, and the host's steal time
    /// when it is worth saying. (What `slowlab record` prints; for `diagnose --backend
    /// bpf` to say the same.)
    pub fn warnings(&self) -> Vec<String> {
        let s = &self.stats;
        let mut w = self.companion_warnings.clone();
        if s.dropped > 0 {
            w.push(format!(
                "{} events lost: the BPF ring buffer was full",
                s.dropped
            ));
        }
        if s.stacks_lost > 0 {
            w.push(format!(
                "{} events have no stack: the stack map could not take it and the BPF ring \
                 buffer was full",
                s.stacks_lost
            ));
        }
        if let Some(line) = missed_line(&s.programs) {
            w.push(line);
        }
        w.extend(unattached_lines(&s.unattached));
        w.extend(s.cpu_times.and_then(|t| t.steal_warning()));
        w
    }
}

/// One warning line per reason the tracepoints of `unattached` (each `NAME: REASON`) were
/// not attached: a kernel or a tracefs that lacks them fails dozens alike, and one line
/// naming the first few says so without burying the rest of the warnings.
fn unattached_lines(unattached: &[String]) -> Vec<String> {
    const NAMED: usize = 3;
    let mut by_reason: Vec<(&str, Vec<&str>)> = Vec::new();
    for what in unattached {
        let (name, reason) = what.split_once(": ").unwrap_or((what, "not attached"));
        match by_reason.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, names)) => names.push(name),
            None => by_reason.push((reason, vec![name])),
        }
    }
    by_reason
        .into_iter()
        .map(|(reason, names)| match names.as_slice() {
            [one] => format!("not recorded: {one}: {reason}"),
            _ => {
                let more = if names.len() > NAMED { ", …" } else { "" };
                format!(
                    "not recorded: {} tracepoints ({}{more}): {reason}",
                    names.len(),
                    names[..names.len().min(NAMED)].join(", ")
                )
            }
        })
        .collect()
}

/// The events the kernel did not give to the recorder's programs (each came on a CPU
/// where the program for its kind was already running: an interrupt's wake-up during
/// another's), by kind, most first; `None` when none was.
fn missed_line(programs: &[slowlab_bpf::sched::ProgramCost]) -> Option<String> {
    let mut by_kind: Vec<(&str, u64)> = Vec::new();
    for p in programs.iter().filter(|p| p.recursion_misses > 0) {
        let Some(kind) = p.events() else { continue };
        match by_kind.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, n)) => *n += p.recursion_misses,
            None => by_kind.push((kind, p.recursion_misses)),
        }
    }
    by_kind.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let total: u64 = by_kind.iter().map(|(_, n)| n).sum();
    let kinds: Vec<String> = by_kind.iter().map(|(k, n)| format!("{n} {k}")).collect();
    (total > 0).then(|| {
        format!(
            "{total} events lost: each came while the recorder was recording another of its \
             kind on the same CPU ({})",
            kinds.join(", ")
        )
    })
}

/// The first of `got` that stops a recording (SIGUSR2 does not).
fn first_stop(got: &[i32]) -> Option<i32> {
    got.iter().copied().find(|&s| s != libc::SIGUSR2)
}

/// The command a bpf recording runs, started as the perf backend's perf starts it: in a
/// process group of its own (a terminal's Ctrl-C reaches slowlab only, which stops the
/// recording in order and passes it on to the whole group), with slowlab's input unless
/// that is a terminal ([`crate::command_stdin`]), and with a
/// guard that kills the group if slowlab dies (`group_guard`).
pub(crate) struct RecordedCommand {
    child: Child,
    guard: Option<GroupGuard>,
    program: String,
    /// Whether it was said that the recording failed and the command runs on.
    said_unrecorded: bool,
}

impl RecordedCommand {
    pub(crate) fn spawn(program: &str, args: &[String]) -> std::io::Result<RecordedCommand> {
        // Opened after the recorder's programs: a dying slowlab closes it first.
        let lifeline = Lifeline::new()?;
        let child = Command::new(program)
            .args(args)
            .stdin(crate::command_stdin())
            .process_group(0)
            .spawn()?;
        let guard = GroupGuard::start(child.id() as i32, lifeline);
        Ok(RecordedCommand {
            child,
            guard,
            program: program.to_string(),
            said_unrecorded: false,
        })
    }

    /// Says, once, that the recording failed while the command runs on: the error itself
    /// comes when it has exited, since the user's work is not killed for a full disk.
    pub(crate) fn say_unrecorded_once(&mut self) {
        if !self.said_unrecorded {
            self.said_unrecorded = true;
            let program = &self.program;
            eprintln!(
                "slowlab: the recording failed (why: below, once {program} exits); {program} \
                 runs on, unrecorded"
            );
        }
    }

    pub(crate) fn id(&self) -> u32 {
        self.child.id()
    }

    /// Its exit status once it has exited; then what it left running is left alone.
    pub(crate) fn try_wait(&mut self) -> std::io::Result<Option<std::process::ExitStatus>> {
        let status = self.child.try_wait()?;
        if status.is_some() {
            if let Some(guard) = self.guard.take() {
                guard.dismiss();
            }
        }
        Ok(status)
    }

    /// Passes a stop signal on to the command's process group (SIGINT as it is, the
    /// others as SIGTERM), as the perf backend does to perf's group: it may not have had
    /// it from a terminal, and a shell waiting for its child would not stop the child.
    /// Says so, and what a second signal does.
    pub(crate) fn forward_stop(&self, sig: i32) {
        let name = slowlab_model::signals::name(sig);
        eprintln!(
            "\nslowlab: {name}: passed on to {}; the recording ends when it exits ({name} \
             again kills it and stops at once, without the trace)",
            self.program
        );
        self.signal_group(if sig == libc::SIGINT {
            libc::SIGINT
        } else {
            libc::SIGTERM
        });
    }

    /// Kills the command's process group: it did not stop when told to.
    pub(crate) fn kill_group(&self) {
        self.signal_group(libc::SIGKILL);
    }

    fn signal_group(&self, sig: i32) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: kill has no memory preconditions; the child leads the group and is
            // not reaped yet.
            unsafe { libc::kill(-pid, sig) };
        }
    }
}

/// A bpf recording of the whole system, started and stopped by its caller (`lab --trace`
/// records around work of its own, with no command): the recorder and the cgroup notes
/// beside its file. [`run_bpf`] is one around a command.
pub struct BpfRecording {
    recorder: SchedRecorder,
    companions: Companions,
    companion_warnings: Vec<String>,
}

impl BpfRecording {
    /// Starts recording into `output`.
    pub fn start(output: &Path, options: &SchedOptions) -> Result<BpfRecording, RecordError> {
        let recorder = SchedRecorder::start(output, options).map_err(RecordError::from_bpf)?;
        let mut companion_warnings = Vec::new();
        // The paths are in the recording itself; the cgroup notes are beside it.
        let companions = Companions::start(output, false, &mut companion_warnings);
        Ok(BpfRecording {
            recorder,
            companions,
            companion_warnings,
        })
    }

    /// Stops it and writes the side files (discarded when the recorder fails).
    pub fn stop(self) -> Result<BpfRecorded, RecordError> {
        self.finish(Ok((0, None, None)))
    }

    /// Stops it after `ran` (a command's exit code, pid and the stop signal that came),
    /// or discards the side files when `ran` failed.
    fn finish(
        self,
        ran: Result<(i32, Option<u32>, Option<i32>), RecordError>,
    ) -> Result<BpfRecorded, RecordError> {
        let BpfRecording {
            recorder,
            companions,
            mut companion_warnings,
        } = self;
        let stopped = recorder.stop().map_err(RecordError::from_bpf);
        let ((exit_code, command_pid, stopped_by), stats) = match (ran, stopped) {
            (Ok(ran), Ok(stats)) => (ran, stats),
            (Err(e), _) | (_, Err(e)) => {
                companions.discard();
                return Err(e);
            }
        };
        let companions = companions.stop(&mut companion_warnings);
        Ok(BpfRecorded {
            stats,
            companions,
            companion_warnings,
            exit_code,
            command_pid,
            stopped_by,
            snapshots: Vec::new(),
            ring_seconds: None,
        })
    }
}

/// Records into `output` while `command` runs (until a stop signal without one).
pub fn run_bpf(
    output: PathBuf,
    options: &SchedOptions,
    command: &[String],
) -> Result<BpfRecorded, RecordError> {
    crate::args::command_found(command)?;
    let mut signals = StopSignals::install();
    let options = if command.is_empty() {
        options.clone()
    } else {
        of_commands(options)
    };
    let recording = BpfRecording::start(&output, &options)?;
    let recorder = &recording.recorder;
    let ran = run_until_stopped(
        command,
        &mut signals,
        &|pid| recorder.note_command(pid, command),
        &|| recorder.has_failed(),
        &|sig, child| stop_at_once(sig, &output, Some(child)),
    );
    let _at_once = SecondSignal::watch(signals, &output);
    recording.finish(ran)
}

/// `options` for a recording of commands (one, or runs of them): their syscalls from the
/// two raw programs, which detach at once ([`SchedOptions::raw_syscalls`]). Such a
/// recording ends with its commands, and whoever started slowlab waits for its exit, which
/// waited ~2 s for the per-syscall programs to be detached (`record -- true` 2.5 s, 0.7 s
/// with these; bench/record/raw_syscalls.sh). A syscall not recorded costs ~40 ns more
/// with them, one recorded ~100 ns less. A recording of the machine (no command, or a
/// ring) keeps the per-syscall programs: it runs long, and most syscalls are not recorded.
pub(crate) fn of_commands(options: &SchedOptions) -> SchedOptions {
    SchedOptions {
        raw_syscalls: true,
        ..options.clone()
    }
}

/// While the trace is written after a stop signal (a big ring's last window takes
/// seconds), a second one ends slowlab at once, as `--help` says ([`stop_at_once`]).
/// Dropped when the trace is written. (While a command is waited for, the wait loops
/// watch for it themselves.)
pub(crate) struct SecondSignal {
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SecondSignal {
    pub(crate) fn watch(mut signals: StopSignals, output: &Path) -> SecondSignal {
        use std::sync::atomic::Ordering;
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let watching = std::sync::Arc::clone(&done);
        let output = output.to_path_buf();
        let thread = std::thread::Builder::new()
            .name("second-signal".into())
            .spawn(move || {
                while !watching.load(Ordering::SeqCst) {
                    if let Some(sig) = first_stop(&signals.take()) {
                        stop_at_once(sig, &output, None);
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
            .ok();
        SecondSignal { done, thread }
    }
}

/// A second stop signal: kills the command that did not stop on the first (its whole
/// group), removes the unfinished trace and exits with 128 + that signal. Snapshots
/// already written stay: they are whole.
pub(crate) fn stop_at_once(sig: i32, output: &Path, command: Option<&RecordedCommand>) -> ! {
    let _ = std::fs::remove_file(slowlab_model::bundle::partial_file(output));
    let killed = match command {
        Some(c) => {
            c.kill_group();
            format!("{} had not stopped and was killed; ", c.program)
        }
        None => String::new(),
    };
    eprintln!(
        "slowlab: {} again: {killed}stopped at once, without the trace",
        slowlab_model::signals::name(sig)
    );
    std::process::exit(128 + sig);
}

impl Drop for SecondSignal {
    fn drop(&mut self) {
        self.done.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Runs `command` until it exits (or, without one, waits for a stop signal), telling
/// `started` its pid: its exit code (0 without one), its pid and the stop signal that
/// came meanwhile. A recorder that has `failed` (a full disk) ends the wait without a
/// command, so that its error comes at once; a command is said to run on unrecorded, and
/// waited for. A second stop signal while the command has not stopped goes to
/// `second_signal` (`run_bpf`: kill it and end slowlab at once, [`stop_at_once`], as the
/// perf backend kills perf's group).
pub(crate) fn run_until_stopped(
    command: &[String],
    signals: &mut StopSignals,
    started: &dyn Fn(u32),
    failed: &dyn Fn() -> bool,
    second_signal: &dyn Fn(i32, &RecordedCommand),
) -> Result<(i32, Option<u32>, Option<i32>), RecordError> {
    let mut stopped_by = None;
    let Some((program, args)) = command.split_first() else {
        loop {
            stopped_by = stopped_by.or(first_stop(&signals.take()));
            if stopped_by.is_some() || failed() {
                return Ok((stopped_by.map_or(0, |sig| 128 + sig), None, stopped_by));
            }
            wake::sleep_until(&[signals.fd()], None);
        }
    };
    let cannot_run = |source| RecordError::Command {
        program: program.clone(),
        source,
    };
    let mut child = RecordedCommand::spawn(program, args).map_err(cannot_run)?;
    started(child.id());
    let exit = wake::exit_fd(child.id());
    loop {
        if let Some(status) = child.try_wait().map_err(cannot_run)? {
            return Ok((
                exit_code(program, status, stopped_by),
                Some(child.id()),
                stopped_by,
            ));
        }
        if failed() {
            child.say_unrecorded_once();
        }
        // The command is told to stop too; wait for it, unless a second signal comes.
        for sig in signals.take().into_iter().filter(|&s| s != libc::SIGUSR2) {
            match stopped_by {
                None => {
                    stopped_by = Some(sig);
                    child.forward_stop(sig);
                }
                Some(_) => second_signal(sig, &child),
            }
        }
        // Without a pidfd, the exit is looked for every 5 ms.
        let poll = exit
            .is_none()
            .then(|| Instant::now() + Duration::from_millis(5));
        wake::sleep_until(&[signals.fd(), exit.as_ref().map(AsFd::as_fd)], poll);
    }
}

/// slowlab's exit code for a recorded command that ended with `status`: 128 + the stop
/// signal slowlab got (and passed on), else the command's own code, or 128 + the signal
/// that killed it, as a shell gives; a command killed by a signal is said to be.
fn exit_code(program: &str, status: std::process::ExitStatus, stopped_by: Option<i32>) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match (stopped_by, status.code(), status.signal()) {
        (Some(sig), _, _) => 128 + sig,
        (None, Some(code), _) => code,
        (None, None, sig) => {
            let sig = sig.unwrap_or(0);
            eprintln!(
                "slowlab: {program} was killed by {} (the recording is kept)",
                slowlab_model::signals::name(sig)
            );
            128 + sig
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slowlab_bpf::sched::{ProgramCost, SchedStats};

    #[test]
    fn losses_become_warnings() {
        let mut r = BpfRecorded::of(SchedStats::default());
        assert!(r.warnings().is_empty());
        r.stats.dropped = 3;
        r.stats.stacks_lost = 5;
        r.stats.unattached = vec!["syscalls:sys_enter_flock: no such tracepoint".into()];
        let missed = |name: &str, recursion_misses| ProgramCost {
            name: name.into(),
            recursion_misses,
            ..ProgramCost::default()
        };
        r.stats.programs = vec![
            missed("on_block_complete", 2),
            missed("on_waking", 3),
            missed("on_switch", 0),
            // The recorder's own faults, raised inside the program: not the work's.
            missed("on_page_fault_kernel", 140),
            missed("on_block_issue", 1),
        ];
        assert_eq!(
            r.warnings(),
            [
                "3 events lost: the BPF ring buffer was full",
                "5 events have no stack: the stack map could not take it and the BPF ring \
                 buffer was full",
                "6 events lost: each came while the recorder was recording another of its \
                 kind on the same CPU (3 disk requests, 3 wake-ups)",
                "not recorded: syscalls:sys_enter_flock: no such tracepoint"
            ]
        );
        r.stats.programs = vec![missed("on_page_fault_kernel", 140)];
        assert_eq!(r.warnings().len(), 3, "{:?}", r.warnings());
    }

    #[test]
    fn the_summary_says_when_many_stacks_came_through_the_ring() {
        let mut r = BpfRecorded::of(SchedStats {
            stacks: 583,
            stacks_in_ring: 427,
            output: "/x/t.data".into(),
            ..SchedStats::default()
        });
        let line = r.wrote_line();
        assert!(
            line.contains(
                "583 stacks, 427 of them through the ring: the stack map could not take them)"
            ),
            "{line}"
        );
        // One in 150: the allocator of map entries, empty for a moment; not worth a word.
        (r.stats.stacks, r.stats.stacks_in_ring) = (150, 1);
        let line = r.wrote_line();
        assert!(line.contains("150 stacks)"), "{line}");
    }

    #[test]
    fn tracepoints_unattached_for_one_reason_are_one_line() {
        let enoent = "failed to attach BPF program: No such file or directory (os error 2)";
        let mut unattached: Vec<String> = ["call_openat", "ret_openat", "call_stat", "ret_stat"]
            .iter()
            .map(|name| format!("{name}: {enoent}"))
            .collect();
        unattached.push("syscalls:sys_enter_flock: no such tracepoint".into());
        assert_eq!(
            unattached_lines(&unattached),
            [
                format!(
                    "not recorded: 4 tracepoints (call_openat, ret_openat, call_stat, …): {enoent}"
                ),
                "not recorded: syscalls:sys_enter_flock: no such tracepoint".into(),
            ]
        );
    }
}
