//! One `slowlab record` run from start to end ([`run`]): the checks, the
//! ring sizing, perf and the companions started, the signals handled, the
//! files finished.
//!
//! Signals (whatever slowlab inherited, see `signals`): SIGINT, SIGTERM and
//! SIGHUP stop the recording — perf and the command it runs are told to stop
//! (SIGINT or SIGTERM to their process group; SIGHUP becomes SIGTERM, which
//! perf handles), perf writes its file, slowlab writes the side files and
//! the outcome says which signal stopped it (exit status 128 + signal). A
//! second stop signal, or perf taking too long ([`STOP_GRACE`] without
//! using CPU, [`STOP_LIMIT`] in all), kills perf's group and the error says
//! what was kept. SIGUSR2 in ring mode saves a snapshot: perf dumps its
//! buffers into a file named after the time (as `--switch-output` names
//! them), which becomes `OUTPUT.<timestamp>` with its own side files.
//!
//! perf writes to `OUTPUT.partial`, renamed to `OUTPUT` only once finished,
//! so an unfinished trace never looks finished.
//!
//! Always on (ring mode, with [`AlwaysOn`]): a snapshot is also asked for
//! by `slowlab record --save` through the control socket (`control`) and by
//! a `--trigger` that fires (`triggers`), `--after` seconds later so that
//! it holds the seconds before and after the moment. Requests are served
//! one dump at a time: each waits for a dump that perf starts after it
//! came, and is answered with that snapshot. At most `--keep-snapshots`
//! snapshots are kept beside OUTPUT (counting those an earlier run left):
//! the oldest go, with their side files, so days of triggers stay bounded.
//!
//! A full disk stops a snapshot, not the recording: before perf is asked
//! to dump, the free space of OUTPUT's directory is compared with the
//! largest snapshot (the ring buffers of every CPU, the paths' bound, and
//! 8 MiB of headers); short of it, the request is answered with a line
//! that says so and perf is not asked, so its ring stays intact. If the
//! disk fills while perf dumps anyway (perf then exits: it cannot go on
//! after a failed write), its partial files are removed, the line says so
//! and a new perf starts recording with an empty ring.
//! `SLOWLAB_SNAPSHOT_NEED_BYTES` replaces the space asked for (tests use
//! it to fill the disk during a dump).
//!
//! perf itself keeps a little more memory with each snapshot it writes
//! (perf 6.1: about 130 KiB), so a ring recording that saves snapshots for
//! days replaces it once it has grown by [`PERF_GROWTH_LIMIT`], right
//! after a snapshot, when its ring was just emptied into the file.
//!
//! Between those, the loop sleeps (`wake`) until a signal, perf's exit or a `--save`
//! client wakes it, or a trigger's next look falls due; it looks every [`POLL`] only
//! while it waits for something it cannot sleep on: perf to catch SIGUSR2, a dump asked
//! for (perf's report of it, the partial file's growth), perf's stop.
//!
//! It does not build the command line (`args`) or run perf itself
//! (`perf_process`); what becomes of a dump, and how many are kept, is
//! `snapshots`'s.

pub(crate) mod snapshots;

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::args::{perf_args_to, preflight, tracepoint_exists, Buffers, STREAM_PAGES};
use crate::companions::Companions;
use crate::control::{answer, ControlSocket};
use crate::perf_process::{check_perf_exit, PerfExit, PerfProcess, StopWatch};
use crate::ring::{plan as plan_ring, side_window};
use crate::signals::{name, StopSignals};
use crate::triggers::{check_available, Scheduled, Subject, Watch};
use crate::{default_after, wake, AlwaysOn, Config, Outcome, RecordError};
use slowlab_model::bundle::partial_file;
use snapshots::{snapshot_need, Kept};

/// How often the loop looks at perf, the signals and the dumps while it waits for what
/// it cannot sleep on (and always where the kernel has no pidfd).
const POLL: Duration = Duration::from_millis(50);

/// How long perf may go without using CPU after it was told to stop
/// before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(30);

/// [`STOP_GRACE`], or the seconds `SLOWLAB_STOP_GRACE_SECS` gives (for tests: a
/// perf that never stops is then killed in seconds, not half a minute).
pub(crate) fn stop_grace() -> Duration {
    crate::overrides::from_env("SLOWLAB_STOP_GRACE_SECS").map_or(STOP_GRACE, Duration::from_secs)
}

/// How long perf may take in all to finish after it was told to stop.
pub(crate) const STOP_LIMIT: Duration = Duration::from_secs(600);

