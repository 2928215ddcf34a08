//! Running the lab's child programs and sweeping them.
//!
//! A child program measures itself — CPU time with the process (and, where
//! it launches others, its children's) rusage, wall time around the work
//! only, excluding process start-up — and prints its figures as the last
//! line of its output, `slowlab-report {json}`. Lines before it are its human
//! output. `SelfTimedExecutor` turns such a child into an `Executor` for the
//! sweep engine; `run_child` runs one once.
//!
//! What it does not do: judge the figures (the scenarios and `verdicts` do).

use serde_json::Value;
use slowlab_model::results::{Role, SweepResult, Variant};
use slowlab_sweep::{
    run_sweep, CommandExecutor, Executor, Measurement, RunError, SweepConfig, SweepError,
};

use crate::{LabContext, LabError};

/// Marks a child's report line.
pub const REPORT_PREFIX: &str = "slowlab-report ";

/// Child side: CPU time of this process (all threads) so far, in seconds;
/// precise to the nanosecond (the scheduler's own accounting, not ticks).
pub fn process_cpu_seconds() -> f64 {
    // SAFETY: timespec is plain data that clock_gettime fills in.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer; the clock id is a constant.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Child side: prints the report line (the child's last output).
pub fn emit_report(report: &Value) {
    println!("{REPORT_PREFIX}{report}");
}

/// A child's output: its human lines and its report.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildOutput {
    pub lines: Vec<String>,
    pub report: Value,
}

impl ChildOutput {
    /// A number from the report, or an error naming the missing field.
    pub fn number(&self, field: &str) -> Result<f64, LabError> {
        self.report
            .get(field)
            .and_then(Value::as_f64)
            .ok_or_else(|| {
                LabError::Failed(format!(
                    "the child's report has no number `{field}`: {}",
                    self.report
                ))
            })
    }
}

/// Splits a child's stdout into human lines and the report.
pub fn parse_child_output(stdout: &[u8]) -> Result<ChildOutput, LabError> {
    let text = String::from_utf8_lossy(stdout);
    let mut lines = Vec::new();
    let mut report = None;
    for line in text.lines() {
        match line.strip_prefix(REPORT_PREFIX) {
            Some(json) => {
                report = Some(serde_json::from_str(json).map_err(|e| {
                    LabError::Failed(format!("the child's report is not JSON ({e}): {json}"))
                })?)
            }
            None => lines.push(line.to_string()),
        }
    }
    let report = report.ok_or_else(|| {
        LabError::Failed(format!(
            "the child printed no report line; its output ended with: {}",
            lines.last().map(String::as_str).unwrap_or("(nothing)")
        ))
    })?;
    Ok(ChildOutput { lines, report })
}

/// Runs `self_exe __child ARGS…` at sizes (`{n}` in ARGS) and takes the
/// child's own `cpu_s` and `wall_s` as the measurement.
pub struct SelfTimedExecutor {
    inner: CommandExecutor,
    /// Every run's output, in order, with its size.
    pub outputs: Vec<(u64, ChildOutput)>,
}

impl SelfTimedExecutor {
    pub fn new(ctx: &LabContext, child_args: &[String]) -> Self {
        let mut template = vec![
            ctx.self_exe.to_string_lossy().into_owned(),
            "__child".into(),
        ];
        template.extend(child_args.iter().cloned());
        SelfTimedExecutor {
            inner: CommandExecutor::new(template, ctx.cancel.clone()).keep_stdout(true),
            outputs: Vec::new(),
        }
    }
}

impl Executor for SelfTimedExecutor {
    fn run(&mut self, n: u64) -> Result<Measurement, RunError> {
        let m = self.inner.run(n)?;
        let parsed = parse_child_output(m.stdout.as_deref().unwrap_or_default()).map_err(|e| {
            RunError::Failed {
                n,
                status: "no report".into(),
                stderr_tail: e.to_string(),
            }
        })?;
        let number = |field: &str| {
            parsed.number(field).map_err(|e| RunError::Failed {
                n,
                status: "bad report".into(),
                stderr_tail: e.to_string(),
            })
        };
        let measurement = Measurement {
            cpu_s: number("cpu_s")?,
            wall_s: number("wall_s")?,
            stdout: None,
        };
        self.outputs.push((n, parsed));
        Ok(measurement)
    }

