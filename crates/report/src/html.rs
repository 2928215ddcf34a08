//! Self-contained static HTML pages: inline CSS and inline SVG, no scripts,
//! fonts or other external resources, every string from a result escaped.
//! The lab report lives here; the trace report of `diagnose` and `analyze
//! --html` is the interactive page of [`crate::interactive`].

use slowlab_model::results::{ScenarioResult, ScenarioStatus, Variant};

use crate::format;
use crate::lab::{affected_text, value_text};
use crate::plot::{self, Series};

pub use crate::plot::escape;

const STYLE: &str = "body{font-family:sans-serif;margin:2em auto;max-width:60em;color:#222}\
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left}\
th{background:#f3f3f3}td.num{text-align:right}pre{background:#f7f7f7;padding:.6em;overflow-x:auto}\
.yes{color:#b03a2e;font-weight:bold}.no{color:#1e8449}.skipped{color:#888}h2{margin-top:2em}";

/// A whole page around `body` (already escaped HTML).
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>{}</title><style>{STYLE}</style></head>\n<body>\n<h1>{}</h1>\n{body}</body></html>\n",
        escape(title),
        escape(title)
    )
}

/// The report of a lab run (or of imported results).
pub fn lab_page(results: &[ScenarioResult]) -> String {
    let mut body = String::from(
        "<table><tr><th>scenario</th><th>affected</th><th>ratio</th>\
         <th>pathological vs control</th><th>explanation</th></tr>\n",
    );
    for r in results {
        let affected = affected_text(r);
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
        let explanation = match r.status {
            ScenarioStatus::Skipped => r.reason.clone().unwrap_or_default(),
            ScenarioStatus::Ran => r.explanation.clone(),
        };
        body.push_str(&format!(
            "<tr><td><a href=\"#{id}\">{id}</a></td><td class=\"{affected}\">{affected}</td>\
             <td class=\"num\">{}</td><td>{}</td><td>{}</td></tr>\n",
            escape(&ratio),
            escape(&comparison),
            escape(&explanation),
            id = escape(&r.id),
        ));
    }
    body.push_str("</table>\n");
    for r in results {
        body.push_str(&scenario_section(r));
    }
    page("slowlab lab report", &body)
}

fn scenario_section(r: &ScenarioResult) -> String {
    let mut s = format!(
        "<h2 id=\"{id}\">{id} <small>({})</small></h2>\n",
        escape(&r.platform),
        id = escape(&r.id)
    );
    if let Some(reason) = &r.reason {
        s.push_str(&format!("<p>{}</p>\n", escape(reason)));
    }
    let swept: Vec<&Variant> = r.variants.iter().filter(|v| v.points.is_some()).collect();
    if !swept.is_empty() {
        let series: Vec<Series> = swept
            .iter()
            .map(|v| Series {
                label: v.name.clone(),
                points: v.points.as_deref().unwrap_or_default(),
                baseline_s: 0.0,
                exponent: v.exponent,
            })
            .collect();
        s.push_str(&plot::series_svg(&r.id, "CPU seconds", &series));
    }
    if !r.variants.is_empty() {
        s.push_str(
            "<table><tr><th>variant</th><th>role</th><th>value</th><th>growth</th><th>verdict</th><th>note</th></tr>\n",
        );
        for v in &r.variants {
            let value = match (v.value, &v.unit) {
                (Some(x), Some(unit)) => value_text(x, unit),
                (Some(x), None) => format!("{x}"),
                _ => "—".into(),
            };
            let role = match v.role {
                slowlab_model::results::Role::Pathological => "pathological",
                slowlab_model::results::Role::Control => "control",
            };
            s.push_str(&format!(
                "<tr><td>{}</td><td>{role}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                escape(&v.name),
                escape(&value),
                escape(&format::exponent(v.exponent, v.exponent_ci)),
                escape(v.verdict.map_or("—", |x| x.as_str())),
                escape(v.note.as_deref().unwrap_or("")),
            ));
        }
        s.push_str("</table>\n");
    }
    if !r.lines.is_empty() {
        s.push_str(&format!("<pre>{}</pre>\n", escape(&r.lines.join("\n"))));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_escapes_every_string_and_has_no_external_resources() {
        let mut r = ScenarioResult::skipped("log-probe", "<script>alert(1)</script>");
        r.lines = vec!["a & b".into()];
        let html = lab_page(&[r]);
        assert!(!html.contains("<script>"), "{html}");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(html.contains("a &amp; b"));
        for external in ["src=", "href=\"http", "<link", "@import"] {
            assert!(!html.contains(external), "{external}");
        }
    }
}