/// How long a SIGUSR2 passed to perf may go without a dump before it is
/// passed again, while perf starts: it catches SIGUSR2 before it records,
/// and forgets one that came then when it starts recording. Once it
/// records it never loses one (one during a dump makes another dump), so
/// it is passed again only within [`PERF_START`], and only when perf is
/// not writing a dump (OUTPUT.partial has not grown for as long).
const ASK_AGAIN: Duration = Duration::from_millis(1500);
const PERF_START: Duration = Duration::from_secs(30);

/// The most warnings kept for the end of a recording (a ring recording
/// may run for days); the rest are counted.
const MAX_WARNINGS: usize = 50;

/// Bytes of a snapshot besides the ring buffers: perf's header, its
/// tracing data (the tracepoints' formats), the cgroup notes.
const SNAPSHOT_OVERHEAD: u64 = 8 << 20;

/// How much perf's own memory may grow in ring mode before it is replaced
/// (right after a snapshot): perf 6.1 keeps about 130 KiB more with every
/// snapshot it writes, 64 MiB in ~500 snapshots.
/// `SLOWLAB_PERF_GROWTH_LIMIT_BYTES` replaces it (for tests).
const PERF_GROWTH_LIMIT: u64 = 64 << 20;

/// Who asked for a snapshot, the process it is about (a `cmd-slower` trigger's), and
/// the client waiting for its answer.
struct Request {
    why: String,
    subject: Option<Subject>,
    client: Option<UnixStream>,
}

/// The state of a recording between perf's start and its end.
struct Session<'a> {
    cfg: &'a Config,
    /// Ring mode: about how many seconds perf's buffers hold.
    ring: Option<f64>,
    companions: Option<Companions>,
    warnings: Vec<String>,
    /// Warnings beyond [`MAX_WARNINGS`].
    warnings_left_out: usize,
    /// The stop signal received first.
    stop: Option<libc::c_int>,
    /// Why perf was killed.
    killed: Option<String>,
    /// Snapshot requests not passed to perf yet (perf was not catching
    /// SIGUSR2 yet, or a dump was under way).
    queued: Vec<Request>,
    /// The requests the dump under way serves.
    in_dump: Vec<Request>,
    /// When a SIGUSR2 was last passed to perf, while its dump has not come
    /// (see [`ASK_AGAIN`]).
    snapshot_asked: Option<Instant>,
    /// The size of OUTPUT.partial while a dump is awaited, and when it
    /// last changed.
    partial_seen: (Option<u64>, Instant),
    /// Dumps not asked for by a request (the last is the final one).
    final_dumps: Vec<PathBuf>,
    /// Snapshots kept (`OUTPUT.<timestamp>`).
    snapshots: Kept,
    /// The free bytes a snapshot may need.
    need: u64,
}

/// See the module documentation.
pub(crate) fn run(cfg: &Config, always: &AlwaysOn) -> Result<Outcome, RecordError> {
    let cpu_at_start = cfg
        .ring_seconds
        .is_none()
        .then(slowlab_bpf::cpu_times_now)
        .flatten();
    let mut outcome = record(cfg, always)?;
    let steal = slowlab_bpf::cpu_times_since(cpu_at_start).and_then(|t| t.steal_warning());
    outcome.warnings.extend(steal);
    Ok(outcome)
}