    fn take_warnings(&mut self) -> Vec<String> {
        self.inner.take_warnings()
    }
}

/// Runs `self_exe __child ARGS…` once and returns its output.
pub fn run_child(ctx: &LabContext, child_args: &[String]) -> Result<ChildOutput, LabError> {
    let mut exec = SelfTimedExecutor::new(ctx, child_args);
    match exec.inner.run(0) {
        Ok(m) => parse_child_output(m.stdout.as_deref().unwrap_or_default()),
        Err(RunError::Interrupted) => Err(LabError::Interrupted),
        Err(e) => Err(LabError::Failed(e.to_string())),
    }
}

/// A sweep of one variant: the child's arguments with `{n}` and the sizes.
pub struct VariantSweep<'s> {
    pub name: &'s str,
    pub role: Role,
    pub child_args: Vec<String>,
    pub sizes: Vec<u64>,
    pub reps: usize,
    pub budget_s: f64,
    pub early_stop: bool,
}

/// Sweeps a self-timed child. Interruption becomes `LabError::Interrupted`.
pub fn sweep_variant(
    ctx: &mut LabContext,
    spec: &VariantSweep,
) -> Result<(SweepResult, Vec<(u64, ChildOutput)>), LabError> {
    ctx.status(&format!("{}: sweeping n = {:?}", spec.name, spec.sizes));
    let mut exec = SelfTimedExecutor::new(ctx, &spec.child_args);
    let config = SweepConfig {
        sizes: spec.sizes.clone(),
        reps: spec.reps,
        warmup: 1,
        // The child times only its work: there is no start-up to subtract.
        baseline_size: None,
        budget_s: spec.budget_s,
        early_stop: spec.early_stop,
        min_net_cost_s: 0.001,
        ..SweepConfig::default()
    };
    let command = exec.inner_command(spec);
    let cancel = ctx.cancel.clone();
    let result = run_sweep(
        &mut exec,
        command,
        &config,
        ctx.out.sweep_progress(),
        &cancel,
    );
    let result = match result {
        Ok(r) if r.interrupted => return Err(LabError::Interrupted),
        Ok(r) => r,
        Err(SweepError::Run(RunError::Interrupted)) => return Err(LabError::Interrupted),
        Err(e) => return Err(e.into()),
    };
    Ok((result, exec.outputs))
}

impl SelfTimedExecutor {
    fn inner_command(&self, spec: &VariantSweep) -> Vec<String> {
        let mut command = vec!["slowlab".to_string(), "__child".to_string()];
        command.extend(spec.child_args.iter().cloned());
        command
    }
}

/// The JSON variant of a swept result.
pub fn sweep_to_variant(name: &str, role: Role, r: &SweepResult) -> Variant {
    Variant {
        name: name.to_string(),
        role,
        points: Some(r.points.clone()),
        value: None,
        unit: Some("s".into()),
        exponent: r.exponent,
        exponent_ci: r.exponent_ci,
        verdict: Some(r.verdict),
        note: (!r.warnings.is_empty()).then(|| r.warnings.join("; ")),
    }
}

/// A single-valued variant.
pub fn value_variant(name: &str, role: Role, value: f64, unit: &str) -> Variant {
    Variant {
        name: name.to_string(),
        role,
        points: None,
        value: Some(value),
        unit: Some(unit.to_string()),
        exponent: None,
        exponent_ci: None,
        verdict: None,
        note: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_output_splits_lines_and_report() {
        let out = b"hello\nworld\nslowlab-report {\"cpu_s\":1.5,\"wall_s\":2}\n";
        let parsed = parse_child_output(out).unwrap();
        assert_eq!(parsed.lines, vec!["hello", "world"]);
        assert_eq!(parsed.number("cpu_s").unwrap(), 1.5);
        assert_eq!(parsed.number("wall_s").unwrap(), 2.0);
        assert!(parsed.number("missing").is_err());
    }

    #[test]
    fn a_child_without_report_is_an_error_quoting_its_output() {
        let err = parse_child_output(b"partial\nlast words\n").unwrap_err();
        assert!(err.to_string().contains("last words"), "{err}");
        let err = parse_child_output(b"slowlab-report {not json\n").unwrap_err();
        assert!(err.to_string().contains("not JSON"), "{err}");
    }
}
