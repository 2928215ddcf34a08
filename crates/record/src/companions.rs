//! What slowlab records beside perf: the path strings of the syscalls
//! (`OUTPUT.paths`, the eBPF capture of `slowlab-bpf`) and notes on the
//! memory cgroups of the processes seen while recording
//! (`OUTPUT.cgroups.json`: which process was in which cgroup, the cgroups'
//! limits, and how many evicted pages each re-read while recording — the
//! kernel's workingset refaults — read while they still exist).
//!
//! Both are best effort: when one cannot run (not root, no BPF) the trace is
//! still recorded and a warning says what is missing. Nothing here runs
//! perf.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// `OUTPUT.SUFFIX`.
pub fn side_file(output: &Path, suffix: &str) -> PathBuf {
    let mut name = output.as_os_str().to_owned();
    name.push(".");
    name.push(suffix);
    PathBuf::from(name)
}

/// How often new processes' cgroups are looked up.
const CGROUP_POLL: Duration = Duration::from_millis(200);

/// The companions of one recording, running.
pub struct Companions {
    paths: Option<(slowlab_bpf::PathCapture, PathBuf)>,
    notes: Option<(Arc<AtomicBool>, JoinHandle<CgroupNotes>, PathBuf)>,
}

impl Companions {
    /// Starts the path capture (if `capture_paths`) and the cgroup notes;
    /// what cannot start becomes a warning.
    pub fn start(output: &Path, capture_paths: bool, warnings: &mut Vec<String>) -> Self {
        let paths = if capture_paths {
            let file = side_file(output, "paths");
            match slowlab_bpf::PathCapture::start(&file) {
                Ok(capture) => Some((capture, file)),
                Err(e) => {
                    warnings.push(format!(
                        "syscall paths are not captured ({e}); the trace has everything else"
                    ));
                    None
                }
            }
        } else {
            None
        };
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let notes = std::thread::Builder::new()
            .name("cgroup-notes".into())
            .spawn(move || {
                let mut notes = CgroupNotes::default();
                let mut noted = HashSet::new();
                loop {
                    notes.poll(&mut noted);
                    if flag.load(Ordering::Relaxed) {
                        return notes;
                    }
                    std::thread::sleep(CGROUP_POLL);
                }
            })
            .ok()
            .map(|handle| (stop, handle, side_file(output, "cgroups.json")));
        Companions { paths, notes }
    }

    /// Stops both and removes what they wrote (the recording failed: no
    /// side file is left looking like part of a complete trace).
    pub fn discard(self) {
        if let Some((capture, file)) = self.paths {
            let _ = capture.stop();
            let _ = std::fs::remove_file(file);
        }
        if let Some((stop, handle, _)) = self.notes {
            stop.store(true, Ordering::Relaxed);
            let _ = handle.join();
        }
    }

    /// Stops both and writes the cgroup notes; returns the files written.
    pub fn stop(self, warnings: &mut Vec<String>) -> Vec<PathBuf> {
        let mut files = Vec::new();
        if let Some((capture, file)) = self.paths {
            match capture.stop() {
                Ok(stats) => {
                    if stats.drops > 0 {
                        warnings.push(format!(
                            "{} syscall paths were dropped (the capture could not keep up)",
                            stats.drops
                        ));
                    }
                    files.push(file);
                }
                Err(e) => warnings.push(format!("the path capture failed: {e}")),
            }
        }
        if let Some((stop, handle, file)) = self.notes {
            stop.store(true, Ordering::Relaxed);
            if let Ok(notes) = handle.join() {
                if !notes.processes.is_empty() {
                    match serde_json::to_vec(&notes)
                        .map_err(std::io::Error::other)
                        .and_then(|bytes| std::fs::write(&file, bytes))
                    {
                        Ok(()) => files.push(file),
                        Err(e) => warnings.push(format!(
                            "cannot write the cgroup notes {}: {e}",
                            file.display()
                        )),
                    }
                }
            }
        }
        files
    }
}

/// Processes in memory cgroups with a limit, those limits, and the pages
/// each of those cgroups refaulted (read back in soon after evicting them)
/// between the first and the last time the notes looked; the JSON of
/// `OUTPUT.cgroups.json`:
/// `{"processes":{"PID":"CGROUP"},"limits":{"CGROUP":BYTES},"refaults":{"CGROUP":PAGES}}`.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct CgroupNotes {
    pub processes: BTreeMap<String, String>,
    pub limits: BTreeMap<String, u64>,
    #[serde(default)]
    pub refaults: BTreeMap<String, u64>,
    /// Per cgroup: its `memory.stat` file and the refault count first read.
    #[serde(skip)]
    watched: BTreeMap<String, (PathBuf, u64)>,
}

