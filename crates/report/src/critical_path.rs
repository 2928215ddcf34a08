//! The critical path for people: the terminal text of `slowlab analyze
//! --critical-path` and of the top of `slowlab diagnose` (the answer, the
//! breakdown, where the time went grouped by process, state and function,
//! and the longest segments in time order). Renders a computed
//! `CriticalPath`; computes nothing. (The HTML report draws the path itself,
//! from `report_data`.)

use slowlab_analyze::critical_path::{describe_part, waited_for, while_waited};
use slowlab_model::critical_path::{CriticalPath, PathPart, Segment, SegmentState, WaitKind};

use crate::format;

fn pct(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        100.0 * part / whole
    } else {
        0.0
    }
}

/// The breakdown in one line: `cpu 1.61 s (64%), runnable …, blocked … (ipc 0.78 s)`.
pub fn breakdown_line(cp: &CriticalPath) -> String {
    let b = &cp.breakdown;
    let kinds: Vec<String> = WaitKind::ALL
        .iter()
        .filter(|&&k| b.blocked.get(k) > 0.0)
        .map(|&k| format!("{} {}", k.as_str(), format::seconds(b.blocked.get(k))))
        .collect();
    format!(
        "on a CPU {} ({:.0}%), runnable {} ({:.0}%), blocked {} ({:.0}%){}",
        format::seconds(b.cpu),
        pct(b.cpu, cp.wall_s),
        format::seconds(b.runnable),
        pct(b.runnable, cp.wall_s),
        format::seconds(b.blocked.total()),
        pct(b.blocked.total(), cp.wall_s),
        if kinds.is_empty() {
            String::new()
        } else {
            format!(": {}", kinds.join(", "))
        }
    )
}

fn segment_text(s: &Segment) -> String {
    let what = match s.state {
        SegmentState::Cpu => format!(
            "on a CPU{}",
            s.top_function
                .as_ref()
                .map(|f| format!(" in {f}"))
                .unwrap_or_default()
        ),
        SegmentState::Runnable => format!(
            "runnable{}",
            s.ran_instead
                .as_ref()
                .map(|t| format!(" while {} [{}] ran", t.comm, t.tid))
                .unwrap_or_default()
        ),
        SegmentState::Blocked if s.unknown => {
            "not known: no scheduler event of it tells what it did here (counted as \
             blocked)"
                .to_string()
        }
        SegmentState::Blocked => {
            let mut t = match &s.resource {
                Some(r) => format!(
                    "blocked ({}): {}",
                    s.kind.unwrap_or(WaitKind::Other).as_str(),
                    waited_for(r, s.blocked_in.as_deref(), s.pid)
                ),
                None => format!(
                    "blocked ({}){}",
                    s.kind.unwrap_or(WaitKind::Other).as_str(),
                    s.blocked_in
                        .as_ref()
                        .map(|f| format!(" in {f}"))
                        .unwrap_or_default()
                ),
            };
            let named_holder = s.resource.as_ref().and_then(|r| r.holder.as_ref());
            if let (Some(w), Some("signal")) = (&s.woken_by, s.ended_by.as_deref()) {
                t.push_str(&format!(", ended by a signal from {} [{}]", w.comm, w.tid));
            } else if let Some(w) = s.woken_by.as_ref().filter(|w| Some(*w) != named_holder) {
                t.push_str(&format!(", ended by {} [{}]", w.comm, w.tid));
            } else if let Some(e) = &s.ended_by {
                let article = if e.starts_with(['a', 'e', 'i', 'o', 'u']) {
                    "an"
                } else {
                    "a"
                };
                t.push_str(&format!(", ended by {article} {e}"));
            }
            t
        }
    };
    let via = match (&s.via, &s.waiter, &s.via_resource) {
        (_, Some(w), Some(r)) => format!(
            "  ←{}",
            while_waited(r, &format!("{} [{}]", w.comm, w.tid)).trim_start_matches(" while")
        ),
        (Some(k), Some(w), None) => format!("  ← {} [{}] waited ({})", w.comm, w.tid, k.as_str()),
        _ => String::new(),
    };
    format!(
        "{:>8.3}–{:<8.3} {:>9}  {}[{}] {what}{via}",
        s.from_s,
        s.to_s,
        format::seconds(s.duration_s()),
        s.comm,
        s.tid
    )
}

/// One row of the text's table: the parts of processes of one name said in the same
/// words.
struct Row {
    comm: String,
    /// The processes' pids, each once, in the order their parts came.
    pids: Vec<i32>,
    words: String,
    seconds: f64,
    share: f64,
}

/// The parts (largest first) as the table says them: parts of one process name in the
/// same words are one row (a launcher's 300 runs of `true` are `true ×300`, not 300 rows
/// of 0.4%; a process's waits in the disk from three functions the table does not name
/// are one), largest first.
fn rows_in_words(parts: &[PathPart]) -> Vec<Row> {
    let mut rows: Vec<Row> = Vec::new();
    let mut index: std::collections::HashMap<(String, String), usize> = Default::default();
    for p in parts {
        let words = describe_part(p, p.pid);
        match index.entry((p.comm.clone(), words.clone())) {
            std::collections::hash_map::Entry::Occupied(e) => {
                let row = &mut rows[*e.get()];
                row.seconds += p.seconds;
                row.share += p.share;
                if !row.pids.contains(&p.pid) {
                    row.pids.push(p.pid);
                }
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(rows.len());
                rows.push(Row {
                    comm: p.comm.clone(),
                    pids: vec![p.pid],
                    words,
                    seconds: p.seconds,
                    share: p.share,
                });
            }
        }
    }
    // Stable: rows of equal time keep the parts' order.
    rows.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
    rows
}

