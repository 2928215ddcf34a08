//! Memory cgroups near their limit that keep re-reading what they evicted:
//! the working set does not fit, so every pass over it reads it again from
//! disk (a scan under such a cap ran 800× slower in the lab).
//!
//! Read from every cgroup with a memory limit, cgroup v1 (the `memory`
//! hierarchy: `memory.limit_in_bytes`, or `hierarchical_memory_limit` of
//! `memory.stat` when lower; `memory.usage_in_bytes`; the
//! `total_workingset_refault_*` counters of `memory.stat`) and cgroup v2
//! (a hierarchy whose root lists `memory` in `cgroup.controllers`:
//! `memory.max`, `memory.current`, `workingset_refault_*` of `memory.stat`),
//! with the processes inside (`cgroup.procs` of it and its descendants).
//!
//! Thresholds: usage at least [`NEAR_LIMIT_SHARE`] of the limit, and
//! refaults (pages read back soon after they were evicted) of at least
//! [`MIN_REFAULT_BYTES_PER_S`] between the two readings. A cgroup full of
//! page cache that does not refault is working as intended.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::procfs::{self, CgroupMount};

/// Usage from which a cgroup is near its limit (share of the limit).
pub const NEAR_LIMIT_SHARE: f64 = 0.9;
/// Refaulted bytes per second from which a cgroup near its limit thrashes.
pub const MIN_REFAULT_BYTES_PER_S: f64 = 1024.0 * 1024.0;
/// Limits from this many bytes are "no limit" (v1 writes 2^63 rounded down
/// to a page).
const UNLIMITED: u64 = 1 << 60;
/// Processes named per cgroup at most.
pub const MAX_PROCS_NAMED: usize = 20;
const PAGE_BYTES: u64 = 4096;

/// A process, named.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcName {
    pub pid: i32,
    pub comm: String,
}

/// One limited memory cgroup at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemcgState {
    /// 1 or 2.
    pub version: u8,
    /// Path inside its hierarchy (`/a/b`).
    pub name: String,
    /// The directory to look in (`/sys/fs/cgroup/memory/a/b`).
    pub shown_dir: String,
    pub limit_bytes: u64,
    pub usage_bytes: u64,
    /// Pages refaulted since the cgroup was made (file and anonymous).
    pub refaulted_pages: u64,
    /// Processes in it and its descendants (at most [`MAX_PROCS_NAMED`]).
    pub processes: Vec<ProcName>,
}

/// Every limited memory cgroup, or why none could be read.
pub fn read_all(root: &Path) -> Result<Vec<MemcgState>, String> {
    let mounts = procfs::cgroup_mounts(root);
    let v1: Vec<&CgroupMount> = mounts
        .iter()
        .filter(|m| !m.v2 && m.controllers.iter().any(|c| c == "memory"))
        .collect();
    let v2: Vec<&CgroupMount> = mounts
        .iter()
        .filter(|m| {
            m.v2 && procfs::read(&m.path.join("cgroup.controllers"))
                .is_some_and(|c| c.split_whitespace().any(|c| c == "memory"))
        })
        .collect();
    if v1.is_empty() && v2.is_empty() {
        return Err("no memory cgroup hierarchy is mounted (neither a v1 `memory` hierarchy nor cgroup v2 with the memory controller)".into());
    }
    let mut out = Vec::new();
    for m in v1 {
        for dir in procfs::cgroup_dirs(&m.path) {
            if let Some(s) = read_v1(root, m, &dir) {
                out.push(s);
            }
        }
    }
    for m in v2 {
        for dir in procfs::cgroup_dirs(&m.path) {
            if let Some(s) = read_v2(root, m, &dir) {
                out.push(s);
            }
        }
    }
    Ok(out)
}

fn read_v1(root: &Path, m: &CgroupMount, dir: &Path) -> Option<MemcgState> {
    let own = procfs::number(&dir.join("memory.limit_in_bytes"))?;
    let stat = procfs::read(&dir.join("memory.stat")).unwrap_or_default();
    let limit = own.min(procfs::counter(&stat, "hierarchical_memory_limit").unwrap_or(u64::MAX));
    if limit >= UNLIMITED {
        return None;
    }
    let refaulted = sum_counters(
        &stat,
        &[
            "total_workingset_refault_file",
            "total_workingset_refault_anon",
        ],
    )
    .or_else(|| sum_counters(&stat, &["total_workingset_refault"]))
    .or_else(|| {
        sum_counters(
            &stat,
            &["workingset_refault_file", "workingset_refault_anon"],
        )
    })
    .unwrap_or(0);
    Some(state(
        root,
        m,
        dir,
        1,
        limit,
        procfs::number(&dir.join("memory.usage_in_bytes")).unwrap_or(0),
        refaulted,
    ))
}

