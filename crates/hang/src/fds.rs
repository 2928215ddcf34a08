//! Who holds a pipe, FIFO or socket: every process's descriptors
//! (`/proc/*/fd`), read once per walk and only when a wait needs them,
//! indexed by what each descriptor's link says (`pipe:[123]`,
//! `socket:[456]`, a path), with the access mode from `fdinfo`.
//!
//! A path is compared as each process sees it; a FIFO reached through
//! another mount namespace under another name is not matched.

use std::collections::HashMap;

use crate::procfs::{parse_fdinfo_flags, Proc};

/// One open descriptor.
#[derive(Clone, Debug, PartialEq)]
pub struct Holder {
    pub pid: i32,
    pub fd: i32,
    /// `O_RDONLY` (0), `O_WRONLY` (1) or `O_RDWR` (2); `None` if fdinfo
    /// could not be read.
    pub access: Option<u32>,
}

impl Holder {
    pub fn can_read(&self) -> bool {
        matches!(self.access, Some(0) | Some(2) | None)
    }

    pub fn can_write(&self) -> bool {
        matches!(self.access, Some(1) | Some(2) | None)
    }
}

/// Descriptors by link text.
pub struct FdIndex {
    by_link: HashMap<String, Vec<(i32, i32)>>,
}

impl FdIndex {
    /// Reads every process's descriptor links (not their fdinfo: that is
    /// read for the few that match).
    pub fn build(proc: &Proc) -> FdIndex {
        let mut by_link: HashMap<String, Vec<(i32, i32)>> = HashMap::new();
        for pid in proc.pids() {
            let dir = proc.pid_dir(pid).join("fd");
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                let Some(fd) = e.file_name().to_str().and_then(|s| s.parse().ok()) else {
                    continue;
                };
                if let Ok(link) = std::fs::read_link(e.path()) {
                    if let Some(link) = link.to_str() {
                        by_link.entry(link.to_string()).or_default().push((pid, fd));
                    }
                }
            }
        }
        FdIndex { by_link }
    }

    /// The descriptors whose link is `link`, with their access modes.
    pub fn holders(&self, proc: &Proc, link: &str) -> Vec<Holder> {
        self.by_link
            .get(link)
            .map(|v| {
                v.iter()
                    .map(|&(pid, fd)| Holder {
                        pid,
                        fd,
                        access: proc
                            .read(&proc.pid_dir(pid).join("fdinfo").join(fd.to_string()))
                            .ok()
                            .and_then(|t| parse_fdinfo_flags(&t))
                            .map(|flags| flags & libc::O_ACCMODE as u32),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}
