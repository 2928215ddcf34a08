//! The comparison in words: the one-sentence answer ("B took 0.84 s longer
//! (1.02 → 1.86 s): +0.71 s waiting for the disk in fsync …") and how one
//! cause is said. Pure.

use slowlab_model::critical_path::{SegmentState, WaitKind};

use super::{CauseKey, Group, PathDiff, FLOOR_SHARE};

/// How many causes the sentence names at most.
const NAMED: usize = 4;

/// The answer in words: "B took 0.84 s longer (1.02 → 1.86 s): +0.71 s
/// waiting for the disk in fsync (fsync_loop); …; other changes under 2%".
pub(super) fn sentence(d: &PathDiff) -> String {
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
