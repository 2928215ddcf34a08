//! The critical path in words: its segments grouped by process, state, kind
//! and function ([`parts`]), and the one-sentence answer that leads
//! `slowlab diagnose` ("`sh` ran 2.51 s: 64% on a CPU in producer
//! (slow_digest), 31% …"). Pure; nothing here prints.

use std::collections::HashMap;

use slowlab_model::critical_path::{
    Killed, PathPart, PathRoot, Resource, ResourceKind, Segment, SegmentState, WaitKind,
};

use crate::unnamed;

/// Segments grouped by (process, state, kind, function, via, and the
/// resources waited on, followed and held), largest first.
/// A CPU segment counts for its `top_function` (the walker passes one
/// share of each CPU segment per sampled function).
pub fn parts(segments: &[Segment], wall_s: f64) -> Vec<PathPart> {
    type Key = (
        (i32, String, SegmentState, Option<WaitKind>, Option<String>),
        Option<WaitKind>,
        Option<ResKey>,
        Option<ResKey>,
        Option<String>,
        Option<ResKey>,
    );
    // A resource as parts are grouped by: its holder by process and
    // command (threads of one pool that take turns make one part); the
    // part keeps the first segment's resource.
    type ResKey = (
        ResourceKind,
        Option<String>,
        Option<String>,
        Option<(i32, String)>,
    );
    let res_key = |r: &Option<Resource>| {
        r.as_ref().map(|r| {
            (
                r.kind,
                r.address.clone(),
                r.name.clone(),
                r.holder.as_ref().map(|h| (h.pid, h.comm.clone())),
            )
        })
    };
    type Firsts = (Option<Resource>, Option<Resource>, Option<Resource>);
    let mut first: HashMap<Key, Firsts> = HashMap::new();
    let mut by: HashMap<Key, f64> = HashMap::new();
    for s in segments {
        let function = match s.state {
            SegmentState::Cpu => s.top_function.clone(),
            SegmentState::Blocked => s.blocked_in.clone(),
            SegmentState::Runnable => None,
        };
        let key = (
            (s.pid, s.comm.clone(), s.state, s.kind, function),
            s.via,
            res_key(&s.resource),
            res_key(&s.via_resource),
            s.waiter.as_ref().map(|w| w.comm.clone()),
            res_key(&s.holding),
        );
        first.entry(key.clone()).or_insert_with(|| {
            (
                s.resource.clone(),
                s.via_resource.clone(),
                s.holding.clone(),
            )
        });
        *by.entry(key).or_default() += s.duration_s();
    }
    let mut out: Vec<PathPart> = by
        .into_iter()
        .map(|(key, seconds)| {
            let (resource, via_resource, holding) = first.remove(&key).unwrap_or_default();
            let ((pid, comm, state, kind, function), via, _, _, waiter, _) = key;
            PathPart {
                pid,
                comm,
                state,
                kind,
                function,
                via,
                resource,
                via_resource,
                waiter,
                holding,
                seconds,
                share: if wall_s > 0.0 { seconds / wall_s } else { 0.0 },
            }
        })
        .collect();
    // Equal times are told apart by their words, so that the order does not follow the
    // hash map's (one run's parts came in another order than the next's).
    out.sort_by(|a, b| {
        b.seconds
            .total_cmp(&a.seconds)
            .then(a.pid.cmp(&b.pid))
            .then(a.function.cmp(&b.function))
            .then_with(|| a.comm.cmp(&b.comm))
            .then_with(|| describe_part(a, a.pid).cmp(&describe_part(b, b.pid)))
    });
    out
}

