//! Reading `/proc` and `/sys` under a root directory (`/` on a live
//! machine, a fake tree in tests): the process ids, a process's name, small
//! files, `key value` counters, and the cgroup mounts. Every read that
//! fails is `None` or an empty list (a process can exit between two reads),
//! except where a check must tell "not allowed" from "absent".
//!
//! It judges nothing.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

/// The numeric entries of `ROOT/proc`, in ascending order.
pub fn pids(root: &Path) -> Vec<i32> {
    let mut pids: Vec<i32> = std::fs::read_dir(root.join("proc"))
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    pids.sort_unstable();
    pids
}

/// `ROOT/proc/PID`.
pub fn proc_dir(root: &Path, pid: i32) -> PathBuf {
    root.join("proc").join(pid.to_string())
}

/// The process's name (`comm`), or "?" once it is gone.
pub fn comm(root: &Path, pid: i32) -> String {
    read(&proc_dir(root, pid).join("comm"))
        .map(|s| s.trim_end().to_string())
        .unwrap_or_else(|| "?".to_string())
}

/// A whole small file as text.
pub fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// The first whitespace-separated field of a file, as a number (`max` and
/// other words are `None`).
pub fn number(path: &Path) -> Option<u64> {
    read(path)?.split_whitespace().next()?.parse().ok()
}

/// The value of `key` in `key value` lines (memory.stat, cpu.stat).
pub fn counter(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut parts = line.split_whitespace();
        if parts.next()? != key {
            return None;
        }
        parts.next()?.parse().ok()
    })
}

/// Lines of a file, counted without holding it in memory (`maps` of a
/// large process runs to megabytes).
pub fn count_lines(path: &Path) -> Option<u64> {
    let file = std::fs::File::open(path).ok()?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut count = 0u64;
    loop {
        let buf = reader.fill_buf().ok()?;
        if buf.is_empty() {
            return Some(count);
        }
        count += buf.iter().filter(|&&b| b == b'\n').count() as u64;
        let len = buf.len();
        reader.consume(len);
    }
}

/// A cgroup hierarchy mounted on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupMount {
    /// Where it is mounted, under the root.
    pub path: PathBuf,
    /// The mount point as the system names it (`/sys/fs/cgroup/memory`).
    pub shown: String,
    /// cgroup v2 (one unified hierarchy), else v1.
    pub v2: bool,
    /// v1: the controllers of the hierarchy (`memory`, `cpu`, …).
    pub controllers: Vec<String>,
}

/// The cgroup hierarchies in `ROOT/proc/mounts`.
pub fn cgroup_mounts(root: &Path) -> Vec<CgroupMount> {
    let text = read(&root.join("proc/mounts")).unwrap_or_default();
    let mut mounts = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [_, mount_point, fs_type, options, ..] = fields[..] else {
            continue;
        };
        let shown = mount_point.replace("\\040", " ");
        let path = root.join(shown.trim_start_matches('/'));
        match fs_type {
            "cgroup" => mounts.push(CgroupMount {
                path,
                shown,
                v2: false,
                controllers: options
                    .split(',')
                    .filter(|o| {
                        matches!(
                            *o,
                            "memory" | "cpu" | "cpuacct" | "cpuset" | "blkio" | "io" | "pids"
                        )
                    })
                    .map(String::from)
                    .collect(),
            }),
            "cgroup2" => mounts.push(CgroupMount {
                path,
                shown,
                v2: true,
                controllers: Vec::new(),
            }),
            _ => {}
        }
    }
    mounts
}

/// Every cgroup directory of a hierarchy (its root first), at most
/// `MAX_CGROUPS` of them.
pub fn cgroup_dirs(mount: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![mount.to_path_buf()];
    while let Some(dir) = stack.pop() {
        if out.len() >= MAX_CGROUPS {
            break;
        }
        if let Ok(entries) = std::fs::read_dir(&dir) {
            let mut children: Vec<PathBuf> = entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect();
            children.sort();
            stack.extend(children.into_iter().rev());
        }
        out.push(dir);
    }
    out
}

/// How many cgroups of one hierarchy are read at most (a machine with more
/// is checked in part, and the check says so).
pub const MAX_CGROUPS: usize = 10_000;

/// The cgroup's path as the system names it: `/` for the root of the
/// hierarchy, `/a/b` below it.
pub fn cgroup_name(mount: &Path, dir: &Path) -> String {
    let rel = dir.strip_prefix(mount).unwrap_or(dir);
    format!("/{}", rel.to_string_lossy())
}

/// The processes in a cgroup (`cgroup.procs`).
pub fn cgroup_procs(dir: &Path) -> Vec<i32> {
    read(&dir.join("cgroup.procs"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Whether this process runs as root (effective uid 0), from
/// `/proc/self/status` of the live system.
pub fn is_root() -> bool {
    read(Path::new("/proc/self/status"))
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_mounts_are_read() {
        assert_eq!(counter("a 1\nbb 22\n", "bb"), Some(22));
        assert_eq!(counter("a 1\n", "b"), None);
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc")).unwrap();
        std::fs::write(
            dir.path().join("proc/mounts"),
            "cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n\
             cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\nproc /proc proc rw 0 0\n",
        )
        .unwrap();
        let m = cgroup_mounts(dir.path());
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].controllers, vec!["memory"]);
        assert!(!m[0].v2 && m[1].v2);
        assert_eq!(m[0].path, dir.path().join("sys/fs/cgroup/memory"));
        std::fs::write(dir.path().join("lines"), "a\nb\nc\n").unwrap();
        assert_eq!(count_lines(&dir.path().join("lines")), Some(3));
    }
}
