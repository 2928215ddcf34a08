//! `slowlab record`: builds the `perf record` command line for a
//! system-wide trace (sampled stacks, scheduler switches and wake-ups with
//! stacks, process lifetimes, page faults, the syscalls the detectors use),
//! checks what would stop it (no perf, no permission, a full disk) with
//! errors that say what to do, and runs it.
//!
//! The command line is a pure function of [`Config`] and the set of
//! tracepoints this kernel has ([`perf_args`]), so it is tested without perf.
//! It does not read the trace; that is `slowlab-perf`.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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

/// The full `perf record` argument list (without the `perf` itself).
/// `has_tracepoint("sched:sched_switch")` says whether the kernel has one.
pub fn perf_args(cfg: &Config, has_tracepoint: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "record".into(),
        "-o".into(),
        cfg.output.display().to_string(),
        "--all-cpus".into(),
        "--sample-cpu".into(),
        "-F".into(),
        cfg.freq.to_string(),
        "--call-graph".into(),
        match cfg.call_graph {
            CallGraph::Fp => "fp".into(),
            CallGraph::Dwarf => "dwarf".into(),
        },
        "-e".into(),
        "cpu-clock".into(),
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
    if let Some(secs) = cfg.ring_seconds {
        a.push("--overwrite".into());
        a.push("--switch-output=signal".into());
        a.push("-m".into());
        a.push(ring_pages(secs, cfg.freq, cfg.cpus).to_string());
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
    pub warnings: Vec<String>,
}

/// Runs `perf record`. Ctrl-C stops it (perf writes the file); in ring
/// mode SIGUSR2 to slowlab saves a snapshot and keeps recording. perf's and
/// CMD's stderr are passed through, minus perf's own status lines.
pub fn run(cfg: &Config) -> Result<Outcome, Error> {
    let mut warnings = preflight(cfg)?;
    let args = perf_args(cfg, &tracepoint_exists);
    let mut child = Command::new("perf")
        .args(&args)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(Error::Spawn)?;
    let perf_pid = child.id() as i32;
    // Ctrl-C reaches perf (same process group); slowlab waits for it.
    // SAFETY: setting a signal disposition to SIG_IGN is async-signal-safe
    // and has no memory-safety preconditions.
    let old_int = unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) };
    let usr2 = Arc::new(AtomicBool::new(false));
    let usr2_id = if cfg.ring_seconds.is_some() {
        signal_hook::flag::register(libc::SIGUSR2, Arc::clone(&usr2)).ok()
    } else {
        None
    };
    let tail: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
    let reader = child.stderr.take().map(|err| {
        let tail = Arc::clone(&tail);
        std::thread::spawn(move || {
            let mut stderr = std::io::stderr();
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                let perf_status = line.starts_with("[ perf record:");
                if !perf_status {
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
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Ok(st),
            Ok(None) => {}
            Err(e) => break Err(e),
        }
        if usr2.swap(false, Ordering::Relaxed) {
            // SAFETY: sending a signal to our own child process.
            unsafe { libc::kill(perf_pid, libc::SIGUSR2) };
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // SAFETY: restores the previous disposition returned by signal().
    unsafe { libc::signal(libc::SIGINT, old_int) };
    if let Some(id) = usr2_id {
        signal_hook::low_level::unregister(id);
    }
    if let Some(r) = reader {
        let _ = r.join();
    }
    let status = status.map_err(Error::Spawn)?;
    let lines = tail.lock().map(|t| t.clone()).unwrap_or_default();
    let code = status.code().unwrap_or(128);
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
    if perf_error || (cfg.command.is_empty() && code != 0 && code != 130) {
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
        warnings,
    })
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
        }
    }

    #[test]
    fn command_line_has_defaults_events_and_command() {
        let args = perf_args(&cfg(), &|_| true);
        let s = args.join(" ");
        assert!(
            s.starts_with(
                "record -o out.data --all-cpus --sample-cpu -F 1000 --call-graph fp -e cpu-clock"
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
        assert!(s.contains("--overwrite --switch-output=signal -m "));
        assert!(!s.contains(" -- "));
        let pages: u64 = args.last().unwrap().parse().unwrap();
        assert!(pages.is_power_of_two());
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
