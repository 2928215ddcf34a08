//! The critical path in words: its segments grouped by process, state, kind
//! and function ([`parts`]), and the one-sentence answer that leads
//! `slowlab diagnose` ("`sh` ran 2.51 s: 64% on a CPU in producer
//! (slow_digest), 31% …"). Pure; nothing here prints.

use std::collections::HashMap;

use slowlab_model::critical_path::{Killed, PathPart, PathRoot, Segment, SegmentState, WaitKind};

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
/// wait followed; a CPU group named by its largest function. When the root
/// or a process it started was killed, the sentence says so first, and
/// `parts` are those of the time before the kill ("`timeout` ran 1.20 s:
/// bash was killed by timeout (SIGTERM) after 1.20 s; until then 97% on a
/// CPU in h_producer (slow_digest)").
pub fn sentence(
    root: &PathRoot,
    wall_s: f64,
    parts: &[PathPart],
    killed: Option<&Killed>,
) -> String {
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
    let Some(k) = killed else {
        return format!("`{}` ran {:.2} s: {}", root.comm, wall_s, pieces.join(", "));
    };
    let signal = k
        .signal
        .as_deref()
        .map(|s| format!(" ({s})"))
        .unwrap_or_default();
    let head = if k.process.pid == root.pid {
        format!("`{}` ran {:.2} s, killed", root.comm, wall_s)
    } else {
        format!(
            "`{}` ran {:.2} s: {} was killed",
            root.comm, wall_s, k.process.comm
        )
    };
    format!(
        "{head} by {}{signal} after {:.2} s; until then {}",
        k.by.comm,
        k.at_s,
        pieces.join(", ")
    )
}

/// What a blocked thread was waiting on, in words.
fn waiting_on(kind: WaitKind, blocked_in: Option<&str>) -> &'static str {
    let f = blocked_in.unwrap_or("");
    match kind {
        WaitKind::Lock => "waiting on a lock",
        WaitKind::Io => "waiting for storage",
        WaitKind::Sleep => "sleeping",
        WaitKind::Fault => "waiting in page faults",
        WaitKind::Other => "blocked",
        WaitKind::Ipc if f.contains("pipe_") || f == "wait_for_partner" => "waiting on a pipe",
        WaitKind::Ipc if f.starts_with("do_wait") || f.contains("wait4") => "waiting for a child",
        WaitKind::Ipc if f.starts_with("futex") => "waiting for a thread to finish",
        WaitKind::Ipc
            if f.starts_with("unix_")
                || f.starts_with("sk_")
                || f.starts_with("tcp_")
                || f.contains("skb") =>
        {
            "waiting on a socket"
        }
        WaitKind::Ipc if f.contains("poll") || f.contains("select") => "waiting in poll",
        WaitKind::Ipc => "waiting for another process",
    }
}

/// One part in words, relative to the root process (`root_pid`).
pub fn describe_part(part: &PathPart, root_pid: i32) -> String {
    let who = if part.pid == root_pid {
        String::new()
    } else {
        format!(" in {}", part.comm)
    };
    let mut text = match part.state {
        SegmentState::Cpu => match &part.function {
            Some(f) if who.is_empty() => format!("on a CPU in {f}"),
            Some(f) => format!("on a CPU{who} ({f})"),
            None => format!("on a CPU{who}"),
        },
        SegmentState::Runnable => format!("runnable{who}, waiting for a CPU"),
        SegmentState::Blocked => {
            let kind = part.kind.unwrap_or(WaitKind::Other);
            let what = waiting_on(kind, part.function.as_deref());
            match &part.function {
                Some(f) => format!("{what}{who} ({f})"),
                None => format!("{what}{who}"),
            }
        }
    };
    if let Some(via) = part.via {
        text.push_str(match via {
            WaitKind::Lock => " behind a lock",
            WaitKind::Io => " behind a storage wait",
            WaitKind::Sleep => " behind a sleep",
            WaitKind::Ipc => " behind a pipe, socket or exit",
            WaitKind::Fault => " behind a page fault",
            WaitKind::Other => " behind a wait",
        });
    }
    text
}