/// [`run`], but for the host's steal time.
fn record(cfg: &Config, always: &AlwaysOn) -> Result<Outcome, RecordError> {
    let mut warnings = preflight(cfg)?;
    let after = trigger_delay(cfg.ring_seconds, always)?;
    let mut signals = StopSignals::install();
    // Started before the ring is sized: their own syscalls are events too.
    let window = cfg.ring_seconds.map(side_window);
    // A command's one-shot recording ends with it: its path capture detaches at once.
    let companions = if window.is_none() && !cfg.command.is_empty() {
        Companions::start_of_command(&cfg.output, cfg.capture_paths, &mut warnings)
    } else {
        Companions::start_with(&cfg.output, cfg.capture_paths, window, &mut warnings)
    };
    let plan = match cfg.ring_seconds {
        Some(secs) => match plan_ring(cfg, secs, &mut signals, &mut warnings) {
            Ok(plan) => Some(plan),
            Err(e) => {
                companions.discard();
                return Err(e);
            }
        },
        None => None,
    };
    let partial = partial_file(&cfg.output);
    let _ = std::fs::remove_file(&partial);
    let buffers = match &plan {
        Some(p) => Buffers::Ring(p.pages),
        None => Buffers::Stream(STREAM_PAGES),
    };
    let args = perf_args_to(cfg, &tracepoint_exists, &partial, buffers, true);
    let mut perf = match PerfProcess::spawn(&args, true, Stdio::inherit()) {
        Ok(p) => p,
        Err(e) => {
            companions.discard();
            return Err(e);
        }
    };
    let need = snapshot_need(|| {
        let ring = plan.as_ref().map_or(0, |p| p.pages) * 4096 * u64::from(cfg.cpus.max(1));
        let paths = if companions.has_paths() {
            slowlab_bpf::DEFAULT_RING_MAX_BYTES
        } else {
            0
        };
        ring + paths + SNAPSHOT_OVERHEAD
    });
    let mut s = Session {
        cfg,
        ring: plan.as_ref().map(|p| p.seconds),
        companions: Some(companions),
        warnings: Vec::new(),
        warnings_left_out: 0,
        stop: None,
        killed: None,
        queued: Vec::new(),
        in_dump: Vec::new(),
        snapshot_asked: None,
        partial_seen: (None, Instant::now()),
        final_dumps: Vec::new(),
        snapshots: if plan.is_some() {
            Kept::on_disk(&cfg.output, always.keep_snapshots)
        } else {
            Kept::none()
        },
        need,
    };
    for w in warnings {
        s.warn(w);
    }
    let triggers: &[crate::Trigger] = if plan.is_some() {
        &always.triggers
    } else {
        &[]
    };
    let mut watch = Watch::new(triggers);
    let mut scheduled = Scheduled::new(after);
    let control = match (cfg.ring_seconds, always.control) {
        (Some(secs), true) => match ControlSocket::open_for_save(&cfg.output, secs) {
            Ok(c) => Some(c),
            Err(line) => {
                s.warn(line);
                None
            }
        },
        _ => None,
    };
    let mut stop_watch: Option<StopWatch> = None;
    let mut perf_started = Instant::now();
    // Not with a command: a new perf would run it again.
    let restart_allowed = s.ring.is_some() && cfg.command.is_empty();
    // perf's memory after its first snapshot, and the growth allowed.
    let mut perf_memory: Option<u64> = None;
    let growth_limit =
        crate::overrides::from_env("SLOWLAB_PERF_GROWTH_LIMIT_BYTES").unwrap_or(PERF_GROWTH_LIMIT);
    let exit = loop {
        match perf.try_wait() {
            Ok(Some(exit)) => {
                let lines = perf.lines();
                let disk_full = lines.iter().any(|l| l.contains("No space left"));
                if restart_allowed && s.stop.is_none() && s.killed.is_none() && disk_full {
                    s.disk_filled(&partial, perf.dumps());
                    match PerfProcess::spawn(&args, true, Stdio::inherit()) {
                        Ok(p) => {
                            perf = p;
                            perf_started = Instant::now();
                            perf_memory = None;
                            continue;
                        }
                        Err(e) => {
                            s.discard(&partial);
                            return Err(e);
                        }
                    }
                }
                break exit;
            }
            Ok(None) => {}
            Err(e) => {
                perf.kill();
                s.discard(&partial);
                return Err(e);
            }
        }
        let dumped = perf.dumps();
        let snapshot_done = !dumped.is_empty() && s.snapshot_asked.is_some();
        for dump in dumped {
            s.on_dump(dump);
        }
        // Right after a snapshot (perf's ring was just emptied into it),
        // a perf grown too much is replaced: nothing is lost but the
        // moment the new one takes to start.
        if snapshot_done && s.snapshot_asked.is_none() && restart_allowed && s.stop.is_none() {
            let now = rss_anon_bytes(perf.pid());
            match (perf_memory, now) {
                (None, Some(bytes)) => perf_memory = Some(bytes),
                (Some(base), Some(bytes)) if bytes.saturating_sub(base) > growth_limit => {
                    eprintln!(
                        "slowlab: perf's memory grew by {} since its first snapshot (perf keeps some with every snapshot): starting a new perf right after the snapshot, so nothing recorded is lost",
                        megabytes(bytes - base)
                    );
                    perf.kill();
                    let _ = std::fs::remove_file(&partial);
                    match PerfProcess::spawn(&args, true, Stdio::inherit()) {
                        Ok(p) => {
                            perf = p;
                            perf_started = Instant::now();
                            perf_memory = None;
                        }
                        Err(e) => {
                            s.discard(&partial);
                            return Err(e);
                        }
                    }
                    continue;
                }
                _ => {}
            }
        }
        for sig in signals.take() {
            if s.on_signal(sig, &perf) && stop_watch.is_none() {
                stop_watch = Some(StopWatch::new(perf.pid(), stop_grace(), STOP_LIMIT));
            }
        }
        if s.stop.is_none() {
            if let Some(c) = &control {
                for client in c.requests() {
                    s.queued.push(Request {
                        why: "slowlab record --save".into(),
                        subject: None,
                        client: Some(client),
                    });
                }
            }
            for due in scheduled.due(&mut watch, Instant::now()) {
                s.queued.push(Request {
                    why: due.why,
                    subject: due.subject,
                    client: None,
                });
            }
        }
        // perf writes a dump into OUTPUT.partial before it names it: one
        // being written (a big ring on a busy machine takes seconds) was
        // not forgotten.
        if s.snapshot_asked.is_some() {
            let len = file_len(&partial);
            if len != s.partial_seen.0 {
                s.partial_seen = (len, Instant::now());
            }
        }
        let ask_again = perf_started.elapsed() < PERF_START
            && s.snapshot_asked.is_some_and(|t| t.elapsed() > ASK_AGAIN)
            && s.partial_seen.1.elapsed() > ASK_AGAIN;
        let ask = !s.queued.is_empty() && s.snapshot_asked.is_none();
        // The space check answers the requests when there is no room.
        if (ask || ask_again)
            && s.stop.is_none()
            && perf.catches(libc::SIGUSR2)
            && (ask_again || s.room_for_snapshot())
        {
            let queued = std::mem::take(&mut s.queued);
            s.in_dump.extend(queued);
            s.snapshot_asked = Some(Instant::now());
            s.partial_seen = (file_len(&partial), Instant::now());
            perf.signal(libc::SIGUSR2);
        }
        if s.killed.is_none() && stop_watch.as_mut().is_some_and(|w| w.expired()) {
            s.killed = Some(format!(
                "it was still not done {} s after the stop",
                stop_grace().as_secs()
            ));
            perf.signal_group(libc::SIGKILL);
        }
        let waiting = s.snapshot_asked.is_some() || !s.queued.is_empty() || stop_watch.is_some();
        let exit_fd = perf.exit_fd();
        let poll = (waiting || exit_fd.is_none()).then(|| Instant::now() + POLL);
        let until = scheduled.next(&watch).into_iter().chain(poll).min();
        // Stopping, the socket's clients wait unanswered: it would stay readable.
        let socket = control.as_ref().filter(|_| s.stop.is_none());
        wake::sleep_until(
            &[signals.fd(), socket.map(ControlSocket::fd), exit_fd],
            until,
        );
    };
    // The reader has passed on every line once it is joined.
    let lines = perf.lines();
    for dump in perf.dumps() {
        s.on_dump(dump);
    }
    drop(control);
    s.finish(exit, &lines, &partial)
}

