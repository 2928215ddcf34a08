//! Runs a selection of scenarios in order: skips those that cannot run here
//! (not root, a failed guard-rail check) with the reason, turns a failure
//! into a skipped result that says what went wrong, and stops at Ctrl-C,
//! marking what did not run.

use slowlab_model::results::ScenarioResult;

use crate::{scenarios, LabContext, LabError};

/// One experiment with a pathological and a control variant.
pub trait Scenario: Sync {
    /// The id users type: `topdown-alloc`, …
    fn id(&self) -> &'static str;
    /// One line for `slowlab lab --list`.
    fn summary(&self) -> &'static str;
    /// Whether it needs root (namespaces, cgroups, mounts, fanotify).
    fn needs_root(&self) -> bool;
    /// Guard rails before starting: `Err(reason)` skips the scenario with a
    /// message that says what to do.
    fn preflight(&self, _ctx: &LabContext) -> Result<(), String> {
        Ok(())
    }
    /// Runs both variants and judges them.
    fn run(&self, ctx: &mut LabContext) -> Result<ScenarioResult, LabError>;
}

/// Every scenario, in the order they run.
pub fn all() -> Vec<&'static dyn Scenario> {
    scenarios::ALL.to_vec()
}

pub fn scenario_ids() -> Vec<&'static str> {
    all().iter().map(|s| s.id()).collect()
}

/// Finds scenarios by id; an unknown id is an error listing the known ones.
pub fn select(ids: &[String]) -> Result<Vec<&'static dyn Scenario>, String> {
    if ids.is_empty() {
        return Ok(all());
    }
    ids.iter()
        .map(|id| {
            all().into_iter().find(|s| s.id() == id).ok_or_else(|| {
                format!(
                    "unknown scenario `{id}`; the scenarios are: {}",
                    scenario_ids().join(", ")
                )
            })
        })
        .collect()
}

/// Runs the scenarios; always returns one result per scenario.
pub fn run_lab(scenarios: &[&dyn Scenario], ctx: &mut LabContext) -> Vec<ScenarioResult> {
    let mut results = Vec::new();
    for scenario in scenarios {
        let id = scenario.id();
        if ctx.cancel.is_cancelled() {
            results.push(ScenarioResult::skipped(id, "interrupted before it started"));
            continue;
        }
        if scenario.needs_root() && !crate::system::is_root() {
            results.push(ScenarioResult::skipped(
                id,
                "needs root (namespaces, cgroups, mounts or fanotify): run slowlab lab as root or with sudo",
            ));
            continue;
        }
        if let Err(reason) = scenario.preflight(ctx) {
            results.push(ScenarioResult::skipped(id, reason));
            continue;
        }
        ctx.lines.clear();
        ctx.out.line(&format!("== {id}: {}", scenario.summary()));
        let outcome = scenario.run(ctx);
        let lines = std::mem::take(&mut ctx.lines);
        let result = match outcome {
            Ok(mut r) => {
                r.lines = lines;
                r
            }
            Err(LabError::Interrupted) => ScenarioResult::skipped(
                id,
                "interrupted (Ctrl-C); everything it created was removed",
            ),
            Err(e) => {
                let mut r = ScenarioResult::skipped(id, format!("failed: {e}"));
                r.lines = lines;
                r
            }
        };
        results.push(result);
    }
    results
}
