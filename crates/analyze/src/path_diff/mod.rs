//! `slowlab diff A B` on two `slowlab diagnose` outputs: why B's root took
//! longer (or shorter) than A's, as the change of its critical path split by
//! cause. A cause is (state, wait kind, process name, thread name, function
//! or resource): the function is a CPU segment's `top_function`, the
//! resource a blocked segment's `blocked_in` or, when the segment carries
//! one, its `resource` object (`kind` and `name`; addresses and pids change
//! between runs, so they are not part of the key). Processes and threads
//! are matched by name, never by pid: a process is named by its main
//! thread's `comm` where the path shows it, else by the `comm` of its
//! lowest thread id on the path.
//!
//! The answer ([`PathDiff::summary`]) speaks of [`Group`]s, the causes of
//! one (state, kind, process, thread) together: a disk wait's `blocked_in`
//! changes from one fsync to the next, and no one of them is the cause.
//!
//! Each run's wall time is taken as the sum of its segments' durations
//! (`critical_path.json` promises they add up to `wall_s`), so the causes'
//! changes add up to the wall-time change by construction.
//!
//! Several runs per side: a cause's change is the difference of its means
//! (B − A), and its interval is the range of the differences over every
//! pairing of a run of A with a run of B: `[min B − max A, max B − min A]`.
//! A change is significant when that interval stays off zero by more than
//! the larger spread (max − min) of one side's own runs, and it is at
//! least [`FLOOR_SHARE`] of A's wall time. We chose ranges, not a
//! bootstrap: with the two to five runs people make per side, a percentile
//! bootstrap of the difference of means is far too narrow (for three runs
//! each of one distribution it excludes zero about one time in five; the
//! rule here, under one in a hundred before the floor — simulated with normal
//! noise). With one run per side there is no interval, the noise is
//! unknown (a warning says so), and only the floor decides.
//!
//! Pure: takes [`CriticalPath`] values (and, until the model has it, each
//! segment's optional resource read from the JSON), returns a
//! [`PathDiff`]; reading files and printing are the binary's.

use std::collections::{BTreeSet, HashMap};

use serde::{Deserialize, Serialize};
use slowlab_model::critical_path::{CriticalPath, SegmentState, WaitKind};

mod words;

use words::sentence;
pub use words::{describe, what_of};

/// A change smaller than this share of A's mean wall time is never named
/// on its own ("other changes under 2%").
pub const FLOOR_SHARE: f64 = 0.02;

/// One run: its critical path and, per segment, the resource it waited
/// on when the JSON said (`None` everywhere for a path without them).
#[derive(Debug, Clone)]
pub struct Run {
    pub path: CriticalPath,
    /// One per segment of `path`, in order.
    pub resources: Vec<Option<String>>,
}

impl Run {
    /// A run of `path`, each segment's resource said as `kind name`
    /// (`kind` alone when it has no name) and its holder's command when
    /// it has one (`mutex (holder)`): addresses and pids change between
    /// runs, names do not.
    pub fn new(path: CriticalPath) -> Run {
        let resources = path
            .segments
            .iter()
            .map(|s| {
                let r = s.resource.as_ref()?;
                let mut text = r.kind.as_str().to_string();
                if let Some(name) = r.name.as_deref().filter(|n| !n.is_empty()) {
                    text = format!("{text} {name}");
                }
                if let Some(h) = &r.holder {
                    text = format!("{text} ({})", h.comm);
                }
                Some(text)
            })
            .collect();
        Run { path, resources }
    }

    /// A run from `critical_path.json`.
    pub fn from_json(value: &serde_json::Value) -> Result<Run, serde_json::Error> {
        Ok(Run::new(CriticalPath::deserialize(value)?))
    }
}

/// What a stretch of the path was: the key causes are matched by.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CauseKey {
    pub state: SegmentState,
    /// For blocked time: why (`null` on a CPU or runnable).
    pub kind: Option<WaitKind>,
    /// The process's name (its main thread's `comm`).
    pub process: String,
    /// The thread's name.
    pub thread: String,
    /// On a CPU: the function most samples were in.
    pub function: Option<String>,
    /// Blocked: what it waited on (the resource, else where it blocked).
    pub resource: Option<String>,
}

/// One side of the comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Side {
    /// The mean of the runs' wall times.
    pub wall_s: f64,
    /// Each run's wall time (the sum of its segments).
    pub runs_s: Vec<f64>,
    /// The root's name (of the first run).
    pub root: String,
}

/// How one cause, or one group of causes, changed from A's runs to B's
/// (module doc: the interval and the rule).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// Mean seconds per run in A and in B.
    pub a_s: f64,
    pub b_s: f64,
    /// `b_s - a_s`.
    pub delta_s: f64,
    /// `[min B − max A, max B − min A]`; `null` with one run per side.
    pub interval: Option<[f64; 2]>,
    pub significant: bool,
}