/// How long after a trigger fires its snapshot is saved, once the triggers are known to
/// work here: `--after`, or [`default_after`] of the ring (0 without triggers or ring).
pub(crate) fn trigger_delay(
    ring_seconds: Option<u32>,
    always: &AlwaysOn,
) -> Result<Duration, RecordError> {
    let Some(secs) = ring_seconds.filter(|_| !always.triggers.is_empty()) else {
        return Ok(Duration::ZERO);
    };
    check_available(&always.triggers).map_err(RecordError::AlwaysOn)?;
    let after = always.after.unwrap_or_else(|| default_after(secs));
    if after.as_secs_f64() >= f64::from(secs) {
        return Err(RecordError::AlwaysOn(format!(
            "--after {} s must be shorter than --ring {secs} s, or a trigger's snapshot keeps nothing from before it fired",
            after.as_secs_f64()
        )));
    }
    Ok(after)
}

impl Session<'_> {
    /// Keeps a warning for the end (at most [`MAX_WARNINGS`]).
    fn warn(&mut self, w: String) {
        if self.warnings.len() < MAX_WARNINGS {
            self.warnings.push(w);
        } else {
            self.warnings_left_out += 1;
        }
    }

    /// Handles one signal; returns true when it asked perf to stop.
    fn on_signal(&mut self, sig: libc::c_int, perf: &PerfProcess) -> bool {
        if sig == libc::SIGUSR2 {
            if self.ring.is_none() {
                eprintln!("slowlab: SIGUSR2 saves a snapshot only in ring mode (--ring SECONDS); recording goes on");
            } else if self.stop.is_none() {
                self.queued.push(Request {
                    why: "SIGUSR2".into(),
                    subject: None,
                    client: None,
                });
            }
            return false;
        }
        if self.stop.is_none() {
            self.stop = Some(sig);
            eprintln!(
                "\nslowlab: {}: stopping; perf is writing {} ({} again stops at once, without it)",
                name(sig),
                self.cfg.output.display(),
                name(sig)
            );
            let forward = if sig == libc::SIGINT {
                libc::SIGINT
            } else {
                libc::SIGTERM
            };
            perf.signal_group(forward);
            return true;
        }
        if self.killed.is_none() {
            self.killed = Some(format!("{} came again", name(sig)));
            perf.signal_group(libc::SIGKILL);
        }
        false
    }

    /// Stops the companions and removes what this recording left unfinished.
    fn discard(&mut self, partial: &Path) {
        if let Some(c) = self.companions.take() {
            c.discard();
        }
        let _ = std::fs::remove_file(partial);
    }

    /// After perf exited: names the files, writes the side files, says how
    /// it ended.
    fn finish(
        mut self,
        exit: PerfExit,
        lines: &[String],
        partial: &Path,
    ) -> Result<Outcome, RecordError> {
        if let Some(why) = self.killed.take() {
            // Dumps perf finished are complete traces: keep them.
            for dump in std::mem::take(&mut self.final_dumps) {
                self.snapshot(dump);
            }
            self.discard(partial);
            let kept = if self.snapshots.this_run().is_empty() {
                "nothing was kept".to_string()
            } else {
                format!("kept the snapshots {}", join(self.snapshots.this_run()))
            };
            return Err(RecordError::PerfKilled {
                output: self.cfg.output.clone(),
                why,
                kept,
                stopped_by: self.stop,
            });
        }
        if let Err(e) = check_perf_exit(self.cfg, exit, lines, self.stop.is_some()) {
            self.discard(partial);
            return Err(e);
        }
        let output = self.cfg.output.clone();
        let finished = if self.ring.is_some() {
            let last = self.final_dumps.pop();
            for dump in std::mem::take(&mut self.final_dumps) {
                self.snapshot(dump);
            }
            let _ = std::fs::remove_file(partial);
            match last {
                Some(last) => Some(last),
                None => {
                    self.warn("perf wrote no ring-buffer snapshot at the end".into());
                    None
                }
            }
        } else {
            Some(partial.to_owned())
        };
        let output = match finished {
            Some(file) => match std::fs::rename(&file, &output) {
                Ok(()) => output,
                Err(e) => {
                    self.discard(&file);
                    return Err(RecordError::Output {
                        path: output,
                        source: e,
                    });
                }
            },
            None => match self.snapshots.this_run().last() {
                Some(newest) => newest.clone(),
                None => {
                    self.discard(partial);
                    return Err(RecordError::PerfFailed {
                        code: 0,
                        last_line: "perf wrote no ring-buffer snapshot".into(),
                    });
                }
            },
        };
        let mut warnings = Vec::new();
        let companions = match self.companions.take() {
            Some(c) => c.stop(&mut warnings),
            None => Vec::new(),
        };
        for w in warnings {
            self.warn(w);
        }
        if self.warnings_left_out > 0 {
            self.warnings.push(format!(
                "{} more warnings were left out",
                self.warnings_left_out
            ));
        }
        // Requests the stop overtook: the final trace holds the last ring.
        for r in self.queued.drain(..).chain(self.in_dump.drain(..)) {
            if let Some(client) = r.client {
                answer(client, Ok(output.as_path()));
            }
        }
        let snapshots = self.snapshots.this_run().to_vec();
        let exit_code = match (self.stop, exit) {
            (Some(sig), _) => 128 + sig,
            _ if self.cfg.command.is_empty() => 0,
            (None, PerfExit::Code(code)) => code,
            (None, PerfExit::Signal(sig)) => 128 + sig,
        };
        Ok(Outcome {
            exit_code,
            output,
            companions,
            warnings: self.warnings,
            stopped_by: self.stop,
            snapshots,
            ring_seconds: self.ring,
        })
    }
}

fn file_len(path: &Path) -> Option<u64> {
    std::fs::metadata(path).map(|m| m.len()).ok()
}

/// perf's anonymous memory (`RssAnon`), in bytes.
fn rss_anon_bytes(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("RssAnon:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// `12.3 MB`.
pub(crate) fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

fn join(files: &[PathBuf]) -> String {
    files
        .iter()
        .map(|f| f.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rss_of_this_process_is_read() {
        assert!(rss_anon_bytes(std::process::id() as i32).is_some_and(|b| b > 0));
        assert!(rss_anon_bytes(-3).is_none());
    }
}
