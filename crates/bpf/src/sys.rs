//! The operating-system checks around a capture: privileges, where tracefs is, which
//! syscall tracepoints the running kernel has, the locked-memory limit, the clocks, and the
//! machine's CPU time counters (for the host's steal time).
//!
//! It reads `/proc` and tracefs, mounts tracefs where it is missing (as perf does), opens
//! perf events (`perf_event_open_cpu`) and calls `setrlimit`/`clock_gettime`; it does not
//! load anything into the kernel.

use std::fs;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use slowlab_model::host_steal::{CpuTimes, PROC_STAT};

use crate::error::BpfError;
use crate::syscall::Syscall;

/// The tracefs root libbpf uses: it prefers the debugfs mount point when that exists, so
/// this does the same to agree with it about which tracepoints exist.
const DEBUGFS_TRACING: &str = "/sys/kernel/debug/tracing";
const TRACEFS: &str = "/sys/kernel/tracing";

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// Fails with [`BpfError::NotPermitted`] when the process clearly lacks the capabilities to
/// load a BPF program and open tracepoint events. Root passes; so does a process with
/// CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN. When `/proc` cannot tell, it passes and the
/// kernel decides.
pub(crate) fn check_privileges() -> Result<(), BpfError> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return Ok(());
    }
    let Ok(status) = fs::read_to_string("/proc/self/status") else {
        return Ok(());
    };
    let Some(caps) = effective_caps(&status) else {
        return Ok(());
    };
    let has = |cap: u32| caps & (1u64 << cap) != 0;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        Ok(())
    } else {
        Err(BpfError::NotPermitted {
            detail: "not root and without CAP_BPF+CAP_PERFMON".into(),
        })
    }
}

/// The `CapEff:` mask of a `/proc/PID/status` text.
fn effective_caps(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("CapEff:"))?;
    u64::from_str_radix(line.trim_start_matches("CapEff:").trim(), 16).ok()
}

/// Mounts tracefs at `/sys/kernel/tracing` when neither tracefs root has `events/` and
/// this process may mount (root), as perf does on its first use of a tracepoint: libbpf
/// finds a `tracepoint/` program's event id there, so without it every syscall program
/// fails to attach. A machine booted without systemd (a container, a minimal VM) has no
/// tracefs mounted. The mount is left in place, as perf leaves it; a failure is left to the
/// attach that follows to report.
pub fn mount_tracefs_if_absent() {
    if [DEBUGFS_TRACING, TRACEFS]
        .iter()
        .any(|root| Path::new(root).join("events").is_dir())
    {
        return;
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return;
    }
    let cstr = |s: &str| std::ffi::CString::new(s).expect("no NUL in a constant");
    let (source, target, fstype) = (cstr("nodev"), cstr(TRACEFS), cstr("tracefs"));
    // SAFETY: the three strings are valid NUL-terminated C strings that outlive the call;
    // a null `data` is allowed.
    unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        );
    }
}

/// The `events/syscalls` directory of the tracefs libbpf will use, or a clear error when
/// tracefs is not mounted, not readable, or has no syscall tracepoints.
pub(crate) fn syscall_events_dir() -> Result<PathBuf, BpfError> {
    mount_tracefs_if_absent();
    let root = if Path::new(DEBUGFS_TRACING).exists() {
        DEBUGFS_TRACING
    } else {
        TRACEFS
    };
    let events = Path::new(root).join("events");
    match fs::metadata(&events) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            return Err(BpfError::NotPermitted {
                detail: format!("cannot read {}", events.display()),
            })
        }
        Err(_) => {
            return Err(BpfError::Unsupported {
                reason: format!(
                    "tracefs is not mounted ({} has no events/): mount it with \
                     `mount -t tracefs nodev {TRACEFS}`",
                    root
                ),
            })
        }
    }
    let syscalls = events.join("syscalls");
    match fs::read_dir(&syscalls) {
        Ok(_) => Ok(syscalls),
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Err(BpfError::NotPermitted {
            detail: format!("cannot read {}", syscalls.display()),
        }),
        Err(_) => Err(BpfError::Unsupported {
            reason: format!(
                "no syscall tracepoints under {} (the kernel needs CONFIG_FTRACE_SYSCALLS=y)",
                events.display()
            ),
        }),
    }
}