/// The answer: the root's wall time and where the largest shares went,
/// from `parts` (largest first): grouped by process, state, kind and the
/// wait followed. A CPU group names its functions: the one that holds
/// nearly all of it ("74% on a CPU in producer (slow_digest)"), else the
/// largest with their shares and the rest ("64% on a CPU in cc1 (hot 4%,
/// f00 2%, f01 2%, the rest 57%)"), so that a build's compiler, whose time
/// is spread over thousands of functions, is one piece and not many, each
/// under the 3% the answer says. When the root or a
/// process it started was killed, the sentence says so first, and `parts`
/// are those of the time before the kill ("`timeout` ran 1.20 s: bash was
/// killed by timeout (SIGTERM) after 1.20 s; until then 97% on a CPU in
/// h_producer (slow_digest)").
pub fn sentence(
    root: &PathRoot,
    wall_s: f64,
    parts: &[PathPart],
    killed: Option<&Killed>,
) -> String {
    if wall_s <= 0.0 {
        return format!("`{}` ran for no measurable time in the trace", root.comm);
    }
    // Parts said in the same words, but for their function, are one piece
    // of the answer: each part's words made once, and found again by them
    // (a build's path has thousands of parts: comparing every part's words
    // with every piece's took 25 s of a minute-long build's diagnose).
    let mut pieces: Vec<Piece> = Vec::new();
    let mut by_words: HashMap<(SegmentState, String), usize> = HashMap::new();
    for p in parts {
        let unnamed = PathPart {
            function: None,
            seconds: 0.0,
            share: 0.0,
            ..p.clone()
        };
        let words = describe_part_in(&unnamed, root.pid, &root.comm);
        let at = *by_words.entry((p.state, words)).or_insert_with(|| {
            pieces.push(Piece {
                part: unnamed,
                functions: HashMap::new(),
            });
            pieces.len() - 1
        });
        let piece = &mut pieces[at];
        piece.part.seconds += p.seconds;
        piece.part.share += p.share;
        if let (SegmentState::Cpu, Some(f)) = (p.state, &p.function) {
            *piece.functions.entry(f.clone()).or_default() += p.seconds;
        }
    }
    pieces.sort_by(|a, b| b.part.seconds.total_cmp(&a.part.seconds));
    let mut pieces: Vec<String> = pieces
        .iter()
        .filter(|p| p.part.share >= 0.03)
        .take(4)
        .map(|p| {
            let functions = cpu_functions(&p.functions, p.part.seconds, wall_s);
            format!(
                "{:.0}% {}",
                p.part.share * 100.0,
                describe_part_with(&p.part, root.pid, &root.comm, functions.as_ref())
            )
        })
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

/// A piece of the answer: parts said in the same words but for their
/// function, summed; a CPU piece's time by function.
struct Piece {
    part: PathPart,
    functions: HashMap<String, f64>,
}

/// A CPU part's functions in words.
enum Functions {
    /// The one function it ran in (or nearly all of it).
    One(String),
    /// The largest functions with their shares of the path, and the rest:
    /// "hot 4%, f00 2%, f01 2%, the rest 57%".
    Shares(String),
}

/// Of a CPU piece's time, the functions with at least this share of the
/// path are named with their shares (at most [`NAMED_FUNCTIONS`]); less
/// than this left over is not said.
const FUNCTION_SHARE: f64 = 0.01;
const NAMED_FUNCTIONS: usize = 3;
/// A CPU piece this much in one function is named by it alone.
const ONE_FUNCTION: f64 = 0.9;

/// A CPU piece of `piece_s` seconds in words by its `functions`' seconds:
/// one function when it holds [`ONE_FUNCTION`] of the piece, else the
/// largest with their shares and the rest. None when no function was
/// sampled.
fn cpu_functions(functions: &HashMap<String, f64>, piece_s: f64, wall_s: f64) -> Option<Functions> {
    let mut largest: Vec<(&String, f64)> = functions.iter().map(|(f, s)| (f, *s)).collect();
    largest.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    let &(top, top_s) = largest.first()?;
    if top_s >= piece_s * ONE_FUNCTION {
        return Some(Functions::One(top.clone()));
    }
    let named: Vec<(&String, f64)> = largest
        .iter()
        .take(NAMED_FUNCTIONS)
        .enumerate()
        .take_while(|(i, (_, s))| *i == 0 || s / wall_s >= FUNCTION_SHARE)
        .map(|(_, f)| *f)
        .collect();
    let mut words: Vec<String> = named
        .iter()
        .map(|(f, s)| format!("{f} {:.0}%", s / wall_s * 100.0))
        .collect();
    let rest_s = piece_s - named.iter().map(|(_, s)| s).sum::<f64>();
    if rest_s / wall_s >= FUNCTION_SHARE {
        words.push(format!("the rest {:.0}%", rest_s / wall_s * 100.0));
    }
    Some(Functions::Shares(words.join(", ")))
}

/// What a blocked thread was waiting on, in words, when the trace names
/// no resource (files written before resources were recorded).
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

/// A holder's name: its command, and its pid when another process's.
fn named(holder: &Option<slowlab_model::critical_path::PathThread>, pid: i32) -> Option<String> {
    holder.as_ref().map(|h| {
        if h.pid == pid {
            h.comm.clone()
        } else {
            format!("{} [{}]", h.comm, h.pid)
        }
    })
}

/// A wait on resource `r` in words (the README's table): what the thread
/// waited for and who held it, ended it, or was waited for.
pub fn waited_for(r: &Resource, blocked_in: Option<&str>, pid: i32) -> String {
    let holder = named(&r.holder, pid);
    let addr = r
        .address
        .as_deref()
        .map(|a| format!(" {a}"))
        .unwrap_or_default();
    let by = |text: &str| match &holder {
        Some(h) => format!("{text} {h}"),
        None => String::new(),
    };
    let f = blocked_in.unwrap_or("");
    match r.kind {
        ResourceKind::Mutex | ResourceKind::Rwlock => format!(
            "waiting on {}{}{}",
            if addr.is_empty() { "a " } else { "" },
            format_args!("{}{addr}", r.kind.as_str()),
            prefixed(&by("held by"))
        ),
        ResourceKind::Condvar => match &holder {
            Some(h) => format!("waiting for {h} to signal a condition variable"),
            None => "waiting on a condition variable".into(),
        },
        ResourceKind::Join => match &holder {
            Some(h) => format!("waiting to join thread {h}"),
            None => "waiting to join a thread".into(),
        },
        ResourceKind::Child => match holder.or(r.name.clone()) {
            Some(c) => format!("waiting for its child {c} to exit"),
            None => "waiting for a child to exit".into(),
        },
        ResourceKind::Pipe if f.contains("write") => {
            format!("writing to a pipe{}", prefixed(&by("read by")))
        }
        ResourceKind::Pipe => format!("reading from a pipe{}", prefixed(&by("written by"))),
        ResourceKind::Socket => format!("waiting on a socket{}", prefixed(&by("for"))),
        ResourceKind::FileLock => format!("waiting on a file lock{}", prefixed(&by("held by"))),
        ResourceKind::Futex => format!("waiting on futex{addr}{}", prefixed(&by("woken by"))),
        ResourceKind::KernelLock => format!(
            "waiting on a kernel lock{}{}",
            r.name
                .as_deref()
                .map(|n| format!(" in {n}"))
                .unwrap_or_default(),
            prefixed(&by("held by"))
        ),
        ResourceKind::Device => match r.name.as_deref() {
            Some(sc) => format!("waiting for the disk ({sc})"),
            None if f.contains("fault") => "waiting for the disk in a page fault".into(),
            None => "waiting for the disk".into(),
        },
        ResourceKind::Timer => match r.name.as_deref() {
            Some(sc) => format!("sleeping ({sc})"),
            None => "sleeping".into(),
        },
        ResourceKind::None => {
            let place = if f.is_empty() {
                "blocked".to_string()
            } else {
                format!("blocked in {f}")
            };
            format!("{place}{}", prefixed(&by("until woken by")))
        }
    }
}

fn prefixed(text: &str) -> String {
    if text.is_empty() {
        String::new()
    } else {
        format!(" {text}")
    }
}

/// What the waiter that a part was followed from waited for, in words
/// ("while `main` waited to join it").
pub fn while_waited(r: &Resource, waiter: &str) -> String {
    let addr = r
        .address
        .as_deref()
        .map(|a| format!(" {a}"))
        .unwrap_or_default();
    let what = match r.kind {
        ResourceKind::Mutex | ResourceKind::Rwlock if addr.is_empty() => {
            format!("on a {} it held", r.kind.as_str())
        }
        ResourceKind::Mutex | ResourceKind::Rwlock => {
            format!("on {}{addr} it held", r.kind.as_str())
        }
        ResourceKind::Condvar => "for it to signal a condition variable".into(),
        ResourceKind::Join => "to join it".into(),
        ResourceKind::Child => "for it to exit".into(),
        ResourceKind::Pipe => "on a pipe for it".into(),
        ResourceKind::Socket => "on a socket for it".into(),
        ResourceKind::FileLock => "on a file lock it held".into(),
        ResourceKind::Futex => format!("on futex{addr} until it woke it"),
        ResourceKind::KernelLock => "on a kernel lock it held".into(),
        ResourceKind::Device | ResourceKind::Timer | ResourceKind::None => "for it".into(),
    };
    format!(" while {waiter} waited {what}")
}

/// One part in words, relative to the root process (`root_pid`).
pub fn describe_part(part: &PathPart, root_pid: i32) -> String {
    describe_part_in(part, root_pid, &part.comm)
}

/// One part in words, relative to the root process (`root_pid`, whose
/// main thread is `root_comm`): another thread of the root's process is
/// named too.
pub fn describe_part_in(part: &PathPart, root_pid: i32, root_comm: &str) -> String {
    let function = part.function.clone().map(Functions::One);
    describe_part_with(part, root_pid, root_comm, function.as_ref())
}

/// [`describe_part_in`] with a CPU part's functions given in words.
fn describe_part_with(
    part: &PathPart,
    root_pid: i32,
    root_comm: &str,
    functions: Option<&Functions>,
) -> String {
    let who = if part.pid != root_pid {
        format!(" in {}", part.comm)
    } else if part.comm != root_comm {
        format!(" in thread {}", part.comm)
    } else {
        String::new()
    };
    let mut text = match part.state {
        SegmentState::Cpu => match functions {
            Some(Functions::One(f)) if who.is_empty() => format!("on a CPU in {f}"),
            Some(Functions::One(f)) => format!("on a CPU{who} {}", unnamed::in_parens(f)),
            Some(Functions::Shares(shares)) => format!("on a CPU{who} ({shares})"),
            None => format!("on a CPU{who}"),
        },
        SegmentState::Runnable => format!("runnable{who}, waiting for a CPU"),
        SegmentState::Blocked => match &part.resource {
            Some(r) => format!("{}{who}", waited_for(r, part.function.as_deref(), part.pid)),
            None => {
                let kind = part.kind.unwrap_or(WaitKind::Other);
                let what = waiting_on(kind, part.function.as_deref());
                match &part.function {
                    Some(f) => format!("{what}{who} {}", unnamed::in_parens(f)),
                    None => format!("{what}{who}"),
                }
            }
        },
    };
    if let Some(h) = &part.holding {
        text.push_str(&format!(" holding {}", h.kind.as_str()));
        if let Some(a) = &h.address {
            text.push_str(&format!(" {a}"));
        }
    }
    match (&part.via_resource, &part.waiter, part.via) {
        (Some(r), Some(w), _) => text.push_str(&while_waited(r, w)),
        (None, _, Some(via)) => text.push_str(match via {
            WaitKind::Lock => " behind a lock",
            WaitKind::Io => " behind a storage wait",
            WaitKind::Sleep => " behind a sleep",
            WaitKind::Ipc => " while another thread waited for it",
            WaitKind::Fault => " behind a page fault",
            WaitKind::Other => " behind a wait",
        }),
        _ => {}
    }
    text
}

#[cfg(test)]
#[path = "summary_tests.rs"]
mod tests;
