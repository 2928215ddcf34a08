//! `slowlab hang`'s output: one sentence per chain ("main [123] waits on
//! mutex 0x55…40 (in transfer) held by worker [125], which …: deadlock"),
//! each hop's state, system call, time off the CPU and stacks under it;
//! and the JSON.
//!
//! This renderer lives here rather than in `slowlab-report` because the
//! report types live here (see `model`): `slowlab-report` depends on
//! `slowlab-model` only, and nothing else uses these types. It reads the
//! report only; it computes nothing.

use std::collections::HashSet;
use std::fmt::Write;

use crate::model::{EndsIn, HangReport, Hop, ThreadChain, ThreadId, WaitKind, WaitsOn};

/// Kernel and user frames shown per hop in the text (the JSON has all).
pub const FRAMES_SHOWN: usize = 6;

/// The report as JSON (pretty-printed).
pub fn json(report: &HangReport) -> serde_json::Result<String> {
    serde_json::to_string_pretty(report)
}

/// The report as text.
pub fn text(report: &HangReport) -> String {
    let mut out = String::new();
    let ns = if report.ns_pid.len() > 1 {
        format!(
            ", pid {} in its namespace",
            report.ns_pid.last().copied().unwrap_or(report.pid)
        )
    } else {
        String::new()
    };
    let blocked = report.threads.iter().filter(|t| t.is_blocked()).count();
    let cycles = report.threads.iter().filter(|t| t.cycle).count();
    let _ = writeln!(
        out,
        "slowlab hang: {} [{}]{ns}: {} thread{}, {blocked} blocked{}",
        report.comm,
        report.pid,
        report.thread_count,
        if report.thread_count == 1 { "" } else { "s" },
        if cycles > 0 {
            format!(", {cycles} in or waiting on a deadlock")
        } else {
            String::new()
        }
    );
    if report.threads.is_empty() {
        out.push_str(
            "no thread is blocked on anything slowlab can follow (--all-threads lists them all)\n",
        );
    }
    let mut shown: HashSet<ThreadId> = HashSet::new();
    for t in &report.threads {
        out.push('\n');
        out.push_str(&sentence(t));
        out.push('\n');
        for hop in &t.chain {
            let id = ThreadId {
                pid: hop.pid,
                tid: hop.tid,
            };
            if !shown.insert(id) {
                let _ = writeln!(out, "  {} (as above)", who(hop));
                continue;
            }
            details(&mut out, hop);
        }
    }
    if !report.warnings.is_empty() {
        out.push('\n');
        for w in &report.warnings {
            let _ = writeln!(out, "warning: {w}");
        }
    }
    out
}

/// `name [tid]`, with its process when it is another one, and its own
/// pid when it lives in another pid namespace.
/// In the sentence, a thread of the walked process leaves its namespace id
/// to the header and its own details line ([`who_in_ns`]).
fn who(hop: &Hop) -> String {
    if hop.process.is_none() {
        return format!("{} [{}]", hop.comm, hop.tid);
    }
    who_in_ns(hop)
}

/// `who`, always with the thread's id in its own pid namespace.
fn who_in_ns(hop: &Hop) -> String {
    let mut s = format!("{} [{}]", hop.comm, hop.tid);
    // A thread of another process; its main thread's id is the pid.
    if let (Some(p), true) = (&hop.process, hop.tid != hop.pid) {
        let _ = write!(s, " of {p} [{}]", hop.pid);
    }
    if let Some(ns) = hop.ns_tid.as_ref().and_then(|n| n.last()) {
        let _ = write!(s, " ({ns} in its pid namespace)");
    }
    s
}

/// The resource in a few words: `mutex 0x55…40 (in transfer)`.
fn what(w: &WaitsOn) -> String {
    let mut s = match w.kind {
        WaitKind::Mutex
        | WaitKind::Rwlock
        | WaitKind::Condvar
        | WaitKind::Semaphore
        | WaitKind::Futex => format!("{} {}", w.kind.word(), w.address.as_deref().unwrap_or("?")),
        WaitKind::Pipe | WaitKind::Socket => {
            w.path.clone().unwrap_or_else(|| w.kind.word().to_string())
        }
        WaitKind::FileLock => format!("a file lock on {}", w.path.as_deref().unwrap_or("?")),
        WaitKind::KernelLock => return w.detail.split(':').next().unwrap_or("").to_string(),
        _ => match &w.path {
            Some(p) => format!("{} {p}", w.kind.word()),
            None => w.kind.word().to_string(),
        },
    };
    if let Some(f) = &w.function {
        let _ = write!(s, " (in {f})");
    }
    s
}