impl CgroupNotes {
    /// Looks up the memory cgroup of every process not yet noted in a
    /// limited one. Processes outside limited cgroups are looked at again
    /// on every poll: a launcher often moves itself into a cgroup after it
    /// started (`echo $$ > cgroup.procs; exec …`).
    fn poll(&mut self, noted: &mut HashSet<u32>) {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return;
        };
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if noted.contains(&pid) {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(entry.path().join("cgroup")) else {
                continue;
            };
            let Some((cgroup, limit_file)) = memory_cgroup(&text) else {
                continue;
            };
            if cgroup == "/" {
                continue;
            }
            let limit = match self.limits.get(&cgroup) {
                Some(&l) => Some(l),
                None => read_limit(&limit_file).inspect(|&l| {
                    self.limits.insert(cgroup.clone(), l);
                    let stat = limit_file.with_file_name("memory.stat");
                    if let Some(first) = read_refaults(&stat) {
                        self.watched.insert(cgroup.clone(), (stat, first));
                    }
                }),
            };
            if limit.is_some() {
                noted.insert(pid);
                self.processes.insert(pid.to_string(), cgroup);
            }
        }
        // The refaults so far of every limited cgroup seen; a cgroup removed
        // since keeps the count of the last look.
        for (cgroup, (stat, first)) in &self.watched {
            if let Some(now) = read_refaults(stat) {
                self.refaults
                    .insert(cgroup.clone(), now.saturating_sub(*first));
            }
        }
    }
}

/// Pages a memory cgroup refaulted so far: `workingset_refault_file` plus
/// `workingset_refault_anon` of its `memory.stat` (v1 and v2 alike; older
/// kernels have one `workingset_refault`).
fn read_refaults(stat: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(stat).ok()?;
    parse_refaults(&text)
}

fn parse_refaults(memory_stat: &str) -> Option<u64> {
    let mut total = None;
    for line in memory_stat.lines() {
        let mut words = line.split_whitespace();
        let (Some(key), Some(value)) = (words.next(), words.next()) else {
            continue;
        };
        if matches!(
            key,
            "workingset_refault_file" | "workingset_refault_anon" | "workingset_refault"
        ) {
            if let Ok(v) = value.parse::<u64>() {
                *total.get_or_insert(0) += v;
            }
        }
    }
    total
}

/// The memory cgroup path of a process from its `/proc/PID/cgroup`, and the
/// file holding that cgroup's limit (v1 `memory.limit_in_bytes`, else v2
/// `memory.max`).
pub fn memory_cgroup(proc_cgroup: &str) -> Option<(String, PathBuf)> {
    let mut v2 = None;
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        if controllers.split(',').any(|c| c == "memory") {
            let file = Path::new("/sys/fs/cgroup/memory")
                .join(path.trim_start_matches('/'))
                .join("memory.limit_in_bytes");
            return Some((path.to_string(), file));
        }
        if controllers.is_empty() {
            v2 = Some(path.to_string());
        }
    }
    let path = v2?;
    let file = Path::new("/sys/fs/cgroup")
        .join(path.trim_start_matches('/'))
        .join("memory.max");
    Some((path, file))
}

/// A limit in bytes; `None` for "no limit" (v2 `max`, v1's huge default)
/// or an unreadable file.
fn read_limit(file: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(file).ok()?;
    let value: u64 = text.trim().parse().ok()?;
    (value < 1 << 60).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_memory_cgroup_in_v1_and_v2_lines() {
        let v1 = "12:pids:/user.slice\n4:memory:/slowlab-x-capped\n0::/init.scope\n";
        let (cg, file) = memory_cgroup(v1).unwrap();
        assert_eq!(cg, "/slowlab-x-capped");
        assert_eq!(
            file,
            PathBuf::from("/sys/fs/cgroup/memory/slowlab-x-capped/memory.limit_in_bytes")
        );
        let (cg, file) = memory_cgroup("0::/box.slice/app\n").unwrap();
        assert_eq!(cg, "/box.slice/app");
        assert_eq!(
            file,
            PathBuf::from("/sys/fs/cgroup/box.slice/app/memory.max")
        );
    }

    #[test]
    fn refaults_add_file_and_anonymous_and_skip_the_hierarchy_totals() {
        let stat = "cache 32010240\nworkingset_refault_anon 7\nworkingset_refault_file 499422\n\
                    total_workingset_refault_anon 9\ntotal_workingset_refault_file 1\n";
        assert_eq!(parse_refaults(stat), Some(499429));
        assert_eq!(parse_refaults("workingset_refault 12\n"), Some(12));
        assert_eq!(parse_refaults("cache 1\n"), None);
    }

    #[test]
    fn notes_without_refaults_still_parse() {
        let notes: CgroupNotes =
            serde_json::from_str(r#"{"processes":{"1":"/a"},"limits":{"/a":4096}}"#).unwrap();
        assert!(notes.refaults.is_empty());
    }

    #[test]
    fn side_files_sit_beside_the_trace() {
        assert_eq!(
            side_file(Path::new("d/trace.data"), "paths"),
            PathBuf::from("d/trace.data.paths")
        );
    }

    #[test]
    fn polling_this_machine_does_not_fail() {
        let mut notes = CgroupNotes::default();
        notes.poll(&mut HashSet::new());
        // Every noted process has a noted limit.
        for cg in notes.processes.values() {
            assert!(notes.limits.contains_key(cg));
        }
    }
}
