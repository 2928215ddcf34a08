//! `slowlab record --backend bpf --ring SECONDS`: the eBPF recorder left running, keeping
//! only about the last SECONDS in memory (`slowlab_bpf::sched` ring mode), and writing a
//! snapshot `OUTPUT.<timestamp>` (with its cgroup notes) on SIGUSR2, on `slowlab record
//! --save` from another shell (the control socket), and `--after` seconds after a
//! `--trigger` fires; at the stop (a stop signal, or the command's exit) the last seconds
//! become OUTPUT. At most `--keep-snapshots` snapshots stay (counting an earlier run's).
//!
//! A full disk stops a snapshot, not the recording: short of room for the most a window
//! can hold, the request is answered with a line that says so; a write the disk cuts
//! short leaves no file. The window stays in memory either way.
//! `SLOWLAB_SNAPSHOT_NEED_BYTES` replaces the room asked for and
//! `SLOWLAB_BPF_RING_MAX_BYTES` the window's bytes (tests use them).
//!
//! It shares the triggers, the control socket and the snapshots' names and pruning with
//! the perf backend's session (`session`); it does not run perf.

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use slowlab_bpf::sched::{RingOptions, SchedOptions, SchedRecorder};

use crate::args::free_bytes;
use crate::bpf_session::{stop_at_once, BpfRecorded, RecordedCommand, SecondSignal};
use crate::companions::{side_file, Companions};
use crate::control::{answer, ControlSocket};
use crate::ring::side_window;
use crate::session::snapshots::{disk_full, snapshot_need, subject_hint, write_waits, Kept};
use crate::session::{megabytes, trigger_delay};
use crate::signals::StopSignals;
use crate::triggers::{Scheduled, Subject, Watch};
use crate::{wake, AlwaysOn, RecordError};
use slowlab_model::bundle::directory_of;

/// How often the loop looks for the command's exit where the kernel cannot wake it for
/// it (no pidfd); it sleeps until a signal, a `--save` client, the exit or a trigger's
/// next look otherwise (`wake`).
const POLL: Duration = Duration::from_millis(50);

/// The most bytes of records a window keeps, whatever its seconds: a busy machine's
/// seconds beyond it are not kept (the eBPF recorder writes 2–15 MB a second under load).
/// `SLOWLAB_BPF_RING_MAX_BYTES` replaces it.
pub const RING_MAX_BYTES: u64 = 512 << 20;

/// Bytes a snapshot may need besides the window's records: its stacks, threads and
/// mappings.
const SNAPSHOT_OVERHEAD: u64 = 32 << 20;

/// A snapshot asked for: by whom, the process it is about (a `cmd-slower` trigger's),
/// and the client waiting for the answer.
struct Request {
    why: String,
    subject: Option<Subject>,
    client: Option<std::os::unix::net::UnixStream>,
}

