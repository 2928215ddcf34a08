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
//!
//! In ring mode ([`Companions::start_with`] with a window) both are rings
//! like perf's: they hold only the last window (the paths in memory, bounded
//! in bytes too, 32 MiB or `SLOWLAB_PATH_RING_MAX_BYTES`; the processes seen
//! and the refaults counted within the window), write it for each snapshot
//! ([`Companions::snapshot`]) and at the stop, and write nothing in between,
//! however long the recording runs.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use slowlab_model::bundle::side_file;

/// The window of [`Companions::start_path_ring`] and of [`crate::BpfRuns`]: what they
/// hold is let go by a forget, not by its age (their bytes still bound it).
pub(crate) const NO_AGE_LIMIT: Duration = Duration::from_secs(365 * 24 * 3600);

/// How often new processes' cgroups are looked up: `/proc` is listed when the kernel
/// handed out a pid since the last listing (`/proc/loadavg`'s last field, [`last_pid`]) or
/// a process seen is younger than [`NEW_PROCESS`], and at least every [`QUIET_LISTING`].
/// (Listing `/proc` five times a second was most of an idle flight recorder's CPU: ~2.5
/// ms a second here, for 70 processes.)
const CGROUP_POLL: Duration = Duration::from_millis(200);
const QUIET_LISTING: Duration = Duration::from_secs(1);

/// A process outside limited cgroups is looked at again on every listing for
/// this long after it was first seen (a launcher moves itself into a cgroup
/// as it starts), then every [`SETTLED_POLL`]: each look is two traced
/// syscalls in the trace being recorded.
const NEW_PROCESS: Duration = Duration::from_secs(2);
const SETTLED_POLL: Duration = Duration::from_secs(5);

/// The cgroup notes being taken: the notes (shared with the polling
/// thread), its stop flag and handle, and the final file.
type NotesThread = (
    Arc<Mutex<CgroupNotes>>,
    Arc<AtomicBool>,
    JoinHandle<()>,
    PathBuf,
);

/// The companions of one recording, running.
pub struct Companions {
    paths: Option<(slowlab_bpf::PathCapture, PathBuf)>,
    notes: Option<NotesThread>,
    /// The output's side files as they may be left from an earlier recording of the
    /// same name: those this one does not write are removed when it stops.
    side_files: [PathBuf; 2],
}

impl Companions {
    /// Starts the path capture (if `capture_paths`) and the cgroup notes;
    /// what cannot start becomes a warning.
    pub fn start(output: &Path, capture_paths: bool, warnings: &mut Vec<String>) -> Self {
        Companions::start_with(output, capture_paths, None, warnings)
    }

    /// [`Companions::start`] for a recording that ends with its command: the path capture
    /// takes the syscalls perf does not record from the raw `sys_enter` tracepoint
    /// ([`slowlab_bpf::CaptureOptions::raw_enter`]), whose detach does not keep slowlab
    /// from exiting for ~1 s after the command, as their own tracepoints' do.
    pub fn start_of_command(
        output: &Path,
        capture_paths: bool,
        warnings: &mut Vec<String>,
    ) -> Self {
        Companions {
            paths: start_paths(output, capture_paths, None, true, warnings),
            notes: start_notes(output, None),
            side_files: side_files(output),
        }
    }

    /// [`Companions::start`], in ring mode when `window` is given: only the
    /// last `window` is kept (see the module documentation).
    pub fn start_with(
        output: &Path,
        capture_paths: bool,
        window: Option<Duration>,
        warnings: &mut Vec<String>,
    ) -> Self {
        Companions {
            paths: start_paths(output, capture_paths, window, false, warnings),
            notes: start_notes(output, window),
            side_files: side_files(output),
        }
    }

    /// The path capture alone (if `capture_paths`), in ring mode with no age limit: each
    /// [`Companions::forget`] lets go of what it holds, each [`Companions::snapshot`]
    /// writes what came since (one recording cut into runs, [`crate::PerfRuns`], with the
    /// cgroup notes of each run its own). Its runs are commands' runs: the raw `sys_enter`
    /// tracepoint, as [`Companions::start_of_command`].
    pub fn start_path_ring(output: &Path, capture_paths: bool, warnings: &mut Vec<String>) -> Self {
        Companions {
            paths: start_paths(output, capture_paths, Some(NO_AGE_LIMIT), true, warnings),
            notes: None,
            side_files: side_files(output),
        }
    }

    /// Ring mode: lets go of the paths captured so far (see [`Companions::start_path_ring`]).
    pub fn forget(&self, warnings: &mut Vec<String>) {
        if let Some((capture, _)) = &self.paths {
            if let Err(e) = capture.forget() {
                warnings.push(format!("the path capture: {e}"));
            }
        }
    }

