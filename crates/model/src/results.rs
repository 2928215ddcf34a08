//! Results of measurements: one sweep (`SweepResult`) and one lab scenario
//! (`ScenarioResult`).
//!
//! These types are the JSON written by `slowlab sweep --json` and
//! `slowlab lab --json`, and read back by `slowlab import`; the field names are
//! documented in README.md and must not change casually. Statistics are
//! computed elsewhere (the `sweep` crate); this module only holds them.

use serde::{Deserialize, Serialize};

use crate::critical_path::{SegmentState, WaitKind};

/// Every repetition measured at one size `n`, in the order they ran.
///
/// `cpu_s[i]` and `wall_s[i]` belong to the same run: CPU is user+sys of the
/// command and all its descendants (from `wait4`), wall is elapsed time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub n: u64,
    pub cpu_s: Vec<f64>,
    pub wall_s: Vec<f64>,
}

impl Point {
    pub fn new(n: u64) -> Self {
        Point {
            n,
            cpu_s: Vec::new(),
            wall_s: Vec::new(),
        }
    }

    pub fn reps(&self) -> usize {
        self.cpu_s.len()
    }
}

/// What a sweep concluded about the growth of a command's cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Grows no faster than about linearly over the top sizes.
    Linear,
    /// Grows faster than linearly, consistently over the last doublings.
    Superlinear,
    /// A one-off jump in cost (a cache or memory-size step), not growth.
    Step,
    /// The data cannot tell; more repetitions or sizes are needed.
    Inconclusive,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Linear => "linear",
            Verdict::Superlinear => "superlinear",
            Verdict::Step => "step",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

/// The complexity class that fits the measured costs best (secondary label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Model {
    #[serde(rename = "1")]
    Constant,
    #[serde(rename = "n")]
    Linear,
    #[serde(rename = "n log n")]
    NLogN,
    #[serde(rename = "n^2")]
    Quadratic,
    #[serde(rename = "n^3")]
    Cubic,
}

impl Model {
    pub const ALL: [Model; 5] = [
        Model::Constant,
        Model::Linear,
        Model::NLogN,
        Model::Quadratic,
        Model::Cubic,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Model::Constant => "1",
            Model::Linear => "n",
            Model::NLogN => "n log n",
            Model::Quadratic => "n^2",
            Model::Cubic => "n^3",
        }
    }

    /// The model's growth function f(n); the fitted cost is `a + b·f(n)`.
    pub fn eval(self, n: f64) -> f64 {
        match self {
            Model::Constant => 1.0,
            Model::Linear => n,
            Model::NLogN => n * n.max(2.0).ln(),
            Model::Quadratic => n * n,
            Model::Cubic => n * n * n,
        }
    }
}

/// One row of the per-size table (terminal, CSV and Markdown exports).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizeRow {
    pub n: u64,
    pub reps: usize,
    /// Median CPU time of the runs at this size.
    pub median_cpu_s: f64,
    /// Median CPU time minus the baseline's median CPU time.
    pub net_cpu_s: f64,
    pub min_wall_s: f64,
    pub median_wall_s: f64,
    /// log2 of the net cost ratio from the previous size, per doubling of n;
    /// `None` for the first size or when a cost is not positive.
    pub local_exponent: Option<f64>,
}

