//! Lab results for people and programs: the verdict table printed at the end
//! of `slowlab lab` (and by `slowlab import`), and JSON Lines, one scenario
//! object per line — the format the Windows probes write too.

use slowlab_model::results::{Role, ScenarioResult, ScenarioStatus, Variant};

use crate::format;
use crate::table::{Align, Table};
use crate::write::ReportError;

/// "yes", "no", "?" (could not tell) or "skipped".
pub fn affected_text(r: &ScenarioResult) -> &'static str {
    match (r.status, r.affected) {
        (ScenarioStatus::Skipped, _) => "skipped",
        (_, Some(true)) => "yes",
        (_, Some(false)) => "no",
        (_, None) => "?",
    }
}

/// A headline value with its unit: "2.31 s", "13 scans/s", "3.7 µs".
pub fn value_text(value: f64, unit: &str) -> String {
    if unit == "s" {
        return format::seconds(value);
    }
    let digits = if value.abs() >= 100.0 {
        0
    } else if value.abs() >= 10.0 {
        1
    } else {
        2
    };
    format!("{value:.digits$} {unit}")
}

/// The pathological variant's exponent with its interval, if it was swept.
fn pathological_exponent(r: &ScenarioResult) -> String {
    r.variants
        .iter()
        .find(|v: &&Variant| v.role == Role::Pathological && v.exponent.is_some())
        .map(|v| format::exponent(v.exponent, v.exponent_ci))
        .unwrap_or_else(|| "—".into())
}

/// The verdict table and, under it, one line of explanation (or the reason
/// for a skip) per scenario.
pub fn render_verdicts(results: &[ScenarioResult]) -> String {
    let mut table = Table::new(&[
        ("scenario", Align::Left),
        ("affected", Align::Left),
        ("ratio", Align::Right),
        ("pathological vs control", Align::Left),
        ("growth (pathological)", Align::Left),
    ]);
    for r in results {
        let (ratio, comparison) = match &r.headline {
            Some(h) => (
                format!("{}×", format::ratio(h.ratio)),
                format!(
                    "{} vs {} ({})",
                    value_text(h.pathological, &h.unit),
                    value_text(h.control, &h.unit),
                    h.metric
                ),
            ),
            None => ("—".into(), "—".into()),
        };
        table.row(vec![
            r.id.clone(),
            affected_text(r).into(),
            ratio,
            comparison,
            pathological_exponent(r),
        ]);
    }
    let mut out = table.render(0);
    out.push('\n');
    for r in results {
        let text = match r.status {
            ScenarioStatus::Skipped => format!(
                "skipped: {}",
                r.reason.as_deref().unwrap_or("no reason given")
            ),
            ScenarioStatus::Ran => r.explanation.clone(),
        };
        if !text.is_empty() {
            out.push_str(&format!("{}: {text}\n", r.id));
        }
    }
    out
}

/// JSON Lines: one object (a scenario result, a trace check) per line.
pub fn json_lines<T: serde::Serialize>(results: &[T]) -> Result<Vec<u8>, ReportError> {
    let mut out = Vec::new();
    for (i, r) in results.iter().enumerate() {
        serde_json::to_writer(&mut out, r).map_err(|e| ReportError::Serialize {
            what: format!("line {}", i + 1),
            message: e.to_string(),
        })?;
        out.push(b'\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use slowlab_model::results::Headline;

    fn ran() -> ScenarioResult {
        ScenarioResult {
            id: "working-set-cap".into(),
            status: ScenarioStatus::Ran,
            reason: None,
            affected: Some(true),
            headline: Some(Headline {
                metric: "scan rate".into(),
                unit: "scans/s".into(),
                pathological: 13.0,
                control: 10200.0,
                ratio: 785.0,
            }),
            variants: vec![],
            explanation: "capped scans fault on every page".into(),
            lines: vec![],
            platform: "linux".into(),
        }
    }

    #[test]
    fn the_table_shows_verdicts_ratios_and_reasons() {
        let skipped = ScenarioResult::skipped("teardown-lock", "needs root");
        let text = render_verdicts(&[ran(), skipped]);
        assert!(text.contains("working-set-cap  yes"), "{text}");
        assert!(text.contains("785×"), "{text}");
        assert!(text.contains("13.0 scans/s vs 10200 scans/s"), "{text}");
        assert!(
            text.contains("teardown-lock: skipped: needs root"),
            "{text}"
        );
    }

    #[test]
    fn json_lines_has_one_parsable_object_per_scenario() {
        let bytes = json_lines(&[ran(), ran()]).unwrap();
        let text = String::from_utf8(bytes).unwrap();
        assert_eq!(text.lines().count(), 2);
        for line in text.lines() {
            let back: ScenarioResult = serde_json::from_str(line).unwrap();
            assert_eq!(back.id, "working-set-cap");
        }
    }
}