fn read_v2(root: &Path, m: &CgroupMount, dir: &Path) -> Option<MemcgState> {
    let limit = procfs::number(&dir.join("memory.max"))?; // "max": no limit
    if limit >= UNLIMITED {
        return None;
    }
    let stat = procfs::read(&dir.join("memory.stat")).unwrap_or_default();
    let refaulted = sum_counters(
        &stat,
        &["workingset_refault_file", "workingset_refault_anon"],
    )
    .or_else(|| sum_counters(&stat, &["workingset_refault"]))
    .unwrap_or(0);
    Some(state(
        root,
        m,
        dir,
        2,
        limit,
        procfs::number(&dir.join("memory.current")).unwrap_or(0),
        refaulted,
    ))
}

fn state(
    root: &Path,
    m: &CgroupMount,
    dir: &Path,
    version: u8,
    limit_bytes: u64,
    usage_bytes: u64,
    refaulted_pages: u64,
) -> MemcgState {
    let name = procfs::cgroup_name(&m.path, dir);
    MemcgState {
        version,
        shown_dir: format!("{}{}", m.shown.trim_end_matches('/'), name).replace("//", "/"),
        name,
        limit_bytes,
        usage_bytes,
        refaulted_pages,
        processes: subtree_processes(root, dir),
    }
}

/// The processes of a cgroup and its descendants, named.
pub fn subtree_processes(root: &Path, dir: &Path) -> Vec<ProcName> {
    procfs::cgroup_dirs(dir)
        .iter()
        .flat_map(|d| procfs::cgroup_procs(d))
        .take(MAX_PROCS_NAMED)
        .map(|pid| ProcName {
            pid,
            comm: procfs::comm(root, pid),
        })
        .collect()
}

/// The sum of the counters present, `None` when none is.
fn sum_counters(stat: &str, keys: &[&str]) -> Option<u64> {
    let values: Vec<u64> = keys
        .iter()
        .filter_map(|k| procfs::counter(stat, k))
        .collect();
    (!values.is_empty()).then(|| values.iter().sum())
}

/// A cgroup near its limit refaulting over the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Thrashing {
    pub cgroup: MemcgState,
    pub usage_share: f64,
    pub refaulted_bytes: u64,
    pub refault_bytes_per_s: f64,
}

