//! working-set-cap's judgement: the figures of each scan, what happened to
//! anonymous memory in the cgroup, the lines of the original program, and
//! the verdict (affected when capped scanning is `AFFECTED_RATIO` times
//! slower than normal).
//!
//! What it does not do: run anything; it reads what the scans reported.

use slowlab_model::results::{Headline, Role, ScenarioResult, ScenarioStatus, Variant};

use super::launch::Outcome;
use super::{AFFECTED_RATIO, DATA_MIB, LIMIT_MIB, OOM_NOTE, PAGE};
use crate::cgroup::CgroupVersion;
use crate::measure::value_variant;
use crate::LabError;

/// One file scan's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Scan {
    pub scans_per_s: f64,
    pub scans: f64,
    pub seconds: f64,
    pub warmup_s: f64,
    pub faults_per_scan: f64,
    /// MiB fetched from storage per scan (/proc/self/io read_bytes).
    pub disk_mib_per_scan: f64,
    /// How often the cgroup's usage hit its limit (capped only).
    pub limit_hits: Option<u64>,
}

impl Scan {
    pub(super) fn from_outcome(what: &str, outcome: Outcome) -> Result<Self, LabError> {
        match outcome {
            Outcome::Report(out) => Ok(Scan {
                scans_per_s: out.number("scans_per_s")?,
                scans: out.number("scans")?,
                seconds: out.number("seconds")?,
                warmup_s: out.number("warmup_s")?,
                faults_per_scan: out.number("faults")? / out.number("scans")?.max(1e-9),
                disk_mib_per_scan: out.number("read_bytes")?
                    / f64::from(1u32 << 20)
                    / out.number("scans")?.max(1e-9),
                limit_hits: None,
            }),
            Outcome::Signalled { signal, stderr } => Err(LabError::Failed(format!(
                "the {what} scanner was killed by signal {signal}{}",
                tail(&stderr)
            ))),
            Outcome::Failed { status, stderr } => Err(LabError::Failed(format!(
                "the {what} scanner failed ({status}){}",
                tail(&stderr)
            ))),
        }
    }
}

fn tail(stderr: &str) -> String {
    match stderr.lines().last() {
        Some(line) => format!(": {line}"),
        None => String::new(),
    }
}

/// What happened to anonymous memory in the cgroup.
#[derive(Debug, Clone, PartialEq)]
pub enum AnonResult {
    /// SIGKILL and the cgroup's OOM counter went up.
    OomKilled { oom_kills: u64 },
    /// It finished (with swap it can be paged out).
    Scanned { scans_per_s: f64, swap: bool },
    /// Killed by SIGKILL without an OOM kill being counted, or by another
    /// signal.
    Killed { signal: i32, oom_kills: Option<u64> },
}

impl AnonResult {
    pub fn judge(outcome: Outcome, oom_kills: Option<u64>, swap: bool) -> Result<Self, LabError> {
        Ok(match outcome {
            Outcome::Signalled { signal, .. }
                if signal == libc::SIGKILL && oom_kills.is_some_and(|k| k > 0) =>
            {
                AnonResult::OomKilled {
                    oom_kills: oom_kills.unwrap_or(0),
                }
            }
            Outcome::Signalled { signal, .. } => AnonResult::Killed { signal, oom_kills },
            Outcome::Report(out) => AnonResult::Scanned {
                scans_per_s: out.number("scans_per_s")?,
                swap,
            },
            Outcome::Failed { status, stderr } => {
                return Err(LabError::Failed(format!(
                    "the anonymous-memory scanner failed ({status}){}",
                    tail(&stderr)
                )))
            }
        })
    }

    /// What to say about it.
    pub fn text(&self) -> String {
        match self {
            AnonResult::OomKilled { .. } => OOM_NOTE.to_string(),
            AnonResult::Scanned {
                scans_per_s,
                swap: true,
            } => format!(
                "not OOM-killed: this machine has swap, so anonymous pages were swapped out and in ({} scans/s)",
                rate(*scans_per_s)
            ),
            AnonResult::Scanned { scans_per_s, .. } => format!(
                "not OOM-killed although there is no swap ({} scans/s): the cgroup limit did not hold",
                rate(*scans_per_s)
            ),
            AnonResult::Killed { signal, oom_kills } => format!(
                "killed by signal {signal}, but the cgroup counted {} OOM kills",
                oom_kills.map_or("no".to_string(), |k| k.to_string())
            ),
        }
    }
}

/// Everything the scenario measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub normal: Scan,
    pub capped: Scan,
    pub pageout: Scan,
    pub anon: AnonResult,
    /// Fraction of the file still in the page cache after dropping it.
    pub resident_after_drop: f64,
    pub version: CgroupVersion,
}

