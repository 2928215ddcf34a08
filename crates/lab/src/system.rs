//! Facts about this machine that the scenarios' guard rails check before
//! starting: privileges, kernel limits, free memory and disk, filesystem
//! types, the CPUs this process may use. Reads only, except `pin_to_cpu`,
//! which pins the calling thread. The memory-cgroup facts are in `cgroup`.

use std::path::Path;

use crate::LabError;

/// Whether we run as root (effective uid 0).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A number from a /proc or /sys file (first whitespace-separated token).
pub fn read_number(path: impl AsRef<Path>) -> Option<u64> {
    std::fs::read_to_string(path)
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `vm.max_map_count`: the most memory mappings one process may have.
pub fn max_map_count() -> Option<u64> {
    read_number("/proc/sys/vm/max_map_count")
}

/// How many memory mappings this process has now.
pub fn own_map_count() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

/// MemAvailable from /proc/meminfo, in bytes.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Whether there is any swap.
pub fn has_swap() -> bool {
    std::fs::read_to_string("/proc/swaps")
        .map(|s| s.lines().count() > 1)
        .unwrap_or(false)
}

/// Free bytes for an unprivileged user on the filesystem holding `path`.
pub fn free_disk(path: &Path) -> Option<u64> {
    let stat = statvfs(path)?;
    Some(stat.f_bavail * stat.f_frsize)
}

/// Free inodes on the filesystem holding `path` (None when it does not
/// count inodes, as btrfs does not).
pub fn free_inodes(path: &Path) -> Option<u64> {
    let stat = statvfs(path)?;
    (stat.f_files > 0).then_some(stat.f_favail)
}

fn statvfs(path: &Path) -> Option<libc::statvfs> {
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: statvfs is plain data; the path is NUL-terminated.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) };
    (rc == 0).then_some(stat)
}

/// The filesystem type magic of `path` (see statfs(2)).
pub fn filesystem_magic(path: &Path) -> Option<i64> {
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: statfs is plain data; the path is NUL-terminated.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers.
    let rc = unsafe { libc::statfs(c_path.as_ptr(), &mut stat) };
    (rc == 0).then_some(stat.f_type as i64)
}

/// tmpfs and ramfs keep files in memory: no page cache to drop or re-read.
pub fn is_memory_filesystem(path: &Path) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    matches!(filesystem_magic(path), Some(TMPFS_MAGIC | RAMFS_MAGIC))
}

/// The kernel's limits on processes and threads, and this process's pids
/// cgroup limit if any; the smallest is what a scenario can start.
pub fn process_headroom() -> Option<u64> {
    let mut limits = Vec::new();
    limits.extend(read_number("/proc/sys/kernel/pid_max"));
    limits.extend(read_number("/proc/sys/kernel/threads-max"));
    if let Some(path) = crate::cgroup::own_file("pids", "pids.max") {
        limits.extend(read_number(&path));
        let current = crate::cgroup::own_file("pids", "pids.current").and_then(read_number);
        if let (Some(max), Some(cur)) = (read_number(&path), current) {
            limits.push(max.saturating_sub(cur));
        }
    }
    // SAFETY: getrlimit fills a plain struct.
    let mut rl: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut rl) } == 0
        && rl.rlim_cur != libc::RLIM_INFINITY
        && !is_root()
    {
        limits.push(rl.rlim_cur);
    }
    limits.into_iter().min()
}

/// `user.max_net_namespaces`: how many network namespaces may exist.
pub fn max_net_namespaces() -> Option<u64> {
    read_number("/proc/sys/user/max_net_namespaces")
}

/// The CPUs this process may run on, ascending.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data that sched_getaffinity fills in.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer and size; pid 0 is this thread.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: the index is below CPU_SETSIZE.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// Pins the calling thread to one CPU (threads it starts later inherit it).
/// For a child's `pre_exec`: die with SIGKILL when the thread that started
/// it ends, and give up (ESRCH) if `parent` is already gone. Makes only
/// async-signal-safe system calls and allocates nothing.
pub(crate) fn die_with_parent(parent: libc::pid_t) -> std::io::Result<()> {
    // SAFETY: prctl and getppid have no memory-safety preconditions.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::getppid() != parent {
            return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
        }
    }
    Ok(())
}

pub fn pin_to_cpu(cpu: usize) -> Result<(), LabError> {
    // SAFETY: cpu_set_t is plain data.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let bits = 8 * std::mem::size_of::<libc::cpu_set_t>();
    if cpu >= bits {
        // libc's CPU_SET panics past the set's size.
        return Err(LabError::io(
            format!(
                "cannot pin to CPU {cpu}: this build knows CPUs 0–{}",
                bits - 1
            ),
            std::io::Error::from_raw_os_error(libc::EINVAL),
        ));
    }
    // SAFETY: CPU_SET on our own set, with an index inside it (checked above).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: valid pointer and size; pid 0 is this thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(LabError::io(
            format!("cannot pin to CPU {cpu}"),
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kernel_limits_and_resources() {
        assert!(max_map_count().unwrap_or(65530) > 1000);
        assert!(own_map_count() > 5);
        assert!(available_memory().unwrap() > 1 << 20);
        assert!(free_disk(Path::new("/")).is_some());
        assert!(process_headroom().unwrap() > 10);
    }

    #[test]
    fn this_process_may_run_on_some_cpu_and_pins_to_it() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty());
        let thread_result = std::thread::spawn(move || {
            pin_to_cpu(cpus[0])?;
            Ok::<_, LabError>(allowed_cpus())
        })
        .join()
        .unwrap();
        assert_eq!(thread_result.unwrap().len(), 1);
    }

    #[test]
    fn proc_is_not_a_memory_filesystem_but_dev_shm_usually_is() {
        assert!(!is_memory_filesystem(Path::new("/proc")));
        if Path::new("/dev/shm").exists() {
            assert!(is_memory_filesystem(Path::new("/dev/shm")));
        }
    }
}