/// Splits the table into the syscalls whose `sys_enter_*` tracepoint exists under
/// `syscalls_dir` and those that do not.
pub(crate) fn available_syscalls(syscalls_dir: &Path) -> (Vec<Syscall>, Vec<Syscall>) {
    Syscall::ALL
        .iter()
        .partition(|s| syscalls_dir.join(s.tracepoint().to_string()).is_dir())
}

/// Raises the soft RLIMIT_MEMLOCK to at least `needed` bytes (to the hard limit, or to
/// infinity when allowed). Returns the soft limit in force afterwards. Kernels since 5.11
/// charge BPF maps to the memory cgroup instead, so a low limit only matters before that.
pub(crate) fn raise_memlock(needed: u64) -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) } != 0 {
        return u64::MAX;
    }
    if lim.rlim_cur == libc::RLIM_INFINITY || lim.rlim_cur >= needed {
        return lim.rlim_cur;
    }
    // Root may raise the hard limit too; others may go up to it.
    let wanted = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: `wanted` is a valid rlimit.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &wanted) } == 0 {
        return libc::RLIM_INFINITY;
    }
    let to_hard = libc::rlimit {
        rlim_cur: lim.rlim_max,
        rlim_max: lim.rlim_max,
    };
    // SAFETY: `to_hard` is a valid rlimit.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &to_hard) } == 0 {
        return lim.rlim_max;
    }
    lim.rlim_cur
}

/// The memory page size in bytes (4096 when it cannot be read).
pub(crate) fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).ok().filter(|&s| s > 0).unwrap_or(4096)
}

/// Opens the perf event `attr` (a `struct perf_event_attr` of PERF_ATTR_SIZE_VER5, 112
/// bytes, as u64 words; its size in the first word) on `cpu`, for all processes.
pub(crate) fn perf_event_open_cpu(attr: &[u64; 14], cpu: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: `attr` is a valid perf_event_attr of the size it names; the other arguments
    // are plain integers.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr.as_ptr(),
            -1i32,
            cpu,
            -1i32,
            8 as libc::c_ulong, // PERF_FLAG_FD_CLOEXEC
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// The lowest address a process can map (`vm.mmap_min_addr`; one page when it cannot be
/// read): the eBPF user stack walk stops at a frame pointer below it, where a read fails.
pub(crate) fn mmap_min_addr() -> u64 {
    std::fs::read_to_string("/proc/sys/vm/mmap_min_addr")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(page_size)
}

/// Reads a clock in nanoseconds; `CLOCK_MONOTONIC` is the clock of `bpf_ktime_get_ns`.
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clocks used here always exist.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// The current CLOCK_MONOTONIC time in nanoseconds: the time base of every
/// [`PathEvent::time_ns`](crate::PathEvent::time_ns), and of `perf record -k monotonic`.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// The machine's CPU time counters now (`/proc/stat`), for the host's steal time over
/// what a file holds; `None` where they cannot be read.
pub fn cpu_times_now() -> Option<CpuTimes> {
    let text = fs::read_to_string(PROC_STAT).ok()?;
    CpuTimes::parse(&text)
}

/// What the machine's CPU time counters counted from `start` (read with
/// [`cpu_times_now`]) to now; `None` when either reading is missing.
pub fn cpu_times_since(start: Option<CpuTimes>) -> Option<CpuTimes> {
    cpu_times_now()?.since(start?)
}

/// The calling thread's id.
pub(crate) fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() as u32 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effective_caps_parses_the_status_line() {
        let status = "Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n";
        assert_eq!(effective_caps(status), Some(0x1ff_ffff_ffff));
        assert_eq!(effective_caps("Name:\tx\n"), None);
    }
}
