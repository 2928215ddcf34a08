//! `slowlab lab --profile`: for each selected scenario whose pathological
//! variant is a cost that grows with n (topdown-alloc's top-down probing,
//! log-probe's probed names), a profiled sweep of that variant's child
//! program (`slowlab_profile::profiled_sweep`), printed with the functions
//! that grow (rendered by the caller); the other scenarios are listed as not
//! profiled, with why. The child programs' arguments and sizes are the
//! scenarios'.

use slowlab_lab::context::TempDir;
use slowlab_lab::scenarios::{log_probe, topdown_alloc};
use slowlab_lab::{LabContext, LabError, Scenario};
use slowlab_model::results::{ScenarioProfile, ScenarioStatus, SweepResult};
use slowlab_sweep::SweepConfig;

/// What to sweep for one scenario: the pathological child's arguments
/// (`{n}` for the size) and sizes, and what must live as long as the sweep.
struct Target {
    variant: &'static str,
    child_args: Vec<String>,
    sizes: Vec<u64>,
    _dir: Option<TempDir>,
}

/// The pathological sweep of a scenario, if it has one.
fn target(id: &str, ctx: &LabContext) -> Option<Result<Target, LabError>> {
    match id {
        "topdown-alloc" => Some(Ok(Target {
            variant: "topdown-probe",
            child_args: topdown_alloc::child_args(topdown_alloc::Placement::Probe, "{n}"),
            sizes: topdown_alloc::sizes(ctx.profile),
            _dir: None,
        })),
        "log-probe" => Some(
            TempDir::new_in(&log_probe::log_root(ctx), "log-probe").map(|dir| Target {
                variant: "probe-names",
                child_args: log_probe::launcher_args(log_probe::Naming::Probe, "{n}", dir.path()),
                sizes: log_probe::sizes(ctx.profile),
                _dir: Some(dir),
            }),
        ),
        _ => None,
    }
}

/// Profiles each scenario's pathological variant, `frequency_hz` samples per
/// CPU second, printing each result's functions as `render` says them; one
/// result per scenario.
pub fn profile_lab(
    scenarios: &[&dyn Scenario],
    ctx: &mut LabContext,
    frequency_hz: u32,
    render: &dyn Fn(&SweepResult) -> String,
) -> Vec<ScenarioProfile> {
    let mut profiles = Vec::new();
    for scenario in scenarios {
        let id = scenario.id();
        let skipped = |variant: &str, reason: String| ScenarioProfile {
            id: id.to_string(),
            variant: variant.to_string(),
            status: ScenarioStatus::Skipped,
            reason: Some(reason),
            sweep: None,
        };
        let target = match target(id, ctx) {
            None => {
                profiles.push(skipped(
                    "",
                    "its pathology is not a cost that grows with a size: nothing to fit".into(),
                ));
                continue;
            }
            Some(Err(e)) => {
                profiles.push(skipped("", e.to_string()));
                continue;
            }
            Some(Ok(t)) => t,
        };
        if ctx.cancel.is_cancelled() {
            profiles.push(skipped(
                target.variant,
                "interrupted before it started".into(),
            ));
            continue;
        }
        if let Err(reason) = scenario.preflight(ctx) {
            profiles.push(skipped(target.variant, reason.to_string()));
            continue;
        }
        ctx.out.line(&format!(
            "== {id}: profiling its pathological variant ({}) at n = {:?}",
            target.variant, target.sizes
        ));
        let mut command = vec![
            ctx.self_exe.to_string_lossy().into_owned(),
            "__child".to_string(),
        ];
        command.extend(target.child_args.iter().cloned());
        let config = SweepConfig {
            sizes: target.sizes.clone(),
            reps: ctx.profile.pick(2, 3, 3),
            budget_s: ctx.profile.pick(30.0, 120.0, 900.0),
            // Every size: the functions are fitted on the top three.
            early_stop: false,
            adaptive: false,
            min_net_cost_s: 0.001,
            ..SweepConfig::default()
        };
        let work_root = ctx.work_root.clone();
        let cancel = ctx.cancel.clone();
        let outcome = crate::profiled_sweep(
            &command,
            &config,
            frequency_hz,
            Some(&work_root),
            ctx.out.sweep_progress(),
            &cancel,
        );
        match outcome {
            Ok(mut sweep) => {
                // The child runs as `slowlab __child …`, whatever the path.
                sweep.command = command_for_humans(&target.child_args);
                for line in render(&sweep).lines() {
                    ctx.out.line(line);
                }
                profiles.push(ScenarioProfile {
                    id: id.to_string(),
                    variant: target.variant.to_string(),
                    status: ScenarioStatus::Ran,
                    reason: sweep.interrupted.then(|| "interrupted".to_string()),
                    sweep: Some(sweep),
                });
            }
            Err(e) => {
                ctx.out.line(&format!("  failed: {e}"));
                profiles.push(skipped(target.variant, format!("failed: {e}")));
            }
        }
    }
    profiles
}

fn command_for_humans(child_args: &[String]) -> Vec<String> {
    let mut command = vec!["slowlab".to_string(), "__child".to_string()];
    command.extend(child_args.iter().cloned());
    command
}
