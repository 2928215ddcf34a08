//! Findings: what the detectors concluded from a trace — a named culprit,
//! what it cost, the evidence and a fix hint. The JSON of these types is
//! `findings.json` of `slowlab diagnose` and `slowlab analyze --findings
//! --json`, documented in README.md. No detection logic lives here.

use serde::{Deserialize, Serialize};

/// How much a finding matters, from its share of the trace's time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Low,
    Medium,
    High,
}

impl Severity {
    /// High from 25% of the time examined, medium from 5%, else low.
    pub fn from_share(share: f64) -> Severity {
        if share >= 0.25 {
            Severity::High
        } else if share >= 0.05 {
            Severity::Medium
        } else {
            Severity::Low
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
        }
    }
}

/// The process (and cgroup, when known) a finding blames.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Culprit {
    pub pid: Option<i32>,
    pub comm: Option<String>,
    pub cgroup: Option<String>,
}

/// One detector's conclusion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The detector: `topdown-probe`, `linear-probe-names`, …
    pub id: String,
    /// One line for people.
    pub title: String,
    pub severity: Severity,
    /// Seconds of time (CPU or waiting, as the detector documents) the
    /// pathology cost in the trace.
    pub cost_s: f64,
    /// `cost_s` as a share of the time examined (0–1).
    pub cost_share: f64,
    pub culprit: Culprit,
    /// The numbers behind the finding; keys are documented per detector.
    pub evidence: serde_json::Map<String, serde_json::Value>,
    /// The most telling call stack, innermost frame first.
    pub stack: Vec<String>,
    /// What to do about it.
    pub fix: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn severity_follows_the_share_and_serializes_lowercase() {
        assert_eq!(Severity::from_share(0.3), Severity::High);
        assert_eq!(Severity::from_share(0.05), Severity::Medium);
        assert_eq!(Severity::from_share(0.01), Severity::Low);
        assert_eq!(serde_json::to_string(&Severity::High).unwrap(), "\"high\"");
    }

    #[test]
    fn a_finding_has_the_documented_fields() {
        let f = Finding {
            id: "linear-probe-names".into(),
            title: "t".into(),
            severity: Severity::Medium,
            cost_s: 1.5,
            cost_share: 0.1,
            culprit: Culprit {
                pid: Some(7),
                comm: Some("verifier".into()),
                cgroup: None,
            },
            evidence: serde_json::Map::new(),
            stack: vec!["stat".into()],
            fix: "use a unique name".into(),
        };
        let v = serde_json::to_value(&f).unwrap();
        for key in [
            "id",
            "title",
            "severity",
            "cost_s",
            "cost_share",
            "culprit",
            "evidence",
            "stack",
            "fix",
        ] {
            assert!(v.get(key).is_some(), "{key}");
        }
        for key in ["pid", "comm", "cgroup"] {
            assert!(v["culprit"].get(key).is_some(), "{key}");
        }
    }
}
