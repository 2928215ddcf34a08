//! Pressure stall information (`/proc/pressure/{cpu,memory,io}`): the share
//! of time in which some (or all) runnable tasks were stalled waiting for
//! a CPU, for memory (reclaim, refaults) or for I/O.
//!
//! Read twice; the judgement is on the `total=` counters (µs stalled)
//! between the two readings, not on the kernel's averages, so it describes
//! the window doctor recorded. Thresholds ("some" share of the window):
//! [`CPU_SOME_SHARE`], [`MEMORY_SOME_SHARE`], [`IO_SOME_SHARE`].

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::procfs;

pub const CPU_SOME_SHARE: f64 = 0.5;
pub const MEMORY_SOME_SHARE: f64 = 0.1;
pub const IO_SOME_SHARE: f64 = 0.2;

/// One resource's stall totals at one moment (µs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PressureState {
    /// `cpu`, `memory` or `io`.
    pub resource: String,
    pub some_us: u64,
    pub full_us: Option<u64>,
}

/// The three pressure files, or why they cannot be read.
pub fn read_all(root: &Path) -> Result<Vec<PressureState>, String> {
    let dir = root.join("proc/pressure");
    let mut out = Vec::new();
    for resource in ["cpu", "memory", "io"] {
        let Some(text) = procfs::read(&dir.join(resource)) else {
            continue;
        };
        let total = |kind: &str| {
            text.lines()
                .find(|l| l.starts_with(kind))?
                .split_whitespace()
                .find_map(|f| f.strip_prefix("total="))?
                .parse::<u64>()
                .ok()
        };
        if let Some(some_us) = total("some") {
            out.push(PressureState {
                resource: resource.to_string(),
                some_us,
                full_us: total("full"),
            });
        }
    }
    if out.is_empty() {
        return Err(format!(
            "{} cannot be read: this kernel has no pressure stall information (CONFIG_PSI, or psi=1 on its command line)",
            dir.display()
        ));
    }
    Ok(out)
}

/// A resource stalled for a large share of the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stalled {
    pub resource: String,
    pub some_share: f64,
    pub full_share: Option<f64>,
    pub threshold: f64,
}

/// The threshold of a resource.
pub fn threshold(resource: &str) -> f64 {
    match resource {
        "cpu" => CPU_SOME_SHARE,
        "memory" => MEMORY_SOME_SHARE,
        _ => IO_SOME_SHARE,
    }
}

/// Every resource stalled for at least its threshold of `seconds`.
pub fn stalled(before: &[PressureState], after: &[PressureState], seconds: f64) -> Vec<Stalled> {
    let window_us = seconds.max(1e-3) * 1e6;
    let mut out = Vec::new();
    for a in after {
        let Some(b) = before.iter().find(|b| b.resource == a.resource) else {
            continue;
        };
        let some_share = a.some_us.saturating_sub(b.some_us) as f64 / window_us;
        let full_share = match (a.full_us, b.full_us) {
            (Some(x), Some(y)) => Some(x.saturating_sub(y) as f64 / window_us),
            _ => None,
        };
        let threshold = threshold(&a.resource);
        if some_share >= threshold {
            out.push(Stalled {
                resource: a.resource.clone(),
                some_share: some_share.min(1.0),
                full_share: full_share.map(|f| f.min(1.0)),
                threshold,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::FakeRoot;

    fn tree(cpu_some: u64, memory_some: u64) -> FakeRoot {
        let fake = FakeRoot::new();
        fake.file(
            "proc/pressure/cpu",
            &format!("some avg10=1.00 avg60=0.00 avg300=0.00 total={cpu_some}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"),
        );
        fake.file(
            "proc/pressure/memory",
            &format!("some avg10=0.00 avg60=0.00 avg300=0.00 total={memory_some}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=5\n"),
        );
        fake.file(
            "proc/pressure/io",
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=7\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=7\n",
        );
        fake
    }

    #[test]
    fn stalls_are_judged_on_the_totals_of_the_window() {
        let before = read_all(tree(1_000, 1_000).path()).unwrap();
        assert_eq!(before.len(), 3);
        // 2 s: memory 10% is 200 ms = 200_000 µs; cpu 50% is 1 s.
        let after = read_all(tree(1_000 + 999_999, 1_000 + 200_000).path()).unwrap();
        let s = stalled(&before, &after, 2.0);
        assert_eq!(s.len(), 1, "{s:?}");
        assert_eq!(s[0].resource, "memory");
        assert!((s[0].some_share - 0.1).abs() < 1e-9);
        let after = read_all(tree(1_000 + 1_000_000, 1_000 + 199_999).path()).unwrap();
        let s = stalled(&before, &after, 2.0);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].resource, "cpu");
    }

    #[test]
    fn a_kernel_without_psi_is_a_reason() {
        let fake = FakeRoot::new();
        assert!(read_all(fake.path()).unwrap_err().contains("CONFIG_PSI"));
    }
}
