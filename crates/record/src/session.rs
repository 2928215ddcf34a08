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
//! It does not build the command line (`args`) or run perf itself
//! (`perf_process`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::args::{perf_args_to, preflight, tracepoint_exists, Buffers, STREAM_PAGES};
use crate::companions::{side_file, Companions};
use crate::perf_process::{check_perf_exit, partial_name, PerfExit, PerfProcess, StopWatch};
use crate::ring::{plan as plan_ring, side_window};
use crate::signals::{name, StopSignals};
use crate::{Config, Outcome, RecordError};

/// How often the loop looks at perf, the signals and the dumps.
const POLL: Duration = Duration::from_millis(50);

/// How long perf may go without using CPU after it was told to stop
/// before it is killed.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(30);

/// How long perf may take in all to finish after it was told to stop.
pub(crate) const STOP_LIMIT: Duration = Duration::from_secs(600);

/// How long a SIGUSR2 passed to perf may go without a dump before it is
/// passed again, while perf starts: it catches SIGUSR2 before it records,
/// and forgets one that came then when it starts recording. Once it
/// records it never loses one (one during a dump makes another dump), so
/// it is passed again only within [`PERF_START`].
const ASK_AGAIN: Duration = Duration::from_millis(1500);
const PERF_START: Duration = Duration::from_secs(30);

/// The state of a recording between perf's start and its end.
struct Session<'a> {
    cfg: &'a Config,
    /// Ring mode: about how many seconds perf's buffers hold.
    ring: Option<f64>,
    companions: Option<Companions>,
    warnings: Vec<String>,
    /// The stop signal received first.
    stop: Option<libc::c_int>,
    /// Why perf was killed.
    killed: Option<String>,
    /// A SIGUSR2 came that is not passed to perf yet (perf was not
    /// catching it yet: its default action would kill perf).
    snapshot_waiting: bool,
    /// When a SIGUSR2 was last passed to perf, while its dump has not come
    /// (see [`ASK_AGAIN`]).
    snapshot_asked: Option<Instant>,
    /// Dumps not asked for by a SIGUSR2 (the last is the final one).
    final_dumps: Vec<PathBuf>,
    /// Snapshots written (`OUTPUT.<timestamp>`).
    snapshots: Vec<PathBuf>,
}

/// See the module documentation.
pub(crate) fn run(cfg: &Config) -> Result<Outcome, RecordError> {
    let mut warnings = preflight(cfg)?;
    let mut signals = StopSignals::install();
    // Started before the ring is sized: their own syscalls are events too.
    let window = cfg.ring_seconds.map(side_window);
    let companions = Companions::start_with(&cfg.output, cfg.capture_paths, window, &mut warnings);
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
    let partial = partial_name(&cfg.output);
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
    let mut s = Session {
        cfg,
        ring: plan.as_ref().map(|p| p.seconds),
        companions: Some(companions),
        warnings,
        stop: None,
        killed: None,
        snapshot_waiting: false,
        snapshot_asked: None,
        final_dumps: Vec::new(),
        snapshots: Vec::new(),
    };
    let mut watch: Option<StopWatch> = None;
    let started = Instant::now();
    let exit = loop {
        match perf.try_wait() {
            Ok(Some(exit)) => break exit,
            Ok(None) => {}
            Err(e) => {
                perf.kill();
                s.discard(&partial);
                return Err(e);
            }
        }
        for dump in perf.dumps() {
            s.on_dump(dump);
        }
        for sig in signals.take() {
            if s.on_signal(sig, &perf) && watch.is_none() {
                watch = Some(StopWatch::new(perf.pid(), STOP_GRACE, STOP_LIMIT));
            }
        }
        let ask_again = started.elapsed() < PERF_START
            && s.snapshot_asked.is_some_and(|t| t.elapsed() > ASK_AGAIN);
        if (s.snapshot_waiting || ask_again) && s.stop.is_none() && perf.catches(libc::SIGUSR2) {
            s.snapshot_waiting = false;
            s.snapshot_asked = Some(Instant::now());
            perf.signal(libc::SIGUSR2);
        }
        if s.killed.is_none() && watch.as_mut().is_some_and(|w| w.expired()) {
            s.killed = Some(format!(
                "it was still not done {} s after the stop",
                STOP_GRACE.as_secs()
            ));
            perf.signal_group(libc::SIGKILL);
        }
        std::thread::sleep(POLL);
    };
    // The reader has passed on every line once it is joined.
    let lines = perf.lines();
    for dump in perf.dumps() {
        s.on_dump(dump);
    }
    s.finish(exit, &lines, &partial)
}

