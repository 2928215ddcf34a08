//! The text of `slowlab diff A B`: both traces' totals, then the rows ranked
//! by their change (most grown first), with both costs, the change, the ratio and
//! whether the row is new or vanished. The values come from
//! `slowlab_analyze::diff`; the differential flame graph is drawn by
//! [`crate::export::flamegraph_svg`] from its `stack A B` lines.

use std::fmt::Write;

use slowlab_model::views::cpu::Key;
use slowlab_model::views::diff::{DiffView, Metric, Normalize};

use crate::table::{Align, Table};

/// The diff as a table; `a_name` and `b_name` label the traces.
pub fn diff_text(v: &DiffView, a_name: &str, b_name: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "A: {a_name}: {} samples over {:.2} s\nB: {b_name}: {} samples over {:.2} s",
        v.a.samples, v.a.duration_s, v.b.samples, v.b.duration_s
    );
    let (unit, what) = match v.normalize {
        Normalize::Total => ("%", "share of each trace's samples"),
        Normalize::Duration => ("/s", "samples per second of each trace"),
    };
    let metric = match v.metric {
        Metric::SelfSamples => "self",
        Metric::Inclusive => "inclusive",
    };
    let key = match v.key {
        Key::Function => "function [module]",
        Key::Module => "module",
        Key::Process => "process",
        Key::Thread => "thread",
    };
    let _ = writeln!(out, "{metric} cost as the {what}, most grown first\n");
    let number = |x: f64| match v.normalize {
        Normalize::Total => format!("{x:.2}{unit}"),
        Normalize::Duration => format!("{x:.1}{unit}"),
    };
    let mut t = Table::new(&[
        ("A", Align::Right),
        ("B", Align::Right),
        ("change", Align::Right),
        ("ratio", Align::Right),
        (key, Align::Left),
    ]);
    for r in &v.functions {
        let name = if r.module.is_empty() {
            r.name.clone()
        } else {
            format!("{} [{}]", r.name, r.module)
        };
        let name = match r.status {
            Some(status) => format!("{name}  ({status})"),
            None => name,
        };
        t.row(vec![
            number(r.a),
            number(r.b),
            format!(
                "{}{}",
                if r.delta >= 0.0 { "+" } else { "" },
                number(r.delta)
            ),
            r.ratio.map_or("—".to_owned(), |x| format!("{x:.2}×")),
            name,
        ]);
    }
    if t.is_empty() {
        // Rows left out by --top 0 are rows: the selection has samples.
        if v.omitted_rows == 0 {
            out.push_str("no samples in either selection\n");
        }
    } else {
        out.push_str(&t.render(0));
        out.push('\n');
    }
    if v.omitted_rows > 0 {
        let _ = writeln!(out, "… {} more rows (--top to show more)", v.omitted_rows);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use slowlab_model::views::diff::{DiffRow, Side};

    #[test]
    fn rows_show_both_costs_the_change_and_the_status() {
        let v = DiffView {
            key: Key::Function,
            normalize: Normalize::Total,
            metric: Metric::SelfSamples,
            a: Side {
                samples: 100,
                duration_s: 1.0,
            },
            b: Side {
                samples: 400,
                duration_s: 3.0,
            },
            omitted_rows: 2,
            functions: vec![
                DiffRow {
                    name: "quad_part".into(),
                    module: "prog".into(),
                    a: 20.0,
                    b: 80.0,
                    delta: 60.0,
                    ratio: Some(4.0),
                    a_samples: 20,
                    b_samples: 320,
                    status: None,
                },
                DiffRow {
                    name: "fresh".into(),
                    module: "prog".into(),
                    a: 0.0,
                    b: 1.0,
                    delta: 1.0,
                    ratio: None,
                    a_samples: 0,
                    b_samples: 4,
                    status: Some("new"),
                },
            ],
        };
        let text = diff_text(&v, "small.data", "big.data");
        assert!(
            text.contains("A: small.data: 100 samples over 1.00 s"),
            "{text}"
        );
        let quad = text.lines().find(|l| l.contains("quad_part")).unwrap();
        for cell in ["20.00%", "80.00%", "+60.00%", "4.00×", "quad_part [prog]"] {
            assert!(quad.contains(cell), "{quad}");
        }
        let fresh = text.lines().find(|l| l.contains("fresh")).unwrap();
        assert!(fresh.contains("—") && fresh.contains("(new)"), "{fresh}");
        assert!(text.contains("… 2 more rows"), "{text}");
    }
}
