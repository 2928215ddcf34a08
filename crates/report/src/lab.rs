//! Lab results for people and programs: the verdict table printed at the end
//! of `slowlab lab` (and by `slowlab import`), the summary of `lab
//! --profile`, and JSON Lines, one scenario object per line — the format
//! the Windows probes write too.

use slowlab_model::results::{
    Role, ScenarioProfile, ScenarioResult, ScenarioStatus, TraceCheck, Variant,
};

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
/// for a skip) per scenario, at any width.
pub fn render_verdicts(results: &[ScenarioResult]) -> String {
    render_verdicts_within(results, None)
}

/// [`render_verdicts`] for a terminal of `width` columns: when the table
/// would be wider, each headline's metric moves out of the table to the
/// scenario's lines below it, and those lines wrap at the width.
pub fn render_verdicts_within(results: &[ScenarioResult], width: Option<usize>) -> String {
    let table = |with_metric: bool| {
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
                        "{} vs {}{}",
                        value_text(h.pathological, &h.unit),
                        value_text(h.control, &h.unit),
                        if with_metric {
                            format!(" ({})", h.metric)
                        } else {
                            String::new()
                        }
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
        table.render(0)
    };
    let widest = |text: &str| text.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    let mut out = table(true);
    let narrow = width.filter(|&w| widest(&out) > w);
    if narrow.is_some() {
        out = table(false);
    }
    out.push('\n');
    for r in results {
        let mut text = match r.status {
            ScenarioStatus::Skipped => format!(
                "skipped: {}",
                r.reason.as_deref().unwrap_or("no reason given")
            ),
            ScenarioStatus::Ran => r.explanation.clone(),
        };
        if let (Some(_), Some(h)) = (narrow, &r.headline) {
            text = format!("{} — {text}", h.metric);
        }
        if text.is_empty() {
            continue;
        }
        let line = format!("{}: {text}", r.id);
        match narrow {
            Some(w) => out.push_str(&wrap(&line, w, 2)),
            None => {
                out.push_str(&line);
                out.push('\n');
            }
        }
    }
    out
}

/// Wraps `text` at spaces to lines of at most `width` characters, the
/// lines after the first indented by `indent`.
fn wrap(text: &str, width: usize, indent: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split(' ') {
        let len = line.chars().count();
        if len > indent && len + 1 + word.chars().count() > width {
            out.push_str(line.trim_end());
            out.push('\n');
            line = " ".repeat(indent);
        } else if !line.trim().is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(line.trim_end());
    out.push('\n');
    out
}

/// One row per scenario: its detector, and whether it fired on the
/// pathological trace and stayed silent on the control's.
pub fn checks_table(checks: &[TraceCheck]) -> String {
    let mut out = format!(
        "{:<16} {:<20} {:<12} {:<12} result\n",
        "scenario", "detector", "pathological", "control"
    );
    let said = |v: Option<bool>, yes: &str, no: &str| match v {
        Some(true) => yes.to_string(),
        Some(false) => no.to_string(),
        None => "-".to_string(),
    };
    for c in checks {
        let result = match &c.reason {
            Some(r) if c.skipped() => format!("skipped: {r}"),
            _ if c.passed() => "PASS".to_string(),
            _ => "FAIL".to_string(),
        };
        out.push_str(&format!(
            "{:<16} {:<20} {:<12} {:<12} {result}\n",
            c.id,
            c.detector,
            said(c.fired, "fired", "silent"),
            said(c.silent, "silent", "fired"),
        ));
    }
    out
}

/// The end of `lab --profile`: per scenario, where the growth of its
/// pathological variant lives (the headline of its profiled sweep), or why
/// it was not profiled.
pub fn profiles_summary(profiles: &[ScenarioProfile]) -> String {
    let mut out = String::from("where each pathological variant's cost grows:\n");
    for p in profiles {
        let text = match (&p.sweep, &p.reason) {
            (Some(sweep), _) if !sweep.functions.is_empty() => format!(
                "{} ({}, whole run {}): {}",
                p.variant,
                sweep.verdict.as_str(),
                format::exponent(sweep.exponent, sweep.exponent_ci),
                crate::sweep::functions_headline(sweep)
            ),
            (Some(_), _) => format!("{}: no samples were recorded", p.variant),
            (None, Some(reason)) => format!("skipped: {reason}"),
            (None, None) => "skipped".to_string(),
        };
        out.push_str(&format!("  {:<16} {text}\n", p.id));
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
    fn a_narrow_terminal_gets_the_metrics_below_the_table() {
        let skipped = ScenarioResult::skipped("teardown-lock", "needs root");
        let wide = render_verdicts(&[ran(), skipped.clone()]);
        let text = render_verdicts_within(&[ran(), skipped], Some(90));
        assert!(wide.lines().any(|l| l.chars().count() > 90), "{wide}");
        for line in text.lines() {
            assert!(line.chars().count() <= 90, "{line:?} in\n{text}");
        }
        assert!(text.contains("13.0 scans/s vs 10200 scans/s"), "{text}");
        assert!(text.contains("working-set-cap: "), "{text}");
        // Nothing is lost: the metric moved under the table.
        let metric = ran().headline.unwrap().metric;
        let first_word = metric.split(' ').next().unwrap();
        assert!(text.contains(first_word), "{text}");
        assert_eq!(
            render_verdicts_within(&[ran()], Some(500)),
            render_verdicts(&[ran()])
        );
    }

    #[test]
    fn the_checks_table_says_pass_fail_and_skipped() {
        let check = |id: &str, fired: Option<bool>, silent, reason: Option<&str>| TraceCheck {
            id: id.into(),
            detector: "det".into(),
            status: if fired.is_some() {
                ScenarioStatus::Ran
            } else {
                ScenarioStatus::Skipped
            },
            reason: reason.map(String::from),
            pathological: None,
            control: None,
            fired,
            silent,
        };
        let text = checks_table(&[
            check("a", Some(true), Some(true), None),
            check("b", Some(true), Some(false), None),
            check("c", None, None, Some("needs root")),
        ]);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[1].starts_with("a ") && lines[1].ends_with("PASS"),
            "{text}"
        );
        assert!(
            lines[2].contains("fired        fired") && lines[2].ends_with("FAIL"),
            "{text}"
        );
        assert!(lines[3].ends_with("skipped: needs root"), "{text}");
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
