//! `slowlab record`: builds the `perf record` command line for a
//! system-wide trace (sampled stacks, scheduler switches and wake-ups with
//! stacks, process lifetimes, page faults, the syscalls the detectors use),
//! checks what would stop it (no perf, no permission, a full disk) with
//! errors that say what to do, and runs it.
//!
//! The command line is a pure function of [`Config`] and the set of
//! tracepoints this kernel has ([`perf_args`]), so it is tested without perf.
//! It does not read the trace; that is `slowlab-perf`.

pub mod companions;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub use companions::{memory_cgroup, side_file, CgroupNotes, Companions};

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
pub enum Error {
    #[error("perf is not installed: install it with `sudo apt-get install linux-perf` (Debian) or `sudo apt-get install linux-tools-$(uname -r)` (Ubuntu)")]
    PerfMissing,
    #[error("system-wide tracing is not allowed (kernel.perf_event_paranoid = {paranoid}, not root): run slowlab record with sudo, or allow it with `sudo sysctl kernel.perf_event_paranoid=-1`")]
    Permission { paranoid: i32 },
    #[error("only {free_mb} MB free in {dir}: a trace needs more; free some space or write elsewhere with -o")]
    DiskFull { dir: PathBuf, free_mb: u64 },
    #[error("command not found: {0}")]
    CommandNotFound(String),
    #[error("perf record failed (exit {code}): {last_line}")]
    PerfFailed { code: i32, last_line: String },
    #[error("cannot start perf: {0}")]
    Spawn(std::io::Error),
}

/// Events recorded besides the sampling event, as `system:name`. Each is
/// added only if this kernel has it.
pub const TRACEPOINTS: &[&str] = &[
    "sched:sched_switch",
    "sched:sched_waking",
    "sched:sched_process_fork",
    "sched:sched_process_exec",
    "sched:sched_process_exit",
    "exceptions:page_fault_user",
    "exceptions:page_fault_kernel",
];

/// Syscalls recorded (entry and exit) for the detectors.
pub const SYSCALLS: &[&str] = &[
    "openat",
    "open",
    "newstat",
    "newlstat",
    "newfstatat",
    "statx",
    "access",
    "faccessat",
    "faccessat2",
    "mmap",
    "munmap",
    "unlink",
    "unlinkat",
    "unshare",
    "clone",
    "clone3",
];

/// Per-CPU buffer pages when perf streams to its file (16 MiB).
pub const STREAM_PAGES: u64 = 4096;

/// The full `perf record` argument list (without the `perf` itself).
/// `has_tracepoint("sched:sched_switch")` says whether the kernel has one.
pub fn perf_args(cfg: &Config, has_tracepoint: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "record".into(),
        "-o".into(),
        cfg.output.display().to_string(),
        "--all-cpus".into(),
        "--sample-cpu".into(),
        // The clock of the eBPF path capture, so paths match syscalls.
        "-k".into(),
        "monotonic".into(),
        "--call-graph".into(),
        match cfg.call_graph {
            CallGraph::Fp => "fp".into(),
            CallGraph::Dwarf => "dwarf".into(),
        },
        // The frequency goes on the sampling event only: a global `-F`
        // would make perf sample the tracepoints too (1 in ~1000 context
        // switches or syscalls) instead of recording every one.
        "-e".into(),
        format!("cpu-clock/freq={}/", cfg.freq),
    ];
    let mut ev = |name: String| {
        a.push("-e".into());
        a.push(name);
    };
    for tp in TRACEPOINTS {
        if has_tracepoint(tp) {
            ev(tp.to_string());
        }
    }
    // Every major fault, not a sample of them.
    ev("major-faults/period=1/".into());
    for sc in SYSCALLS {
        for dir in ["enter", "exit"] {
            let tp = format!("syscalls:sys_{dir}_{sc}");
            if has_tracepoint(&tp) {
                ev(tp);
            }
        }
    }
    a.push("-m".into());
    if let Some(secs) = cfg.ring_seconds {
        a.push(ring_pages(secs, cfg.freq, cfg.cpus).to_string());
        a.push("--overwrite".into());
        a.push("--switch-output=signal".into());
    } else {
        // Bursts of syscall events (thousands of probes a millisecond)
        // overflow perf's default 512 KiB per CPU.
        a.push(STREAM_PAGES.to_string());
    }
    if !cfg.command.is_empty() {
        a.push("--".into());
        a.extend(cfg.command.iter().cloned());
    }
    a
}

