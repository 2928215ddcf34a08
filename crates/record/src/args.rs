//! The `perf record` command line of a slowlab trace (a pure function of the
//! [`Config`], the buffers and the tracepoints this kernel has, so it is
//! tested without perf), and the checks made before perf starts: perf
//! installed, permission, free disk space, tracefs, the command found.
//!
//! It runs no perf; `perf_process` and `session` do.

use std::path::{Path, PathBuf};

use crate::{CallGraph, Config, RecordError};

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
    // Disk requests handed to the device and completed: the I/O a blocked
    // thread waits for (`bench/record` measures what they cost).
    "block:block_rq_issue",
    "block:block_rq_complete",
];

/// Syscalls recorded (entry and exit) for the detectors, in the order perf
/// is given them: the rows of `slowlab_model::syscalls` marked as recorded.
pub const SYSCALLS: &[&str] = slowlab_model::syscalls::RECORDED_BY_PERF;

/// Per-CPU buffer pages when perf streams to its file (16 MiB).
pub const STREAM_PAGES: u64 = 4096;

/// How perf buffers the events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Buffers {
    /// Streamed to the file through `pages` per CPU.
    Stream(u64),
    /// Overwritten in place (`--overwrite`), `pages` per CPU, written on
    /// SIGUSR2 and at the end (`--switch-output=signal`).
    Ring(u64),
}

/// The full `perf record` argument list (without the `perf` itself), writing
/// to `cfg.output`. `has_tracepoint("sched:sched_switch")` says whether the
/// kernel has one. Ring mode is sized by [`ring_pages`]'s estimate here;
/// `slowlab record` measures the event rate instead (see `ring`).
pub fn perf_args(cfg: &Config, has_tracepoint: &dyn Fn(&str) -> bool) -> Vec<String> {
    let buffers = match cfg.ring_seconds {
        Some(secs) => Buffers::Ring(ring_pages(secs, cfg.freq, cfg.cpus)),
        None => Buffers::Stream(STREAM_PAGES),
    };
    perf_args_to(cfg, has_tracepoint, &cfg.output, buffers, true)
}

/// [`perf_args`] writing to `output` (`-` for a pipe) with `buffers`, with or
/// without `cfg`'s command.
pub(crate) fn perf_args_to(
    cfg: &Config,
    has_tracepoint: &dyn Fn(&str) -> bool,
    output: &Path,
    buffers: Buffers,
    with_command: bool,
) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "record".into(),
        "-o".into(),
        output.display().to_string(),
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
        let stackless =
            slowlab_model::syscalls::lookup(sc).is_some_and(|info| info.recorded_without_stack());
        for dir in ["enter", "exit"] {
            let tp = format!("syscalls:sys_{dir}_{sc}");
            if has_tracepoint(&tp) {
                // A wait's resource needs no stack of its own (the switch
                // away has it): perf's per-event term saves the walk.
                ev(if stackless {
                    format!("{tp}/call-graph=no/")
                } else {
                    tp
                });
            }
        }
    }
    a.push("-m".into());
    match buffers {
        Buffers::Ring(pages) => {
            a.push(pages.to_string());
            a.push("--overwrite".into());
            a.push("--switch-output=signal".into());
        }
        // Bursts of syscall events (thousands of probes a millisecond)
        // overflow perf's default 512 KiB per CPU.
        Buffers::Stream(pages) => a.push(pages.to_string()),
    }
    if with_command && !cfg.command.is_empty() {
        a.push("--".into());
        a.extend(cfg.command.iter().cloned());
    }
    a
}

/// A first guess of the per-CPU ring-buffer pages (a power of two) for
/// about `secs` seconds, used when the event rate cannot be measured: a
/// sample with a 30-frame stack is ~300 bytes, and scheduler and syscall
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

