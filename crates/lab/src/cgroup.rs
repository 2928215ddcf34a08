//! Memory cgroups, in one place for every scenario: finding where new ones
//! can be made (the cgroup v1 `memory` hierarchy, or a cgroup v2 mount with
//! the memory controller enabled for its children), making one with a
//! memory limit that a child joins between fork and exec, reading its
//! counters (OOM kills, limit hits), and removing it — its processes killed
//! first — on every exit path through a `Cleanup` guard. Also the path of a
//! controller's file for this process's own cgroup (the pids limit of the
//! guard rails).
//!
//! What it does not do: change any existing cgroup, enable a controller, or
//! move this process anywhere; the only cgroups it touches are the ones it
//! made, named `slowlab-OWNER-PID-LABEL` at the root of the hierarchy.

use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::cleanup::Cleanup;
use crate::system::read_number;
use crate::LabError;

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
pub fn memory_root() -> Result<(PathBuf, CgroupVersion), LabError> {
    let mounts = std::fs::read_to_string("/proc/self/mounts")
        .map_err(|e| LabError::io("cannot read /proc/self/mounts", e))?;
    let (v1, v2) = parse_mounts(&mounts);
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
    Err(LabError::NoMemoryCgroup)
}

/// From /proc/mounts text: the v1 hierarchy with the memory controller, and
/// every cgroup v2 mount point.
pub fn parse_mounts(mounts: &str) -> (Option<PathBuf>, Vec<PathBuf>) {
    let mut v1 = None;
    let mut v2 = Vec::new();
    for line in mounts.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [_, mount_point, fs_type, options, ..] = fields[..] else {
            continue;
        };
        let mount_point = PathBuf::from(mount_point.replace("\\040", " "));
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
pub fn own_file(controller: &str, file: &str) -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let candidate = if controllers.split(',').any(|c| c == controller) {
            Path::new("/sys/fs/cgroup").join(controller)
        } else if controllers.is_empty() {
            PathBuf::from("/sys/fs/cgroup")
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

/// A memory cgroup made by a scenario: limited, then removed by its guard
/// (its processes killed first) on every exit path.
pub struct MemoryCgroup {
    dir: PathBuf,
    version: CgroupVersion,
    /// `cgroup.procs`, open for the child to write "0" into between fork
    /// and exec.
    procs: std::fs::File,
    _guard: Cleanup,
}

impl MemoryCgroup {
    /// Makes `slowlab-OWNER-PID-LABEL` under `root` (from `memory_root`)
    /// with its memory limited to `limit_bytes`.
    pub fn create(
        root: &Path,
        version: CgroupVersion,
        owner: &str,
        label: &str,
        limit_bytes: u64,
    ) -> Result<Self, LabError> {
        let dir = root.join(format!("slowlab-{owner}-{}-{label}", std::process::id()));
        std::fs::create_dir(&dir)
            .map_err(|e| LabError::io(format!("cannot create the cgroup {}", dir.display()), e))?;
        let removed = dir.clone();
        let guard = Cleanup::register(format!("remove the cgroup {}", dir.display()), move || {
            remove(&removed)
        });
        let limit_file = match version {
            CgroupVersion::V1 => "memory.limit_in_bytes",
            CgroupVersion::V2 => "memory.max",
        };
        std::fs::write(dir.join(limit_file), limit_bytes.to_string())
            .map_err(|e| LabError::io(format!("cannot set {}/{limit_file}", dir.display()), e))?;
        let procs = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
            .map_err(|e| LabError::io(format!("cannot open {}/cgroup.procs", dir.display()), e))?;
        Ok(MemoryCgroup {
            dir,
            version,
            procs,
            _guard: guard,
        })
    }

    /// The cgroup's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The open `cgroup.procs`: a child writes "0" into it between fork and
    /// exec to join the cgroup before it runs anything.
    pub fn procs_fd(&self) -> RawFd {
        self.procs.as_raw_fd()
    }

    /// A `key value` counter from one of the cgroup's files.
    fn keyed(&self, file: &str, key: &str) -> Option<u64> {
        let text = std::fs::read_to_string(self.dir.join(file)).ok()?;
        parse_counter(&text, key)
    }

    /// How many processes the cgroup's OOM killer killed.
    pub fn oom_kills(&self) -> Option<u64> {
        match self.version {
            CgroupVersion::V1 => self.keyed("memory.oom_control", "oom_kill"),
            CgroupVersion::V2 => self.keyed("memory.events", "oom_kill"),
        }
    }

    /// How many times usage hit the limit.
    pub fn limit_hits(&self) -> Option<u64> {
        match self.version {
            CgroupVersion::V1 => read_number(self.dir.join("memory.failcnt")),
            CgroupVersion::V2 => self.keyed("memory.events", "max"),
        }
    }
}

/// A `key value` counter from memory.oom_control (v1) or memory.events (v2).
pub fn parse_counter(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut parts = line.split_whitespace();
        (parts.next()? == key).then(|| parts.next()?.parse().ok())?
    })
}

