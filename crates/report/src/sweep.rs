//! A sweep result for people (the terminal table, the verdict line and,
//! with `--profile`, the functions that grow; with `--critical-path`, the
//! causes of the critical path that grow) and for programs (JSON, CSV,
//! Markdown), behind one `Exporter` trait in the manner of hyperfine's
//! exporters.

use slowlab_model::results::{CauseGrowth, FunctionGrowth, FunctionVerdict, SweepResult, Verdict};

use crate::format;
use crate::plot;
use crate::table::{Align, Table};
use crate::write::ReportError;

/// Turns a sweep result into the bytes of one export format.
pub trait Exporter {
    fn export(&self, result: &SweepResult) -> Result<Vec<u8>, ReportError>;
}

pub struct JsonExporter;
pub struct CsvExporter;
pub struct MarkdownExporter;
pub struct SvgExporter;

impl Exporter for JsonExporter {
    fn export(&self, result: &SweepResult) -> Result<Vec<u8>, ReportError> {
        let mut bytes = serde_json::to_vec_pretty(result).map_err(|e| ReportError::Serialize {
            what: "the sweep result".into(),
            message: e.to_string(),
        })?;
        bytes.push(b'\n');
        Ok(bytes)
    }
}

impl Exporter for CsvExporter {
    fn export(&self, result: &SweepResult) -> Result<Vec<u8>, ReportError> {
        let csv_error = |e: csv::Error| ReportError::Serialize {
            what: "the CSV table".into(),
            message: e.to_string(),
        };
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record([
            "n",
            "reps",
            "median_cpu_s",
            "net_cpu_s",
            "min_wall_s",
            "median_wall_s",
            "local_exponent",
        ])
        .map_err(csv_error)?;
        for r in &result.rows {
            w.write_record([
                r.n.to_string(),
                r.reps.to_string(),
                r.median_cpu_s.to_string(),
                r.net_cpu_s.to_string(),
                r.min_wall_s.to_string(),
                r.median_wall_s.to_string(),
                r.local_exponent.map(|e| e.to_string()).unwrap_or_default(),
            ])
            .map_err(csv_error)?;
        }
        w.into_inner().map_err(|e| ReportError::Serialize {
            what: "the CSV table".into(),
            message: e.to_string(),
        })
    }
}

impl Exporter for MarkdownExporter {
    fn export(&self, result: &SweepResult) -> Result<Vec<u8>, ReportError> {
        let mut out = format!("Sweep of `{}`\n\n", result.command.join(" "));
        out.push_str("| n | reps | median CPU | net CPU | min wall | local exponent |\n");
        out.push_str("|---:|---:|---:|---:|---:|---:|\n");
        for r in &result.rows {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                r.n,
                r.reps,
                format::seconds(r.median_cpu_s),
                format::seconds(r.net_cpu_s),
                format::seconds(r.min_wall_s),
                format::opt(r.local_exponent, 2)
            ));
        }
        out.push_str(&format!("\n**{}**\n", verdict_line(result)));
        Ok(out.into_bytes())
    }
}

impl Exporter for SvgExporter {
    fn export(&self, result: &SweepResult) -> Result<Vec<u8>, ReportError> {
        Ok(plot::sweep_svg(result).into_bytes())
    }
}

/// The exporter for a file name's extension, if any: `.json`, `.csv`,
/// `.md`/`.markdown`, `.svg`.
pub fn exporter_for(path: &str) -> Option<Box<dyn Exporter>> {
    let lower = path.to_ascii_lowercase();
    if lower.ends_with(".json") {
        Some(Box::new(JsonExporter))
    } else if lower.ends_with(".csv") {
        Some(Box::new(CsvExporter))
    } else if lower.ends_with(".md") || lower.ends_with(".markdown") {
        Some(Box::new(MarkdownExporter))
    } else if lower.ends_with(".svg") {
        Some(Box::new(SvgExporter))
    } else {
        None
    }
}

