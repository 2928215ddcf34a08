//! Runs a selection of scenarios in order: skips those that cannot run here
//! (not root, a failed guard-rail check) with the reason, turns a failure
//! into a skipped result that says what went wrong, and stops at Ctrl-C,
//! marking what did not run.
//!
//! What it does not do: know any scenario's details or create anything
//! itself; each scenario undoes what it made (`cleanup`).

use slowlab_model::results::{Role, ScenarioResult, ScenarioStatus, TraceCheck, TracedRun};

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
    fn preflight(&self, _ctx: &LabContext) -> Result<(), LabError> {
        Ok(())
    }
    /// Runs both variants and judges them.
    fn run(&self, ctx: &mut LabContext) -> Result<ScenarioResult, LabError>;

    /// The detector (`slowlab analyze --findings`) that must fire on a trace
    /// of the pathological variant and stay silent on the control's.
    fn detector(&self) -> &'static str;

    /// For `lab --trace`: runs one representative instance of the variant
    /// with `role`, small enough that a system-wide trace of it stays small,
    /// while the caller records.
    fn run_for_trace(&self, ctx: &mut LabContext, role: Role) -> Result<(), LabError>;
}

/// Every scenario, in the order they run.
pub fn all() -> Vec<&'static dyn Scenario> {
    scenarios::ALL.to_vec()
}

pub fn scenario_ids() -> Vec<&'static str> {
    all().iter().map(|s| s.id()).collect()
}

/// Finds scenarios by id; an unknown id is an error listing the known ones.
pub fn select(ids: &[String]) -> Result<Vec<&'static dyn Scenario>, LabError> {
    if ids.is_empty() {
        return Ok(all());
    }
    ids.iter()
        .map(|id| {
            all()
                .into_iter()
                .find(|s| s.id() == id)
                .ok_or_else(|| LabError::UnknownScenario {
                    id: id.clone(),
                    known: scenario_ids().join(", "),
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
            results.push(ScenarioResult::skipped(id, reason.to_string()));
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
            Err(LabError::Interrupted) => {
                ScenarioResult::skipped(id, "interrupted; everything it created was removed")
            }
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

/// What a [`Tracer`] fails with: the recorder's or the analyzer's own
/// error (the binary implements the trait with both, and this crate
/// depends on neither). Its text goes into the trace check as it is.
pub type TracerError = Box<dyn std::error::Error + Send + Sync>;

/// Records the whole system around one traced run and analyzes it.
pub trait Tracer {
    /// Starts recording; `label` names the trace (`topdown-alloc-pathological`).
    fn start(&mut self, label: &str) -> Result<(), TracerError>;
    /// Stops recording and runs the detectors on the trace.
    fn stop(&mut self) -> Result<TracedRun, TracerError>;
    /// Stops recording and removes what the run wrote (it was interrupted: a trace of
    /// part of a run must not sit beside the others looking complete).
    fn discard(&mut self);
}

/// `lab --trace`: for each scenario, records one run of its pathological
/// and of its control variant, and checks that the scenario's detector fires
/// on the first and stays silent on the second.
pub fn trace_lab(
    scenarios: &[&dyn Scenario],
    ctx: &mut LabContext,
    tracer: &mut dyn Tracer,
) -> Vec<TraceCheck> {
    let mut checks = Vec::new();
    for scenario in scenarios {
        let id = scenario.id();
        let detector = scenario.detector();
        let skipped = |reason: String| TraceCheck {
            id: id.to_string(),
            detector: detector.to_string(),
            status: ScenarioStatus::Skipped,
            reason: Some(reason),
            pathological: None,
            control: None,
            fired: None,
            silent: None,
        };
        if ctx.cancel.is_cancelled() {
            checks.push(skipped("interrupted before it started".into()));
            continue;
        }
        if scenario.needs_root() && !crate::system::is_root() {
            checks.push(skipped("needs root".into()));
            continue;
        }
        if let Err(reason) = scenario.preflight(ctx) {
            checks.push(skipped(reason.to_string()));
            continue;
        }
        ctx.out
            .line(&format!("== {id}: tracing both variants for {detector}"));
        let mut runs = Vec::new();
        for role in [Role::Pathological, Role::Control] {
            let label = format!(
                "{id}-{}",
                match role {
                    Role::Pathological => "pathological",
                    Role::Control => "control",
                }
            );
            let failed = |error: String| TracedRun {
                trace: String::new(),
                findings: Vec::new(),
                titles: Vec::new(),
                error: Some(error),
            };
            if ctx.cancel.is_cancelled() {
                runs.push(failed("interrupted before it started".into()));
                continue;
            }
            ctx.status(&format!("{label}: recording"));
            let run = match tracer.start(&label) {
                Err(e) => failed(e.to_string()),
                Ok(()) => {
                    let outcome = scenario.run_for_trace(ctx, role);
                    if ctx.cancel.is_cancelled() {
                        tracer.discard();
                        failed("interrupted: what it recorded was removed".into())
                    } else {
                        ctx.status(&format!("{label}: analyzing"));
                        let mut run = tracer.stop().unwrap_or_else(|e| failed(e.to_string()));
                        if let Err(e) = outcome {
                            run.error = Some(e.to_string());
                        }
                        run
                    }
                }
            };
            for title in &run.titles {
                ctx.out.line(&format!("  {label}: {title}"));
            }
            if let Some(e) = &run.error {
                ctx.out.line(&format!("  {label}: failed: {e}"));
            }
            runs.push(run);
        }
        let control = runs.pop();
        let pathological = runs.pop();
        let fired_on = |r: &Option<TracedRun>| {
            r.as_ref()
                .filter(|r| r.error.is_none())
                .map(|r| r.findings.iter().any(|f| f == detector))
        };
        let fired = fired_on(&pathological);
        let silent = fired_on(&control).map(|f| !f);
        checks.push(TraceCheck {
            id: id.to_string(),
            detector: detector.to_string(),
            status: ScenarioStatus::Ran,
            reason: if ctx.cancel.is_cancelled() {
                Some("interrupted".into())
            } else {
                None
            },
            pathological,
            control,
            fired,
            silent,
        });
    }
    checks
}
