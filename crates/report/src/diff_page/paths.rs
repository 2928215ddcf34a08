//! The critical-path part of the `slowlab diff --html` page on `slowlab
//! diagnose` directories: what the page embeds to draw A's and B's
//! critical paths as two bars on one time axis (each as long as its wall
//! time, its stretches coloured by state and wait kind and named by their
//! cause) above the table of causes. `diff.js` draws it; this module only
//! shapes the data. It does not compare: `slowlab_analyze::path_diff`
//! does, and the bars show the first run of each side.

use serde::Serialize;
use slowlab_analyze::path_diff::{describe, segment_causes, CauseKey, PathDiff, Run};
use slowlab_model::critical_path::{SegmentState, WaitKind};

/// The path comparison as the page embeds it.
#[derive(Serialize)]
pub struct PathsSection<'a> {
    /// The comparison: summary, sides, causes (all of them), warnings.
    pub diff: &'a PathDiff,
    /// A's first run, then B's.
    pub bars: [Bar; 2],
}

/// One run's critical path as a bar.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bar {
    /// The sum of its pieces: the run's wall time as the comparison counts
    /// it.
    pub wall_s: f64,
    /// Back to back from 0, adjacent segments of one cause merged.
    pub pieces: Vec<Piece>,
}

/// A stretch of the bar.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Piece {
    /// Seconds after the bar's start.
    pub from_s: f64,
    pub to_s: f64,
    /// Its colour: `cpu`, `runnable`, or the wait kind of blocked time
    /// (`lock`, `io`, `sleep`, `ipc`, `fault`, `other`).
    pub class: &'static str,
    /// The cause in words, with its process and thread.
    pub what: String,
}

impl<'a> PathsSection<'a> {
    /// The section of `diff`, computed from `a` and `b` (the runs of each
    /// side, as given to `diff_paths`).
    pub fn new(diff: &'a PathDiff, a: &[Run], b: &[Run]) -> PathsSection<'a> {
        let bar = |runs: &[Run]| runs.first().map(bar_of).unwrap_or_default();
        PathsSection {
            diff,
            bars: [bar(a), bar(b)],
        }
    }
}

impl Default for Bar {
    fn default() -> Bar {
        Bar {
            wall_s: 0.0,
            pieces: Vec::new(),
        }
    }
}

/// The colour class of a cause.
pub fn class_of(key: &CauseKey) -> &'static str {
    match key.state {
        SegmentState::Cpu => "cpu",
        SegmentState::Runnable => "runnable",
        SegmentState::Blocked => match key.kind.unwrap_or(WaitKind::Other) {
            WaitKind::Lock => "lock",
            WaitKind::Io => "io",
            WaitKind::Sleep => "sleep",
            WaitKind::Ipc => "ipc",
            WaitKind::Fault => "fault",
            WaitKind::Other => "other",
        },
    }
}

