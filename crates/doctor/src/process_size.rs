//! Processes with very many memory mappings or threads. Every mapping
//! change and page fault of such a process contends on one address-space
//! lock, `fork` copies every mapping, and whatever reads `/proc/PID/maps`
//! (profilers, monitors, `ps`) takes that lock for a long time; thousands
//! of threads make every scheduler walk and `/proc` read over them slow.
//!
//! Read from `ROOT/proc/PID/status` (`Threads:`) and the lines of
//! `ROOT/proc/PID/maps`. Thresholds: [`MANY_MAPPINGS`], [`MANY_THREADS`].

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::procfs;

/// Mappings from which a process is reported (the kernel's default
/// `vm.max_map_count` is 65530).
pub const MANY_MAPPINGS: u64 = 20_000;
/// Threads from which a process is reported.
pub const MANY_THREADS: u64 = 2_000;

/// A process at or above a threshold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LargeProcess {
    pub pid: i32,
    pub comm: String,
    pub mappings: u64,
    pub threads: u64,
}

/// What the scan found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SizeScan {
    /// At or above a threshold, most mappings first.
    pub large: Vec<LargeProcess>,
    pub processes: u32,
    /// Processes whose mappings could not be read (not allowed).
    pub unreadable: u32,
}

/// Counts threads and mappings of every process.
pub fn scan(root: &Path) -> SizeScan {
    let mut out = SizeScan::default();
    for pid in procfs::pids(root) {
        let dir = procfs::proc_dir(root, pid);
        let Some(status) = procfs::read(&dir.join("status")) else {
            continue;
        };
        out.processes += 1;
        let threads = status
            .lines()
            .find_map(|l| l.strip_prefix("Threads:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(1);
        let mappings = match std::fs::File::open(dir.join("maps")) {
            Ok(_) => procfs::count_lines(&dir.join("maps")).unwrap_or(0),
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                out.unreadable += 1;
                0
            }
            Err(_) => 0,
        };
        if mappings >= MANY_MAPPINGS || threads >= MANY_THREADS {
            out.large.push(LargeProcess {
                pid,
                comm: procfs::comm(root, pid),
                mappings,
                threads,
            });
        }
    }
    out.large
        .sort_by(|a, b| b.mappings.cmp(&a.mappings).then(b.threads.cmp(&a.threads)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::FakeRoot;

    #[test]
    fn processes_at_a_threshold_are_reported() {
        let fake = FakeRoot::new();
        let maps = |n: u64| "7f00-7f01 r--p 0 0:0 0\n".repeat(n as usize);
        for (pid, comm, mappings, threads) in [
            (1, "small", 10, 1),
            (2, "mapper", MANY_MAPPINGS, 1),
            (3, "almost", MANY_MAPPINGS - 1, MANY_THREADS - 1),
            (4, "threads", 5, MANY_THREADS),
        ] {
            fake.process(pid, comm);
            fake.file(
                &format!("proc/{pid}/status"),
                &format!("Name:\t{comm}\nThreads:\t{threads}\n"),
            );
            fake.file(&format!("proc/{pid}/maps"), &maps(mappings));
        }
        let s = scan(fake.path());
        let names: Vec<&str> = s.large.iter().map(|p| p.comm.as_str()).collect();
        assert_eq!(names, vec!["mapper", "threads"]);
        assert_eq!(s.large[0].mappings, MANY_MAPPINGS);
        assert_eq!(s.processes, 4);
    }
}
