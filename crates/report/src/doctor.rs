//! `slowlab doctor`'s report for people and programs: the verdict of each
//! check, then the findings most costly first (as `diagnose` prints them),
//! as terminal text, as JSON (`slowlab_doctor::Report`), or as a
//! self-contained HTML page. Renders only; the checks are
//! `slowlab-doctor`'s.

use slowlab_doctor::{Report, Verdict};

use crate::format;
use crate::html::{escape, page};
use crate::trace_views::{culprit_text, findings_text};

/// One line per check, the findings, and what the exit status means.
pub fn doctor_text(report: &Report) -> String {
    let mut out = format!(
        "slowlab doctor: standing conditions read twice, {:.1} s apart, the whole system recorded in between\n\n",
        report.seconds
    );
    let width = report.checks.iter().map(|c| c.id.len()).max().unwrap_or(0);
    for c in &report.checks {
        out.push_str(&format!(
            "  {:<8} {:<width$}  {}\n",
            c.verdict.as_str(),
            c.id,
            c.detail
        ));
    }
    out.push('\n');
    if report.findings.is_empty() {
        out.push_str("no findings\n");
    } else {
        out.push_str(&format!(
            "{} finding(s), most costly first:\n",
            report.findings.len()
        ));
        out.push_str(&findings_text(&report.findings));
    }
    out.push_str(&format!("\n{}\n", summary(report)));
    out
}

/// The last line: what was found, and the exit status.
fn summary(report: &Report) -> String {
    let skipped = report
        .checks
        .iter()
        .filter(|c| c.verdict == Verdict::Skipped)
        .count();
    let what = match report.exit_code {
        0 => "nothing found".to_string(),
        1 => format!("{} finding(s)", report.findings.len()),
        _ => format!("nothing found, but {skipped} check(s) could not run"),
    };
    format!("verdict: {what} (exit {})", report.exit_code)
}

/// The report as pretty JSON.
pub fn doctor_json(report: &Report) -> Result<String, serde_json::Error> {
    serde_json::to_string_pretty(report)
}

/// A self-contained HTML page of the report.
pub fn doctor_html(report: &Report) -> String {
    let mut body = format!("<p>{}</p>\n", escape(&summary(report)));
    body.push_str(
        "<h2>Checks</h2>\n<table><tr><th>check</th><th>verdict</th><th>detail</th></tr>\n",
    );
    for c in &report.checks {
        let class = match c.verdict {
            Verdict::Found => "yes",
            Verdict::Ok => "no",
            Verdict::Skipped => "skipped",
        };
        body.push_str(&format!(
            "<tr><td>{}</td><td class=\"{class}\">{}</td><td>{}</td></tr>\n",
            escape(&c.id),
            c.verdict.as_str(),
            escape(&c.detail)
        ));
    }
    body.push_str("</table>\n<h2>Findings, most costly first</h2>\n");
    if report.findings.is_empty() {
        body.push_str("<p>no findings</p>\n");
    }
    for (i, f) in report.findings.iter().enumerate() {
        body.push_str(&format!(
            "<h3>{}. [{}] {}</h3>\n<p>{}</p>\n<p>cost {} ({:.1}% of the time examined); culprit: {}</p>\n<p><b>fix:</b> {}</p>\n",
            i + 1,
            f.severity.as_str(),
            escape(&f.id),
            escape(&f.title),
            format::seconds(f.cost_s),
            f.cost_share * 100.0,
            escape(&culprit_text(f)),
            escape(&f.fix)
        ));
        if !f.evidence.is_empty() {
            let json = serde_json::to_string_pretty(&f.evidence).unwrap_or_default();
            body.push_str(&format!("<pre>{}</pre>\n", escape(&json)));
        }
    }
    page("slowlab doctor", &body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use slowlab_doctor::Check;
    use slowlab_model::findings::{Culprit, Finding, Severity};

    fn report(findings: Vec<Finding>, verdict: Verdict) -> Report {
        let checks = vec![Check {
            id: "fanotify-permission".into(),
            verdict,
            detail: "1 watcher <on /srv>".into(),
        }];
        Report {
            seconds: 3.0,
            exit_code: slowlab_doctor::exit_code(&checks, &findings),
            checks,
            findings,
        }
    }

    #[test]
    fn checks_findings_and_the_exit_status_are_rendered() {
        let f = Finding {
            id: "fanotify-permission-watcher".into(),
            title: "scanner (pid 4) holds every file open".into(),
            severity: Severity::Medium,
            cost_s: 0.25,
            cost_share: 0.05,
            culprit: Culprit {
                pid: Some(4),
                comm: Some("scanner".into()),
                cgroup: None,
            },
            evidence: serde_json::Map::new(),
            stack: Vec::new(),
            fix: "stop scanner".into(),
        };
        let r = report(vec![f], Verdict::Found);
        let text = doctor_text(&r);
        assert!(
            text.contains("found    fanotify-permission  1 watcher"),
            "{text}"
        );
        assert!(
            text.contains("scanner (pid 4)") && text.contains("fix: stop scanner"),
            "{text}"
        );
        assert!(text.ends_with("verdict: 1 finding(s) (exit 1)\n"), "{text}");
        let html = doctor_html(&r);
        assert!(html.contains("&lt;on /srv&gt;") && !html.contains("<on /srv>"));
        let json: serde_json::Value = serde_json::from_str(&doctor_json(&r).unwrap()).unwrap();
        assert_eq!(json["exit_code"], 1);
        assert_eq!(json["checks"][0]["verdict"], "found");
    }

    #[test]
    fn a_skipped_check_without_findings_says_so() {
        let text = doctor_text(&report(Vec::new(), Verdict::Skipped));
        assert!(text.contains("no findings"), "{text}");
        assert!(text.contains("1 check(s) could not run (exit 2)"), "{text}");
    }
}