/// One hop's clause, given the name of the thread it waits for.
fn clause(hop: &Hop, next: Option<&str>) -> String {
    let Some(w) = &hop.waits_on else {
        return if matches!(hop.state.as_str(), "zombie" | "dead") {
            "has exited".to_string()
        } else if hop.state == "running" && hop.syscall.is_none() {
            "is running".to_string()
        } else {
            "is runnable (waiting for a CPU)".to_string()
        };
    };
    match (w.kind, next) {
        (WaitKind::Join, Some(n)) => format!("waits for the exit of {n}"),
        (WaitKind::Child, Some(n)) => format!("waits for its child {n}"),
        (WaitKind::Stopped | WaitKind::Timer, _) => w.detail.clone(),
        (WaitKind::Pipe | WaitKind::Fifo | WaitKind::UnixSocket | WaitKind::Socket, Some(n)) => {
            format!("waits on {} whose other end {n} holds", what(w))
        }
        (_, Some(n)) => format!("waits on {} held by {n}", what(w)),
        (WaitKind::Child, None) => w.detail.clone(),
        (WaitKind::Unknown, None) => format!("is blocked: {}", w.detail),
        (WaitKind::Device, None) => format!("waits on a device ({})", w.detail),
        (WaitKind::KernelLock, None) => format!("waits on a {}", w.detail),
        (_, None) => format!("waits on {} ({})", what(w), w.detail),
    }
}

/// The chain as one sentence.
pub fn sentence(t: &ThreadChain) -> String {
    let name_of = |id: &ThreadId| {
        t.chain
            .iter()
            .find(|h| h.pid == id.pid && h.tid == id.tid)
            .map(who)
            .unwrap_or_else(|| format!("[{}]", id.tid))
    };
    let mut s = String::new();
    for (i, hop) in t.chain.iter().enumerate() {
        if i == 0 {
            s.push_str(&who(hop));
            s.push(' ');
        } else {
            s.push_str(", which ");
        }
        let next = hop
            .waits_on
            .as_ref()
            .and_then(|w| w.held_by)
            .map(|id| name_of(&id));
        let last = i + 1 == t.chain.len();
        // The last hop's owner is only named when it closes a cycle.
        let next = if last && t.ends_in != EndsIn::Cycle {
            None
        } else {
            next
        };
        s.push_str(&clause(hop, next.as_deref()));
    }
    if t.cycle {
        let closing = t
            .chain
            .last()
            .and_then(|h| h.waits_on.as_ref())
            .and_then(|w| w.held_by);
        let start = closing
            .and_then(|c| {
                t.chain
                    .iter()
                    .position(|h| h.pid == c.pid && h.tid == c.tid)
            })
            .unwrap_or(0);
        if start == 0 {
            s.push_str(": deadlock");
        } else {
            let members: Vec<String> = t.chain[start..].iter().map(who).collect();
            let _ = write!(s, ": deadlock of {}", members.join(", "));
        }
    }
    s
}

fn details(out: &mut String, hop: &Hop) {
    let mut line = format!("  {}: {}", who_in_ns(hop), hop.state);
    if let Some(s) = hop.off_cpu_s {
        let _ = write!(line, ", off the CPU for {}", seconds(s));
    }
    if let Some(sc) = &hop.syscall {
        let _ = write!(line, ", in {}({})", sc.name, sc.args.join(", "));
    }
    if let Some(w) = &hop.waits_on {
        if w.held_by.is_some() {
            let _ = write!(line, "; {}", w.detail);
        }
    }
    out.push_str(&line);
    out.push('\n');
    if !hop.kernel_stack.is_empty() {
        let _ = writeln!(out, "      kernel: {}", frames(&hop.kernel_stack));
    }
    if !hop.user_stack.is_empty() {
        let _ = writeln!(out, "      user:   {}", frames(&hop.user_stack));
    }
}

fn frames(f: &[String]) -> String {
    let mut s = f
        .iter()
        .take(FRAMES_SHOWN)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(" ← ");
    if f.len() > FRAMES_SHOWN {
        let _ = write!(s, " ← … ({} more)", f.len() - FRAMES_SHOWN);
    }
    s
}

fn seconds(s: f64) -> String {
    if s >= 100.0 {
        format!("{s:.0} s")
    } else if s >= 1.0 {
        format!("{s:.1} s")
    } else {
        format!("{:.0} ms", s * 1000.0)
    }
}
