//! Self-contained HTML pages: inline CSS and inline SVG, no scripts, fonts
//! or other external resources, every string from a result or a trace
//! escaped. Two pages: the lab report and the trace report of `diagnose`
//! (findings, the main views, flame graphs as embedded images so that their
//! own scripts never run in the page).

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

/// What the `diagnose` page shows.
/// What the diagnose page shows: the analysis, the command, the flame
/// graphs drawn from it, and the warnings of the run.
pub struct DiagnosePage<'a> {
    pub command: &'a [String],
    pub diagnosis: &'a slowlab_analyze::diagnose::Diagnosis,
    pub cpu_flamegraph: Option<&'a [u8]>,
    pub offcpu_flamegraph: Option<&'a [u8]>,
    pub warnings: &'a [String],
}

pub fn diagnose_page(p: &DiagnosePage) -> String {
    let d = p.diagnosis;
    use crate::trace_views::culprit_text;
    let mut b = format!(
        "<p>Command: <code>{}</code></p>\n",
        escape(&p.command.join(" "))
    );
    for w in p.warnings {
        b.push_str(&format!(
            "<p class=\"skipped\">warning: {}</p>\n",
            escape(w)
        ));
    }
    if let Some(cp) = &d.critical_path {
        b.push_str(&crate::critical_path::critical_path_html(cp, 12));
    }
    b.push_str("<h2>Findings</h2>\n");
    if d.findings.is_empty() {
        b.push_str("<p>No detector fired on this trace.</p>\n");
    }
    for (i, f) in d.findings.iter().enumerate() {
        b.push_str(&format!(
            "<h3>{}. <span class=\"{}\">[{}]</span> {}</h3>\n<p>{}</p>\n\
             <p>cost {} ({:.1}% of the time examined); culprit: {}</p>\n",
            i + 1,
            if f.severity == slowlab_model::findings::Severity::High {
                "yes"
            } else {
                "no"
            },
            escape(f.severity.as_str()),
            escape(&f.id),
            escape(&f.title),
            escape(&format::seconds(f.cost_s)),
            f.cost_share * 100.0,
            escape(&culprit_text(f)),
        ));
        b.push_str("<table><tr><th>evidence</th><th>value</th></tr>\n");
        for (k, v) in &f.evidence {
            b.push_str(&format!(
                "<tr><td>{}</td><td>{}</td></tr>\n",
                escape(k),
                escape(&v.to_string())
            ));
        }
        b.push_str("</table>\n");
        if !f.stack.is_empty() {
            b.push_str(&format!("<pre>{}</pre>\n", escape(&f.stack.join("\n"))));
        }
        b.push_str(&format!("<p><b>Fix:</b> {}</p>\n", escape(&f.fix)));
    }

    b.push_str("<h2>CPU (sampled) of the command's processes</h2>\n");
    b.push_str(&cpu_tables(&d.command_cpu));
    b.push_str("<details><summary>CPU of the whole system</summary>\n");
    b.push_str(&cpu_tables(&d.system_cpu));
    b.push_str("</details>\n");
    if let Some(svg) = p.cpu_flamegraph {
        b.push_str(&embedded_svg("CPU flame graph", svg));
    }

    b.push_str("<h2>Waits</h2>\n<pre>");
    b.push_str(&escape(&crate::trace_views::waits_text(&d.waits, 12, 2)));
    b.push_str("</pre>\n");
    if let Some(svg) = p.offcpu_flamegraph {
        b.push_str(&embedded_svg("Off-CPU flame graph (time blocked)", svg));
    }
    b.push_str("<h2>Page faults</h2>\n<pre>");
    b.push_str(&escape(&crate::trace_views::faults_text(&d.faults, 10, 2)));
    b.push_str("</pre>\n<h2>Syscalls</h2>\n<pre>");
    b.push_str(&escape(&crate::trace_views::syscalls_text(
        &d.syscalls,
        6,
        6,
    )));
    b.push_str("</pre>\n<h2>Processes</h2>\n<pre>");
    b.push_str(&escape(&crate::trace_views::procs_text(&d.procs, 10)));
    b.push_str("</pre>\n");
    page("slowlab diagnose report", &b)
}

/// The process and function tables of a CPU summary.
fn cpu_tables(summary: &slowlab_analyze::cpu::Summary) -> String {
    let mut b = format!(
        "<p>{} samples over {}, {} lost.</p>\n<table><tr><th>pid</th><th>process</th><th>samples</th></tr>\n",
        summary.samples,
        escape(&format::seconds(summary.duration_s)),
        summary.lost
    );
    for p in summary.processes.iter().take(15) {
        b.push_str(&format!(
            "<tr><td class=\"num\">{}</td><td>{}</td><td class=\"num\">{}</td></tr>\n",
            p.pid,
            escape(&p.comm),
            p.samples
        ));
    }
    b.push_str("</table>\n<table><tr><th>function</th><th>module</th><th>self</th><th>inclusive</th></tr>\n");
    for f in summary.functions.iter().take(20) {
        b.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>\n",
            escape(&f.name),
            escape(&f.module),
            f.self_samples,
            f.inclusive
        ));
    }
    b.push_str("</table>\n");
    b
}

/// An SVG as an `<img>` with a data URI: self-contained, and any script in
/// it does not run in the page.
fn embedded_svg(title: &str, svg: &[u8]) -> String {
    use base64::Engine;
    format!(
        "<h3>{}</h3>\n<img alt=\"{}\" style=\"max-width:100%\" src=\"data:image/svg+xml;base64,{}\">\n",
        escape(title),
        escape(title),
        base64::engine::general_purpose::STANDARD.encode(svg)
    )
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
