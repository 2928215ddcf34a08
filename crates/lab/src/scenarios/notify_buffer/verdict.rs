//! notify-buffer's judgement: two questions, the buffer size (the
//! scenario's verdict: affected when the 2 MiB buffer costs
//! `BUFFER_AFFECTED_RATIO` times the 16 KiB one) and the permission
//! watcher (the Linux hazard, in the explanation and the variants).
//!
//! What it does not do: measure anything; it reads the per-file costs.

use slowlab_model::results::{Headline, Role, ScenarioResult, ScenarioStatus, Variant};

use super::{
    BUFFER_AFFECTED_RATIO, CONFIGS, INOTIFY_LARGE, INOTIFY_SMALL, NONE, PERMISSION_OTHER_CPU,
    PERMISSION_SAME_CPU, WATCHER_HAZARD_RATIO,
};
use crate::measure::value_variant;

/// Two questions: the buffer size (the scenario's verdict) and the
/// permission watcher (the Linux hazard, in the explanation and variants).
pub(super) fn judge(
    costs: &[Option<f64>],
    failures: &[Option<String>],
    events: &[u64],
    files: u64,
) -> ScenarioResult {
    let base = costs[NONE];
    let ratio = |i: usize| match (costs[i], base) {
        (Some(c), Some(b)) if b > 0.0 => Some(c / b),
        _ => None,
    };
    let (small, large) = (costs[INOTIFY_SMALL], costs[INOTIFY_LARGE]);
    let buffer_ratio = match (large, small) {
        (Some(l), Some(s)) if s > 0.0 => Some(l / s),
        _ => None,
    };
    let headline = match (large, small, buffer_ratio) {
        (Some(l), Some(s), Some(r)) => Some(Headline {
            metric: "seconds per file created and deleted, 2 MiB vs 16 KiB inotify buffer".into(),
            unit: "s".into(),
            pathological: l,
            control: s,
            ratio: r,
        }),
        _ => None,
    };
    let mut explanation = match buffer_ratio {
        Some(r) if r >= BUFFER_AFFECTED_RATIO => {
            format!("a 2 MiB watcher buffer makes file operations {r:.1}× as slow as a 16 KiB one")
        }
        Some(r) => format!("the watcher's buffer size makes no difference here ({r:.2}×)"),
        None => "the buffer-size comparison could not run".to_string(),
    };
    if let Some(r) = ratio(INOTIFY_SMALL) {
        explanation.push_str(&format!("; an inotify watcher costs {r:.1}×"));
    }
    let same = ratio(PERMISSION_SAME_CPU).map_or(String::new(), |r| {
        format!(" ({r:.1}× with the watcher on the same CPU)")
    });
    match (ratio(PERMISSION_OTHER_CPU), ratio(PERMISSION_SAME_CPU)) {
        (Some(r), _) if r >= WATCHER_HAZARD_RATIO => explanation.push_str(&format!(
            "; a fanotify permission watcher on another CPU makes every file open {r:.1}× as slow{same} — the Linux hazard of this family"
        )),
        (Some(r), _) => explanation.push_str(&format!(
            "; a fanotify permission watcher on another CPU costs {r:.1}×{same}"
        )),
        (None, Some(r)) => explanation.push_str(&format!(
            "; a fanotify permission watcher on the same CPU costs {r:.1}×"
        )),
        (None, None) => {
            if let Some(reason) = &failures[PERMISSION_OTHER_CPU] {
                explanation.push_str(&format!("; the permission watcher could not run ({reason})"));
            }
        }
    }
    let variants: Vec<Variant> = CONFIGS
        .iter()
        .enumerate()
        .map(|(i, config)| {
            let role = if matches!(i, INOTIFY_LARGE | PERMISSION_OTHER_CPU | PERMISSION_SAME_CPU) {
                Role::Pathological
            } else {
                Role::Control
            };
            let mut v = value_variant(config.name, role, costs[i].unwrap_or(f64::NAN), "s");
            if costs[i].is_none() {
                v.value = None;
            }
            v.note = match (&failures[i], ratio(i)) {
                (Some(reason), _) => Some(format!("could not run: {reason}")),
                (None, Some(r)) if i != NONE => Some(format!(
                    "{r:.2}× the cost without a watcher; {} events for {files} files per repetition",
                    events[i]
                )),
                _ => None,
            };
            v
        })
        .collect();
    ScenarioResult {
        id: "notify-buffer".into(),
        status: ScenarioStatus::Ran,
        reason: None,
        affected: buffer_ratio.map(|r| r >= BUFFER_AFFECTED_RATIO),
        headline,
        variants,
        explanation,
        lines: Vec::new(),
        platform: "linux".into(),
    }
}
