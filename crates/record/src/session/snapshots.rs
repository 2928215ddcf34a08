//! Ring mode's snapshots: a dump perf finished becomes `OUTPUT.<timestamp>`
//! with its own side files and answers the requests waiting for it; the
//! oldest beyond `--keep-snapshots` go (with an earlier run's left on
//! disk); a full disk answers the requests instead, or, when perf's write
//! filled it, removes what perf left unfinished. The session's loop
//! (`mod.rs`) decides when a snapshot is asked for.

use std::path::{Path, PathBuf};

use super::{join, megabytes, Session};
use crate::args::free_bytes;
use crate::companions::side_file;
use crate::control::answer;
use crate::triggers::Subject;
use crate::DEFAULT_KEEP_SNAPSHOTS;
use slowlab_model::bundle::{directory_of, partial_file};

/// The snapshots `OUTPUT.<digits>` beside `output` (an earlier run's
/// too), oldest first.
fn snapshots_on_disk(output: &Path) -> Vec<PathBuf> {
    let Some(name) = output.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return Vec::new();
    };
    let prefix = format!("{name}.");
    let Ok(entries) = std::fs::read_dir(directory_of(output)) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.strip_prefix(&prefix)
                .is_some_and(|stamp| !stamp.is_empty() && stamp.bytes().all(|b| b.is_ascii_digit()))
                && e.file_type().is_ok_and(|t| t.is_file())
        })
        .map(|e| side_file(output, &e.file_name().to_string_lossy()[prefix.len()..]))
        .collect();
    found.sort();
    found
}

impl Session<'_> {
    /// Whether OUTPUT's disk has room for a snapshot; if not, answers the
    /// requests queued with why, and says so on one line.
    pub(super) fn room_for_snapshot(&mut self) -> bool {
        let dir = directory_of(&self.cfg.output);
        let Some(free) = free_bytes(dir) else {
            return true;
        };
        if free >= self.need {
            return true;
        }
        let why = disk_full(free, dir, self.need);
        let asked: Vec<String> = self.queued.iter().map(|r| r.why.clone()).collect();
        eprintln!("slowlab: no snapshot for {}: {why}", asked.join(", "));
        for r in std::mem::take(&mut self.queued) {
            if let Some(client) = r.client {
                answer(client, Err(why.clone()));
            }
        }
        false
    }

    /// perf exited because the disk filled while it wrote a snapshot:
    /// removes what it left unfinished and answers the requests.
    pub(super) fn disk_filled(&mut self, partial: &Path, dumps: Vec<PathBuf>) {
        // Dumps perf reported after the failure may be cut short too.
        for dump in dumps {
            let _ = std::fs::remove_file(dump);
        }
        remove_partials(partial, &self.final_dumps);
        let dir = directory_of(&self.cfg.output);
        let why = format!(
            "the disk filled while perf wrote the snapshot ({} free in {}): nothing was saved and its partial file was removed; recording goes on with a new ring",
            megabytes(free_bytes(dir).unwrap_or(0)),
            dir.display()
        );
        eprintln!("slowlab: {why}");
        self.snapshot_asked = None;
        for r in std::mem::take(&mut self.in_dump) {
            if let Some(client) = r.client {
                answer(client, Err(why.clone()));
            }
        }
    }

    /// A file perf finished dumping its ring buffers into.
    pub(super) fn on_dump(&mut self, dump: PathBuf) {
        if self.snapshot_asked.is_some() && self.stop.is_none() {
            self.snapshot_asked = None;
            let trace = self.snapshot(dump);
            for r in std::mem::take(&mut self.in_dump) {
                if let Some(client) = r.client {
                    answer(client, Ok(trace.as_path()));
                }
            }
        } else {
            self.final_dumps.push(dump);
        }
    }

    /// Names a dump `OUTPUT.<timestamp>`, writes its side files, and lets
    /// the oldest snapshots go beyond the number kept.
    pub(super) fn snapshot(&mut self, dump: PathBuf) -> PathBuf {
        let target = snapshot_name(&self.cfg.output, &dump);
        let trace = match std::fs::rename(&dump, &target) {
            Ok(()) => target,
            Err(e) => {
                self.warn(format!(
                    "cannot rename the snapshot {} to {}: {e}",
                    dump.display(),
                    target.display()
                ));
                dump
            }
        };
        let mut warnings = Vec::new();
        let mut files = match &self.companions {
            Some(c) => c.snapshot(&trace, &mut warnings),
            None => Vec::new(),
        };
        let subject = self.in_dump.iter().find_map(|r| r.subject.clone());
        match write_waits(&trace, subject.as_ref()) {
            Some(Ok(file)) => files.push(file),
            Some(Err(e)) => warnings.push(e),
            None => {}
        }
        for w in warnings {
            self.warn(w);
        }
        let why: Vec<String> = self.in_dump.iter().map(|r| r.why.clone()).collect();
        eprintln!(
            "slowlab: snapshot {}{}{}{}",
            trace.display(),
            if files.is_empty() {
                String::new()
            } else {
                format!(" (and {})", join(&files))
            },
            if why.is_empty() {
                String::new()
            } else {
                format!(" for {}", why.join(", "))
            },
            subject_hint(&trace, subject.as_ref())
        );
        self.snapshots.add(trace.clone());
        trace
    }
}