/// The one-line verdict with its numbers, e.g.
/// `superlinear: ≈N^1.97 [1.92–2.03]; last doubling ×3.9; projected 2N: 31 s`.
pub fn verdict_line(r: &SweepResult) -> String {
    let mut parts = vec![format!(
        "{}: ≈{}",
        r.verdict.as_str(),
        format::exponent(r.exponent, r.exponent_ci)
    )];
    if let Some(ratio) = r.last_ratio {
        let step = match r.sizes.as_slice() {
            [.., a, b] if *b == a * 2 => "last doubling".to_string(),
            [.., a, b] => format!("last step ({a}→{b})"),
            _ => "last step".to_string(),
        };
        parts.push(format!("{step} ×{}", format::ratio(ratio)));
    }
    if let Some(p) = r.projected_next_s {
        parts.push(format!("projected 2N: {}", format::seconds(p)));
    }
    if let Some(m) = r.model {
        parts.push(format!("best fit {}", m.as_str()));
    }
    parts.join("; ")
}

/// The whole terminal report: command, baseline, per-size table, verdict,
/// reason and warnings.
pub fn render_text(r: &SweepResult) -> String {
    let mut out = format!("sweep of: {}\n", r.command.join(" "));
    if let Some(b) = &r.baseline {
        out.push_str(&format!(
            "baseline n={}: {} CPU, median of {} run(s)\n",
            b.n,
            format::seconds(slowlab_sweep::stats::median(&b.cpu_s)),
            b.reps()
        ));
    }
    let mut table = Table::new(&[
        ("n", Align::Right),
        ("reps", Align::Right),
        ("median CPU", Align::Right),
        ("net CPU", Align::Right),
        ("min wall", Align::Right),
        ("local exp", Align::Right),
    ]);
    for row in &r.rows {
        table.row(vec![
            row.n.to_string(),
            row.reps.to_string(),
            format::seconds(row.median_cpu_s),
            format::seconds(row.net_cpu_s),
            format::seconds(row.min_wall_s),
            format::opt(row.local_exponent, 2),
        ]);
    }
    out.push('\n');
    out.push_str(&table.render(2));
    out.push('\n');
    out.push_str(&verdict_line(r));
    out.push('\n');
    if !r.reason.is_empty() {
        out.push_str(&format!("  why: {}\n", r.reason));
    }
    if r.verdict == Verdict::Inconclusive && r.warnings.is_empty() {
        out.push_str("  try: more repetitions (--reps) or larger sizes\n");
    }
    if !r.functions.is_empty() {
        out.push('\n');
        out.push_str(&render_functions(r));
    }
    if !r.cause_groups.is_empty() {
        out.push('\n');
        out.push_str(&render_causes(r));
    }
    for w in &r.warnings {
        out.push_str(&format!("warning: {w}\n"));
    }
    out
}

/// Fitted functions shown in the terminal table at most.
const TOP_FUNCTIONS: usize = 10;
/// Names quoted for the functions with too few samples.
const TOO_FEW_NAMES: usize = 5;

