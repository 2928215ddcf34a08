//! A sweep result for people (the terminal table and the verdict line) and
//! for programs (JSON, CSV, Markdown), behind one `Exporter` trait in the
//! manner of hyperfine's exporters.

use slowlab_model::results::{SweepResult, Verdict};

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
            format::seconds(b.median_cpu_s()),
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
    for w in &r.warnings {
        out.push_str(&format!("warning: {w}\n"));
    }
    out
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

    #[test]
    fn exporter_follows_the_extension() {
        assert!(exporter_for("a.JSON").is_some());
        assert!(exporter_for("a.md").is_some());
        assert!(exporter_for("a.txt").is_none());
    }
}