/// One run's bar: its segments laid back to back (the path's segments
/// are; laying them so keeps the bar's length the sum the comparison
/// uses), neighbours with the same cause as one piece.
pub fn bar_of(run: &Run) -> Bar {
    let mut pieces: Vec<(Piece, CauseKey)> = Vec::new();
    let mut t = 0.0;
    for (key, s) in segment_causes(run).into_iter().zip(&run.path.segments) {
        let d = s.duration_s();
        match pieces.last_mut() {
            Some((p, k)) if *k == key => p.to_s = t + d,
            _ => pieces.push((
                Piece {
                    from_s: t,
                    to_s: t + d,
                    class: class_of(&key),
                    what: describe(&key),
                },
                key,
            )),
        }
        t += d;
    }
    Bar {
        wall_s: t,
        pieces: pieces.into_iter().map(|(p, _)| p).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff_page::{diff_page, DiffPageData};
    use slowlab_analyze::path_diff::diff_paths;
    use slowlab_model::critical_path::{Breakdown, CriticalPath, PathRoot, Segment};

    /// A path of `(pid, tid, comm, state, kind, function or blocked_in,
    /// seconds)` stretches, back to back from 0.
    #[allow(clippy::type_complexity)]
    fn path(stretches: &[(i32, &str, SegmentState, Option<WaitKind>, &str, f64)]) -> Run {
        let mut t = 0.0;
        let segments = stretches
            .iter()
            .map(|&(pid, comm, state, kind, f, secs)| {
                let s = Segment {
                    from_s: t,
                    to_s: t + secs,
                    pid,
                    tid: pid,
                    comm: comm.to_string(),
                    state,
                    kind,
                    top_function: (state == SegmentState::Cpu).then(|| f.to_string()),
                    woken_by: None,
                    ended_by: None,
                    ran_instead: None,
                    blocked_in: (state == SegmentState::Blocked).then(|| f.to_string()),
                    depth: 0,
                    via: None,
                    waiter: None,
                    resource: None,
                    via_resource: None,
                    holding: None,
                    unknown: false,
                };
                t += secs;
                s
            })
            .collect();
        Run::new(CriticalPath {
            wall_s: t,
            root: PathRoot {
                pid: stretches[0].0,
                tid: stretches[0].0,
                comm: stretches[0].1.to_string(),
                start_s: 0.0,
            },
            breakdown: Breakdown::default(),
            segments,
            parts: Vec::new(),
            summary: String::new(),
            unknown_s: 0.0,
            killed: None,
        })
    }

    const CPU: SegmentState = SegmentState::Cpu;
    const BLOCKED: SegmentState = SegmentState::Blocked;
    const EVIL: &str = "</script><b>evil";

    #[test]
    fn the_page_has_both_bars_as_long_as_their_wall_times_and_the_causes() {
        let a = path(&[
            (10, "prog", CPU, None, "compute", 0.5),
            (10, "prog", CPU, None, "compute", 0.25),
            (10, "prog", BLOCKED, Some(WaitKind::Io), "fsync", 0.25),
        ]);
        let b = path(&[
            (20, "prog", CPU, None, "compute", 0.75),
            (20, "prog", BLOCKED, Some(WaitKind::Io), "fsync", 1.5),
            (21, EVIL, BLOCKED, Some(WaitKind::Lock), "futex_wait", 0.5),
        ]);
        let d = diff_paths(std::slice::from_ref(&a), std::slice::from_ref(&b)).unwrap();
        let section = PathsSection::new(&d, &[a], &[b]);
        let [ba, bb] = &section.bars;
        assert_eq!((ba.wall_s, bb.wall_s), (1.0, 2.75));
        assert_eq!((ba.wall_s, bb.wall_s), (d.a.wall_s, d.b.wall_s));
        // The two CPU segments of one cause are one piece; back to back.
        let shape = |b: &Bar| -> Vec<(f64, f64, &str)> {
            b.pieces
                .iter()
                .map(|p| (p.from_s, p.to_s, p.class))
                .collect()
        };
        assert_eq!(shape(ba), [(0.0, 0.75, "cpu"), (0.75, 1.0, "io")]);
        assert_eq!(
            shape(bb),
            [(0.0, 0.75, "cpu"), (0.75, 2.25, "io"), (2.25, 2.75, "lock")]
        );
        assert_eq!(bb.pieces[1].what, "waiting for the disk in fsync (prog)");

        let page = diff_page(&DiffPageData {
            title: "slowlab diff: a → b",
            a_name: "a",
            b_name: "b",
            view: None,
            tree: None,
            paths: Some(&section),
        })
        .unwrap();
        let data = page
            .split("id=\"slowlab-data\">")
            .nth(1)
            .and_then(|s| s.split("</script>").next())
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(data).unwrap();
        let bars = &v["paths"]["bars"];
        assert_eq!(bars[0]["wall_s"], 1.0);
        assert_eq!(bars[1]["wall_s"], 2.75);
        assert_eq!(bars[1]["pieces"][2]["to_s"], 2.75);
        // The cause rows: fsync grew most, then the new lock wait.
        let causes = v["paths"]["diff"]["causes"].as_array().unwrap();
        let row = |c: &serde_json::Value| {
            (
                c["state"].as_str().unwrap().to_string(),
                c["kind"].as_str().map(str::to_string),
                c["thread"].as_str().unwrap().to_string(),
                c["delta_s"].as_f64().unwrap(),
            )
        };
        assert_eq!(
            row(&causes[0]),
            ("blocked".into(), Some("io".into()), "prog".into(), 1.25)
        );
        assert_eq!(
            row(&causes[1]),
            ("blocked".into(), Some("lock".into()), EVIL.into(), 0.5)
        );
        // A hostile thread name stays inside the data, as text.
        assert_eq!(page.matches("<script").count(), 2, "only the page's own");
        assert!(page.contains("\\u003c/script>\\u003cb>evil"));
    }
}