/// The command's program can be found (on PATH, or as a path), before any recording
/// starts: a one-line error otherwise.
pub fn command_found(command: &[String]) -> Result<(), RecordError> {
    match command.first() {
        Some(cmd) if find_program(cmd).is_none() => Err(RecordError::CommandNotFound(cmd.clone())),
        _ => Ok(()),
    }
}

/// Checks everything that would make `perf record -a` fail at once.
/// Returns warnings for what only degrades the trace.
pub fn preflight(cfg: &Config) -> Result<Vec<String>, RecordError> {
    let mut warnings = Vec::new();
    if find_program("perf").is_none() {
        return Err(RecordError::PerfMissing);
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok())
        .unwrap_or(2);
    if !root && paranoid > -1 {
        return Err(RecordError::Permission { paranoid });
    }
    command_found(&cfg.command)?;
    let dir = slowlab_model::bundle::directory_of(&cfg.output);
    if let Some(free) = free_bytes(dir) {
        let free_mb = free / (1 << 20);
        if free_mb < 64 {
            return Err(RecordError::DiskFull {
                dir: dir.to_owned(),
                free_mb,
            });
        }
    }
    if !tracepoint_exists("sched:sched_switch") {
        // perf mounts tracefs itself on first use; make sure it is there.
        slowlab_bpf::mount_tracefs_if_absent();
        if !tracepoint_exists("sched:sched_switch") {
            warnings.push("tracefs is not available: recording CPU samples only (no context switches, faults or syscalls); mount it with `sudo mount -t tracefs nodev /sys/kernel/tracing`".into());
        }
    }
    Ok(warnings)
}

/// Free bytes for an unprivileged writer in `dir`.
pub(crate) fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: `c` is a valid NUL-terminated path; `st` is written by the call.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    (rc == 0).then(|| st.f_bavail as u64 * st.f_frsize as u64)
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
            "block:block_rq_issue",
            "block:block_rq_complete",
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
    fn syscall_events_keep_their_order_from_before_the_shared_table() {
        // The list `slowlab record` gave perf before the syscall table moved to
        // `model`: the command line (and so the traces) must not change, but
        // for the signals added at its end.
        let before = [
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
            // Added after: who killed a command (the critical path's `killed`).
            "kill",
            "tgkill",
            "tkill",
        ];
        // Added after, without stacks: the resource of a wait.
        let stackless = ["futex", "wait4", "waitid", "flock"];
        let expected: Vec<String> = before
            .iter()
            .flat_map(|sc| ["enter", "exit"].map(|dir| format!("syscalls:sys_{dir}_{sc}")))
            .chain(stackless.iter().flat_map(|sc| {
                ["enter", "exit"].map(|dir| format!("syscalls:sys_{dir}_{sc}/call-graph=no/"))
            }))
            .collect();
        let args = perf_args(&cfg(), &|_| true);
        let syscalls: Vec<&String> = args.iter().filter(|a| a.starts_with("syscalls:")).collect();
        assert_eq!(syscalls, expected.iter().collect::<Vec<_>>());
    }

    #[test]
    fn missing_tracepoints_are_left_out() {
        let args = perf_args(&cfg(), &|tp| !tp.starts_with("syscalls:"));
        assert!(!args.iter().any(|a| a.starts_with("syscalls:")));
        assert!(args.iter().any(|a| a == "sched:sched_switch"));
        // A kernel without the block tracepoints records everything else.
        let args = perf_args(&cfg(), &|tp| !tp.starts_with("block:"));
        assert!(!args.iter().any(|a| a.starts_with("block:")));
        assert!(args.iter().any(|a| a == "syscalls:sys_enter_openat"));
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
    fn measuring_the_rate_streams_to_a_pipe_without_the_command() {
        let args = perf_args_to(
            &cfg(),
            &|_| true,
            Path::new("-"),
            Buffers::Stream(256),
            false,
        );
        let s = args.join(" ");
        assert!(s.starts_with("record -o - "), "{s}");
        assert!(s.ends_with("-m 256"), "{s}");
        assert!(!s.contains("make"));
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
