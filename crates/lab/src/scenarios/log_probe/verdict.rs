//! log-probe's judgement: affected when the time spent finding a log name
//! grows super-linearly with probing and not with unique names; the
//! headline is the launches' total CPU time, with where probing overtakes
//! launching.
//!
//! What it does not do: run anything; it reads the sweeps and totals.

use slowlab_model::results::{Headline, Role, ScenarioResult, ScenarioStatus, SweepResult};

use super::LaunchTotals;
use crate::measure::sweep_to_variant;
use crate::verdicts::{exponent_text, sweep_affected};

/// Verdict: affected when the time spent finding a log name grows
/// super-linearly with probing and not with unique names. Headline: the
/// launches' total CPU time at the largest launch count both measured (what
/// the user waits for), with the launch count where probing overtakes
/// launching.
pub(super) fn judge(
    swept: &[(&str, Role, SweepResult)],
    launch_totals: &[Vec<LaunchTotals>],
    check_s: f64,
) -> ScenarioResult {
    let (probe, unique) = (&swept[0].2, &swept[1].2);
    let common = launch_totals[0]
        .iter()
        .rev()
        .find_map(|p| launch_totals[1].iter().find(|u| u.n == p.n).map(|u| (p, u)));
    let headline = common.map(|(p, u)| Headline {
        metric: format!("CPU time of {} launches", p.n),
        unit: "s".into(),
        pathological: p.cpu_s,
        control: u.cpu_s,
        ratio: p.cpu_s / u.cpu_s.max(1e-9),
    });
    // Probing N launches costs about N²/2 checks; launching them N times the
    // control's cost per launch: equal at N = 2 × launch / check.
    let overtake = common
        .filter(|_| check_s > 0.0)
        .map(|(_, u)| 2.0 * (u.cpu_s / u.n.max(1) as f64) / check_s);
    let added = common.map(|(p, u)| {
        format!(
            "; at {} launches probing adds {:.2} s to {:.2} s of launching",
            p.n,
            (p.cpu_s - u.cpu_s).max(0.0),
            u.cpu_s
        )
    });
    ScenarioResult {
        id: "log-probe".into(),
        status: ScenarioStatus::Ran,
        reason: None,
        affected: sweep_affected(probe.verdict, &[unique.verdict]),
        headline,
        variants: swept
            .iter()
            .map(|(name, role, r)| {
                let mut v = sweep_to_variant(name, *role, r);
                let what = "points: CPU time the launches spent finding their log name";
                v.note = Some(match v.note {
                    Some(warnings) => format!("{what}; {warnings}"),
                    None => what.to_string(),
                });
                v
            })
            .collect(),
        explanation: format!(
            "finding a free log name by probing grows as {} ({}), with unique names as {} ({}); one check costs {:.2} µs{}{}",
            exponent_text(probe),
            probe.verdict.as_str(),
            exponent_text(unique),
            unique.verdict.as_str(),
            check_s * 1e6,
            added.unwrap_or_default(),
            overtake.map_or(String::new(), |n| format!(
                "; probing overtakes launching after about {n:.0} launches"
            )),
        ),
        lines: Vec::new(),
        platform: "linux".into(),
    }
}
