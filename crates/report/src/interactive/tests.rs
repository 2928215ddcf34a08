//! The page around the data: one script element holding JSON that reads
//! back equal to the data whatever the trace's strings, a policy forbidding
//! every request, and scripts that never parse strings as markup.

use slowlab_analyze::report_data::{report_data, Inputs, ReportData};
use slowlab_analyze::select::Selection;
use slowlab_model::trace::{ProcIdx, Process, StrIdx, Thread, ThreadIdx, Trace};

use super::*;

const HOSTILE: &str = "</script><img src=x onerror=alert(1)><!--";

fn data() -> ReportData {
    let mut t = Trace {
        strings: vec![HOSTILE.to_owned(), "<b>hb</b>".to_owned()],
        ..Trace::default()
    };
    t.processes.push(Process {
        pid: 7,
        ppid: None,
        comm: StrIdx(0),
        start_ns: Some(10),
        exec_ns: None,
        end_ns: None,
        threads: vec![ThreadIdx(0)],
    });
    t.threads.push(Thread {
        tid: 7,
        process: ProcIdx(0),
        comm: StrIdx(1),
        start_ns: Some(10),
        end_ns: None,
    });
    t.meta.end_ns = 1_000_000;
    report_data(
        &slowlab_analyze::detect::Context::new(&t, None, None),
        &Inputs {
            title: "report of <i>x</i>",
            command: &[HOSTILE.to_owned()],
            critical_path: None,
            findings: &[],
            command_processes: &[],
            selection: &Selection::default(),
            filter_text: &[],
            warnings: &[HOSTILE.to_owned()],
        },
    )
}

fn between<'a>(s: &'a str, open: &str, close: &str) -> &'a str {
    let start = s.find(open).expect("opening") + open.len();
    let len = s[start..].find(close).expect("closing");
    &s[start..start + len]
}

#[test]
fn the_data_is_embedded_once_and_reads_back_whatever_its_strings() {
    let d = data();
    let page = interactive_page(&d).unwrap();
    assert_eq!(page.matches("id=\"slowlab-data\"").count(), 1);
    // Exactly the two script elements close; no string of the trace opens
    // or closes one, or starts a comment.
    assert_eq!(page.matches("</script>").count(), 2);
    assert!(!page.contains("<img"));
    assert!(!page.contains("<!--"));
    let json = between(&page, "id=\"slowlab-data\">", "</script>");
    let back: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(back, serde_json::to_value(&d).unwrap());
    assert_eq!(back["strings"][0], HOSTILE);
    assert!(page.contains("<title>report of &lt;i&gt;x&lt;/i&gt;</title>"));
}

#[test]
fn the_page_forbids_every_request_and_loads_nothing() {
    let page = interactive_page(&data()).unwrap();
    assert!(page.contains(
        "content=\"default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\""
    ));
    for external in [
        "src=\"",
        "href=\"http",
        "<link",
        "@import",
        "http://",
        "https://",
        "url(",
    ] {
        assert!(!page.contains(external), "{external}");
    }
}

#[test]
fn the_scripts_insert_text_never_markup() {
    // The diff page's too.
    for script in SCRIPTS.iter().chain(&crate::diff_page::SCRIPTS) {
        assert!(!script.contains("</script"));
        assert!(!script.contains("<!--"));
        for sink in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "new Function",
            "fetch(",
            "XMLHttpRequest",
        ] {
            assert!(!script.contains(sink), "{sink}");
        }
    }
}