    /// Whether the path capture runs.
    pub fn has_paths(&self) -> bool {
        self.paths.is_some()
    }

    /// Ring mode: writes the side files of the snapshot `trace` (its
    /// `.paths` and `.cgroups.json`) from the window ending now, and keeps
    /// going; returns the files written.
    pub fn snapshot(&self, trace: &Path, warnings: &mut Vec<String>) -> Vec<PathBuf> {
        let mut files = Vec::new();
        if let Some((capture, _)) = &self.paths {
            let file = side_file(trace, "paths");
            match capture.snapshot(&file) {
                Ok(_) => files.push(file),
                Err(e) => warnings.push(format!("the path capture of {}: {e}", trace.display())),
            }
        }
        if let Some((shared, ..)) = &self.notes {
            let notes = shared.lock().unwrap_or_else(|e| e.into_inner());
            let file = side_file(trace, "cgroups.json");
            if let Some(written) = write_notes(&notes, &file, warnings) {
                files.push(written);
            }
        }
        files
    }

    /// Stops both and removes what they wrote (the recording failed: no
    /// side file is left looking like part of a complete trace).
    pub fn discard(self) {
        if let Some((capture, file)) = self.paths {
            let _ = capture.stop();
            let _ = std::fs::remove_file(file);
        }
        if let Some((_, stop, handle, _)) = self.notes {
            stop.store(true, Ordering::Relaxed);
            let _ = handle.join();
        }
    }

    /// Stops both and writes the cgroup notes; returns the files written. An earlier
    /// recording's side file of the same name that this one did not write (no path
    /// capture, or no notes) is removed: beside the new trace it would be read as its.
    pub fn stop(self, warnings: &mut Vec<String>) -> Vec<PathBuf> {
        let side_files = self.side_files.clone();
        let files = self.stop_both(warnings);
        for stale in side_files.iter().filter(|f| !files.contains(f)) {
            let _ = std::fs::remove_file(stale);
        }
        files
    }

    fn stop_both(self, warnings: &mut Vec<String>) -> Vec<PathBuf> {
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
        if let Some((shared, stop, handle, file)) = self.notes {
            stop.store(true, Ordering::Relaxed);
            if handle.join().is_ok() {
                let notes = shared.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(written) = write_notes(&notes, &file, warnings) {
                    files.push(written);
                }
            }
        }
        files
    }
}

/// The side files of `output` the companions write.
fn side_files(output: &Path) -> [PathBuf; 2] {
    [
        side_file(output, "paths"),
        side_file(output, "cgroups.json"),
    ]
}

/// Starts the path capture into `OUTPUT.paths` if `capture_paths` (in ring mode with a
/// `window`; on the raw `sys_enter` tracepoint with `raw_enter`); what cannot start
/// becomes a warning.
fn start_paths(
    output: &Path,
    capture_paths: bool,
    window: Option<Duration>,
    raw_enter: bool,
    warnings: &mut Vec<String>,
) -> Option<(slowlab_bpf::PathCapture, PathBuf)> {
    if !capture_paths {
        return None;
    }
    let file = side_file(output, "paths");
    let options = slowlab_bpf::CaptureOptions {
        ring: window.map(|keep| slowlab_bpf::RingOptions {
            keep,
            max_bytes: crate::overrides::from_env("SLOWLAB_PATH_RING_MAX_BYTES")
                .unwrap_or(slowlab_bpf::DEFAULT_RING_MAX_BYTES),
        }),
        raw_enter,
        ..slowlab_bpf::CaptureOptions::default()
    };
    match slowlab_bpf::PathCapture::start_with(&file, &options) {
        Ok(capture) => Some((capture, file)),
        Err(e) => {
            warnings.push(format!(
                "syscall paths are not captured ({e}); the trace has everything else"
            ));
            None
        }
    }
}

/// Starts the thread that takes the cgroup notes of `output` (in ring mode with a
/// `window`).
fn start_notes(output: &Path, window: Option<Duration>) -> Option<NotesThread> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let shared = Arc::new(Mutex::new(CgroupNotes {
        window,
        ..CgroupNotes::default()
    }));
    let mine = Arc::clone(&shared);
    std::thread::Builder::new()
        .name("cgroup-notes".into())
        .spawn(move || {
            let mut noted = HashSet::new();
            // When `/proc` was last listed, and the last pid handed out then.
            let mut listed: Option<(Instant, Option<u64>)> = None;
            loop {
                let now = Instant::now();
                let pid = last_pid();
                if let Ok(mut notes) = mine.lock() {
                    let due = notes.settling(now)
                        || listed.is_none_or(|(at, before)| {
                            pid.is_none()
                                || pid != before
                                || now.duration_since(at) >= QUIET_LISTING
                        });
                    if due {
                        listed = Some((now, pid));
                        notes.poll(&mut noted, now);
                    }
                }
                if flag.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(CGROUP_POLL);
            }
        })
        .ok()
        .map(|handle| (shared, stop, handle, side_file(output, "cgroups.json")))
}

