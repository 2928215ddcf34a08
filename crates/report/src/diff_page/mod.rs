//! The interactive page of `slowlab diff A B --html FILE`: one
//! self-contained file with the comparison's table (sortable, filterable)
//! and a differential flame graph of the merged call tree (red grew, blue
//! shrank; click to zoom, search to highlight and sum), drawn by `diff.js`
//! with the report's flame graph (`interactive/flame.js`) on a canvas from
//! the data embedded once as JSON. On `slowlab diagnose` directories the
//! page starts with the critical paths compared ([`paths`]: both paths as
//! bars on one time axis, and the causes' table), and has the CPU part
//! only when both sides have a trace.
//!
//! Same rules as the report's page (`interactive`): no request at all (the
//! Content-Security-Policy forbids them), every trace string inserted as
//! text, the JSON embedded with `<` escaped. It does not compute the
//! comparison: `slowlab_analyze::diff` and `diff_tree` do.

use serde::Serialize;
use slowlab_model::views::diff::{DiffTree, DiffView};

use crate::html::escape;

pub mod paths;
use crate::interactive::{fill_template, script_safe_json, PageError};
pub use paths::PathsSection;

/// The report's page template: the same head (the policy forbidding every
/// request), the same markers.
const PAGE: &str = include_str!("../interactive/page.html");
/// The report page's style sheet, and this page's few additions.
const STYLE: [&str; 2] = [
    include_str!("../interactive/style.css"),
    include_str!("diff.css"),
];
/// The report's flame graph (`interactive/flame.js`, which the page's
/// differential one extends), then the page's own script.
pub(crate) const SCRIPTS: [&str; 2] = [
    include_str!("../interactive/flame.js"),
    include_str!("diff.js"),
];

/// What the page embeds.
#[derive(Serialize)]
pub struct DiffPageData<'a> {
    pub title: &'a str,
    pub a_name: &'a str,
    pub b_name: &'a str,
    /// The sampled CPU compared (absent: no CPU part).
    pub view: Option<&'a DiffView>,
    pub tree: Option<&'a DiffTree>,
    /// The critical paths compared (directories only).
    pub paths: Option<&'a PathsSection<'a>>,
}

/// The whole page.
pub fn diff_page(data: &DiffPageData) -> Result<String, PageError> {
    let json = script_safe_json(data)?;
    let style = STYLE.concat();
    let script = SCRIPTS.concat();
    fill_template(
        PAGE,
        &[
            ("{{TITLE}}", &escape(data.title)),
            ("{{STYLE}}", &style),
            ("{{DATA}}", &json),
            ("{{SCRIPT}}", &script),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use slowlab_analyze::diff::{diff_view, DiffOptions, Metric, Normalize};
    use slowlab_analyze::select::Selection;
    use slowlab_model::trace::Trace;
    use slowlab_model::views::cpu::Key;

    #[test]
    fn the_page_embeds_the_data_once_and_no_string_can_close_the_script() {
        let t = Trace::default();
        let view = diff_view(
            &t,
            &t,
            &Selection::default(),
            DiffOptions {
                key: Key::Function,
                normalize: Normalize::Total,
                metric: Metric::SelfSamples,
                top: None,
            },
        );
        let tree = DiffTree {
            names: vec!["</script><script>alert(1)</script>".into()],
            name: vec![0],
            parent: vec![-1],
            a: vec![1],
            b: vec![2],
        };
        let page = diff_page(&DiffPageData {
            title: "a <b> → b",
            a_name: "a.data",
            b_name: "b.data",
            view: Some(&view),
            tree: Some(&tree),
            paths: None,
        })
        .unwrap();
        assert_eq!(page.matches("<script").count(), 2, "only the page's own");
        assert!(page.contains("\\u003c/script>\\u003cscript>alert(1)"));
        assert!(page.contains("<title>a &lt;b&gt; → b</title>"));
        assert!(page.contains("default-src 'none'"));
        assert!(!page.contains("{{"), "every marker filled");
    }
}
