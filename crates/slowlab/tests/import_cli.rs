//! `slowlab import` on results written by the Windows probes: a fixture
//! captured from the probes running under Wine (tests/fixtures/README.md),
//! its completion by slowlab's statistics, exports, and bad input.

use std::process::{Command, Output};

const SLOWLAB: &str = env!("CARGO_BIN_EXE_slowlab");
const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/windows-probes-wine.jsonl"
);

fn slowlab(args: &[&str]) -> Output {
    Command::new(SLOWLAB)
        .args(args)
        .output()
        .expect("cannot run slowlab")
}

#[test]
fn probe_results_render_as_a_verdict_table_with_computed_growth() {
    let o = slowlab(&["import", FIXTURE, "--json", "-"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = String::from_utf8_lossy(&o.stderr);
    for id in [
        "topdown-alloc",
        "notify-buffer",
        "log-probe",
        "teardown-lock",
        "working-set-cap",
    ] {
        assert!(
            table.contains(&format!("== {id} (windows)")),
            "{id} missing: {table}"
        );
    }
    assert!(table.contains("Topdown allocs took"), "{table}");
    // The completed JSON Lines: every swept variant now has a verdict.
    let text = String::from_utf8_lossy(&o.stdout);
    let mut swept = 0;
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        for variant in v["variants"].as_array().unwrap() {
            if variant.get("points").is_some() {
                swept += 1;
                assert!(variant["verdict"].is_string(), "{variant}");
                assert!(variant["exponent"].is_number(), "{variant}");
            }
        }
    }
    assert_eq!(
        swept, 4,
        "topdown-alloc and log-probe carry two swept variants each"
    );
}

#[test]
fn html_export_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    let o = slowlab(&["import", FIXTURE, "--html", html.to_str().unwrap()]);
    assert!(o.status.success());
    let page = std::fs::read_to_string(html).unwrap();
    assert!(page.contains("<svg") && page.contains("log-probe"));
}

#[test]
fn bad_files_get_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    for (content, expect) in [
        ("", "empty"),
        ("{\"id\":\"x\",\"status\":\"ran\"}\nnot json\n", "line 2"),
        ("\u{0}\u{1}binary", "line 1"),
    ] {
        let path = dir.path().join("bad.jsonl");
        std::fs::write(&path, content).unwrap();
        let o = slowlab(&["import", path.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "accepted {content:?}");
        assert!(err.contains(expect), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    let o = slowlab(&["import", "/nonexistent/results.jsonl"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot read"));
}