/// The growing function in one sentence, e.g. "`quad_part` (growth) grows
/// as N^2.01 [1.96–2.05] and is 78% of the cost at n=8000; `lin_part`
/// N^1.00": the first function of `functions` (where the growth lives)
/// when it grows super-linearly (else the fastest-growing one, with its
/// open verdict), and the linear function with the largest own share.
/// Judged on self cost when that grows, else on inclusive cost.
pub fn functions_headline(r: &SweepResult) -> String {
    let max_n = r.sizes.last().copied().unwrap_or(0);
    let mut parts = Vec::new();
    match r.functions.first() {
        Some(f) if f.self_verdict == FunctionVerdict::Superlinear => parts.push(format!(
            "`{}` ({}) grows as {} and is {} of the cost at n={max_n}",
            f.name,
            f.module,
            format::exponent(f.self_exponent, f.self_exponent_ci),
            percent(f.self_share_at_max)
        )),
        Some(f) if f.verdict == FunctionVerdict::Superlinear => parts.push(format!(
            "`{}` ({}) grows as {} (with what it calls) and is {} of the cost at n={max_n}",
            f.name,
            f.module,
            format::exponent(f.exponent, f.exponent_ci),
            percent(f.share_at_max)
        )),
        // Noise left the verdict open: still say which function grows
        // fastest, with its verdict, rather than nothing.
        Some(f) if f.self_exponent.is_some() => parts.push(format!(
            "no function's cost grows certainly super-linearly; the fastest is `{}` ({}), {} ({}), {} of the cost at n={max_n}",
            f.name,
            f.module,
            format::exponent(f.self_exponent, f.self_exponent_ci),
            f.self_verdict.as_str(),
            percent(f.self_share_at_max)
        )),
        _ => parts.push("no function's cost grows super-linearly".to_string()),
    }
    let linear = r
        .functions
        .iter()
        .filter(|f| f.self_verdict == FunctionVerdict::Linear)
        .max_by(|a, b| a.self_share_at_max.total_cmp(&b.self_share_at_max));
    if let Some(f) = linear {
        parts.push(format!(
            "`{}` N^{}",
            f.name,
            format::opt(f.self_exponent, 2)
        ));
    }
    parts.join("; ")
}

/// The `--profile` part of the terminal report: the headline, a table of
/// the fitted functions (fastest growth first, as `functions` is ordered)
/// and the functions with too few samples.
pub fn render_functions(r: &SweepResult) -> String {
    let max_n = r.sizes.last().copied().unwrap_or(0);
    let period = r
        .profile_period_s
        .map(|p| format!(", one sample per {} of CPU", format::seconds(p)))
        .unwrap_or_default();
    let mut out = format!("functions (perf{period}):\n  {}\n", functions_headline(r));
    let (fitted, too_few): (Vec<&FunctionGrowth>, Vec<&FunctionGrowth>) = r
        .functions
        .iter()
        .partition(|f| f.verdict != FunctionVerdict::TooFewSamples);
    let at_max = format!("share at n={max_n}");
    let mut table = Table::new(&[
        ("function", Align::Left),
        ("module", Align::Left),
        ("inclusive", Align::Left),
        ("verdict", Align::Left),
        (at_max.as_str(), Align::Right),
        ("self", Align::Left),
        ("self share", Align::Right),
    ]);
    for f in fitted.iter().take(TOP_FUNCTIONS) {
        let own = match f.self_verdict {
            FunctionVerdict::TooFewSamples => "too few samples".to_string(),
            v => format!(
                "{} {}",
                format::exponent(f.self_exponent, f.self_exponent_ci),
                v.as_str()
            ),
        };
        table.row(vec![
            short(&f.name),
            f.module.clone(),
            format::exponent(f.exponent, f.exponent_ci),
            f.verdict.as_str().to_string(),
            percent(f.share_at_max),
            own,
            percent(f.self_share_at_max),
        ]);
    }
    if !fitted.is_empty() {
        out.push('\n');
        out.push_str(&table.render(2));
    }
    if fitted.len() > TOP_FUNCTIONS {
        out.push_str(&format!(
            "  … and {} more fitted functions (see --json)\n",
            fitted.len() - TOP_FUNCTIONS
        ));
    }
    if let Some(first) = too_few.first() {
        let names: Vec<String> = too_few
            .iter()
            .take(TOO_FEW_NAMES)
            .map(|f| short(&f.name))
            .collect();
        out.push_str(&format!(
            "  too few samples to fit: {} function(s), e.g. {} ({})\n",
            too_few.len(),
            names.join(", "),
            first.reason
        ));
    }
    out
}

/// Groups of causes the headline names at most.
const NAMED_CAUSES: usize = 4;
/// Rows of the causes table at most.
const TOP_CAUSES: usize = 10;
/// A group of causes smaller than this share of the path at the largest
/// size is not named in the headline.
const NAMED_SHARE: f64 = 0.05;