/// Everything `slowlab sweep` measured and concluded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepResult {
    /// The command as given, with `{n}` still in place.
    pub command: Vec<String>,
    /// The sizes that were measured, ascending.
    pub sizes: Vec<u64>,
    /// The sizes that were asked for but not measured (budget, early stop).
    #[serde(default)]
    pub skipped_sizes: Vec<u64>,
    pub points: Vec<Point>,
    /// Runs at the baseline size (default 0), subtracted from every point.
    pub baseline: Option<Point>,
    #[serde(default)]
    pub rows: Vec<SizeRow>,
    /// `local_exponents[i]` is the exponent between `sizes[i]` and `sizes[i+1]`.
    pub local_exponents: Vec<Option<f64>>,
    /// Growth exponent over the top three sizes (least squares on log-log).
    pub exponent: Option<f64>,
    /// 95% bootstrap confidence interval of `exponent`.
    pub exponent_ci: Option<[f64; 2]>,
    pub verdict: Verdict,
    /// One sentence: why this verdict.
    #[serde(default)]
    pub reason: String,
    /// Best-fitting complexity class (secondary label).
    pub model: Option<Model>,
    /// Net cost ratio of the last two sizes.
    #[serde(default)]
    pub last_ratio: Option<f64>,
    /// Projected CPU seconds at twice the largest size.
    #[serde(default)]
    pub projected_next_s: Option<f64>,
    pub warnings: Vec<String>,
    /// Seed of the bootstrap; the same data and seed give the same interval.
    #[serde(default)]
    pub seed: u64,
    /// Wall-clock seconds the whole sweep took.
    #[serde(default)]
    pub elapsed_s: f64,
    /// The sweep was stopped by Ctrl-C; the result holds what was measured.
    #[serde(default)]
    pub interrupted: bool,
    /// `sweep --profile`: CPU seconds one sample stands for (the sampling
    /// period); a function's cost per run is its samples times this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_period_s: Option<f64>,
    /// `sweep --profile`: how each sampled function's cost grows, the
    /// fastest-growing first (see `FunctionGrowth`); empty without a profile.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<FunctionGrowth>,
    /// `sweep --critical-path`: how the time of each group of causes of
    /// the critical path grows (state, kind, process and thread, every
    /// function or resource of it together), the fastest-growing first;
    /// empty without `--critical-path`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cause_groups: Vec<CauseGrowth>,
    /// `sweep --critical-path`: the same for each cause (a group's one
    /// function or resource), as `slowlab diff` keys them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<CauseGrowth>,
}

/// What `sweep --profile` concluded about one function's cost: a sweep
/// verdict, or that it had too few samples to fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FunctionVerdict {
    Linear,
    Superlinear,
    Step,
    Inconclusive,
    /// Fewer samples at the largest size than a fit needs; not guessed.
    TooFewSamples,
}

impl FunctionVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            FunctionVerdict::TooFewSamples => "too few samples",
            FunctionVerdict::Linear => Verdict::Linear.as_str(),
            FunctionVerdict::Superlinear => Verdict::Superlinear.as_str(),
            FunctionVerdict::Step => Verdict::Step.as_str(),
            FunctionVerdict::Inconclusive => Verdict::Inconclusive.as_str(),
        }
    }
}

impl From<Verdict> for FunctionVerdict {
    fn from(v: Verdict) -> Self {
        match v {
            Verdict::Linear => FunctionVerdict::Linear,
            Verdict::Superlinear => FunctionVerdict::Superlinear,
            Verdict::Step => FunctionVerdict::Step,
            Verdict::Inconclusive => FunctionVerdict::Inconclusive,
        }
    }
}

/// A function's samples in each profiled run at one size (n = 0: the
/// baseline runs), in the order the runs were made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionPoint {
    pub n: u64,
    /// Samples with the function anywhere on the stack (inclusive cost).
    pub samples: Vec<u64>,
    /// Samples with the function innermost (self cost).
    #[serde(default)]
    pub self_samples: Vec<u64>,
}

/// How one function's sampled cost grows across the sizes of a sweep
/// (`sweep --profile`), fitted with the sweep's own statistics on its cost
/// per run (samples × `SweepResult::profile_period_s`, baseline runs
/// subtracted). The unprefixed fields are its inclusive cost, the `self_`
/// ones its self cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionGrowth {
    pub name: String,
    /// The binary or library it is in (`[kernel.kallsyms]` for the kernel).
    pub module: String,
    #[serde(default)]
    pub kernel: bool,
    /// Exponent of the inclusive cost over the top three sizes.
    pub exponent: Option<f64>,
    pub exponent_ci: Option<[f64; 2]>,
    pub verdict: FunctionVerdict,
    /// Median inclusive samples at the largest size over the median of all
    /// samples there (0–1).
    pub share_at_max: f64,
    /// Local exponents of the inclusive cost between consecutive sizes.
    #[serde(default)]
    pub local_exponents: Vec<Option<f64>>,
    #[serde(default)]
    pub self_exponent: Option<f64>,
    #[serde(default)]
    pub self_exponent_ci: Option<[f64; 2]>,
    pub self_verdict: FunctionVerdict,
    #[serde(default)]
    pub self_share_at_max: f64,
    /// Why the inclusive verdict, one sentence.
    #[serde(default)]
    pub reason: String,
    pub points: Vec<FunctionPoint>,
}

