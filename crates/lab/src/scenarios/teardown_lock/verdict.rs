//! teardown-lock's judgement: the original program's lines per variant,
//! the line comparing the worst stalls, and the verdict (affected when the
//! maximum stall with namespaces is `AFFECTED_RATIO` times the control's
//! and at least `MIN_STALL_S`).
//!
//! What it does not do: measure anything.

use slowlab_model::results::{Headline, Role, ScenarioResult, ScenarioStatus, Variant};

use super::variant::Measured;
use super::{AFFECTED_RATIO, MIN_STALL_S};
use crate::measure::value_variant;

/// Seconds with three significant digits (at least three decimals):
/// `1.234`, `0.231`, `0.0412`, `0.0000213`.
pub fn seconds(s: f64) -> String {
    let decimals = if s > 0.0 && s.is_finite() {
        (2 - s.log10().floor() as i32).clamp(3, 9) as usize
    } else {
        3
    };
    format!("{s:.decimals$}")
}

/// The lines of the original program for one variant.
pub fn variant_lines(m: &Measured) -> Vec<String> {
    let per = |s: f64| s * 1000.0 / m.n.max(1) as f64;
    let mut lines = vec![
        format!(
            "Process creation took {} s ({:.3} ms per process).",
            seconds(m.creation_s),
            per(m.creation_s)
        ),
        format!(
            "Process destruction took {} s ({:.3} ms per process).",
            seconds(m.destruction_s),
            per(m.destruction_s)
        ),
        format!(
            "Monitor blocked for {} s total, maximum was {} s.",
            seconds(m.all.total_s),
            seconds(m.all.max_s)
        ),
    ];
    if m.tail_timed_out {
        lines.push(format!(
            "(the monitor still saw stalls {} s after the last process was reaped; gave up waiting)",
            seconds(m.tail_s)
        ));
    }
    lines
}

pub(super) fn verdict_line(pathological: &Measured, control: &Measured) -> String {
    let rounds = pathological.round_max_s.len();
    format!(
        "Maximum monitor stall {} s with network namespaces, {} s without{}: {:.0} times as long.",
        seconds(pathological.all.max_s),
        seconds(control.all.max_s),
        if rounds > 1 {
            format!(" (worst of {rounds} rounds each)")
        } else {
            String::new()
        },
        ratio(pathological.all.max_s, control.all.max_s)
    )
}

fn ratio(pathological: f64, control: f64) -> f64 {
    pathological / control.max(1e-9)
}

/// Verdict: affected when the maximum stall with namespaces is at least
/// `AFFECTED_RATIO` times the control's and at least `MIN_STALL_S`.
pub fn judge(n: usize, pathological: &Measured, control: &Measured) -> ScenarioResult {
    let r = ratio(pathological.all.max_s, control.all.max_s);
    let affected = r >= AFFECTED_RATIO && pathological.all.max_s >= MIN_STALL_S;
    let explanation = if affected {
        format!(
            "tearing down {n} network namespaces holds the global rtnl lock: an rtnl call stalled up to {} s ({} s during creation), vs {} s with plain processes",
            seconds(pathological.all.max_s),
            seconds(pathological.during_creation.max_s),
            seconds(control.all.max_s),
        )
    } else {
        format!(
            "{n} network namespaces were torn down without stalling an rtnl call much (maximum {} s vs {} s with plain processes)",
            seconds(pathological.all.max_s),
            seconds(control.all.max_s),
        )
    };
    ScenarioResult {
        id: "teardown-lock".into(),
        status: ScenarioStatus::Ran,
        reason: None,
        affected: Some(affected),
        headline: Some(Headline {
            metric: format!("maximum monitor stall (SIOCGIFCONF, needs rtnl), {n} processes"),
            unit: "s".into(),
            pathological: pathological.all.max_s,
            control: control.all.max_s,
            ratio: r,
        }),
        variants: vec![
            variant(pathological, Role::Pathological),
            variant(control, Role::Control),
        ],
        explanation,
        lines: Vec::new(),
        platform: "linux".into(),
    }
}

fn variant(m: &Measured, role: Role) -> Variant {
    let mut v = value_variant(m.kind.variant_name(), role, m.all.max_s, "s");
    let per_round: Vec<String> = m.round_max_s.iter().map(|&s| seconds(s)).collect();
    v.note = Some(format!(
        "maximum monitor stall of {} rounds (per round: {} s); mean creation {} s, mean destruction {} s, \
         cleanup after the last reap up to {} s; monitor: {} calls, {} s in total, maximum {} s during \
         creation and {} s during destruction{}{}",
        per_round.len(),
        per_round.join(", "),
        seconds(m.creation_s),
        seconds(m.destruction_s),
        seconds(m.tail_s),
        m.all.calls,
        seconds(m.all.total_s),
        seconds(m.during_creation.max_s),
        seconds(m.during_destruction.max_s),
        if m.realtime { "" } else { "; monitor not SCHED_FIFO" },
        if m.tail_timed_out { "; the wait for the end of the cleanup timed out" } else { "" },
    ));
    v
}