/// Records in ring mode until a stop signal, or until `command` exits (see the module
/// documentation).
pub fn run_bpf_ring(
    output: PathBuf,
    options: &SchedOptions,
    ring_seconds: u32,
    always: &AlwaysOn,
    command: &[String],
) -> Result<BpfRecorded, RecordError> {
    let after = trigger_delay(Some(ring_seconds), always)?;
    let max_bytes =
        crate::overrides::from_env("SLOWLAB_BPF_RING_MAX_BYTES").unwrap_or(RING_MAX_BYTES);
    crate::args::command_found(command)?;
    let mut signals = StopSignals::install();
    let ring = RingOptions {
        window: Duration::from_secs(u64::from(ring_seconds)),
        max_bytes,
        spill: false,
    };
    let recorder =
        SchedRecorder::start_ring(&output, options, ring).map_err(RecordError::from_bpf)?;
    let mut warnings = Vec::new();
    let companions = Companions::start_with(
        &output,
        false,
        Some(side_window(ring_seconds)),
        &mut warnings,
    );
    let control = if always.control {
        ControlSocket::open_for_save(&output, ring_seconds)
            .map_err(|line| warnings.push(line))
            .ok()
    } else {
        None
    };
    let mut child = match command.split_first() {
        Some((program, args)) => match RecordedCommand::spawn(program, args) {
            Ok(child) => {
                recorder.note_command(child.id(), command);
                Some(child)
            }
            Err(e) => {
                companions.discard();
                return Err(RecordError::Command {
                    program: program.clone(),
                    source: e,
                });
            }
        },
        None => None,
    };
    let mut ring = Ring {
        output: &output,
        recorder: &recorder,
        companions: &companions,
        snapshots: Kept::on_disk(&output, always.keep_snapshots),
        max_bytes,
        warnings,
    };
    let triggers = Watch::new(&always.triggers);
    let (exit_code, stopped_by, again) = ring.run(
        &mut child,
        &mut signals,
        control.as_ref(),
        triggers,
        Scheduled::new(after),
    );
    drop(control);
    if let Some(sig) = again {
        stop_at_once(sig, &output, child.as_ref());
    }
    let mut warnings = std::mem::take(&mut ring.warnings);
    let snapshots = ring.snapshots.this_run().to_vec();
    let _at_once = SecondSignal::watch(signals, &output);
    let stats = match recorder.stop() {
        Ok(stats) => stats,
        Err(e) => {
            companions.discard();
            return Err(RecordError::from_bpf(e));
        }
    };
    let files = companions.stop(&mut warnings);
    Ok(BpfRecorded {
        stats,
        companions: files,
        companion_warnings: warnings,
        exit_code,
        command_pid: child.as_ref().map(RecordedCommand::id),
        stopped_by,
        snapshots,
        ring_seconds: Some(ring_seconds),
    })
}

/// A ring recording between its start and its stop.
struct Ring<'a> {
    output: &'a Path,
    recorder: &'a SchedRecorder,
    companions: &'a Companions,
    snapshots: Kept,
    /// The most bytes of records a window keeps.
    max_bytes: u64,
    warnings: Vec<String>,
}