/// How the time of one cause of the critical path grows across the sizes
/// of a sweep (`sweep --critical-path`), fitted with the sweep's own
/// statistics on its seconds per run (baseline runs subtracted). The key
/// is `slowlab diff`'s: state, wait kind, process and thread names, and the
/// function (on a CPU) or resource (blocked); a group has neither and
/// names the one that is most of it in `mostly`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CauseGrowth {
    pub state: SegmentState,
    pub kind: Option<WaitKind>,
    pub process: String,
    pub thread: String,
    pub function: Option<String>,
    pub resource: Option<String>,
    /// A group: its function or resource with the most time at the
    /// largest size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mostly: Option<String>,
    /// The cause in words ("sleeping in hrtimer_nanosleep (prog)").
    pub words: String,
    /// Exponent over the top three sizes.
    pub exponent: Option<f64>,
    pub exponent_ci: Option<[f64; 2]>,
    /// `too-few-samples` here: too little time at the largest size to fit.
    pub verdict: FunctionVerdict,
    /// Median seconds per run at the largest size.
    pub median_at_max_s: f64,
    /// That over the median wall time of the critical path there (0–1).
    pub share_at_max: f64,
    #[serde(default)]
    pub local_exponents: Vec<Option<f64>>,
    /// Why the verdict, one sentence.
    #[serde(default)]
    pub reason: String,
    pub points: Vec<CausePoint>,
}

/// A cause's seconds in every run at one size (n = 0: the baseline runs),
/// in the order the runs were made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CausePoint {
    pub n: u64,
    pub seconds: Vec<f64>,
}

/// Whether a lab scenario ran on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScenarioStatus {
    Ran,
    Skipped,
}

/// The part a variant plays in a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Pathological,
    Control,
}

/// The scenario's main comparison: pathological against control.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    /// What was compared, e.g. "CPU time at n=4000" or "maximum monitor stall".
    pub metric: String,
    /// Unit of `pathological` and `control`, e.g. "s", "scans/s".
    pub unit: String,
    pub pathological: f64,
    pub control: f64,
    /// How many times worse the pathological variant is (always ≥ 0; > 1 is worse).
    pub ratio: f64,
}

/// One variant of a scenario: either a sweep (`points` and its statistics) or
/// a single measured `value`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Variant {
    pub name: String,
    pub role: Role,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub points: Option<Vec<Point>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    #[serde(default)]
    pub exponent: Option<f64>,
    #[serde(default)]
    pub exponent_ci: Option<[f64; 2]>,
    #[serde(default)]
    pub verdict: Option<Verdict>,
    /// Anything else worth saying about this variant ("OOM-killed", …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What one lab scenario found on one machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioResult {
    pub id: String,
    pub status: ScenarioStatus,
    /// Why it was skipped (or what limited it), one line.
    #[serde(default)]
    pub reason: Option<String>,
    /// `None` when skipped or when the result cannot tell.
    #[serde(default)]
    pub affected: Option<bool>,
    #[serde(default)]
    pub headline: Option<Headline>,
    #[serde(default)]
    pub variants: Vec<Variant>,
    /// One line of explanation for the verdict table.
    #[serde(default)]
    pub explanation: String,
    /// The human lines printed while it ran, in the spirit of the originals.
    #[serde(default)]
    pub lines: Vec<String>,
    /// Where it ran: "linux" for `slowlab lab`, "windows" for the probes.
    #[serde(default = "default_platform")]
    pub platform: String,
}

fn default_platform() -> String {
    "linux".to_string()
}

impl ScenarioResult {
    /// A scenario that could not run here, with the reason and what to do.
    pub fn skipped(id: &str, reason: impl Into<String>) -> Self {
        ScenarioResult {
            id: id.to_string(),
            status: ScenarioStatus::Skipped,
            reason: Some(reason.into()),
            affected: None,
            headline: None,
            variants: Vec::new(),
            explanation: String::new(),
            lines: Vec::new(),
            platform: default_platform(),
        }
    }
}

/// One traced run of a variant (`slowlab lab --trace`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TracedRun {
    /// The trace file.
    pub trace: String,
    /// Ids of the detectors that fired on it.
    pub findings: Vec<String>,
    /// Their titles, in the same order.
    pub titles: Vec<String>,
    /// Why the run or its trace failed, if it did.
    #[serde(default)]
    pub error: Option<String>,
}

/// Whether a scenario's detector fires on a trace of its pathological
/// variant and stays silent on its control's (`slowlab lab --trace`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceCheck {
    pub id: String,
    pub detector: String,
    pub status: ScenarioStatus,
    #[serde(default)]
    pub reason: Option<String>,
    pub pathological: Option<TracedRun>,
    pub control: Option<TracedRun>,
    /// The detector fired on the pathological trace.
    pub fired: Option<bool>,
    /// The detector stayed silent on the control trace.
    pub silent: Option<bool>,
}