impl Session<'_> {
    /// Handles one signal; returns true when it asked perf to stop.
    fn on_signal(&mut self, sig: libc::c_int, perf: &PerfProcess) -> bool {
        if sig == libc::SIGUSR2 {
            if self.ring.is_none() {
                eprintln!("slowlab: SIGUSR2 saves a snapshot only in ring mode (--ring SECONDS); recording goes on");
            } else if self.stop.is_none() {
                self.snapshot_waiting = true;
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

    /// A file perf finished dumping its ring buffers into.
    fn on_dump(&mut self, dump: PathBuf) {
        if self.snapshot_asked.is_some() && self.stop.is_none() {
            self.snapshot_asked = None;
            self.snapshot(dump);
        } else {
            self.final_dumps.push(dump);
        }
    }

    /// Names a dump `OUTPUT.<timestamp>` and writes its side files.
    fn snapshot(&mut self, dump: PathBuf) {
        let target = snapshot_name(&self.cfg.output, &dump);
        let trace = match std::fs::rename(&dump, &target) {
            Ok(()) => target,
            Err(e) => {
                self.warnings.push(format!(
                    "cannot rename the snapshot {} to {}: {e}",
                    dump.display(),
                    target.display()
                ));
                dump
            }
        };
        let files = match &self.companions {
            Some(c) => c.snapshot(&trace, &mut self.warnings),
            None => Vec::new(),
        };
        eprintln!(
            "slowlab: snapshot {}{}",
            trace.display(),
            if files.is_empty() {
                String::new()
            } else {
                format!(" (and {})", join(&files))
            }
        );
        self.snapshots.push(trace);
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
            let kept = if self.snapshots.is_empty() {
                "nothing was kept".to_string()
            } else {
                format!("kept the snapshots {}", join(&self.snapshots))
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
                    self.warnings
                        .push("perf wrote no ring-buffer snapshot at the end".into());
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
            None => match self.snapshots.last() {
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
        let companions = match self.companions.take() {
            Some(c) => c.stop(&mut self.warnings),
            None => Vec::new(),
        };
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
            snapshots: self.snapshots,
            ring_seconds: self.ring,
        })
    }
}

/// `OUTPUT.<timestamp>` for perf's dump `OUTPUT.partial.<timestamp>`.
fn snapshot_name(output: &Path, dump: &Path) -> PathBuf {
    let partial = partial_name(output);
    let stamp = dump
        .file_name()
        .zip(partial.file_name())
        .and_then(|(d, p)| {
            let d = d.to_string_lossy();
            let p = format!("{}.", p.to_string_lossy());
            d.strip_prefix(&p).map(str::to_owned)
        })
        .unwrap_or_else(|| "snapshot".into());
    side_file(output, &stamp)
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
    fn a_dump_becomes_a_snapshot_named_after_its_time() {
        let out = Path::new("/tmp/x/r.data");
        assert_eq!(
            snapshot_name(out, Path::new("/tmp/x/r.data.partial.2026112314260813")),
            PathBuf::from("/tmp/x/r.data.2026112314260813")
        );
        assert_eq!(
            snapshot_name(out, Path::new("elsewhere")),
            PathBuf::from("/tmp/x/r.data.snapshot")
        );
    }
}