/// How one cause changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cause {
    #[serde(flatten)]
    pub key: CauseKey,
    #[serde(flatten)]
    pub change: Change,
}

/// The causes of one (state, kind, process, thread) together: a disk
/// wait's `blocked_in` differs from one fsync to the next
/// (`jbd2_log_wait_commit`, `bit_wait_io`, …), a CPU stretch's function
/// too; the answer speaks of these.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Group {
    pub state: SegmentState,
    pub kind: Option<WaitKind>,
    pub process: String,
    pub thread: String,
    /// The function or resource of its cause that changed most.
    pub mostly: Option<String>,
    #[serde(flatten)]
    pub change: Change,
}

/// The comparison: the wall-time change and its causes, largest change
/// first. The causes' `delta_s` add up to `delta_s`, and so do the
/// groups'.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathDiff {
    pub a: Side,
    pub b: Side,
    pub delta_s: f64,
    /// The wall-time change's interval, as a cause's.
    pub interval: Option<[f64; 2]>,
    pub significant: bool,
    /// The answer in one sentence with numbers.
    pub summary: String,
    pub causes: Vec<Cause>,
    pub groups: Vec<Group>,
    /// What the reader should know: unknown noise, roots that differ.
    pub warnings: Vec<String>,
}

/// Compares the runs of A with the runs of B. `None` when a side has no
/// run.
pub fn diff_paths(a: &[Run], b: &[Run]) -> Option<PathDiff> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let a_causes: Vec<HashMap<CauseKey, f64>> = a.iter().map(causes_of).collect();
    let b_causes: Vec<HashMap<CauseKey, f64>> = b.iter().map(causes_of).collect();
    let wall = |runs: &[Run]| -> Vec<f64> {
        runs.iter()
            .map(|r| r.path.segments.iter().map(|s| s.duration_s()).sum())
            .collect()
    };
    let (a_walls, b_walls) = (wall(a), wall(b));
    let noise_known = a.len() > 1 || b.len() > 1;
    let a_wall = mean(&a_walls);
    let floor = FLOOR_SHARE * a_wall;
    let keys: BTreeSet<&CauseKey> = a_causes
        .iter()
        .chain(&b_causes)
        .flat_map(|m| m.keys())
        .collect();
    let values = |maps: &[HashMap<CauseKey, f64>], k: &CauseKey| -> Vec<f64> {
        maps.iter()
            .map(|m| m.get(k).copied().unwrap_or(0.0))
            .collect()
    };
    let mut causes: Vec<Cause> = keys
        .into_iter()
        .map(|k| {
            let (va, vb) = (values(&a_causes, k), values(&b_causes, k));
            Cause {
                key: k.clone(),
                change: Change::of(&va, &vb, noise_known, floor),
            }
        })
        .collect();
    causes.sort_by(|x, y| {
        y.change
            .delta_s
            .abs()
            .total_cmp(&x.change.delta_s.abs())
            .then_with(|| x.key.cmp(&y.key))
    });
    let groups = groups_of(&a_causes, &b_causes, &causes, noise_known, floor);
    // The wall change is the sum of the causes' (exact up to rounding),
    // its interval and significance from the runs' wall times.
    let wall_change = Change::of(&a_walls, &b_walls, noise_known, floor);
    let side = |runs: &[Run], walls: Vec<f64>| Side {
        wall_s: mean(&walls),
        runs_s: walls,
        root: runs[0].path.root.comm.clone(),
    };
    let mut warnings = Vec::new();
    if !noise_known {
        warnings.push(
            "one run per side: the runs' own noise is unknown, so every change of 2% or more \
             counts; give several runs per side (slowlab diff A1 A2 A3 -- B1 B2 B3)"
                .to_string(),
        );
    }
    let roots: BTreeSet<&str> = a
        .iter()
        .chain(b)
        .map(|r| r.path.root.comm.as_str())
        .collect();
    if roots.len() > 1 {
        warnings.push(format!(
            "the runs' roots differ ({}): are they the same program?",
            roots.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    let mut out = PathDiff {
        a: side(a, a_walls),
        b: side(b, b_walls),
        delta_s: causes.iter().map(|c| c.change.delta_s).sum(),
        interval: wall_change.interval,
        significant: wall_change.significant,
        summary: String::new(),
        causes,
        groups,
        warnings,
    };
    out.summary = sentence(&out);
    Some(out)
}

/// The causes summed by (state, kind, process, thread), largest change
/// first; `causes` come largest change first.
fn groups_of(
    a: &[HashMap<CauseKey, f64>],
    b: &[HashMap<CauseKey, f64>],
    causes: &[Cause],
    noise_known: bool,
    floor: f64,
) -> Vec<Group> {
    type GroupKey = (SegmentState, Option<WaitKind>, String, String);
    let key = |k: &CauseKey| (k.state, k.kind, k.process.clone(), k.thread.clone());
    let sums = |runs: &[HashMap<CauseKey, f64>]| -> Vec<HashMap<GroupKey, f64>> {
        runs.iter()
            .map(|m| {
                let mut by: HashMap<GroupKey, f64> = HashMap::new();
                for (k, v) in m {
                    *by.entry(key(k)).or_default() += v;
                }
                by
            })
            .collect()
    };
    let (ga, gb) = (sums(a), sums(b));
    let keys: BTreeSet<GroupKey> = causes.iter().map(|c| key(&c.key)).collect();
    let mut out: Vec<Group> = keys
        .into_iter()
        .map(|k| {
            let values = |runs: &[HashMap<GroupKey, f64>]| -> Vec<f64> {
                runs.iter()
                    .map(|m| m.get(&k).copied().unwrap_or(0.0))
                    .collect()
            };
            let (va, vb) = (values(&ga), values(&gb));
            let mostly = causes
                .iter()
                .find(|c| key(&c.key) == k)
                .and_then(|c| c.key.function.clone().or_else(|| c.key.resource.clone()));
            let (state, kind, process, thread) = k;
            Group {
                state,
                kind,
                process,
                thread,
                mostly,
                change: Change::of(&va, &vb, noise_known, floor),
            }
        })
        .collect();
    out.sort_by(|x, y| {
        let size = |g: &Group| g.change.delta_s.abs();
        size(y).total_cmp(&size(x)).then_with(|| {
            (x.state, x.kind, &x.process, &x.thread).cmp(&(y.state, y.kind, &y.process, &y.thread))
        })
    });
    out
}

/// One run's seconds by cause; they add up to the sum of its segments.
pub fn causes_of(run: &Run) -> HashMap<CauseKey, f64> {
    let mut by: HashMap<CauseKey, f64> = HashMap::new();
    for (key, s) in segment_causes(run).into_iter().zip(&run.path.segments) {
        *by.entry(key).or_default() += s.duration_s();
    }
    by
}

/// Each segment's cause, in the path's order (one per segment): what the
/// page's bars colour and name.
pub fn segment_causes(run: &Run) -> Vec<CauseKey> {
    let names = process_names(&run.path);
    run.path
        .segments
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let (kind, function, resource) = match s.state {
                SegmentState::Cpu => (None, s.top_function.clone(), None),
                SegmentState::Runnable => (None, None, None),
                SegmentState::Blocked => (
                    Some(s.kind.unwrap_or(WaitKind::Other)),
                    None,
                    run.resources
                        .get(i)
                        .cloned()
                        .flatten()
                        .or_else(|| s.blocked_in.clone()),
                ),
            };
            CauseKey {
                state: s.state,
                kind,
                process: names.get(&s.pid).cloned().unwrap_or_else(|| s.comm.clone()),
                thread: s.comm.clone(),
                function,
                resource,
            }
        })
        .collect()
}