/// Writes `notes` to `file` (through a temporary name) unless they are
/// empty; a failure becomes a warning.
fn write_notes(notes: &CgroupNotes, file: &Path, warnings: &mut Vec<String>) -> Option<PathBuf> {
    if notes.processes.is_empty() {
        return None;
    }
    let partial = side_file(file, "partial");
    match serde_json::to_vec(notes)
        .map_err(std::io::Error::other)
        .and_then(|bytes| std::fs::write(&partial, bytes))
        .and_then(|()| std::fs::rename(&partial, file))
    {
        Ok(()) => Some(file.to_owned()),
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            warnings.push(format!(
                "cannot write the cgroup notes {}: {e}",
                file.display()
            ));
            None
        }
    }
}

/// Processes in memory cgroups with a limit, those limits, and the pages
/// each of those cgroups refaulted (read back in soon after evicting them)
/// between the first and the last time the notes looked (in ring mode:
/// within the window); the JSON of `OUTPUT.cgroups.json`:
/// `{"processes":{"PID":"CGROUP"},"limits":{"CGROUP":BYTES},"refaults":{"CGROUP":PAGES}}`.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct CgroupNotes {
    pub processes: BTreeMap<String, String>,
    pub limits: BTreeMap<String, u64>,
    #[serde(default)]
    pub refaults: BTreeMap<String, u64>,
    /// Per cgroup: its `memory.stat` file and the refault counts read, the
    /// first one the baseline (in ring mode, the last one read before the
    /// window).
    #[serde(skip)]
    watched: BTreeMap<String, (PathBuf, VecDeque<(Instant, u64)>)>,
    /// Ring mode: the window kept.
    #[serde(skip)]
    window: Option<Duration>,
    /// Ring mode: when each noted process was last seen.
    #[serde(skip)]
    seen: BTreeMap<u32, Instant>,
    /// Processes seen outside limited cgroups: when first seen, when last
    /// looked at.
    #[serde(skip)]
    unlimited: BTreeMap<u32, (Instant, Instant)>,
}

impl CgroupNotes {
    /// Whether a process seen outside limited cgroups is still new: it may move itself
    /// into one, and is looked at on every poll until [`NEW_PROCESS`] has passed.
    fn settling(&self, now: Instant) -> bool {
        self.unlimited
            .values()
            .any(|&(first, _)| now.duration_since(first) <= NEW_PROCESS)
    }

    /// Looks up the memory cgroup of every process not yet noted in a
    /// limited one. Processes outside limited cgroups are looked at again
    /// on every poll: a launcher often moves itself into a cgroup after it
    /// started (`echo $$ > cgroup.procs; exec …`), at first on every poll,
    /// after [`NEW_PROCESS`] every [`SETTLED_POLL`]. In ring mode, what was
    /// last seen before the window is let go.
    fn poll(&mut self, noted: &mut HashSet<u32>, now: Instant) {
        let mut text = String::new();
        let mut alive = HashSet::new();
        for pid in pids(Path::new("/proc")) {
            if noted.contains(&pid) {
                if self.window.is_some() {
                    self.seen.insert(pid, now);
                }
                continue;
            }
            alive.insert(pid);
            if let Some(&(first, last)) = self.unlimited.get(&pid) {
                if now.duration_since(first) > NEW_PROCESS
                    && now.duration_since(last) < SETTLED_POLL
                {
                    continue;
                }
            }
            if !read_small(
                &Path::new("/proc").join(pid.to_string()).join("cgroup"),
                &mut text,
            ) {
                continue;
            }
            let first = self.unlimited.get(&pid).map_or(now, |&(first, _)| first);
            self.unlimited.insert(pid, (first, now));
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
                        let counts = VecDeque::from([(now, first)]);
                        self.watched.insert(cgroup.clone(), (stat, counts));
                    }
                }),
            };
            if limit.is_some() {
                noted.insert(pid);
                self.unlimited.remove(&pid);
                if self.window.is_some() {
                    self.seen.insert(pid, now);
                }
                self.processes.insert(pid.to_string(), cgroup);
            }
        }
        self.unlimited.retain(|pid, _| alive.contains(pid));
        // The refaults so far of every limited cgroup seen; a cgroup removed
        // since keeps the count of the last look.
        let start = self.window.and_then(|w| now.checked_sub(w));
        for (cgroup, (stat, counts)) in &mut self.watched {
            if let Some(count) = read_refaults(stat) {
                counts.push_back((now, count));
            }
            // The baseline: the first count, or in ring mode the last one
            // read at or before the window's start.
            while counts.len() > 2
                && match start {
                    Some(start) => counts[1].0 <= start,
                    None => true,
                }
            {
                if start.is_some() {
                    counts.pop_front();
                } else {
                    counts.remove(1);
                }
            }
            if let (Some(first), Some(last)) = (counts.front(), counts.back()) {
                self.refaults
                    .insert(cgroup.clone(), last.1.saturating_sub(first.1));
            }
        }
        if let Some(start) = start {
            self.forget_before(start, noted);
        }
    }

    /// Ring mode: lets go of the processes last seen before `start`, and of
    /// the cgroups no process kept is in.
    fn forget_before(&mut self, start: Instant, noted: &mut HashSet<u32>) {
        let gone: Vec<u32> = self
            .seen
            .iter()
            .filter(|(_, &t)| t < start)
            .map(|(&pid, _)| pid)
            .collect();
        for pid in gone {
            self.seen.remove(&pid);
            noted.remove(&pid);
            self.processes.remove(&pid.to_string());
        }
        let live: HashSet<&String> = self.processes.values().collect();
        let unused: Vec<String> = self
            .limits
            .keys()
            .filter(|cg| !live.contains(cg))
            .cloned()
            .collect();
        for cgroup in unused {
            self.limits.remove(&cgroup);
            self.refaults.remove(&cgroup);
            self.watched.remove(&cgroup);
        }
    }
}

