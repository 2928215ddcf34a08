//! Cgroups whose CPU quota throttles them: their processes are stopped
//! for the rest of each period once the quota is spent, so their latency
//! jumps by up to a period even on an idle machine.
//!
//! Read from `cpu.stat` of every cgroup of a v1 hierarchy with the `cpu`
//! controller (`nr_periods`, `nr_throttled`, `throttled_time` in ns) and of
//! a cgroup v2 hierarchy (`throttled_usec`), twice; the processes named are
//! those in the cgroup and its descendants.
//!
//! Threshold: throttled for at least [`MIN_THROTTLED_SHARE`] of the window
//! between the two readings (the kernel sums throttled time over the
//! cgroup's CPUs).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::memcg::{subtree_processes, ProcName};
use crate::procfs;

/// Throttled time, as a share of the window, from which a cgroup is
/// reported.
pub const MIN_THROTTLED_SHARE: f64 = 0.05;

/// One cgroup's CPU bandwidth counters at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuState {
    pub version: u8,
    pub name: String,
    pub shown_dir: String,
    pub nr_periods: u64,
    pub nr_throttled: u64,
    pub throttled_ns: u64,
    /// Named only for cgroups already throttled at some time.
    pub processes: Vec<ProcName>,
}

/// Every cgroup with CPU bandwidth counters, or why there are none.
pub fn read_all(root: &Path) -> Result<Vec<CpuState>, String> {
    let mounts: Vec<_> = procfs::cgroup_mounts(root)
        .into_iter()
        .filter(|m| m.v2 || m.controllers.iter().any(|c| c == "cpu"))
        .collect();
    if mounts.is_empty() {
        return Err("no cgroup hierarchy with the cpu controller is mounted".into());
    }
    let mut out = Vec::new();
    for m in &mounts {
        for dir in procfs::cgroup_dirs(&m.path) {
            let Some(stat) = procfs::read(&dir.join("cpu.stat")) else {
                continue;
            };
            let Some(nr_periods) = procfs::counter(&stat, "nr_periods") else {
                continue;
            };
            let throttled_ns = if m.v2 {
                procfs::counter(&stat, "throttled_usec").map(|us| us * 1000)
            } else {
                procfs::counter(&stat, "throttled_time")
            }
            .unwrap_or(0);
            let nr_throttled = procfs::counter(&stat, "nr_throttled").unwrap_or(0);
            let name = procfs::cgroup_name(&m.path, &dir);
            out.push(CpuState {
                version: if m.v2 { 2 } else { 1 },
                shown_dir: format!("{}{}", m.shown.trim_end_matches('/'), name).replace("//", "/"),
                name,
                nr_periods,
                nr_throttled,
                throttled_ns,
                processes: if nr_throttled > 0 {
                    subtree_processes(root, &dir)
                } else {
                    Vec::new()
                },
            });
        }
    }
    Ok(out)
}

/// A cgroup throttled during the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Throttled {
    pub cgroup: CpuState,
    pub throttled_s: f64,
    pub throttled_share: f64,
    pub periods: u64,
    pub throttled_periods: u64,
}

/// The cgroups throttled for at least [`MIN_THROTTLED_SHARE`] of `seconds`
/// between `before` and `after`, most throttled first.
pub fn throttled(before: &[CpuState], after: &[CpuState], seconds: f64) -> Vec<Throttled> {
    let mut out = Vec::new();
    for a in after {
        let Some(b) = before.iter().find(|b| b.shown_dir == a.shown_dir) else {
            continue;
        };
        let throttled_s = a.throttled_ns.saturating_sub(b.throttled_ns) as f64 / 1e9;
        let share = throttled_s / seconds.max(1e-3);
        if share >= MIN_THROTTLED_SHARE {
            out.push(Throttled {
                cgroup: a.clone(),
                throttled_s,
                throttled_share: share,
                periods: a.nr_periods.saturating_sub(b.nr_periods),
                throttled_periods: a.nr_throttled.saturating_sub(b.nr_throttled),
            });
        }
    }
    out.sort_by(|x, y| y.throttled_s.total_cmp(&x.throttled_s));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::FakeRoot;

    fn tree(throttled_ns: u64) -> FakeRoot {
        let fake = FakeRoot::new();
        fake.file(
            "proc/mounts",
            "cgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\n",
        );
        fake.file(
            "sys/fs/cgroup/cpu/cpu.stat",
            "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n",
        );
        fake.file(
            "sys/fs/cgroup/cpu/quota/cpu.stat",
            &format!("nr_periods 300\nnr_throttled 250\nthrottled_time {throttled_ns}\n"),
        );
        fake.file("sys/fs/cgroup/cpu/quota/cgroup.procs", "9\n");
        fake.process(9, "spin");
        fake
    }

    #[test]
    fn a_throttled_cgroup_is_found_at_the_threshold() {
        let before = read_all(tree(1_000).path()).unwrap();
        assert_eq!(before.len(), 2);
        // 2 s window: 5% is 100 ms.
        let after = read_all(tree(1_000 + 100_000_000).path()).unwrap();
        let t = throttled(&before, &after, 2.0);
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].cgroup.name, "/quota");
        assert_eq!(t[0].cgroup.processes[0].comm, "spin");
        let after = read_all(tree(1_000 + 99_999_999).path()).unwrap();
        assert!(throttled(&before, &after, 2.0).is_empty());
    }

    #[test]
    fn v2_counts_microseconds() {
        let fake = FakeRoot::new();
        fake.file("proc/mounts", "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n");
        fake.file(
            "sys/fs/cgroup/job/cpu.stat",
            "usage_usec 5\nnr_periods 10\nnr_throttled 3\nthrottled_usec 7\n",
        );
        let s = read_all(fake.path()).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].throttled_ns, 7000);
    }
}
