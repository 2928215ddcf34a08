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

/// A change smaller than this share of A's mean wall time is never named
/// on its own ("other changes under 2%").
pub const FLOOR_SHARE: f64 = 0.02;

/// How many causes the sentence names at most.
const NAMED: usize = 4;

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

/// The answer in words: "B took 0.84 s longer (1.02 → 1.86 s): +0.71 s
/// waiting for the disk in fsync (fsync_loop); …; other changes under 2%".
fn sentence(d: &PathDiff) -> String {
    let (a, b) = (d.a.wall_s, d.b.wall_s);
    if !d.significant {
        let why = match d.interval {
            Some([lo, hi]) => format!(
                "{} s, within the runs' own noise [{lo:+.2}, {hi:+.2}] s",
                signed(d.delta_s)
            ),
            None => format!("{} s, under 2%", signed(d.delta_s)),
        };
        return format!("No significant change: {a:.2} → {b:.2} s ({why})");
    }
    let head = if d.delta_s >= 0.0 {
        format!("B took {:.2} s longer ({a:.2} → {b:.2} s)", d.delta_s)
    } else {
        format!("B took {:.2} s less ({a:.2} → {b:.2} s)", -d.delta_s)
    };
    let (named, rest): (Vec<&Group>, Vec<&Group>) =
        d.groups.iter().partition(|g| g.change.significant);
    let (named, more) = (&named[..named.len().min(NAMED)], named.len() > NAMED);
    let mut pieces: Vec<String> = named
        .iter()
        .map(|g| {
            let mostly = |state| g.mostly.clone().filter(|_| g.state == state);
            let key = CauseKey {
                state: g.state,
                kind: g.kind,
                process: g.process.clone(),
                thread: g.thread.clone(),
                function: mostly(SegmentState::Cpu),
                resource: mostly(SegmentState::Blocked),
            };
            format!("{} s {}", signed(g.change.delta_s), describe(&key))
        })
        .collect();
    let floor = FLOOR_SHARE * a;
    let (mut noisy, mut small) = (false, false);
    for c in rest {
        if c.change.delta_s.abs() >= floor {
            noisy = true;
        } else if c.change.delta_s != 0.0 {
            small = true;
        }
    }
    if more {
        pieces.push("more changes below".to_string());
    }
    if noisy {
        pieces.push("other changes within the runs' noise".to_string());
    } else if small {
        pieces.push("other changes under 2%".to_string());
    }
    if pieces.is_empty() {
        pieces.push("no single cause of 2% or more".to_string());
    }
    format!("{head}: {}", pieces.join("; "))
}

fn signed(s: f64) -> String {
    format!("{s:+.2}")
}

/// A cause in words, naming its process (and its thread when the name
/// differs): "waiting for the disk in fsync (fsync_loop)".
pub fn describe(key: &CauseKey) -> String {
    let what = what_of(key);
    if key.thread == key.process {
        format!("{what} ({})", key.process)
    } else {
        format!("{what} ({}, thread {})", key.process, key.thread)
    }
}

