//! A trace with what `slowlab record` writes beside it: the path strings of
//! the path-taking syscalls (`FILE.paths`, captured with eBPF) and the
//! memory-cgroup notes (`FILE.cgroups.json`). The types the readers fill and
//! the analyses read, the parser of the cgroup notes' bytes
//! ([`CgroupInfo::from_json`]), how the side files are named beside a
//! trace ([`side_file`], [`partial_file`]) and the directory they go in
//! ([`directory_of`]); opening them is `slowlab-open`'s.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use crate::trace::Trace;

/// The side file `TRACE.SUFFIX` of a trace (`paths`, `cgroups.json`, or a
/// recording's `partial`).
pub fn side_file(trace: &Path, suffix: &str) -> PathBuf {
    let mut name = trace.as_os_str().to_owned();
    name.push(".");
    name.push(suffix);
    PathBuf::from(name)
}

/// `FILE.partial`: where a recording, a snapshot or a side file is written until it is
/// finished, then renamed to `FILE` (and removed if it is not finished).
pub fn partial_file(file: &Path) -> PathBuf {
    side_file(file, "partial")
}

/// The directory an output file goes in: its parent, or `.` for a bare file name.
pub fn directory_of(file: &Path) -> &Path {
    file.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// A path captured at a syscall's entry (on the trace's clock).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CapturedPath {
    pub time_ns: u64,
    pub tid: i32,
    /// The tracepoint's syscall name: `openat`, `newfstatat`, …
    pub syscall: String,
    pub path: String,
}

/// Memory-cgroup facts recorded beside a trace (see `slowlab record`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CgroupInfo {
    /// pid → memory cgroup path.
    pub process_cgroup: HashMap<i32, String>,
    /// cgroup path → memory limit in bytes (absent: no limit).
    pub limits: HashMap<String, u64>,
    /// cgroup path → pages it refaulted (read back in soon after evicting
    /// them) while the trace was recorded.
    pub refaults: HashMap<String, u64>,
}

/// The JSON `slowlab record` writes as `FILE.cgroups.json`
/// (`slowlab_record::CgroupNotes`):
/// `{"processes":{"PID":"CGROUP"},"limits":{"CGROUP":BYTES},"refaults":{"CGROUP":PAGES}}`.
#[derive(serde::Deserialize)]
struct CgroupNotesJson {
    processes: BTreeMap<String, String>,
    limits: BTreeMap<String, u64>,
    #[serde(default)]
    refaults: BTreeMap<String, u64>,
}

/// The cgroup notes are not the JSON `slowlab record` writes.
#[derive(Debug)]
pub struct CgroupNotesError(serde_json::Error);

impl std::fmt::Display for CgroupNotesError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for CgroupNotesError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

impl CgroupInfo {
    /// Parses the bytes of a `FILE.cgroups.json`. Process ids that are not
    /// numbers are left out; anything that is not the notes' JSON is an
    /// error. Nothing is allocated beyond what the bytes hold.
    pub fn from_json(bytes: &[u8]) -> Result<CgroupInfo, CgroupNotesError> {
        let notes: CgroupNotesJson = serde_json::from_slice(bytes).map_err(CgroupNotesError)?;
        Ok(CgroupInfo {
            process_cgroup: notes
                .processes
                .into_iter()
                .filter_map(|(pid, cg)| pid.parse().ok().map(|p| (p, cg)))
                .collect(),
            limits: notes.limits.into_iter().collect(),
            refaults: notes.refaults.into_iter().collect(),
        })
    }
}

/// A trace and its side files (each absent when it was not recorded or
/// could not be read).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct TraceBundle {
    pub trace: Trace,
    pub paths: Option<Vec<CapturedPath>>,
    pub cgroups: Option<CgroupInfo>,
    /// What could not be read beside the trace, each with what to do.
    pub warnings: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_notes_parse_as_record_writes_them() {
        let json = br#"{"processes":{"42":"/work.slice","x":"/bad"},"limits":{"/work.slice":1048576},"refaults":{"/work.slice":7}}"#;
        let info = CgroupInfo::from_json(json).expect("valid notes");
        assert_eq!(info.process_cgroup.len(), 1);
        assert_eq!(info.process_cgroup[&42], "/work.slice");
        assert_eq!(info.limits["/work.slice"], 1 << 20);
        assert_eq!(info.refaults["/work.slice"], 7);
        // Refaults were added later: older notes lack them.
        let old = br#"{"processes":{},"limits":{}}"#;
        assert!(CgroupInfo::from_json(old)
            .expect("old notes")
            .refaults
            .is_empty());
    }

    #[test]
    fn damaged_cgroup_notes_are_errors() {
        for bad in [
            &b""[..],
            b"{",
            b"[]",
            b"{\"processes\":{}}",
            b"{\"processes\":{},\"limits\":{\"/a\":-1}}",
            b"\xff\xfe",
        ] {
            assert!(CgroupInfo::from_json(bad).is_err(), "{bad:?}");
        }
        // Nesting deeper than serde_json's limit is an error, not a stack overflow.
        let deep = format!("{{\"processes\":{}", "[".repeat(100_000));
        assert!(CgroupInfo::from_json(deep.as_bytes()).is_err());
    }
}