/// Who a cause is of: "prog" or "prog, thread worker".
fn whose(c: &CauseGrowth) -> String {
    if c.thread == c.process {
        c.process.clone()
    } else {
        format!("{}, thread {}", c.process, c.thread)
    }
}

/// The growing causes in one sentence, e.g. "sleeping in
/// hrtimer_nanosleep grows as N^2.01 [1.96–2.05] (prog), on a CPU in
/// compute_page as N^1.00 [0.98–1.02] (prog)": the fitted groups of at
/// least 5% of the path at the largest size, in `cause_groups`' order
/// (super-linear first).
pub fn causes_headline(r: &SweepResult) -> String {
    let named: Vec<String> = r
        .cause_groups
        .iter()
        .filter(|g| g.verdict != FunctionVerdict::TooFewSamples && g.share_at_max >= NAMED_SHARE)
        .take(NAMED_CAUSES)
        .enumerate()
        .map(|(i, g)| {
            format!(
                "{} {}{} ({})",
                g.words,
                if i == 0 { "grows as " } else { "as " },
                format::exponent(g.exponent, g.exponent_ci),
                whose(g)
            )
        })
        .collect();
    if named.is_empty() {
        "no cause has enough time to fit".to_string()
    } else {
        named.join(", ")
    }
}

/// The `--critical-path` part of the terminal report: the headline and a
/// table of the groups of causes (fastest growth first, as `cause_groups`
/// is ordered); the causes one by one are in the JSON.
pub fn render_causes(r: &SweepResult) -> String {
    let max_n = r.sizes.last().copied().unwrap_or(0);
    let mut out = format!(
        "the critical path by cause (wall time):\n  {}\n",
        causes_headline(r)
    );
    let at_max = format!("at n={max_n}");
    let mut table = Table::new(&[
        ("cause", Align::Left),
        ("whose", Align::Left),
        ("growth", Align::Left),
        ("verdict", Align::Left),
        (at_max.as_str(), Align::Right),
        ("share", Align::Right),
    ]);
    for g in r.cause_groups.iter().take(TOP_CAUSES) {
        let (growth, verdict) = match g.verdict {
            FunctionVerdict::TooFewSamples => ("—".to_string(), "too small to fit"),
            v => (format::exponent(g.exponent, g.exponent_ci), v.as_str()),
        };
        table.row(vec![
            short(&g.words),
            whose(g),
            growth,
            verdict.to_string(),
            format::seconds(g.median_at_max_s),
            percent(g.share_at_max),
        ]);
    }
    out.push('\n');
    out.push_str(&table.render(2));
    if r.cause_groups.len() > TOP_CAUSES {
        out.push_str(&format!(
            "  … and {} more (see --json)\n",
            r.cause_groups.len() - TOP_CAUSES
        ));
    }
    out
}

/// A share 0–1 as a percentage.
fn percent(share: f64) -> String {
    if share > 0.0 && share < 0.01 {
        "<1%".to_string()
    } else {
        format!("{:.0}%", share * 100.0)
    }
}