/// The text of the path: the answer, the breakdown, the `top` largest
/// groups and the `top` longest segments (in time order).
pub fn critical_path_text(cp: &CriticalPath, top: usize) -> String {
    let mut out = format!(
        "why `{}` [{}] took {}:\n  {}\n  {}\n",
        cp.root.comm,
        cp.root.pid,
        format::seconds(cp.wall_s),
        cp.summary,
        breakdown_line(cp)
    );
    out.push_str("\n  where the time went (by process, state and function):\n");
    let rows = rows_in_words(&cp.parts);
    for row in rows.iter().take(top) {
        let who = match row.pids.as_slice() {
            [pid] => format!("{}[{pid}]", row.comm),
            pids => format!("{} ×{}", row.comm, pids.len()),
        };
        out.push_str(&format!(
            "  {:>5.1}% {:>9}  {who} {}\n",
            row.share * 100.0,
            format::seconds(row.seconds),
            row.words
        ));
    }
    if rows.len() > top {
        out.push_str(&format!("  … {} more groups\n", rows.len() - top));
    }
    let mut longest: Vec<&Segment> = cp.segments.iter().collect();
    longest.sort_by(|a, b| b.duration_s().total_cmp(&a.duration_s()));
    longest.truncate(top);
    longest.sort_by(|a, b| a.from_s.total_cmp(&b.from_s));
    out.push_str(&format!(
        "\n  the {} longest of {} segments, in time order (seconds after the start):\n",
        longest.len(),
        cp.segments.len()
    ));
    for s in longest {
        out.push_str(&format!("  {}\n", segment_text(s)));
    }
    if cp.unknown_s > 0.0005 {
        out.push_str(&format!(
            "  note: {} of the root had no scheduler event and counts as blocked (other)\n",
            format::seconds(cp.unknown_s)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use slowlab_model::critical_path::{Breakdown, PathRoot};

    fn path() -> CriticalPath {
        let seg = |from_s: f64, to_s: f64, state, kind, comm: &str| Segment {
            from_s,
            to_s,
            pid: 7,
            tid: 7,
            comm: comm.into(),
            state,
            kind,
            top_function: (state == SegmentState::Cpu).then(|| "work".to_string()),
            woken_by: None,
            ended_by: None,
            ran_instead: None,
            blocked_in: None,
            depth: 0,
            via: None,
            waiter: None,
            resource: None,
            via_resource: None,
            holding: None,
            unknown: false,
        };
        let mut breakdown = Breakdown {
            cpu: 1.0,
            ..Breakdown::default()
        };
        breakdown.blocked.add(WaitKind::Sleep, 3.0);
        let segments = vec![
            seg(0.0, 1.0, SegmentState::Cpu, None, "<b>app"),
            seg(
                1.0,
                4.0,
                SegmentState::Blocked,
                Some(WaitKind::Sleep),
                "<b>app",
            ),
        ];
        CriticalPath {
            wall_s: 4.0,
            root: PathRoot {
                pid: 7,
                tid: 7,
                comm: "<b>app".into(),
                start_s: 0.5,
            },
            breakdown,
            parts: slowlab_analyze::critical_path::parts(&segments, 4.0),
            segments,
            summary: "`<b>app` ran 4.00 s: 75% sleeping".into(),
            unknown_s: 0.0,
            killed: None,
        }
    }

    #[test]
    fn the_text_leads_with_the_answer_and_the_breakdown() {
        let text = critical_path_text(&path(), 5);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("why `<b>app` [7] took"), "{text}");
        assert!(lines[1].contains("75% sleeping"), "{text}");
        assert!(lines[2].contains("on a CPU 1.00 s (25%)"), "{text}");
        assert!(lines[2].contains("sleep 3.00 s"), "{text}");
    }

    #[test]
    fn processes_of_one_name_said_alike_are_one_row() {
        let mut cp = path();
        // 300 runs of `true`, 10 ms each on a CPU in the same function.
        let one = cp.parts[0].clone();
        cp.parts = (0..300)
            .map(|i| PathPart {
                pid: 100 + i,
                comm: "true".into(),
                seconds: 0.01,
                share: 0.0025,
                ..one.clone()
            })
            .chain(std::iter::once(PathPart {
                seconds: 0.5,
                share: 0.125,
                ..one.clone()
            }))
            .collect();
        let text = critical_path_text(&cp, 5);
        let table: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.contains("where the time went"))
            .skip(1)
            .take_while(|l| !l.is_empty())
            .collect();
        assert_eq!(table.len(), 2, "{text}");
        assert!(
            table[0].contains("75.0%") && table[0].contains("true ×300"),
            "{text}"
        );
        assert!(table[1].contains("<b>app[7]"), "{text}");
    }
}