/// Reads a small file (a /proc entry) into `text` with an open and reads:
/// no `statx` for a size hint, as `fs::read_to_string` makes (every
/// syscall here is an event of the trace being recorded).
fn read_small(path: &Path, text: &mut String) -> bool {
    use std::io::Read;
    text.clear();
    let Ok(mut file) = std::fs::File::open(path) else {
        return false;
    };
    let mut buf = [0u8; 4096];
    let mut bytes = Vec::new();
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&buf[..n]),
            Err(_) => return false,
        }
    }
    text.push_str(&String::from_utf8_lossy(&bytes));
    true
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

/// The last pid (or thread id) the kernel handed out, the last field of `/proc/loadavg`:
/// while it stays the same, no process was started.
fn last_pid() -> Option<u64> {
    let mut text = String::new();
    read_small(Path::new("/proc/loadavg"), &mut text)
        .then(|| text.split_whitespace().nth(4)?.parse().ok())
        .flatten()
}

/// The pids of the processes `proc` lists (its numeric entries); none when
/// it cannot be read.
pub(crate) fn pids(proc: &Path) -> impl Iterator<Item = u32> {
    std::fs::read_dir(proc)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
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
    fn the_last_pid_handed_out_moves_when_a_process_starts() {
        let before = last_pid().expect("/proc/loadavg has the last pid");
        let child = std::process::Command::new("true")
            .status()
            .expect("true runs");
        assert!(child.success());
        let after = last_pid().expect("/proc/loadavg has the last pid");
        assert_ne!(before, after, "a process started and the last pid stayed");
    }

    #[test]
    fn side_files_sit_beside_the_trace() {
        assert_eq!(
            side_file(Path::new("d/trace.data"), "paths"),
            PathBuf::from("d/trace.data.paths")
        );
    }

    #[test]
    fn ring_notes_forget_processes_and_cgroups_last_seen_before_the_window() {
        let t0 = Instant::now();
        let mut notes = CgroupNotes {
            window: Some(Duration::from_secs(3)),
            ..CgroupNotes::default()
        };
        let mut noted = HashSet::from([1, 2]);
        for (pid, cg, seen) in [(1, "/old", t0), (2, "/new", t0 + Duration::from_secs(5))] {
            notes.processes.insert(pid.to_string(), cg.to_string());
            notes.limits.insert(cg.to_string(), 4096);
            notes.refaults.insert(cg.to_string(), 7);
            notes.seen.insert(pid, seen);
        }
        notes.forget_before(t0 + Duration::from_secs(3), &mut noted);
        assert_eq!(notes.processes.keys().collect::<Vec<_>>(), ["2"]);
        assert_eq!(notes.limits.keys().collect::<Vec<_>>(), ["/new"]);
        assert_eq!(notes.refaults.keys().collect::<Vec<_>>(), ["/new"]);
        assert_eq!(noted, HashSet::from([2]));
    }

    #[test]
    fn small_files_are_read_whole() {
        let mut text = String::from("old");
        assert!(read_small(Path::new("/proc/self/cgroup"), &mut text));
        assert!(text.contains(':'), "{text}");
        assert!(!read_small(Path::new("/proc/self/no-such-file"), &mut text));
    }

    #[test]
    fn polling_this_machine_does_not_fail() {
        let mut notes = CgroupNotes::default();
        notes.poll(&mut HashSet::new(), Instant::now());
        // Every noted process has a noted limit.
        for cg in notes.processes.values() {
            assert!(notes.limits.contains_key(cg));
        }
    }
}