impl TraceCheck {
    /// Both halves of the check hold.
    pub fn passed(&self) -> bool {
        self.fired == Some(true) && self.silent == Some(true)
    }

    /// Not judged: it could not run here, or was interrupted before its pathological run
    /// was (its reason says which).
    pub fn skipped(&self) -> bool {
        self.reason.is_some() && self.fired.is_none()
    }

    /// Judged and does not hold: a detector silent on the pathological trace or firing
    /// on the control's, or a run that could not be recorded or analyzed.
    pub fn failed(&self) -> bool {
        !self.skipped() && !self.passed()
    }
}

/// `slowlab lab --profile`: a profiled sweep of one scenario's
/// pathological variant; the first of `sweep.functions` is where its
/// growth lives (see `FunctionGrowth`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioProfile {
    pub id: String,
    /// The variant profiled (its pathological one).
    pub variant: String,
    pub status: ScenarioStatus,
    /// Why it was skipped, or what went wrong.
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub sweep: Option<SweepResult>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_and_model_serialize_as_documented() {
        assert_eq!(
            serde_json::to_string(&Verdict::Superlinear).unwrap(),
            "\"superlinear\""
        );
        assert_eq!(serde_json::to_string(&Model::NLogN).unwrap(), "\"n log n\"");
        let m: Model = serde_json::from_str("\"n^2\"").unwrap();
        assert_eq!(m, Model::Quadratic);
    }

    #[test]
    fn a_sweep_without_functions_reads_and_writes_as_before() {
        let old = r#"{"command":["x","{n}"],"sizes":[1],"points":[],"baseline":null,
            "local_exponents":[],"exponent":null,"exponent_ci":null,"verdict":"linear",
            "model":null,"warnings":[]}"#;
        let r: SweepResult = serde_json::from_str(old).unwrap();
        assert!(r.functions.is_empty() && r.profile_period_s.is_none());
        let text = serde_json::to_string(&r).unwrap();
        assert!(!text.contains("functions") && !text.contains("profile_period_s"));
        assert_eq!(
            serde_json::to_string(&FunctionVerdict::TooFewSamples).unwrap(),
            "\"too-few-samples\""
        );
    }

    #[test]
    fn a_check_whose_run_could_not_be_recorded_fails_and_a_skipped_one_does_not() {
        let run = |error: Option<&str>| TracedRun {
            trace: String::new(),
            findings: Vec::new(),
            titles: Vec::new(),
            error: error.map(str::to_string),
        };
        let check = |reason: Option<&str>, fired, silent| TraceCheck {
            id: "log-probe".into(),
            detector: "linear-probe-names".into(),
            status: ScenarioStatus::Ran,
            reason: reason.map(str::to_string),
            pathological: Some(run(None)),
            control: Some(run(None)),
            fired,
            silent,
        };
        let passed = check(None, Some(true), Some(true));
        assert!(passed.passed() && !passed.failed() && !passed.skipped());
        let silent = check(None, Some(false), Some(true));
        assert!(silent.failed() && !silent.skipped());
        // Neither run could be recorded (a full disk): nothing was judged, yet it ran.
        let unrecorded = TraceCheck {
            pathological: Some(run(Some("the disk filled"))),
            control: Some(run(Some("the disk filled"))),
            ..check(None, None, None)
        };
        assert!(unrecorded.failed() && !unrecorded.skipped());
        let skipped = TraceCheck {
            status: ScenarioStatus::Skipped,
            pathological: None,
            control: None,
            ..check(Some("needs root"), None, None)
        };
        assert!(skipped.skipped() && !skipped.failed());
    }

    #[test]
    fn skipped_scenario_round_trips_through_json() {
        let s = ScenarioResult::skipped("teardown-lock", "needs root: run with sudo");
        let text = serde_json::to_string(&s).unwrap();
        assert!(text.contains("\"status\":\"skipped\""));
        let back: ScenarioResult = serde_json::from_str(&text).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn scenario_without_optional_fields_parses_with_defaults() {
        // What a minimal Windows probe line looks like.
        let line = r#"{"id":"topdown-alloc","status":"ran","variants":[
            {"name":"topdown","role":"pathological","points":[{"n":1000,"cpu_s":[0.1],"wall_s":[0.1]}]}]}"#;
        let s: ScenarioResult = serde_json::from_str(line).unwrap();
        assert_eq!(s.platform, "linux");
        assert_eq!(s.variants[0].points.as_ref().unwrap()[0].n, 1000);
        assert_eq!(s.variants[0].verdict, None);
    }
}