/// A cause in words without its process: "waiting for the disk in fsync".
pub fn what_of(key: &CauseKey) -> String {
    match key.state {
        SegmentState::Cpu => match &key.function {
            Some(f) => format!("on a CPU in {f}"),
            None => "on a CPU".to_string(),
        },
        SegmentState::Runnable => "waiting for a CPU".to_string(),
        SegmentState::Blocked => {
            let what = match key.kind.unwrap_or(WaitKind::Other) {
                WaitKind::Lock => "waiting on a lock",
                WaitKind::Io => "waiting for the disk",
                WaitKind::Sleep => "sleeping",
                WaitKind::Ipc => "waiting on another thread or process",
                WaitKind::Fault => "waiting in page faults",
                WaitKind::Other => "blocked",
            };
            match &key.resource {
                Some(r) => format!("{what} in {r}"),
                None => what.to_string(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slowlab_model::critical_path::{Breakdown, PathRoot, PathThread, Segment};

    /// A stretch of `secs` seconds: (pid, tid, thread comm, state, kind,
    /// function or blocked_in).
    type Stretch<'a> = (
        i32,
        i32,
        &'a str,
        SegmentState,
        Option<WaitKind>,
        Option<&'a str>,
        f64,
    );

    fn cpu<'a>(pid: i32, tid: i32, comm: &'a str, f: &'a str, secs: f64) -> Stretch<'a> {
        (pid, tid, comm, SegmentState::Cpu, None, Some(f), secs)
    }

    fn wait<'a>(
        pid: i32,
        tid: i32,
        comm: &'a str,
        k: WaitKind,
        at: &'a str,
        secs: f64,
    ) -> Stretch<'a> {
        (
            pid,
            tid,
            comm,
            SegmentState::Blocked,
            Some(k),
            Some(at),
            secs,
        )
    }

    /// A path rooted at the first stretch's process, its segments back to
    /// back.
    fn path(stretches: &[Stretch]) -> CriticalPath {
        let mut t = 0.0;
        let segments: Vec<Segment> = stretches
            .iter()
            .map(|&(pid, tid, comm, state, kind, f, secs)| {
                let s = Segment {
                    from_s: t,
                    to_s: t + secs,
                    pid,
                    tid,
                    comm: comm.to_string(),
                    state,
                    kind,
                    top_function: (state == SegmentState::Cpu).then(|| f.unwrap().to_string()),
                    woken_by: None,
                    ended_by: None,
                    ran_instead: None,
                    blocked_in: (state == SegmentState::Blocked).then(|| f.unwrap().to_string()),
                    depth: 0,
                    via: None,
                    waiter: None,
                    resource: None,
                    via_resource: None,
                    holding: None,
                };
                t += secs;
                s
            })
            .collect();
        let (pid, tid, comm) = (stretches[0].0, stretches[0].1, stretches[0].2);
        CriticalPath {
            wall_s: t,
            root: PathRoot {
                pid,
                tid,
                comm: comm.to_string(),
                start_s: 0.0,
            },
            breakdown: Breakdown::default(),
            segments,
            parts: Vec::new(),
            summary: String::new(),
            unknown_s: 0.0,
            killed: None,
        }
    }

    fn one(a: CriticalPath, b: CriticalPath) -> PathDiff {
        diff_paths(&[Run::new(a)], &[Run::new(b)]).unwrap()
    }

    fn find<'a>(d: &'a PathDiff, thread: &str, what: &str) -> &'a Cause {
        d.causes
            .iter()
            .find(|c| {
                c.key.thread == thread
                    && (c.key.function.as_deref() == Some(what)
                        || c.key.resource.as_deref() == Some(what))
            })
            .unwrap_or_else(|| panic!("no cause {thread}/{what}: {d:#?}"))
    }

    fn assert_sums(d: &PathDiff) {
        let sum: f64 = d.causes.iter().map(|c| c.change.delta_s).sum();
        assert!(
            (sum - (d.b.wall_s - d.a.wall_s)).abs() < 1e-9,
            "{sum} vs {d:#?}"
        );
        assert!((d.delta_s - (d.b.wall_s - d.a.wall_s)).abs() < 1e-9);
    }

    #[test]
    fn a_process_with_another_pid_but_the_same_name_is_matched() {
        let a = path(&[
            cpu(100, 100, "app", "work", 1.0),
            wait(100, 100, "app", WaitKind::Io, "fsync", 0.2),
        ]);
        let b = path(&[
            cpu(200, 200, "app", "work", 1.0),
            wait(200, 200, "app", WaitKind::Io, "fsync", 0.9),
        ]);
        let d = one(a, b);
        assert_sums(&d);
        assert_eq!(d.causes.len(), 2, "{d:#?}");
        let first = &d.causes[0].key;
        assert_eq!(
            (first.state, first.kind),
            (SegmentState::Blocked, Some(WaitKind::Io))
        );
        assert_eq!(first.resource.as_deref(), Some("fsync"));
        assert!((d.causes[0].change.delta_s - 0.7).abs() < 1e-12);
        assert_eq!(find(&d, "app", "work").change.delta_s, 0.0);
        assert!(
            d.summary.starts_with(
                "B took 0.70 s longer (1.20 → 1.90 s): +0.70 s waiting for the disk in fsync (app)"
            ),
            "{}",
            d.summary
        );
        assert!(d.significant);
        assert_eq!(d.warnings.len(), 1, "one run per side: noise unknown");
    }

    #[test]
    fn a_disk_wait_split_across_kernel_functions_is_one_group() {
        let a = path(&[
            cpu(1, 1, "app", "work", 1.0),
            wait(1, 1, "app", WaitKind::Io, "bit_wait_io", 0.01),
        ]);
        let b = path(&[
            cpu(1, 1, "app", "work", 1.07),
            wait(1, 1, "app", WaitKind::Io, "bit_wait_io", 0.04),
            wait(1, 1, "app", WaitKind::Io, "jbd2_log_wait_commit", 0.06),
            wait(1, 1, "app", WaitKind::Io, "wait_for_completion_io", 0.05),
        ]);
        let d = one(a, b);
        assert_sums(&d);
        // No one kernel function grew as much as the CPU did...
        assert_eq!(d.causes[0].key.function.as_deref(), Some("work"));
        // ...but the disk wait did, and the answer says so first.
        let g = &d.groups[0];
        assert_eq!(
            (g.state, g.kind),
            (SegmentState::Blocked, Some(WaitKind::Io))
        );
        assert!((g.change.delta_s - 0.14).abs() < 1e-12, "{g:?}");
        assert_eq!(g.mostly.as_deref(), Some("jbd2_log_wait_commit"));
        let sum: f64 = d.groups.iter().map(|g| g.change.delta_s).sum();
        assert!((sum - d.delta_s).abs() < 1e-9);
        assert!(
            d.summary.starts_with(
                "B took 0.21 s longer (1.01 → 1.22 s): +0.14 s waiting for the disk in \
                 jbd2_log_wait_commit (app); +0.07 s on a CPU in work (app)"
            ),
            "{}",
            d.summary
        );
    }

    #[test]
    fn a_renamed_process_is_two_causes() {
        let a = path(&[cpu(100, 100, "app", "work", 1.0)]);
        let b = path(&[cpu(100, 100, "app2", "work", 1.1)]);
        let d = one(a, b);
        assert_sums(&d);
        assert_eq!(d.causes.len(), 2, "{d:#?}");
        assert!((find(&d, "app", "work").change.delta_s + 1.0).abs() < 1e-12);
        assert!((find(&d, "app2", "work").change.delta_s - 1.1).abs() < 1e-12);
        assert!(
            d.warnings.iter().any(|w| w.contains("roots differ")),
            "{:?}",
            d.warnings
        );
    }

    #[test]
    fn a_thread_only_in_b_is_a_cause_of_its_own_named_by_its_process() {
        // B's path runs through a new thread `flusher` of the root's
        // process: a cause of its own, its process named by the root.
        let a = path(&[cpu(10, 10, "srv", "serve", 0.5)]);
        let b = path(&[
            cpu(20, 20, "srv", "serve", 0.5),
            cpu(20, 23, "flusher", "flush_all", 0.3),
        ]);
        let d = one(a, b);
        assert_sums(&d);
        let c = &d.causes[0];
        assert_eq!(c.key.process, "srv");
        assert_eq!(c.key.thread, "flusher");
        assert_eq!(c.key.function.as_deref(), Some("flush_all"));
        assert_eq!(c.change.a_s, 0.0);
        assert!((c.change.b_s - 0.3).abs() < 1e-12);
        assert!(
            d.summary
                .contains("+0.30 s on a CPU in flush_all (srv, thread flusher)"),
            "{}",
            d.summary
        );
    }

    #[test]
    fn a_process_not_shown_by_its_main_thread_is_named_by_its_lowest_thread() {
        let mut b = path(&[
            cpu(20, 20, "srv", "serve", 0.5),
            cpu(30, 32, "w-a", "crunch", 0.2),
            cpu(30, 31, "w-b", "crunch", 0.1),
        ]);
        let d = one(path(&[cpu(20, 20, "srv", "serve", 0.5)]), b.clone());
        assert!(
            d.causes
                .iter()
                .filter(|c| c.key.thread.starts_with("w-"))
                .all(|c| c.key.process == "w-b"),
            "{d:#?}"
        );
        // Where the path names the main thread (here as a waker), that name wins.
        b.segments[0].woken_by = Some(PathThread {
            pid: 30,
            tid: 30,
            comm: "pool".into(),
        });
        let d = one(path(&[cpu(20, 20, "srv", "serve", 0.5)]), b);
        assert!(
            d.causes
                .iter()
                .filter(|c| c.key.thread.starts_with("w-"))
                .all(|c| c.key.process == "pool"),
            "{d:#?}"
        );
    }

    #[test]
    fn a_cause_that_moved_to_another_thread_is_a_loss_and_a_gain() {
        let a = path(&[
            wait(1, 1, "app", WaitKind::Ipc, "futex_wait", 0.4),
            cpu(1, 2, "worker-1", "render_page", 0.4),
        ]);
        let b = path(&[
            wait(1, 1, "app", WaitKind::Ipc, "futex_wait", 0.45),
            cpu(1, 3, "worker-2", "render_page", 0.45),
        ]);
        let d = one(a, b);
        assert_sums(&d);
        assert!((find(&d, "worker-1", "render_page").change.delta_s + 0.4).abs() < 1e-12);
        assert!((find(&d, "worker-2", "render_page").change.delta_s - 0.45).abs() < 1e-12);
        assert!((find(&d, "app", "futex_wait").change.delta_s - 0.05).abs() < 1e-12);
        // Largest change first, whatever its sign.
        assert_eq!(d.causes[0].key.thread, "worker-2");
        assert_eq!(d.causes[1].key.thread, "worker-1");
    }

    #[test]
    fn deltas_add_up_to_the_wall_delta_with_many_causes_and_runs() {
        let mk = |x: f64| {
            path(&[
                cpu(5, 5, "p", "a", 0.11 * x),
                wait(5, 5, "p", WaitKind::Lock, "futex_wait", 0.07 + x / 3.0),
                (5, 5, "p", SegmentState::Runnable, None, None, 0.013 * x),
                wait(5, 6, "q", WaitKind::Sleep, "hrtimer_nanosleep", 0.2 / x),
                cpu(7, 7, "other", "b", 0.031),
                wait(5, 5, "p", WaitKind::Fault, "folio_wait", 0.001 * x),
            ])
        };
        let a: Vec<Run> = [1.0, 1.1, 0.9].map(|x| Run::new(mk(x))).into();
        let b: Vec<Run> = [2.0, 2.3, 1.7, 2.1].map(|x| Run::new(mk(x))).into();
        let d = diff_paths(&a, &b).unwrap();
        assert_sums(&d);
        assert_eq!(d.causes.len(), 6);
        assert!(d.warnings.is_empty(), "{:?}", d.warnings);
    }

    #[test]
    fn a_resource_names_the_wait_and_its_holder_instead_of_blocked_in() {
        let a = path(&[wait(1, 1, "app", WaitKind::Lock, "futex_wait", 0.2)]);
        let mut v = serde_json::to_value(&a).unwrap();
        v["segments"][0]["resource"] = serde_json::json!({
            "kind": "mutex", "address": "0x7f00", "name": "cache_lock",
            "holder": {"pid": 1, "tid": 2, "comm": "w"}
        });
        let run = Run::from_json(&v).unwrap();
        assert_eq!(
            run.resources,
            vec![Some("mutex cache_lock (w)".to_string())]
        );
        let d = diff_paths(&[Run::new(a)], &[run]).unwrap();
        assert!(find(&d, "app", "mutex cache_lock (w)").change.delta_s == 0.2);
        assert!(find(&d, "app", "futex_wait").change.delta_s == -0.2);
    }

    #[test]
    fn a_change_inside_the_runs_noise_is_not_significant() {
        let mk = |x: f64| Run::new(path(&[cpu(1, 1, "app", "work", x)]));
        let a: Vec<Run> = [1.00, 1.06, 0.97].map(mk).into();
        let b: Vec<Run> = [1.04, 0.99, 1.08].map(mk).into();
        let d = diff_paths(&a, &b).unwrap();
        assert!(!d.significant);
        assert!(!d.causes[0].change.significant);
        let [lo, hi] = d.interval.unwrap();
        assert!(lo < 0.0 && hi > 0.0, "{lo} {hi}");
        assert!(
            d.summary.starts_with("No significant change"),
            "{}",
            d.summary
        );
        // Runs apart but by less than their own spread: still noise.
        let b: Vec<Run> = [1.07, 1.12, 1.16].map(mk).into();
        let d = diff_paths(&a, &b).unwrap();
        assert!(!d.significant, "{d:#?}");
        // Clearly apart: significant, and the interval is every pairing's.
        let b: Vec<Run> = [1.50, 1.55, 1.52].map(mk).into();
        let d = diff_paths(&a, &b).unwrap();
        assert!(d.significant);
        let [lo, hi] = d.interval.unwrap();
        assert!((lo - (1.50 - 1.06)).abs() < 1e-12 && (hi - (1.55 - 0.97)).abs() < 1e-12);
    }

    #[test]
    fn one_run_per_side_counts_changes_of_two_percent_and_warns() {
        let d = one(
            path(&[cpu(1, 1, "app", "work", 1.0)]),
            path(&[cpu(1, 1, "app", "work", 1.015)]),
        );
        assert!(!d.significant);
        assert!(d.interval.is_none());
        assert!(
            d.warnings[0].contains("noise is unknown"),
            "{:?}",
            d.warnings
        );
        let d = one(
            path(&[cpu(1, 1, "app", "work", 1.0)]),
            path(&[cpu(1, 1, "app", "work", 0.9)]),
        );
        assert!(d.significant);
        assert!(
            d.summary.starts_with("B took 0.10 s less (1.00 → 0.90 s)"),
            "{}",
            d.summary
        );
    }

    #[test]
    fn no_runs_no_diff() {
        assert!(diff_paths(&[], &[Run::new(path(&[cpu(1, 1, "a", "f", 1.0)]))]).is_none());
    }

    #[test]
    fn the_json_has_the_documented_fields() {
        let d = one(
            path(&[cpu(1, 1, "app", "work", 1.0)]),
            path(&[cpu(1, 1, "app", "work", 1.5)]),
        );
        let v = serde_json::to_value(&d).unwrap();
        for k in ["a", "b", "delta_s", "significant", "causes"] {
            assert!(v.get(k).is_some(), "{k}: {v}");
        }
        assert!(v["a"]["wall_s"].is_f64());
        let c = &v["causes"][0];
        for k in [
            "state", "kind", "process", "thread", "function", "resource", "a_s", "b_s", "delta_s",
            "interval",
        ] {
            assert!(c.get(k).is_some(), "{k}: {c}");
        }
        assert_eq!(c["state"], "cpu");
        assert!(c["kind"].is_null() && c["interval"].is_null());
    }
}
