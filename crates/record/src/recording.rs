//! [`Recording`]: a recording started and stopped by the caller (`slowlab
//! lab --trace`) rather than by a command's end or a signal. perf starts
//! with its events disabled and is enabled through its control FIFO, which
//! it acknowledges, so [`Recording::start`] returns once perf records.
//!
//! The caller owns the signals (the lab cancels on Ctrl-C and then stops
//! the recording); this module installs no handler. perf runs as in
//! `session` (its own process group, killed with slowlab, writing to
//! `OUTPUT.partial` until finished). It does not analyze the trace.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::args::{perf_args_to, preflight, tracepoint_exists, Buffers, STREAM_PAGES};
use crate::companions::Companions;
use crate::perf_process::{check_perf_exit, PerfProcess};
use crate::session::{stop_grace, STOP_LIMIT};
use crate::{Config, Outcome, RecordError};
use slowlab_model::bundle::partial_file;

/// How long [`Recording::start`] waits for perf to begin recording.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How long [`Recording::switch_file`] waits for perf to finish a file (~10–20 ms here).
const SWITCH_TIMEOUT: Duration = Duration::from_secs(30);

/// How long [`Recording::wait_perf_idle`] waits for perf to open its next file.
const IDLE_LIMIT: Duration = Duration::from_secs(2);

static FIFO_SEQ: AtomicU32 = AtomicU32::new(0);

/// A recording started and stopped by the caller: [`Recording::start`]
/// returns once perf records, [`Recording::stop`] stops it and writes the
/// file. `cfg`'s command and ring mode are ignored. Dropping a recording
/// that was not stopped kills perf and removes its partial file. Start and
/// stop it on one thread that outlives it: perf dies with that thread.
pub struct Recording {
    cfg: Config,
    perf: Option<PerfProcess>,
    companions: Option<Companions>,
    warnings: Vec<String>,
    fifo_dir: PathBuf,
}

impl Recording {
    pub fn start(cfg: &Config) -> Result<Recording, RecordError> {
        Recording::start_with(cfg, false)
    }

