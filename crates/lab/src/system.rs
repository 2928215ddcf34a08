//! Facts about this machine that the scenarios' guard rails check before
//! starting: privileges, kernel limits, free memory and disk, filesystem
//! types. Reads only; changes nothing.

use std::path::Path;

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
    if let Some(path) = own_cgroup_file("pids", "pids.max") {
        limits.extend(read_number(&path));
        let current = own_cgroup_file("pids", "pids.current").and_then(read_number);
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

/// Which cgroup interface has the memory controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    /// `memory.limit_in_bytes`, `memory.oom_control`.
    V1,
    /// `memory.max`, `memory.events`.
    V2,
}

/// Where new memory cgroups can be made: the mount point of the v1 memory
/// hierarchy, or a cgroup v2 mount whose root enables the memory controller
/// for its children; the reason (and what to do) when there is neither.
pub fn memory_cgroup_root() -> Result<(std::path::PathBuf, CgroupVersion), String> {
    let mounts = std::fs::read_to_string("/proc/self/mounts")
        .map_err(|e| format!("cannot read /proc/self/mounts: {e}"))?;
    let (v1, v2) = parse_cgroup_mounts(&mounts);
    if let Some(path) = v1 {
        if path.join("memory.limit_in_bytes").exists() {
            return Ok((path, CgroupVersion::V1));
        }
    }
    for path in v2 {
        let enabled = std::fs::read_to_string(path.join("cgroup.subtree_control"))
            .map(|s| s.split_whitespace().any(|c| c == "memory"))
            .unwrap_or(false);
        if enabled {
            return Ok((path, CgroupVersion::V2));
        }
    }
    Err(
        "no memory cgroup controller: neither a cgroup v1 `memory` hierarchy nor a cgroup v2 \
         mount with `memory` in cgroup.subtree_control (mount one, or enable it with \
         `echo +memory > /sys/fs/cgroup/cgroup.subtree_control`)"
            .into(),
    )
}

/// From /proc/mounts text: the v1 hierarchy with the memory controller, and
/// every cgroup v2 mount point.
pub fn parse_cgroup_mounts(mounts: &str) -> (Option<std::path::PathBuf>, Vec<std::path::PathBuf>) {
    let mut v1 = None;
    let mut v2 = Vec::new();
    for line in mounts.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [_, mount_point, fs_type, options, ..] = fields[..] else {
            continue;
        };
        let mount_point = std::path::PathBuf::from(mount_point.replace("\\040", " "));
        match fs_type {
            "cgroup" if v1.is_none() && options.split(',').any(|o| o == "memory") => {
                v1 = Some(mount_point)
            }
            "cgroup2" => v2.push(mount_point),
            _ => {}
        }
    }
    (v1, v2)
}

/// The path of a controller's file for this process's own cgroup, for
/// cgroup v1 (`/sys/fs/cgroup/<controller>/<path>/<file>`) or v2.
pub fn own_cgroup_file(controller: &str, file: &str) -> Option<std::path::PathBuf> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let candidate = if controllers.split(',').any(|c| c == controller) {
            Path::new("/sys/fs/cgroup").join(controller)
        } else if controllers.is_empty() {
            std::path::PathBuf::from("/sys/fs/cgroup")
        } else {
            continue;
        };
        let file_path = candidate.join(path.trim_start_matches('/')).join(file);
        if file_path.exists() {
            return Some(file_path);
        }
    }
    None
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
pub fn pin_to_cpu(cpu: usize) -> Result<(), String> {
    // SAFETY: cpu_set_t is plain data.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU_SET on our own set; an index beyond the set is ignored by libc.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: valid pointer and size; pid 0 is this thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(format!(
            "cannot pin to CPU {cpu}: {}",
            std::io::Error::last_os_error()
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
    fn finds_the_memory_cgroup_mounts() {
        let mounts = "tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0\n\
            cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n\
            cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n\
            cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n";
        let (v1, v2) = parse_cgroup_mounts(mounts);
        assert_eq!(v1, Some("/sys/fs/cgroup/memory".into()));
        assert_eq!(v2, vec![std::path::PathBuf::from("/sys/fs/cgroup/unified")]);
        let (v1, v2) = parse_cgroup_mounts("cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n");
        assert_eq!(v1, None);
        assert_eq!(v2, vec![std::path::PathBuf::from("/sys/fs/cgroup")]);
    }

    #[test]
    fn this_process_may_run_on_some_cpu_and_pins_to_it() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty());
        let thread_result = std::thread::spawn(move || {
            pin_to_cpu(cpus[0])?;
            Ok::<_, String>(allowed_cpus())
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
