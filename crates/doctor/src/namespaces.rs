//! Namespace churn: namespaces made and destroyed at a high rate (a
//! container or sandbox per request). Making and tearing down network and
//! mount namespaces takes global locks (`rtnl`, `net_mutex`, the mount
//! lock) and RCU grace periods that every other process's network and
//! mount operations wait behind.
//!
//! Read from the `ROOT/proc/PID/ns/*` links (`net:[4026531840]`) of every
//! process, twice: the namespaces present at one reading and not the
//! other were made or destroyed in between. Namespaces that live shorter
//! than the window between the readings are not seen, so this undercounts.
//! Threshold: [`CHURN_PER_S`] namespaces made or destroyed per second.

use std::collections::BTreeSet;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::procfs;

/// Namespaces made or destroyed per second from which churn is reported.
pub const CHURN_PER_S: f64 = 5.0;

/// The namespaces in use at one moment: (kind, inode).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceSet {
    pub namespaces: BTreeSet<(String, u64)>,
    /// Processes whose namespaces were read, and those not allowed.
    pub processes: u32,
    pub unreadable: u32,
}

/// The namespaces of every process.
pub fn read_all(root: &Path) -> NamespaceSet {
    let mut out = NamespaceSet::default();
    for pid in procfs::pids(root) {
        let dir = procfs::proc_dir(root, pid).join("ns");
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                out.unreadable += 1;
                continue;
            }
            Err(_) => continue,
        };
        out.processes += 1;
        for entry in entries.flatten() {
            let Ok(link) = std::fs::read_link(entry.path()) else {
                continue;
            };
            let link = link.to_string_lossy();
            let Some((kind, rest)) = link.split_once(":[") else {
                continue;
            };
            if let Some(inode) = rest.strip_suffix(']').and_then(|i| i.parse().ok()) {
                out.namespaces.insert((kind.to_string(), inode));
            }
        }
    }
    out
}

/// Namespaces made and destroyed between two readings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Churn {
    pub made: u64,
    pub destroyed: u64,
    pub per_s: f64,
    /// Made or destroyed, by kind (`net`, `mnt`, …).
    pub by_kind: std::collections::BTreeMap<String, u64>,
}

/// The churn between `before` and `after`, over `seconds`.
pub fn churn(before: &NamespaceSet, after: &NamespaceSet, seconds: f64) -> Churn {
    let made: Vec<_> = after.namespaces.difference(&before.namespaces).collect();
    let destroyed: Vec<_> = before.namespaces.difference(&after.namespaces).collect();
    let mut by_kind = std::collections::BTreeMap::new();
    for (kind, _) in made.iter().chain(destroyed.iter()) {
        *by_kind.entry(kind.clone()).or_insert(0) += 1;
    }
    Churn {
        made: made.len() as u64,
        destroyed: destroyed.len() as u64,
        per_s: (made.len() + destroyed.len()) as f64 / seconds.max(1e-3),
        by_kind,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::FakeRoot;

    #[test]
    fn namespaces_made_and_destroyed_are_counted() {
        let before = FakeRoot::new();
        before.process(1, "init");
        before.namespace(1, "net", 100);
        before.namespace(1, "mnt", 101);
        before.process(2, "old");
        before.namespace(2, "net", 200);
        let after = FakeRoot::new();
        after.process(1, "init");
        after.namespace(1, "net", 100);
        after.namespace(1, "mnt", 101);
        after.process(3, "new");
        after.namespace(3, "net", 300);
        after.namespace(3, "mnt", 301);
        let b = read_all(before.path());
        assert_eq!(b.namespaces.len(), 3);
        let c = churn(&b, &read_all(after.path()), 1.0);
        assert_eq!((c.made, c.destroyed), (2, 1));
        assert_eq!(c.by_kind["net"], 2);
        assert!((c.per_s - 3.0).abs() < 1e-9);
    }
}