/// Per-CPU ring-buffer pages (a power of two) for about `secs` seconds:
/// a sample with a 30-frame stack is ~300 bytes, and scheduler and syscall
/// events add about as much again on a busy machine.
pub fn ring_pages(secs: u32, freq: u32, _cpus: u32) -> u64 {
    let bytes = secs as u64 * freq as u64 * 600 + secs as u64 * 256 * 1024;
    (bytes / 4096).max(16).next_power_of_two()
}

/// Whether this kernel has tracepoint `system:name` (looks in tracefs).
pub fn tracepoint_exists(name: &str) -> bool {
    let Some((sys, tp)) = name.split_once(':') else {
        return false;
    };
    ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .any(|root| Path::new(&format!("{root}/events/{sys}/{tp}/id")).exists())
}

/// Finds `prog` on `PATH` (or as a path).
pub fn find_program(prog: &str) -> Option<PathBuf> {
    if prog.contains('/') {
        let p = PathBuf::from(prog);
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
}

/// Checks everything that would make `perf record -a` fail at once.
/// Returns warnings for what only degrades the trace.
pub fn preflight(cfg: &Config) -> Result<Vec<String>, Error> {
    let mut warnings = Vec::new();
    if find_program("perf").is_none() {
        return Err(Error::PerfMissing);
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok())
        .unwrap_or(2);
    if !root && paranoid > -1 {
        return Err(Error::Permission { paranoid });
    }
    if let Some(cmd) = cfg.command.first() {
        if find_program(cmd).is_none() {
            return Err(Error::CommandNotFound(cmd.clone()));
        }
    }
    let dir = cfg
        .output
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if let Some(free) = free_bytes(dir) {
        let free_mb = free / (1 << 20);
        if free_mb < 64 {
            return Err(Error::DiskFull {
                dir: dir.to_owned(),
                free_mb,
            });
        }
    }
    if !tracepoint_exists("sched:sched_switch") {
        if root {
            // perf mounts tracefs itself on first use; make sure it is there.
            let _ = Command::new("mount")
                .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
                .stderr(Stdio::null())
                .status();
        }
        if !tracepoint_exists("sched:sched_switch") {
            warnings.push("tracefs is not available: recording CPU samples only (no context switches, faults or syscalls); mount it with `sudo mount -t tracefs nodev /sys/kernel/tracing`".into());
        }
    }
    Ok(warnings)
}

fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: `c` is a valid NUL-terminated path; `st` is written by the call.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    (rc == 0).then(|| st.f_bavail as u64 * st.f_frsize as u64)
}

/// What a recording produced.
#[derive(Debug)]
pub struct Outcome {
    /// Exit code of CMD (0 without CMD).
    pub exit_code: i32,
    pub output: PathBuf,
    /// The companion files written beside the trace (`OUTPUT.paths`,
    /// `OUTPUT.cgroups.json`).
    pub companions: Vec<PathBuf>,
    pub warnings: Vec<String>,
}

/// A running `perf record` with its stderr reader: perf's and CMD's stderr
/// are passed through (when `echo`), minus perf's own status lines, and the
/// last lines are kept to explain a failure.
struct PerfProcess {
    child: Child,
    reader: Option<JoinHandle<()>>,
    tail: Arc<Mutex<Vec<String>>>,
}