/// What to run for the process a trigger's snapshot is about (none: nothing), to end
/// the line that names the snapshot: the critical path from it, not from the
/// longest-running process.
pub(crate) fn subject_hint(trace: &Path, subject: Option<&Subject>) -> String {
    subject.map_or_else(String::new, |s| {
        format!(
            "; why pid {} was slow: slowlab analyze {} --critical-path --root {}",
            s.pid,
            trace.display(),
            s.pid
        )
    })
}

/// Writes `TRACE.waits.txt`, what the process a trigger's snapshot is about waited on
/// when the trigger fired ([`Subject::waits`]), if walked; the file, or why it is not
/// there (a full disk).
pub(crate) fn write_waits(
    trace: &Path,
    subject: Option<&Subject>,
) -> Option<Result<PathBuf, String>> {
    let text = subject?.waits.as_ref()?;
    let file = side_file(trace, WAITS);
    let partial = partial_file(&file);
    let written = std::fs::write(&partial, text).and_then(|()| std::fs::rename(&partial, &file));
    Some(written.map(|()| file.clone()).map_err(|e| {
        let _ = std::fs::remove_file(&partial);
        format!("cannot write {}: {e}", file.display())
    }))
}

/// The side file of [`write_waits`].
const WAITS: &str = "waits.txt";

/// The snapshots kept beside OUTPUT, oldest first: those an earlier run left, then this
/// run's; at most `keep` of them (the oldest go, with their side files).
pub(crate) struct Kept {
    snapshots: Vec<PathBuf>,
    /// This run's among them.
    saved_here: usize,
    keep: usize,
}

impl Kept {
    /// The snapshots on disk beside `output`, at most `keep_snapshots` kept
    /// ([`DEFAULT_KEEP_SNAPSHOTS`] when 0); the oldest beyond it go now.
    pub(crate) fn on_disk(output: &Path, keep_snapshots: usize) -> Kept {
        let keep = match keep_snapshots {
            0 => DEFAULT_KEEP_SNAPSHOTS,
            n => n,
        };
        let mut kept = Kept {
            snapshots: snapshots_on_disk(output),
            saved_here: 0,
            keep,
        };
        kept.prune();
        kept
    }

    /// None (not ring mode).
    pub(crate) fn none() -> Kept {
        Kept {
            snapshots: Vec::new(),
            saved_here: 0,
            keep: DEFAULT_KEEP_SNAPSHOTS,
        }
    }

    /// A snapshot this run saved; the oldest beyond the number kept go.
    pub(crate) fn add(&mut self, trace: PathBuf) {
        self.snapshots.push(trace);
        self.saved_here += 1;
        self.prune();
    }

    /// Removes the oldest snapshots (and their side files) beyond the number kept.
    fn prune(&mut self) {
        while self.snapshots.len() > self.keep {
            let old = self.snapshots.remove(0);
            self.saved_here = self.saved_here.min(self.snapshots.len());
            remove_snapshot(&old, self.keep);
        }
    }

    /// This run's snapshots still kept, oldest first.
    pub(crate) fn this_run(&self) -> &[PathBuf] {
        &self.snapshots[self.snapshots.len() - self.saved_here.min(self.snapshots.len())..]
    }
}