/// The cgroups of `after` near their limit whose refaults since `before`
/// reach [`MIN_REFAULT_BYTES_PER_S`] over `seconds`.
pub fn thrashing(before: &[MemcgState], after: &[MemcgState], seconds: f64) -> Vec<Thrashing> {
    let mut out = Vec::new();
    for a in after {
        let Some(b) = before
            .iter()
            .find(|b| b.version == a.version && b.shown_dir == a.shown_dir)
        else {
            continue; // made during the window: no rate yet
        };
        let usage = a.usage_bytes.max(b.usage_bytes);
        let usage_share = usage as f64 / a.limit_bytes.max(1) as f64;
        let refaulted_bytes = a.refaulted_pages.saturating_sub(b.refaulted_pages) * PAGE_BYTES;
        let rate = refaulted_bytes as f64 / seconds.max(1e-3);
        if usage_share >= NEAR_LIMIT_SHARE && rate >= MIN_REFAULT_BYTES_PER_S {
            out.push(Thrashing {
                cgroup: a.clone(),
                usage_share,
                refaulted_bytes,
                refault_bytes_per_s: rate,
            });
        }
    }
    out.sort_by(|x, y| y.refault_bytes_per_s.total_cmp(&x.refault_bytes_per_s));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::FakeRoot;

    const MIB: u64 = 1 << 20;

    fn v1_tree(refaults: u64, usage: u64) -> FakeRoot {
        let fake = FakeRoot::new();
        fake.file(
            "proc/mounts",
            "cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n",
        );
        let root = "sys/fs/cgroup/memory";
        fake.file(
            &format!("{root}/memory.limit_in_bytes"),
            "9223372036854771712\n",
        );
        fake.file(&format!("{root}/memory.usage_in_bytes"), "123456789\n");
        fake.file(
            &format!("{root}/memory.stat"),
            "total_workingset_refault_file 999999\n",
        );
        fake.file(&format!("{root}/cgroup.procs"), "1\n");
        let cg = format!("{root}/capped");
        fake.file(
            &format!("{cg}/memory.limit_in_bytes"),
            &(16 * MIB).to_string(),
        );
        fake.file(&format!("{cg}/memory.usage_in_bytes"), &usage.to_string());
        fake.file(
            &format!("{cg}/memory.stat"),
            &format!(
                "cache 1\nworkingset_refault_file 5\nhierarchical_memory_limit {}\n\
                 total_workingset_refault_anon 0\ntotal_workingset_refault_file {refaults}\n",
                64 * MIB
            ),
        );
        fake.file(&format!("{cg}/cgroup.procs"), "4242\n");
        fake.process(4242, "cat");
        fake
    }

    #[test]
    fn a_v1_cgroup_at_its_limit_refaulting_is_thrashing() {
        let before = read_all(v1_tree(1000, 16 * MIB - 4096).path()).unwrap();
        assert_eq!(before.len(), 1, "only the limited cgroup: {before:?}");
        let b = &before[0];
        assert_eq!(b.name, "/capped");
        assert_eq!(b.shown_dir, "/sys/fs/cgroup/memory/capped");
        assert_eq!(b.limit_bytes, 16 * MIB, "the lower of own and hierarchical");
        assert_eq!(b.refaulted_pages, 1000);
        assert_eq!(
            b.processes,
            vec![ProcName {
                pid: 4242,
                comm: "cat".into()
            }]
        );
        // 3 s, 1000 + 3 MiB/4 KiB pages: exactly 1 MiB/s.
        let after = read_all(v1_tree(1000 + 768, 16 * MIB).path()).unwrap();
        let t = thrashing(&before, &after, 3.0);
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].refaulted_bytes, 3 * MIB);
        // One page less is below the threshold.
        let after = read_all(v1_tree(1000 + 767, 16 * MIB).path()).unwrap();
        assert!(thrashing(&before, &after, 3.0).is_empty());
        // Refaulting far from the limit is no thrashing.
        let after = read_all(v1_tree(100_000, 8 * MIB).path()).unwrap();
        let before_low = read_all(v1_tree(1000, 8 * MIB).path()).unwrap();
        assert!(thrashing(&before_low, &after, 3.0).is_empty());
    }

    #[test]
    fn a_v2_cgroup_is_read_from_memory_max() {
        let fake = FakeRoot::new();
        fake.file("proc/mounts", "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n");
        fake.file("sys/fs/cgroup/cgroup.controllers", "cpu io memory pids\n");
        fake.file("sys/fs/cgroup/memory.stat", "workingset_refault_file 1\n");
        let cg = "sys/fs/cgroup/app.slice/job";
        fake.file(&format!("{cg}/memory.max"), &(32 * MIB).to_string());
        fake.file(&format!("{cg}/memory.current"), &(31 * MIB).to_string());
        fake.file(
            &format!("{cg}/memory.stat"),
            "anon 1\nworkingset_refault_anon 10\nworkingset_refault_file 90\n",
        );
        fake.file(&format!("{cg}/cgroup.procs"), "");
        fake.file(&format!("{cg}/sub/cgroup.procs"), "77\n");
        fake.file("sys/fs/cgroup/app.slice/memory.max", "max\n");
        fake.process(77, "scan");
        let s = read_all(fake.path()).unwrap();
        assert_eq!(s.len(), 1, "{s:?}");
        assert_eq!((s[0].version, s[0].name.as_str()), (2, "/app.slice/job"));
        assert_eq!(s[0].refaulted_pages, 100);
        assert_eq!(s[0].usage_bytes, 31 * MIB);
        assert_eq!(s[0].processes[0].comm, "scan");
    }

    #[test]
    fn no_hierarchy_is_a_reason() {
        let fake = FakeRoot::new();
        fake.file("proc/mounts", "proc /proc proc rw 0 0\n");
        assert!(read_all(fake.path())
            .unwrap_err()
            .contains("no memory cgroup"));
    }
}
