//! The text of `slowlab diff A B` on two `slowlab diagnose` outputs: the
//! answer in one sentence, both sides' wall times (each run's with several
//! runs), then the causes by size of change: A's and B's seconds, the
//! change, its interval where the runs give one, and the cause in words.
//! Renders a computed `slowlab_analyze::path_diff::PathDiff`; computes
//! nothing.

use std::fmt::Write;

use slowlab_analyze::path_diff::{describe, PathDiff, FLOOR_SHARE};

use crate::table::{Align, Table};

/// How many causes the table shows.
const ROWS: usize = 12;

/// The comparison as text; `a_name` and `b_name` label the sides.
pub fn path_diff_text(d: &PathDiff, a_name: &str, b_name: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}\n", d.summary);
    for (label, name, side) in [("A", a_name, &d.a), ("B", b_name, &d.b)] {
        let runs = if side.runs_s.len() > 1 {
            let each: Vec<String> = side.runs_s.iter().map(|s| format!("{s:.2}")).collect();
            format!(
                " (mean of {} runs: {} s)",
                side.runs_s.len(),
                each.join(", ")
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "{label}: {name}: `{}` {:.3} s{runs}",
            side.root, side.wall_s
        );
    }
    let _ = writeln!(
        out,
        "\nthe critical path's change by cause, largest first\n"
    );
    let noise = d.interval.is_some();
    let mut columns = vec![
        ("A s", Align::Right),
        ("B s", Align::Right),
        ("change", Align::Right),
    ];
    if noise {
        columns.push(("interval", Align::Right));
    }
    columns.push(("cause", Align::Left));
    let mut t = Table::new(&columns);
    let floor = FLOOR_SHARE * d.a.wall_s;
    let shown: Vec<_> = d
        .causes
        .iter()
        .filter(|c| c.change.delta_s.abs() >= floor || c.change.significant)
        .take(ROWS)
        .collect();
    for c in &shown {
        let mut row = vec![
            format!("{:.3}", c.change.a_s),
            format!("{:.3}", c.change.b_s),
            format!("{:+.3}", c.change.delta_s),
        ];
        if noise {
            row.push(c.change.interval.map_or("—".to_string(), |[lo, hi]| {
                format!("[{lo:+.3}, {hi:+.3}]")
            }));
        }
        let mut what = describe(&c.key);
        if noise && !c.change.significant {
            what.push_str("  (no significant change)");
        }
        row.push(what);
        t.row(row);
    }
    if t.is_empty() {
        out.push_str("no cause changed by 2% of A's wall time or more\n");
    } else {
        out.push_str(&t.render(0));
        out.push('\n');
    }
    let rest = d.causes.len() - shown.len();
    if rest > 0 {
        let seconds: f64 = d
            .causes
            .iter()
            .filter(|c| !shown.iter().any(|s| s.key == c.key))
            .map(|c| c.change.delta_s)
            .sum();
        let _ = writeln!(
            out,
            "… {rest} more causes, {seconds:+.3} s together (--json lists them all)"
        );
    }
    out
}