    /// [`Recording::start`]; with `runs`, one recording cut into runs ([`crate::PerfRuns`]):
    /// perf switches to a new file at each [`Recording::switch_file`], and the path
    /// capture keeps its paths in memory for [`Recording::paths`]' snapshots.
    pub(crate) fn start_with(cfg: &Config, runs: bool) -> Result<Recording, RecordError> {
        let of_command = !cfg.command.is_empty();
        let mut cfg = cfg.clone();
        cfg.command.clear();
        cfg.ring_seconds = None;
        let mut warnings = preflight(&cfg)?;
        let fifo_dir = std::env::temp_dir().join(format!(
            "slowlab-perf-control-{}-{}",
            std::process::id(),
            FIFO_SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&fifo_dir).map_err(RecordError::Spawn)?;
        let mut rec = Recording {
            cfg,
            perf: None,
            companions: None,
            warnings: Vec::new(),
            fifo_dir,
        };
        let (ctl, ack) = (rec.fifo_dir.join("ctl"), rec.fifo_dir.join("ack"));
        let (mut ctl_end, ack_end) = (make_fifo(&ctl)?, make_fifo(&ack)?);
        rec.companions = Some(if runs {
            Companions::start_path_ring(&rec.cfg.output, rec.cfg.capture_paths, &mut warnings)
        } else if of_command {
            Companions::start_of_command(&rec.cfg.output, rec.cfg.capture_paths, &mut warnings)
        } else {
            Companions::start(&rec.cfg.output, rec.cfg.capture_paths, &mut warnings)
        });
        rec.warnings = warnings;
        let partial = partial_file(&rec.cfg.output);
        let _ = std::fs::remove_file(&partial);
        let mut args = perf_args_to(
            &rec.cfg,
            &tracepoint_exists,
            &partial,
            Buffers::Stream(STREAM_PAGES),
            false,
        );
        args.splice(
            1..1,
            [
                "-D".to_string(),
                "-1".to_string(),
                format!("--control=fifo:{},{}", ctl.display(), ack.display()),
            ],
        );
        if runs {
            args.push("--switch-output=signal".into());
        }
        rec.perf = Some(PerfProcess::spawn(&args, false, Stdio::null())?);
        ctl_end.write_all(b"enable\n").map_err(RecordError::Spawn)?;
        rec.wait_for_ack(&ack_end)?;
        Ok(rec)
    }

    /// Waits until perf answers `ack` on its control FIFO, or fails if perf
    /// exits first or takes longer than [`START_TIMEOUT`].
    fn wait_for_ack(&mut self, ack: &std::fs::File) -> Result<(), RecordError> {
        use std::os::fd::AsRawFd;
        let deadline = Instant::now() + START_TIMEOUT;
        let mut got = Vec::new();
        while !got.windows(3).any(|w| w == b"ack") {
            let Some(perf) = self.perf.as_mut() else {
                return Err(RecordError::PerfFailed {
                    code: 0,
                    last_line: "perf is not running".into(),
                });
            };
            if let Some(exit) = perf.try_wait()? {
                let lines = perf.lines();
                self.perf = None;
                check_perf_exit(&self.cfg, exit, &lines, false)?;
                return Err(RecordError::PerfFailed {
                    code: 0,
                    last_line: "perf exited before it started recording".into(),
                });
            }
            if Instant::now() > deadline {
                return Err(RecordError::PerfFailed {
                    code: 0,
                    last_line: format!(
                        "perf did not start recording within {} s",
                        START_TIMEOUT.as_secs()
                    ),
                });
            }
            let mut pfd = libc::pollfd {
                fd: ack.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd for the duration of the call.
            let ready = unsafe { libc::poll(&mut pfd, 1, 100) };
            if ready > 0 {
                let mut buf = [0u8; 16];
                let n = (&*ack).read(&mut buf).unwrap_or(0);
                got.extend_from_slice(&buf[..n]);
            }
        }
        Ok(())
    }

    /// The warnings of the start (what the companions could not do).
    pub(crate) fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The companions: with `runs`, the path capture's ring.
    pub(crate) fn paths(&self) -> Option<&Companions> {
        self.companions.as_ref()
    }

    /// With `runs`: perf finishes the file it writes and goes on in a new one; the
    /// finished file (`OUTPUT.partial.TIMESTAMP`), or perf's error if it ended.
    pub(crate) fn switch_file(&mut self) -> Result<PathBuf, RecordError> {
        let perf = self.perf.as_mut().ok_or_else(|| RecordError::PerfFailed {
            code: 0,
            last_line: "perf is not running".into(),
        })?;
        perf.signal(libc::SIGUSR2);
        match perf.wait_dump(SWITCH_TIMEOUT) {
            Ok(file) => Ok(file),
            Err(exit) => {
                let lines = perf.lines();
                self.perf = None;
                check_perf_exit(&self.cfg, exit, &lines, false)?;
                Err(RecordError::PerfFailed {
                    code: 0,
                    last_line: format!(
                        "perf ended, or did not switch to a new file within {} s",
                        SWITCH_TIMEOUT.as_secs()
                    ),
                })
            }
        }
    }

    /// Waits (at most [`IDLE_LIMIT`]) until perf has opened the file it switched to: it
    /// reads every process's threads and mappings for it after the switch is reported.
    pub(crate) fn wait_perf_idle(&self) {
        if let Some(perf) = &self.perf {
            perf.wait_idle(IDLE_LIMIT);
        }
    }

    /// Stops perf and the companions, and removes every file perf wrote (with `runs`:
    /// what it recorded after the last run).
    pub(crate) fn stop_discarding(mut self) {
        if let Some(mut perf) = self.perf.take() {
            perf.signal(libc::SIGINT);
            let _ = perf.wait_bounded(stop_grace(), STOP_LIMIT);
            // Every line read, so every dump reported.
            let _ = perf.lines();
            for dump in perf.dumps() {
                let _ = std::fs::remove_file(dump);
            }
            let _ = std::fs::remove_file(partial_file(&self.cfg.output));
        }
        if let Some(c) = self.companions.take() {
            c.discard();
        }
    }

    /// Stops perf (SIGINT: it writes the file, renamed into place once
    /// finished) and the companions. perf taking too long is killed.
    pub fn stop(mut self) -> Result<Outcome, RecordError> {
        let Some(mut perf) = self.perf.take() else {
            return Err(RecordError::PerfFailed {
                code: 0,
                last_line: "perf is not running".into(),
            });
        };
        perf.signal(libc::SIGINT);
        let partial = partial_file(&self.cfg.output);
        let finished = perf.wait_bounded(stop_grace(), STOP_LIMIT);
        let lines = perf.lines();
        let companions = self.companions.take();
        let checked = match finished {
            Ok(exit) => check_perf_exit(&self.cfg, exit, &lines, true),
            Err(_) => Err(RecordError::PerfKilled {
                output: self.cfg.output.clone(),
                why: format!(
                    "it was still not done {} s after the stop",
                    stop_grace().as_secs()
                ),
                kept: "nothing was kept".into(),
                stopped_by: None,
            }),
        };
        let renamed = checked.and_then(|()| {
            std::fs::rename(&partial, &self.cfg.output).map_err(|source| RecordError::Output {
                path: self.cfg.output.clone(),
                source,
            })
        });
        if let Err(e) = renamed {
            if let Some(c) = companions {
                c.discard();
            }
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
        let mut warnings = std::mem::take(&mut self.warnings);
        let files = companions
            .map(|c| c.stop(&mut warnings))
            .unwrap_or_default();
        Ok(Outcome::written(self.cfg.output.clone(), files, warnings))
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        if let Some(mut perf) = self.perf.take() {
            perf.kill();
            let _ = std::fs::remove_file(partial_file(&self.cfg.output));
        }
        if let Some(c) = self.companions.take() {
            c.discard();
        }
        let _ = std::fs::remove_dir_all(&self.fifo_dir);
    }
}

/// Creates a FIFO and opens it read-write: holding both ends, the open
/// never blocks and perf can open its end at any time.
fn make_fifo(path: &Path) -> Result<std::fs::File, RecordError> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| RecordError::Spawn(std::io::Error::other(e)))?;
    // SAFETY: `c` is a valid NUL-terminated path.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
        return Err(RecordError::Spawn(std::io::Error::last_os_error()));
    }
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(RecordError::Spawn)
}