impl PerfProcess {
    fn spawn(args: &[String], echo: bool) -> Result<PerfProcess, Error> {
        let mut child = Command::new("perf")
            .args(args)
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(Error::Spawn)?;
        let tail: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
        let reader = child.stderr.take().map(|err| {
            let tail = Arc::clone(&tail);
            std::thread::spawn(move || {
                let mut stderr = std::io::stderr();
                for line in BufReader::new(err).lines() {
                    let Ok(line) = line else { break };
                    let perf_status = line.starts_with("[ perf record:")
                        || line == "Events disabled"
                        || line == "Events enabled";
                    if echo && !perf_status {
                        let _ = writeln!(stderr, "{line}");
                    }
                    if let Ok(mut t) = tail.lock() {
                        t.push(line);
                        if t.len() > 50 {
                            t.remove(0);
                        }
                    }
                }
            })
        });
        Ok(PerfProcess {
            child,
            reader,
            tail,
        })
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Waits for perf to exit; returns its exit code and last stderr lines.
    fn finish(mut self, status: std::io::Result<ExitStatus>) -> Result<(i32, Vec<String>), Error> {
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        let status = status.map_err(Error::Spawn)?;
        let lines = self.tail.lock().map(|t| t.clone()).unwrap_or_default();
        Ok((status.code().unwrap_or(128), lines))
    }
}

/// Turns perf's exit code and last stderr lines into an error that says what
/// to do, or `Ok` when perf wrote its file.
fn check_perf_exit(
    cfg: &Config,
    code: i32,
    lines: &[String],
    stopped_by_us: bool,
) -> Result<(), Error> {
    let perf_error = lines.iter().any(|l| {
        l.contains("Failed to collect")
            || l.contains("Error:")
            || l.contains("failed to mmap")
            || l.contains("No space left")
    });
    if lines.iter().any(|l| l.contains("No space left")) {
        let dir = cfg.output.parent().unwrap_or(Path::new(".")).to_owned();
        return Err(Error::DiskFull {
            free_mb: free_bytes(&dir).unwrap_or(0) / (1 << 20),
            dir,
        });
    }
    let interrupted = code == 0 || code == 130 || (stopped_by_us && code == 128);
    if perf_error || (cfg.command.is_empty() && !interrupted) {
        let last = lines
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty() && !l.starts_with("[ perf record:"))
            .cloned()
            .unwrap_or_else(|| "no message".into());
        if lines
            .iter()
            .any(|l| l.contains("perf_event_paranoid") || l.contains("Permission denied"))
        {
            return Err(Error::Permission { paranoid: 2 });
        }
        return Err(Error::PerfFailed {
            code,
            last_line: last,
        });
    }
    Ok(())
}