/// Scans per second: no decimals from 10 up.
pub fn rate(x: f64) -> String {
    if x >= 10.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

fn times(normal: f64, slow: f64) -> f64 {
    normal / slow.max(1e-9)
}

/// The lines of the original program, and the other variants'.
pub fn lines(m: &Measured) -> Vec<String> {
    let mut lines = vec![
        format!(
            "{} scans/s normal, {} scans/s capped: {:.0} times as long.",
            rate(m.normal.scans_per_s),
            rate(m.capped.scans_per_s),
            times(m.normal.scans_per_s, m.capped.scans_per_s)
        ),
        format!(
            "{} scans/s with MADV_PAGEOUT before every scan: {:.0} times as long.",
            rate(m.pageout.scans_per_s),
            times(m.normal.scans_per_s, m.pageout.scans_per_s)
        ),
        format!(
            "Per scan of {} pages: {:.0} page faults and {:.1} MiB read from disk normal, {:.0} and {:.1} MiB capped, {:.0} and {:.1} MiB with MADV_PAGEOUT.",
            (DATA_MIB << 20) / PAGE as u64,
            m.normal.faults_per_scan,
            m.normal.disk_mib_per_scan,
            m.capped.faults_per_scan,
            m.capped.disk_mib_per_scan,
            m.pageout.faults_per_scan,
            m.pageout.disk_mib_per_scan,
        ),
        format!(
            "Anonymous memory in the {LIMIT_MIB} MiB cgroup: {}.",
            m.anon.text()
        ),
    ];
    if m.resident_after_drop > 0.05 {
        lines.push(format!(
            "(the page cache kept {:.0}% of the file after it was dropped: the first scans were not all from disk)",
            m.resident_after_drop * 100.0
        ));
    }
    lines
}

/// Verdict: affected when scanning in the capped cgroup is at least
/// `AFFECTED_RATIO` times slower than normal.
pub fn judge(m: &Measured) -> ScenarioResult {
    let ratio = times(m.normal.scans_per_s, m.capped.scans_per_s);
    let affected = ratio >= AFFECTED_RATIO;
    let cgroup = match m.version {
        CgroupVersion::V1 => "cgroup v1 memory.limit_in_bytes",
        CgroupVersion::V2 => "cgroup v2 memory.max",
    };
    let explanation = if affected {
        format!(
            "a {LIMIT_MIB} MiB memory cap ({cgroup}) makes every page of a {DATA_MIB} MiB file scan fault: {} scans/s instead of {} ({ratio:.0}×); anonymous memory: {}",
            rate(m.capped.scans_per_s),
            rate(m.normal.scans_per_s),
            short_anon(&m.anon),
        )
    } else {
        format!(
            "a {LIMIT_MIB} MiB memory cap ({cgroup}) slowed a {DATA_MIB} MiB file scan only {ratio:.1}×",
        )
    };
    let scan_note = |s: &Scan| {
        format!(
            "{:.1} scans in {:.2} s after a first scan of {:.3} s; per scan {:.0} page faults and {:.1} MiB read from disk{}",
            s.scans,
            s.seconds,
            s.warmup_s,
            s.faults_per_scan,
            s.disk_mib_per_scan,
            s.limit_hits
                .map(|h| format!("; the cgroup hit its limit {h} times"))
                .unwrap_or_default()
        )
    };
    let with_note = |mut v: Variant, s: &Scan| {
        v.note = Some(scan_note(s));
        v
    };
    let mut anon = value_variant(
        &format!("anonymous-capped-{LIMIT_MIB}MiB"),
        Role::Pathological,
        0.0,
        "scans/s",
    );
    anon.value = match m.anon {
        AnonResult::Scanned { scans_per_s, .. } => Some(scans_per_s),
        _ => None,
    };
    anon.note = Some(m.anon.text());
    ScenarioResult {
        id: "working-set-cap".into(),
        status: ScenarioStatus::Ran,
        reason: None,
        affected: Some(affected),
        headline: Some(Headline {
            metric: format!(
                "scans per second of a {DATA_MIB} MiB file mapping, in a {LIMIT_MIB} MiB memory cgroup vs normal"
            ),
            unit: "scans/s".into(),
            pathological: m.capped.scans_per_s,
            control: m.normal.scans_per_s,
            ratio,
        }),
        variants: vec![
            with_note(
                value_variant(
                    &format!("capped-{LIMIT_MIB}MiB"),
                    Role::Pathological,
                    m.capped.scans_per_s,
                    "scans/s",
                ),
                &m.capped,
            ),
            with_note(
                value_variant("normal", Role::Control, m.normal.scans_per_s, "scans/s"),
                &m.normal,
            ),
            with_note(
                value_variant(
                    "madv-pageout",
                    Role::Pathological,
                    m.pageout.scans_per_s,
                    "scans/s",
                ),
                &m.pageout,
            ),
            anon,
        ],
        explanation,
        lines: Vec::new(),
        platform: "linux".into(),
    }
}

fn short_anon(anon: &AnonResult) -> String {
    match anon {
        AnonResult::OomKilled { .. } => "OOM-killed (no swap)".into(),
        other => other.text(),
    }
}
