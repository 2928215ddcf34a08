//! The critical path in words: its segments grouped by process, state, kind
//! and function ([`parts`]), and the one-sentence answer that leads
//! `slowlab diagnose` ("`sh` ran 2.51 s: 64% on a CPU in producer
//! (slow_digest), 31% …"). Pure; nothing here prints.

use std::collections::HashMap;

pub use slowlab_model::critical_path::describe_part;
use slowlab_model::critical_path::{PathPart, PathRoot, Segment, SegmentState, WaitKind};

/// Segments grouped by (process, state, kind, function, via), largest first.
/// A CPU segment counts for its `top_function` (the walker passes one
/// share of each CPU segment per sampled function).
pub fn parts(segments: &[Segment], wall_s: f64) -> Vec<PathPart> {
    type Key = (
        i32,
        String,
        SegmentState,
        Option<WaitKind>,
        Option<String>,
        Option<WaitKind>,
    );
    let mut by: HashMap<Key, f64> = HashMap::new();
    for s in segments {
        let function = match s.state {
            SegmentState::Cpu => s.top_function.clone(),
            SegmentState::Blocked => s.blocked_in.clone(),
            SegmentState::Runnable => None,
        };
        *by.entry((s.pid, s.comm.clone(), s.state, s.kind, function, s.via))
            .or_default() += s.duration_s();
    }
    let mut out: Vec<PathPart> = by
        .into_iter()
        .map(
            |((pid, comm, state, kind, function, via), seconds)| PathPart {
                pid,
                comm,
                state,
                kind,
                function,
                via,
                seconds,
                share: if wall_s > 0.0 { seconds / wall_s } else { 0.0 },
            },
        )
        .collect();
    out.sort_by(|a, b| {
        b.seconds
            .total_cmp(&a.seconds)
            .then(a.pid.cmp(&b.pid))
            .then(a.function.cmp(&b.function))
    });
    out
}

/// The answer: the root's wall time and where the largest shares went,
/// from `parts` (largest first): grouped by process, state, kind and the
/// wait followed; a CPU group named by its largest function.
pub fn sentence(root: &PathRoot, wall_s: f64, parts: &[PathPart]) -> String {
    if wall_s <= 0.0 {
        return format!("`{}` ran for no measurable time in the trace", root.comm);
    }
    let mut merged: Vec<PathPart> = Vec::new();
    for p in parts {
        match merged
            .iter_mut()
            .find(|m| m.pid == p.pid && m.state == p.state && m.kind == p.kind && m.via == p.via)
        {
            // Parts come largest first: the group keeps its first function.
            Some(m) => {
                m.seconds += p.seconds;
                m.share += p.share;
            }
            None => {
                let mut first = p.clone();
                if first.state != SegmentState::Cpu {
                    first.function = None;
                }
                merged.push(first);
            }
        }
    }
    merged.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
    let mut pieces: Vec<String> = merged
        .iter()
        .filter(|p| p.share >= 0.03)
        .take(4)
        .map(|p| format!("{:.0}% {}", p.share * 100.0, describe_part(p, root.pid)))
        .collect();
    if pieces.is_empty() {
        pieces.push("in many short stretches, none above 3%".to_string());
    }
    format!("`{}` ran {:.2} s: {}", root.comm, wall_s, pieces.join(", "))
}