/// Runs `perf record` with its companions (see [`companions`]). Ctrl-C
/// stops it (perf writes the file); in ring mode SIGUSR2 to slowlab saves a
/// snapshot and keeps recording. perf's and CMD's stderr are passed
/// through, minus perf's own status lines.
pub fn run(cfg: &Config) -> Result<Outcome, Error> {
    let mut warnings = preflight(cfg)?;
    let args = perf_args(cfg, &tracepoint_exists);
    // Ctrl-C reaches perf (same process group); slowlab waits for it.
    // SAFETY: setting a signal disposition to SIG_IGN is async-signal-safe
    // and has no memory-safety preconditions.
    let old_int = unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) };
    let companions = Companions::start(&cfg.output, cfg.capture_paths, &mut warnings);
    let mut perf = match PerfProcess::spawn(&args, true) {
        Ok(p) => p,
        Err(e) => {
            companions.discard();
            // SAFETY: restores the previous disposition returned by signal().
            unsafe { libc::signal(libc::SIGINT, old_int) };
            return Err(e);
        }
    };
    let usr2 = Arc::new(AtomicBool::new(false));
    let usr2_id = if cfg.ring_seconds.is_some() {
        signal_hook::flag::register(libc::SIGUSR2, Arc::clone(&usr2)).ok()
    } else {
        None
    };
    let status = loop {
        match perf.child.try_wait() {
            Ok(Some(st)) => break Ok(st),
            Ok(None) => {}
            Err(e) => break Err(e),
        }
        if usr2.swap(false, Ordering::Relaxed) {
            // SAFETY: sending a signal to our own child process.
            unsafe { libc::kill(perf.pid(), libc::SIGUSR2) };
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // SAFETY: restores the previous disposition returned by signal().
    unsafe { libc::signal(libc::SIGINT, old_int) };
    if let Some(id) = usr2_id {
        signal_hook::low_level::unregister(id);
    }
    let (code, lines) = perf.finish(status)?;
    if let Err(e) = check_perf_exit(cfg, code, &lines, false) {
        companions.discard();
        return Err(e);
    }
    let companion_files = companions.stop(&mut warnings);
    let mut output = cfg.output.clone();
    if cfg.ring_seconds.is_some() {
        // Snapshots are written as OUTPUT.<timestamp>; the newest becomes OUTPUT.
        if let Some(newest) = newest_snapshot(&cfg.output) {
            if std::fs::rename(&newest, &cfg.output).is_ok() {
                output = cfg.output.clone();
            } else {
                output = newest;
            }
        } else {
            warnings.push("no ring-buffer snapshot was written".into());
        }
    }
    let exit_code = if cfg.command.is_empty() { 0 } else { code };
    Ok(Outcome {
        exit_code,
        output,
        companions: companion_files,
        warnings,
    })
}

/// How long [`Recording::start`] waits for perf to begin recording.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A recording started and stopped by the caller (`slowlab lab --trace`):
/// [`Recording::start`] returns once perf records (perf starts with its
/// events disabled and is enabled through its control FIFO, which it
/// acknowledges), [`Recording::stop`] stops it and writes the file. `cfg`'s
/// command and ring mode are ignored. Dropping a recording that was not
/// stopped kills perf and removes its partial file.
pub struct Recording {
    cfg: Config,
    perf: Option<PerfProcess>,
    companions: Option<Companions>,
    warnings: Vec<String>,
    fifo_dir: PathBuf,
}

impl Recording {
    pub fn start(cfg: &Config) -> Result<Recording, Error> {
        let mut cfg = cfg.clone();
        cfg.command.clear();
        cfg.ring_seconds = None;
        let mut warnings = preflight(&cfg)?;
        let fifo_dir = std::env::temp_dir().join(format!(
            "slowlab-perf-control-{}-{}",
            std::process::id(),
            FIFO_SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&fifo_dir).map_err(Error::Spawn)?;
        let mut rec = Recording {
            cfg,
            perf: None,
            companions: None,
            warnings: Vec::new(),
            fifo_dir,
        };
        let (ctl, ack) = (rec.fifo_dir.join("ctl"), rec.fifo_dir.join("ack"));
        let (mut ctl_end, ack_end) = (make_fifo(&ctl)?, make_fifo(&ack)?);
        rec.companions = Some(Companions::start(
            &rec.cfg.output,
            rec.cfg.capture_paths,
            &mut warnings,
        ));
        rec.warnings = warnings;
        let mut args = perf_args(&rec.cfg, &tracepoint_exists);
        args.splice(
            1..1,
            [
                "-D".to_string(),
                "-1".to_string(),
                format!("--control=fifo:{},{}", ctl.display(), ack.display()),
            ],
        );
        rec.perf = Some(PerfProcess::spawn(&args, false)?);
        ctl_end.write_all(b"enable\n").map_err(Error::Spawn)?;
        rec.wait_for_ack(&ack_end)?;
        Ok(rec)
    }

    /// Waits until perf answers `ack` on its control FIFO, or fails if perf
    /// exits first or takes longer than [`START_TIMEOUT`].
    fn wait_for_ack(&mut self, ack: &std::fs::File) -> Result<(), Error> {
        use std::os::fd::AsRawFd;
        let deadline = std::time::Instant::now() + START_TIMEOUT;
        let mut got = Vec::new();
        while !got.windows(3).any(|w| w == b"ack") {
            let perf = self.perf.as_mut().expect("perf was spawned");
            if let Ok(Some(status)) = perf.child.try_wait() {
                let perf = self.perf.take().expect("perf was spawned");
                let (code, lines) = perf.finish(Ok(status))?;
                check_perf_exit(&self.cfg, code, &lines, false)?;
                return Err(Error::PerfFailed {
                    code,
                    last_line: "perf exited before it started recording".into(),
                });
            }
            if std::time::Instant::now() > deadline {
                return Err(Error::PerfFailed {
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

    /// Stops perf (SIGINT: it writes the file) and the companions.
    pub fn stop(mut self) -> Result<Outcome, Error> {
        let mut perf = self.perf.take().expect("a started recording has perf");
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(perf.pid(), libc::SIGINT) };
        let status = perf.child.wait();
        let (code, lines) = perf.finish(status)?;
        let companions = self.companions.take();
        if let Err(e) = check_perf_exit(&self.cfg, code, &lines, true) {
            if let Some(c) = companions {
                c.discard();
            }
            return Err(e);
        }
        let mut warnings = std::mem::take(&mut self.warnings);
        let files = companions
            .map(|c| c.stop(&mut warnings))
            .unwrap_or_default();
        Ok(Outcome {
            exit_code: 0,
            output: self.cfg.output.clone(),
            companions: files,
            warnings,
        })
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        if let Some(mut perf) = self.perf.take() {
            let _ = perf.child.kill();
            let status = perf.child.wait();
            let _ = perf.finish(status);
            let _ = std::fs::remove_file(&self.cfg.output);
        }
        if let Some(c) = self.companions.take() {
            c.discard();
        }
        let _ = std::fs::remove_dir_all(&self.fifo_dir);
    }
}

static FIFO_SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Creates a FIFO and opens it read-write: holding both ends, the open
/// never blocks and perf can open its end at any time.
fn make_fifo(path: &Path) -> Result<std::fs::File, Error> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| Error::Spawn(std::io::Error::other(e)))?;
    // SAFETY: `c` is a valid NUL-terminated path.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
        return Err(Error::Spawn(std::io::Error::last_os_error()));
    }
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(Error::Spawn)
}

fn newest_snapshot(output: &Path) -> Option<PathBuf> {
    let dir = output
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let base = output.file_name()?.to_string_lossy().into_owned();
    let prefix = format!("{base}.");
    let mut snaps: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with(&prefix) && n[prefix.len()..].chars().all(|c| c.is_ascii_digit())
        })
        .map(|e| e.path())
        .collect();
    snaps.sort();
    snaps.pop()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> Config {
        Config {
            output: PathBuf::from("out.data"),
            freq: 1000,
            ring_seconds: None,
            call_graph: CallGraph::Fp,
            command: vec!["make".into(), "-j2".into()],
            cpus: 2,
            capture_paths: true,
        }
    }

    #[test]
    fn command_line_has_defaults_events_and_command() {
        let args = perf_args(&cfg(), &|_| true);
        let s = args.join(" ");
        assert!(
            s.starts_with(
                "record -o out.data --all-cpus --sample-cpu -k monotonic --call-graph fp -e cpu-clock/freq=1000/"
            ),
            "{s}"
        );
        for ev in [
            "sched:sched_switch",
            "sched:sched_waking",
            "sched:sched_process_fork",
            "sched:sched_process_exec",
            "sched:sched_process_exit",
            "exceptions:page_fault_user",
            "major-faults/period=1/",
            "syscalls:sys_enter_openat",
            "syscalls:sys_exit_openat",
            "syscalls:sys_enter_unshare",
            "syscalls:sys_enter_clone3",
            "syscalls:sys_exit_newfstatat",
            "syscalls:sys_enter_mmap",
            "syscalls:sys_enter_unlink",
        ] {
            assert!(args.iter().any(|a| a == ev), "missing {ev}");
        }
        assert!(s.ends_with("-- make -j2"));
        assert!(!s.contains("--overwrite"));
        // No global frequency: it would turn the tracepoints into samples.
        assert!(!args.iter().any(|a| a == "-F" || a == "--freq"));
    }

    #[test]
    fn missing_tracepoints_are_left_out() {
        let args = perf_args(&cfg(), &|tp| !tp.starts_with("syscalls:"));
        assert!(!args.iter().any(|a| a.starts_with("syscalls:")));
        assert!(args.iter().any(|a| a == "sched:sched_switch"));
        let args = perf_args(&cfg(), &|_| false);
        assert_eq!(args.iter().filter(|a| *a == "-e").count(), 2);
    }

    #[test]
    fn ring_mode_and_dwarf() {
        let mut c = cfg();
        c.ring_seconds = Some(10);
        c.call_graph = CallGraph::Dwarf;
        c.command.clear();
        let args = perf_args(&c, &|_| true);
        let s = args.join(" ");
        assert!(s.contains("--call-graph dwarf"));
        assert!(s.contains(" --overwrite --switch-output=signal"));
        assert!(!s.contains(" -- "));
        let m = args.iter().position(|a| a == "-m").unwrap();
        let pages: u64 = args[m + 1].parse().unwrap();
        assert!(pages.is_power_of_two());
        assert_eq!(pages, ring_pages(10, 1000, 2));
    }

    #[test]
    fn ring_pages_grow_with_seconds() {
        assert!(ring_pages(60, 1000, 2) > ring_pages(5, 1000, 2));
        assert!(ring_pages(0, 1000, 2) >= 16);
    }

    #[test]
    fn finds_programs() {
        assert!(find_program("sh").is_some());
        assert!(find_program("surely-not-a-program-xyz").is_none());
    }
}
