//! Judging scenarios from their variants, shared by the swept scenarios
//! (topdown-alloc, log-probe) and by `slowlab import`, which completes
//! results written by the Windows probes: growth statistics for variants
//! that carry only points, the affected verdict of a sweep scenario, and the
//! parsing of JSON Lines results.
//!
//! What it does not do: judge the scenarios that are not sweeps (each
//! judges itself) or render anything.

use slowlab_model::results::{Role, ScenarioResult, ScenarioStatus, SweepResult, Verdict};
use slowlab_sweep::verdict::judge_points;

use crate::LabError;

/// Seed for the bootstrap of imported points (fixed: the same file gives
/// the same intervals).
const IMPORT_SEED: u64 = 0x1_4907;

/// A sweep scenario is affected when its pathological variant grows
/// super-linearly while no control does; `None` when a variant could not be
/// decided and the answer is not already yes.
pub fn sweep_affected(pathological: Verdict, controls: &[Verdict]) -> Option<bool> {
    let affected =
        pathological == Verdict::Superlinear && !controls.contains(&Verdict::Superlinear);
    let undecided =
        pathological == Verdict::Inconclusive || controls.contains(&Verdict::Inconclusive);
    if undecided && !affected {
        None
    } else {
        Some(affected)
    }
}

/// "N^1.98" or "N^?".
pub fn exponent_text(r: &SweepResult) -> String {
    r.exponent
        .map_or("N^?".to_string(), |k| format!("N^{k:.2}"))
}

/// Fills what a result written elsewhere leaves out: each swept variant's
/// exponent, interval and verdict, and the scenario's affected verdict when
/// it rests on those sweeps.
pub fn complete(result: &mut ScenarioResult) {
    if result.status != ScenarioStatus::Ran {
        return;
    }
    for variant in &mut result.variants {
        let Some(points) = &variant.points else {
            continue;
        };
        if variant.verdict.is_some() {
            continue;
        }
        let (growth, decision) = judge_points(points, IMPORT_SEED);
        variant.exponent = growth.exponent;
        variant.exponent_ci = growth.exponent_ci;
        variant.verdict = Some(decision.verdict);
    }
    if result.affected.is_none() {
        let verdict_of = |role: Role| -> Vec<Verdict> {
            result
                .variants
                .iter()
                .filter(|v| v.role == role && v.points.is_some())
                .filter_map(|v| v.verdict)
                .collect()
        };
        let pathological = verdict_of(Role::Pathological);
        if let [first, ..] = pathological.as_slice() {
            result.affected = sweep_affected(*first, &verdict_of(Role::Control));
        }
    }
}

/// Parses results: JSON Lines (one scenario per line, blank lines ignored)
/// or one JSON array. The error names the line and what is wrong.
pub fn parse_results(text: &str) -> Result<Vec<ScenarioResult>, LabError> {
    let trimmed = text.trim_start();
    if trimmed.is_empty() {
        return Err(LabError::EmptyResults);
    }
    if trimmed.starts_with('[') {
        return serde_json::from_str(trimmed).map_err(LabError::ResultsArray);
    }
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str::<ScenarioResult>(line).map_err(|source| LabError::ResultsLine {
                line: i + 1,
                source,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affected_needs_superlinear_pathology_and_no_superlinear_control() {
        use Verdict::*;
        assert_eq!(sweep_affected(Superlinear, &[Linear, Linear]), Some(true));
        assert_eq!(sweep_affected(Superlinear, &[Superlinear]), Some(false));
        assert_eq!(sweep_affected(Linear, &[Linear]), Some(false));
        assert_eq!(sweep_affected(Inconclusive, &[Linear]), None);
        assert_eq!(sweep_affected(Superlinear, &[Inconclusive]), Some(true));
        assert_eq!(sweep_affected(Linear, &[Inconclusive]), None);
    }

    #[test]
    fn imported_points_get_statistics_and_a_verdict() {
        let line = r#"{"id":"topdown-alloc","status":"ran","platform":"windows","variants":[
          {"name":"MEM_TOP_DOWN","role":"pathological","points":[
            {"n":1000,"cpu_s":[0.10,0.11],"wall_s":[0.1,0.1]},
            {"n":2000,"cpu_s":[0.40,0.41],"wall_s":[0.4,0.4]},
            {"n":4000,"cpu_s":[1.60,1.62],"wall_s":[1.6,1.6]}]},
          {"name":"normal","role":"control","points":[
            {"n":1000,"cpu_s":[0.010,0.011],"wall_s":[0.01,0.01]},
            {"n":2000,"cpu_s":[0.020,0.021],"wall_s":[0.02,0.02]},
            {"n":4000,"cpu_s":[0.040,0.041],"wall_s":[0.04,0.04]}]}]}"#
            .replace('\n', " ");
        let mut results = parse_results(&line).unwrap();
        complete(&mut results[0]);
        let r = &results[0];
        assert_eq!(r.variants[0].verdict, Some(Verdict::Superlinear));
        assert!((r.variants[0].exponent.unwrap() - 2.0).abs() < 0.05);
        assert_eq!(r.variants[1].verdict, Some(Verdict::Linear));
        assert_eq!(r.affected, Some(true));
    }

    #[test]
    fn bad_input_names_the_line() {
        assert!(parse_results("").unwrap_err().to_string().contains("empty"));
        let err = parse_results("{\"id\":\"x\",\"status\":\"ran\"}\nnot json\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 2"), "{err}");
        let err = parse_results("{\"id\":\"x\",\"status\":\"sideways\"}")
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 1"), "{err}");
        assert_eq!(parse_results("[]").unwrap().len(), 0);
    }
}