impl Ring<'_> {
    /// Serves snapshot requests until the command exits or a stop signal comes: the
    /// command's exit code (128 + the signal that stopped the recording), that signal, and
    /// a second one that came while the command had not stopped (the caller then stops at
    /// once, once the control socket is gone).
    fn run(
        &mut self,
        child: &mut Option<RecordedCommand>,
        signals: &mut StopSignals,
        control: Option<&ControlSocket>,
        mut triggers: Watch,
        mut scheduled: Scheduled,
    ) -> (i32, Option<i32>, Option<i32>) {
        let mut stopped_by = None;
        let exit = child.as_ref().and_then(|c| wake::exit_fd(c.id()));
        let exit_unseen = child.is_some() && exit.is_none();
        loop {
            let mut queued: Vec<Request> = Vec::new();
            for sig in signals.take() {
                if sig == libc::SIGUSR2 {
                    queued.push(Request {
                        why: "SIGUSR2".into(),
                        subject: None,
                        client: None,
                    });
                } else if stopped_by.is_none() {
                    stopped_by = Some(sig);
                    if let Some(c) = child.as_ref() {
                        c.forward_stop(sig);
                    }
                } else {
                    // The command was told to stop and has not: a second signal.
                    return (128 + sig, stopped_by, Some(sig));
                }
            }
            let exited = match child.as_mut().map(RecordedCommand::try_wait) {
                Some(Ok(Some(status))) => Some(status.code().unwrap_or(1)),
                Some(Err(_)) => Some(1),
                _ => None,
            };
            if let Some(code) = exited {
                return (stopped_by.map_or(code, |s| 128 + s), stopped_by, None);
            }
            // With a command, wait for its exit: it was told to stop too.
            if stopped_by.is_some() && child.is_none() {
                return (128 + stopped_by.unwrap_or(0), stopped_by, None);
            }
            // A recorder that failed records nothing more: its stop says why (a service
            // must not run on as if it recorded). A command runs on, told so.
            if self.recorder.has_failed() {
                match child.as_mut() {
                    Some(c) => c.say_unrecorded_once(),
                    None => return (1, None, None),
                }
            }
            if let Some(c) = control {
                for client in c.requests() {
                    queued.push(Request {
                        why: "slowlab record --save".into(),
                        subject: None,
                        client: Some(client),
                    });
                }
            }
            let due = scheduled.due(&mut triggers, Instant::now());
            queued.extend(due.into_iter().map(|due| Request {
                why: due.why,
                subject: due.subject,
                client: None,
            }));
            if !queued.is_empty() && stopped_by.is_none() {
                self.snapshot(queued);
            }
            let poll = exit_unseen.then(|| Instant::now() + POLL);
            let until = scheduled.next(&triggers).into_iter().chain(poll).min();
            let fds = [
                signals.fd(),
                control.map(ControlSocket::fd),
                exit.as_ref().map(AsFd::as_fd),
            ];
            wake::sleep_until(&fds, until);
        }
    }

    /// Writes one snapshot for the requests, or says why none was, to each. The first
    /// process a request is about is the snapshot's command (its analysis's default root).
    fn snapshot(&mut self, requests: Vec<Request>) {
        let why: Vec<String> = requests.iter().map(|r| r.why.clone()).collect();
        let subject = requests.iter().find_map(|r| r.subject.as_ref());
        let result = self.save(subject);
        match &result {
            Ok((trace, files, steal)) => {
                eprintln!(
                    "slowlab: snapshot {}{} for {}{}",
                    trace.display(),
                    files
                        .iter()
                        .map(|f| format!(" (and {})", f.display()))
                        .collect::<String>(),
                    why.join(", "),
                    subject_hint(trace, subject)
                );
                // Said as it is saved (its analysis says it too): a trigger on CPU pressure
                // may have fired on the host's.
                if let Some(steal) = steal {
                    eprintln!("slowlab: warning: {}: {steal}", trace.display());
                }
            }
            Err(e) => eprintln!("slowlab: no snapshot for {}: {e}", why.join(", ")),
        }
        for r in requests {
            if let Some(client) = r.client {
                answer(
                    client,
                    result
                        .as_ref()
                        .map(|(t, ..)| t.as_path())
                        .map_err(Clone::clone),
                );
            }
        }
    }

    /// Writes a snapshot (about `subject`, if any) and its side files; the snapshot's path,
    /// the side files' and the host's steal time over its window when it is worth saying,
    /// or why there is none.
    fn save(
        &mut self,
        subject: Option<&Subject>,
    ) -> Result<(PathBuf, Vec<PathBuf>, Option<String>), String> {
        let dir = directory_of(self.output);
        // What this window needs, not the fullest one's: a ring of seconds on a quiet
        // machine holds megabytes, where its bound is half a gigabyte.
        let need = snapshot_need(|| {
            let window = self.recorder.window_bytes().unwrap_or(self.max_bytes);
            window.min(self.max_bytes) + SNAPSHOT_OVERHEAD
        });
        if let Some(free) = free_bytes(dir).filter(|&free| free < need) {
            return Err(disk_full(free, dir, need));
        }
        let trace = side_file(self.output, &timestamp());
        let about = subject.map(|s| (s.pid, s.args.clone()));
        let info = self.recorder.snapshot_about(&trace, about).map_err(|e| {
            format!(
                "{e} ({} free in {}); the ring is kept and recording goes on",
                megabytes(free_bytes(dir).unwrap_or(0)),
                dir.display()
            )
        })?;
        let mut files = self.companions.snapshot(&trace, &mut self.warnings);
        match write_waits(&trace, subject) {
            Some(Ok(file)) => files.push(file),
            Some(Err(e)) => self.warnings.push(e),
            None => {}
        }
        self.snapshots.add(trace.clone());
        let steal = info.cpu_times.and_then(|t| t.steal_warning());
        Ok((trace, files, steal))
    }
}

/// Now as perf names its dumps: local time, `YYYYmmddHHMMSScc` (centiseconds).
fn timestamp() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs() as libc::time_t;
    // SAFETY: localtime_r writes the zeroed `tm` it is given; `secs` lives for the call.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&secs, &mut tm);
        tm
    };
    format!(
        "{:04}{:02}{:02}{:02}{:02}{:02}{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        now.subsec_millis() / 10
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_are_named_as_perf_names_its_dumps() {
        let stamp = timestamp();
        assert_eq!(stamp.len(), 16, "{stamp}");
        assert!(stamp.bytes().all(|b| b.is_ascii_digit()), "{stamp}");
        assert!(stamp.starts_with("20"), "{stamp}");
    }
}