/// Each process's name: its main thread's `comm` wherever the path names
/// it, else the `comm` of its lowest thread id on the path.
fn process_names(path: &CriticalPath) -> HashMap<i32, String> {
    let mut threads: Vec<(i32, i32, &str)> = vec![(path.root.pid, path.root.tid, &path.root.comm)];
    for s in &path.segments {
        threads.push((s.pid, s.tid, &s.comm));
        for t in [&s.woken_by, &s.ran_instead, &s.waiter]
            .into_iter()
            .flatten()
        {
            threads.push((t.pid, t.tid, &t.comm));
        }
    }
    // The main thread first, then by thread id.
    threads.sort_by_key(|&(pid, tid, _)| (pid, tid != pid, tid));
    let mut names = HashMap::new();
    for (pid, _, comm) in threads {
        names.entry(pid).or_insert_with(|| comm.to_string());
    }
    names
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

fn spread(v: &[f64]) -> f64 {
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    max - min
}

impl Change {
    fn of(a: &[f64], b: &[f64], noise_known: bool, floor: f64) -> Change {
        let (a_s, b_s) = (mean(a), mean(b));
        let delta_s = b_s - a_s;
        let big_enough = delta_s.abs() >= floor && delta_s != 0.0;
        if !noise_known {
            return Change {
                a_s,
                b_s,
                delta_s,
                interval: None,
                significant: big_enough,
            };
        }
        let max = |v: &[f64]| v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
        let lo = min(b) - max(a);
        let hi = max(b) - min(a);
        // How far the interval stays off zero (negative when it spans it).
        let gap = lo.max(-hi);
        Change {
            a_s,
            b_s,
            delta_s,
            interval: Some([lo, hi]),
            significant: big_enough && gap > spread(a).max(spread(b)),
        }
    }
}

#[cfg(test)]
mod tests;