/// Long (C++/Rust generic) names cut to fit a table column.
fn short(name: &str) -> String {
    const MAX: usize = 48;
    if name.chars().count() <= MAX {
        name.to_string()
    } else {
        let cut: String = name.chars().take(MAX - 1).collect();
        format!("{cut}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slowlab_model::results::{Model, Point, SizeRow};

    fn sample() -> SweepResult {
        let rows: Vec<SizeRow> = [(1000u64, 0.11), (2000, 0.41), (4000, 1.61)]
            .iter()
            .enumerate()
            .map(|(i, &(n, t))| SizeRow {
                n,
                reps: 3,
                median_cpu_s: t,
                net_cpu_s: t - 0.01,
                min_wall_s: t,
                median_wall_s: t,
                local_exponent: (i > 0).then_some(2.0),
            })
            .collect();
        SweepResult {
            command: vec!["work".into(), "{n}".into()],
            sizes: vec![1000, 2000, 4000],
            skipped_sizes: vec![],
            points: rows
                .iter()
                .map(|r| Point {
                    n: r.n,
                    cpu_s: vec![r.median_cpu_s; 3],
                    wall_s: vec![r.median_cpu_s; 3],
                })
                .collect(),
            baseline: Some(Point {
                n: 0,
                cpu_s: vec![0.01; 3],
                wall_s: vec![0.01; 3],
            }),
            rows,
            local_exponents: vec![Some(2.0), Some(2.0)],
            exponent: Some(1.97),
            exponent_ci: Some([1.92, 2.03]),
            verdict: Verdict::Superlinear,
            reason: "because".into(),
            model: Some(Model::Quadratic),
            last_ratio: Some(3.9),
            projected_next_s: Some(31.0),
            warnings: vec!["be careful".into()],
            seed: 1,
            elapsed_s: 6.0,
            interrupted: false,
            profile_period_s: None,
            functions: Vec::new(),
            cause_groups: Vec::new(),
            causes: Vec::new(),
        }
    }

    #[test]
    fn verdict_line_has_the_documented_shape() {
        assert_eq!(
            verdict_line(&sample()),
            "superlinear: ≈N^1.97 [1.92–2.03]; last doubling ×3.90; projected 2N: 31 s; best fit n^2"
        );
    }

    #[test]
    fn text_report_shows_table_verdict_and_warnings() {
        let text = render_text(&sample());
        assert!(text.contains("baseline n=0: 10 ms CPU"), "{text}");
        assert!(text.contains("4000"), "{text}");
        assert!(text.contains("warning: be careful"), "{text}");
    }

    #[test]
    fn json_has_the_documented_fields() {
        let bytes = JsonExporter.export(&sample()).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        for key in [
            "command",
            "sizes",
            "points",
            "baseline",
            "local_exponents",
            "exponent",
            "exponent_ci",
            "verdict",
            "model",
            "warnings",
        ] {
            assert!(v.get(key).is_some(), "missing {key}");
        }
        assert_eq!(v["verdict"], "superlinear");
        assert_eq!(v["model"], "n^2");
        assert_eq!(v["points"][0]["cpu_s"].as_array().unwrap().len(), 3);
    }

    #[test]
    fn csv_and_markdown_have_a_row_per_size() {
        let csv = String::from_utf8(CsvExporter.export(&sample()).unwrap()).unwrap();
        assert_eq!(csv.lines().count(), 4);
        assert!(csv.starts_with("n,reps,median_cpu_s"));
        let md = String::from_utf8(MarkdownExporter.export(&sample()).unwrap()).unwrap();
        assert_eq!(md.lines().filter(|l| l.starts_with("| 4000")).count(), 1);
    }

    fn function(name: &str, k: f64, verdict: FunctionVerdict, share: f64) -> FunctionGrowth {
        FunctionGrowth {
            name: name.into(),
            module: "growth".into(),
            kernel: false,
            exponent: Some(k),
            exponent_ci: Some([k - 0.05, k + 0.04]),
            verdict,
            share_at_max: share,
            local_exponents: vec![Some(k)],
            self_exponent: Some(k),
            self_exponent_ci: Some([k - 0.05, k + 0.04]),
            self_verdict: verdict,
            self_share_at_max: share,
            reason: String::new(),
            points: vec![],
        }
    }

    #[test]
    fn functions_are_reported_with_the_growing_one_first() {
        let mut r = sample();
        r.profile_period_s = Some(0.0005);
        let mut rare = function("rare", 0.0, FunctionVerdict::TooFewSamples, 0.001);
        rare.exponent = None;
        rare.reason = "3 samples per run at n=4000 (median), fewer than the 50 a fit needs".into();
        r.functions = vec![
            function("quad_part", 2.01, FunctionVerdict::Superlinear, 0.78),
            function("lin_part", 1.0, FunctionVerdict::Linear, 0.21),
            rare,
        ];
        assert_eq!(
            functions_headline(&r),
            "`quad_part` (growth) grows as N^2.01 [1.96–2.05] and is 78% of the cost at n=4000; \
             `lin_part` N^1.00"
        );
        let text = render_text(&r);
        assert!(text.contains("one sample per 500 µs of CPU"), "{text}");
        let row = |name: &str| text.lines().position(|l| l.trim_start().starts_with(name));
        let quad = row("quad_part ").expect("table row");
        let lin = row("lin_part ").expect("table row");
        assert!(quad < lin, "{text}");
        assert!(
            text.contains("too few samples to fit: 1 function(s), e.g. rare (3 samples"),
            "{text}"
        );
        let v: serde_json::Value =
            serde_json::from_slice(&JsonExporter.export(&r).unwrap()).unwrap();
        assert_eq!(v["functions"][0]["name"], "quad_part");
        assert_eq!(v["functions"][2]["verdict"], "too-few-samples");
    }

    fn cause(words: &str, thread: &str, k: Option<f64>, verdict: FunctionVerdict) -> CauseGrowth {
        use slowlab_model::critical_path::SegmentState;
        CauseGrowth {
            state: SegmentState::Cpu,
            kind: None,
            process: "prog".into(),
            thread: thread.into(),
            function: None,
            resource: None,
            mostly: None,
            words: words.into(),
            exponent: k,
            exponent_ci: k.map(|k| [k - 0.05, k + 0.04]),
            verdict,
            median_at_max_s: 0.5,
            share_at_max: 0.4,
            local_exponents: Vec::new(),
            reason: String::new(),
            points: Vec::new(),
        }
    }

    #[test]
    fn causes_are_said_growing_first_and_too_small_ones_are_not_named() {
        let mut r = sample();
        r.cause_groups = vec![
            cause(
                "sleeping in do_nanosleep",
                "prog",
                Some(2.01),
                FunctionVerdict::Superlinear,
            ),
            cause(
                "on a CPU in compute",
                "worker",
                Some(1.0),
                FunctionVerdict::Linear,
            ),
            cause(
                "waiting for a CPU",
                "prog",
                None,
                FunctionVerdict::TooFewSamples,
            ),
        ];
        assert_eq!(
            causes_headline(&r),
            "sleeping in do_nanosleep grows as N^2.01 [1.96–2.05] (prog), \
             on a CPU in compute as N^1.00 [0.95–1.04] (prog, thread worker)"
        );
        let text = render_text(&r);
        assert!(
            text.contains("the critical path by cause (wall time):"),
            "{text}"
        );
        assert!(text.contains("too small to fit"), "{text}");
        let v: serde_json::Value =
            serde_json::from_slice(&JsonExporter.export(&r).unwrap()).unwrap();
        assert_eq!(v["cause_groups"][0]["exponent"], 2.01);
        assert_eq!(v["cause_groups"][0]["state"], "cpu");
        // Without --critical-path the JSON has neither list.
        let plain: serde_json::Value =
            serde_json::from_slice(&JsonExporter.export(&sample()).unwrap()).unwrap();
        assert!(plain.get("causes").is_none() && plain.get("cause_groups").is_none());
    }

    #[test]
    fn an_open_verdict_still_names_the_fastest_growing_function() {
        let mut r = sample();
        r.functions = vec![
            function("quad_part", 1.47, FunctionVerdict::Step, 0.8),
            function("lin_part", 0.96, FunctionVerdict::Linear, 0.2),
        ];
        assert_eq!(
            functions_headline(&r),
            "no function's cost grows certainly super-linearly; the fastest is `quad_part` \
             (growth), N^1.47 [1.42–1.51] (step), 80% of the cost at n=4000; `lin_part` N^0.96"
        );
    }

    #[test]
    fn exporter_follows_the_extension() {
        assert!(exporter_for("a.JSON").is_some());
        assert!(exporter_for("a.md").is_some());
        assert!(exporter_for("a.txt").is_none());
    }
}
