//! The interactive `report.html`: one self-contained page that draws the
//! report's data ([`slowlab_model::views::report_data::ReportData`], embedded
//! once as JSON) with the hand-written scripts beside this file (canvas for
//! the timeline and the flame graphs; no library). The page may make no
//! request at all (its Content-Security-Policy forbids every one), inserts
//! every string of the trace as text, and embeds the JSON with every `<`
//! escaped as `\u003c`, so that no string of the trace can close the
//! script element.
//!
//! It does not compute anything: selections, tables and flame graphs are
//! the page's scripts' work on the embedded data.

use slowlab_model::views::report_data::ReportData;

use crate::html::escape;

const PAGE: &str = include_str!("page.html");
const STYLE: &str = include_str!("style.css");
/// The scripts in the order they are concatenated into the page's one
/// script element (functions of the earlier ones are used by the later).
/// `flame.js` is the diff page's too.
const SCRIPTS: [&str; 6] = [
    include_str!("data.js"),
    include_str!("flame.js"),
    include_str!("report_flame.js"),
    include_str!("timeline.js"),
    include_str!("tables.js"),
    include_str!("app.js"),
];

/// Why the page could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    #[error("cannot encode the report's data as JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("the page template lacks its {0} marker (a bug in slowlab: report it)")]
    Template(&'static str),
}

/// The data as JSON safe inside a `<script>` element: every `<` escaped
/// (JSON allows `\u003c` anywhere a character may be), so neither
/// `</script>` nor `<!--` can appear.
pub fn script_safe_json<T: serde::Serialize + ?Sized>(
    data: &T,
) -> Result<String, serde_json::Error> {
    let json = serde_json::to_string(data)?;
    Ok(json.replace('<', "\\u003c"))
}

/// `template` with each marker replaced by its value, in template order,
/// splitting the template (never the inserted text, which may contain
/// anything, markers included).
pub fn fill_template(template: &str, values: &[(&'static str, &str)]) -> Result<String, PageError> {
    let mut out =
        String::with_capacity(template.len() + values.iter().map(|v| v.1.len()).sum::<usize>());
    let mut rest = template;
    for &(marker, value) in values {
        let (before, after) = rest.split_once(marker).ok_or(PageError::Template(marker))?;
        out.push_str(before);
        out.push_str(value);
        rest = after;
    }
    out.push_str(rest);
    Ok(out)
}

/// The whole page.
pub fn interactive_page(data: &ReportData) -> Result<String, PageError> {
    let json = script_safe_json(data)?;
    let script = SCRIPTS.concat();
    let title = escape(&data.meta.title);
    fill_template(
        PAGE,
        &[
            ("{{TITLE}}", &title),
            ("{{STYLE}}", STYLE),
            ("{{DATA}}", &json),
            ("{{SCRIPT}}", &script),
        ],
    )
}

#[cfg(test)]
mod tests;
