//! The lab's one error type, `LabError`: why a scenario, a child program or
//! a lab command (scenario selection, reading results) could not do its
//! work. Each variant's text is what the user reads — a skip reason, the
//! `failed: …` of a result, a child's line on stderr — so the texts are
//! part of the behaviour.
//!
//! What it does not do: decide what an error means for a run (skip, fail,
//! stop); the runner does.

/// Why a scenario, a child program or a lab command could not finish.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error("interrupted")]
    Interrupted,
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Sweep(#[from] slowlab_sweep::SweepError),
    /// A path or argument with a NUL byte, which no system call takes.
    #[error(transparent)]
    Nul(#[from] std::ffi::NulError),
    /// A guard rail: this machine cannot run the scenario as it is; the
    /// text says why and what to do. The scenario is skipped with it.
    #[error("{0}")]
    Unsuitable(String),
    /// Neither a cgroup v1 memory hierarchy nor a cgroup v2 mount with the
    /// memory controller enabled.
    #[error(
        "no memory cgroup controller: neither a cgroup v1 `memory` hierarchy nor a cgroup v2 \
         mount with `memory` in cgroup.subtree_control (mount one, or enable it with \
         `echo +memory > /sys/fs/cgroup/cgroup.subtree_control`)"
    )]
    NoMemoryCgroup,
    /// `slowlab lab ID…` with an id that is no scenario's.
    #[error("unknown scenario `{id}`; the scenarios are: {known}")]
    UnknownScenario { id: String, known: String },
    /// A results file with nothing in it.
    #[error("the file is empty: expected one JSON scenario result per line")]
    EmptyResults,
    /// A results file that starts like a JSON array but is not one of
    /// scenario results.
    #[error("not a JSON array of scenario results: {0}")]
    ResultsArray(#[source] serde_json::Error),
    /// A line of a JSON Lines results file that is not a scenario result
    /// (`line` counts from 1).
    #[error("line {line} is not a scenario result: {source}")]
    ResultsLine {
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error("{0}")]
    Failed(String),
}

impl LabError {
    /// An I/O error with what was being done.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        LabError::Io {
            what: what.into(),
            source,
        }
    }

    /// The last OS error (errno) with what was being done.
    pub fn last_os(what: impl Into<String>) -> Self {
        Self::io(what, std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts are what users read: they are the ones the lab printed
    /// when its errors were strings.
    #[test]
    fn the_texts_are_the_ones_users_read() {
        assert_eq!(
            LabError::NoMemoryCgroup.to_string(),
            "no memory cgroup controller: neither a cgroup v1 `memory` hierarchy nor a cgroup v2 \
             mount with `memory` in cgroup.subtree_control (mount one, or enable it with \
             `echo +memory > /sys/fs/cgroup/cgroup.subtree_control`)"
        );
        let err = crate::runner::select(&["no-such".into()]).err().unwrap();
        assert_eq!(
            err.to_string(),
            format!(
                "unknown scenario `no-such`; the scenarios are: {}",
                crate::scenario_ids().join(", ")
            )
        );
        assert_eq!(
            LabError::EmptyResults.to_string(),
            "the file is empty: expected one JSON scenario result per line"
        );
        let io = std::io::Error::from_raw_os_error(libc::ENOENT);
        let text = format!("cannot open /x: {io}");
        assert_eq!(LabError::io("cannot open /x", io).to_string(), text);
        let nul = std::ffi::CString::new("a\0b").unwrap_err();
        let text = nul.to_string();
        assert_eq!(LabError::from(nul).to_string(), text);
        assert_eq!(LabError::Unsuitable("why".into()).to_string(), "why");
    }
}