/// Kills whatever is in the cgroup, then removes it, retrying briefly while
/// the kernel lets go of it.
fn remove(dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        let pids: Vec<libc::pid_t> = procs
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        for &pid in &pids {
            // SAFETY: kill(2) has no memory-safety preconditions.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        if pids.is_empty() {
            match std::fs::remove_dir(dir) {
                Ok(()) => return,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
                Err(_) => {}
            }
        }
        if Instant::now() >= deadline {
            eprintln!(
                "slowlab: could not remove the cgroup {}; remove it with `rmdir {}`",
                dir.display(),
                dir.display()
            );
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_memory_cgroup_mounts() {
        let mounts = "tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0\n\
            cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n\
            cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n\
            cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n";
        let (v1, v2) = parse_mounts(mounts);
        assert_eq!(v1, Some("/sys/fs/cgroup/memory".into()));
        assert_eq!(v2, vec![PathBuf::from("/sys/fs/cgroup/unified")]);
        let (v1, v2) = parse_mounts("cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n");
        assert_eq!(v1, None);
        assert_eq!(v2, vec![PathBuf::from("/sys/fs/cgroup")]);
    }

    #[test]
    fn parses_the_oom_counters_of_both_cgroup_versions() {
        let v1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n";
        assert_eq!(parse_counter(v1, "oom_kill"), Some(2));
        assert_eq!(parse_counter(v1, "under_oom"), Some(0));
        let v2 = "low 0\nhigh 0\nmax 1735\noom 1\noom_kill 1\noom_group_kill 0\n";
        assert_eq!(parse_counter(v2, "oom_kill"), Some(1));
        assert_eq!(parse_counter(v2, "max"), Some(1735));
        assert_eq!(parse_counter(v2, "missing"), None);
        assert_eq!(parse_counter("oom_kill x\n", "oom_kill"), None);
    }

    /// Where there is a memory controller and the rights to use it: a
    /// cgroup is made with its limit and is gone when its guard drops.
    #[test]
    fn a_cgroup_is_limited_and_removed_with_its_guard() {
        let Ok((root, version)) = memory_root() else {
            return;
        };
        if !crate::system::is_root() {
            return;
        }
        let cgroup = MemoryCgroup::create(&root, version, "unit-test", "guard", 32 << 20).unwrap();
        let dir = cgroup.dir().to_path_buf();
        assert!(dir.is_dir());
        let limit_file = match version {
            CgroupVersion::V1 => "memory.limit_in_bytes",
            CgroupVersion::V2 => "memory.max",
        };
        assert_eq!(read_number(dir.join(limit_file)), Some(32 << 20));
        assert_eq!(cgroup.oom_kills(), Some(0));
        drop(cgroup);
        assert!(!dir.exists(), "{} left behind", dir.display());
    }
}