/// The line a snapshot request is answered with when OUTPUT's disk, with `free` bytes in
/// `dir`, has less than the `need` a snapshot may take.
pub(crate) fn disk_full(free: u64, dir: &Path, need: u64) -> String {
    format!(
        "the disk is full: {} free in {}, a snapshot needs up to {}; the ring is kept and recording goes on: free some space and save again",
        megabytes(free),
        dir.display(),
        megabytes(need)
    )
}

/// The free bytes a snapshot asks for: `SLOWLAB_SNAPSHOT_NEED_BYTES` (tests fill the disk
/// with it), else `otherwise`.
pub(crate) fn snapshot_need(otherwise: impl FnOnce() -> u64) -> u64 {
    crate::overrides::from_env("SLOWLAB_SNAPSHOT_NEED_BYTES").unwrap_or_else(otherwise)
}

/// Removes a snapshot and its side files, and says so.
fn remove_snapshot(old: &Path, keep: usize) {
    let _ = std::fs::remove_file(old);
    for side in ["paths", "cgroups.json", WAITS] {
        let _ = std::fs::remove_file(side_file(old, side));
    }
    eprintln!(
        "slowlab: removed the oldest snapshot {} (keeping the last {keep})",
        old.display()
    );
}

/// `OUTPUT.<timestamp>` for perf's dump `OUTPUT.partial.<timestamp>`.
fn snapshot_name(output: &Path, dump: &Path) -> PathBuf {
    let partial = partial_file(output);
    let stamp = dump
        .file_name()
        .zip(partial.file_name())
        .and_then(|(d, p)| {
            let d = d.to_string_lossy();
            let p = format!("{}.", p.to_string_lossy());
            d.strip_prefix(&p).map(str::to_owned)
        })
        .unwrap_or_else(|| "snapshot".into());
    side_file(output, &stamp)
}

/// Removes `OUTPUT.partial` and the dumps perf left under its name
/// (`OUTPUT.partial.<timestamp>`), but those in `keep`.
fn remove_partials(partial: &Path, keep: &[PathBuf]) {
    let _ = std::fs::remove_file(partial);
    let Some(name) = partial
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
    else {
        return;
    };
    let prefix = format!("{name}.");
    if let Ok(entries) = std::fs::read_dir(directory_of(partial)) {
        for e in entries.flatten() {
            let kept = keep.iter().any(|k| k.file_name() == Some(&e.file_name()));
            if e.file_name().to_string_lossy().starts_with(&prefix) && !kept {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_left_by_an_earlier_run_are_found_oldest_first() {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = dir.path().join("r.data");
        for name in [
            "r.data.2026112714000002",
            "r.data.2026112713000001",
            "r.data.2026112713000001.paths",
            "r.data.partial",
            "r.data",
            "other.data.2026112713000001",
        ] {
            std::fs::write(dir.path().join(name), b"x").expect("write");
        }
        assert_eq!(
            snapshots_on_disk(&out),
            vec![
                dir.path().join("r.data.2026112713000001"),
                dir.path().join("r.data.2026112714000002")
            ]
        );
    }

    #[test]
    fn partial_files_go_but_the_dumps_kept_for_the_end() {
        let dir = tempfile::tempdir().expect("temp dir");
        let partial = partial_file(&dir.path().join("r.data"));
        let kept = dir.path().join("r.data.partial.2026112713000001");
        let cut = dir.path().join("r.data.partial.2026112713000002");
        for f in [&partial, &kept, &cut] {
            std::fs::write(f, b"x").expect("write");
        }
        remove_partials(&partial, std::slice::from_ref(&kept));
        assert!(!partial.exists() && !cut.exists() && kept.exists());
    }

    #[test]
    fn a_dump_becomes_a_snapshot_named_after_its_time() {
        let out = Path::new("/tmp/x/r.data");
        assert_eq!(
            snapshot_name(out, Path::new("/tmp/x/r.data.partial.2026112314260813")),
            PathBuf::from("/tmp/x/r.data.2026112314260813")
        );
        assert_eq!(
            snapshot_name(out, Path::new("elsewhere")),
            PathBuf::from("/tmp/x/r.data.snapshot")
        );
    }
}
