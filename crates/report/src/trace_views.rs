//! Terminal text of the trace views that explain time off the CPU — waits
//! with who-woke-whom, page faults, process lifetimes, syscalls and their
//! paths, the timeline — and of the detectors' findings. Each function takes
//! a view from the `analyze` crate and returns text; nothing here computes.

use slowlab_analyze::classify::summarize_stack;
use slowlab_model::findings::Finding;
use slowlab_model::views::faults::FaultsView;
use slowlab_model::views::procs::{ProcView, ProcsView};
use slowlab_model::views::syscalls::SyscallsView;
use slowlab_model::views::timeline::TimelineView;
use slowlab_model::views::waits::WaitsView;

use crate::format;
use crate::table::{Align, Table};

/// Threads by their longest waits, each wait in one line:
/// `monitor blocked 235 ms in __mutex_lock ← dev_ifconf; woken by kworker/u4:1 in cleanup_net`.
pub fn waits_text(view: &WaitsView, threads: usize, waits: usize) -> String {
    if !view.has_sched_events {
        return "no scheduler events in this trace: record with `slowlab record` (sched_switch and sched_waking), or on Windows with WPR and probes/windows/slowlab.wprp (CSwitch and ReadyThread), to see waits\n".into();
    }
    let mut table = Table::new(&[
        ("pid", Align::Right),
        ("tid", Align::Right),
        ("thread", Align::Left),
        ("running", Align::Right),
        ("blocked", Align::Right),
        ("runnable", Align::Right),
    ]);
    for t in view.threads.iter().take(threads) {
        table.row(vec![
            t.pid.to_string(),
            t.tid.to_string(),
            t.comm.clone(),
            format::seconds(t.running_s),
            format::seconds(t.blocked_s),
            format::seconds(t.runnable_s),
        ]);
    }
    let mut out = table.render(0);
    out.push_str("\nlongest waits:\n");
    for t in view.threads.iter().take(threads) {
        for w in t.waits.iter().take(waits) {
            let waker = match w.wakers.first() {
                Some(k) => format!(
                    "; woken by {}{} in {}",
                    k.comm,
                    k.pid.map_or(String::new(), |p| format!(" ({p})")),
                    summarize_stack(&waker_frames(&k.stack), 1)
                ),
                None => String::new(),
            };
            out.push_str(&format!(
                "  {} blocked {} in {} ({}×, longest {}){waker}\n",
                t.comm,
                format::seconds(w.wait_s),
                summarize_stack(&w.stack, 2),
                w.count,
                format::seconds(w.max_s),
            ));
        }
    }
    out
}

/// The waker's frames past the wake-up and unlock machinery, which say
/// little about why it woke anyone.
fn waker_frames(stack: &[String]) -> Vec<String> {
    stack
        .iter()
        .filter(|n| !(n.contains("unlock") || n.contains("wake") || n.starts_with("ttwu")))
        .cloned()
        .collect()
}

pub fn faults_text(view: &FaultsView, processes: usize, stacks: usize) -> String {
    if !view.has_fault_events {
        return "no page-fault events in this trace: record with `slowlab record` to see faults\n"
            .into();
    }
    let mut table = Table::new(&[
        ("pid", Align::Right),
        ("process", Align::Left),
        ("faults", Align::Right),
        ("minor", Align::Right),
        ("major", Align::Right),
        ("user", Align::Right),
        ("kernel", Align::Right),
        ("peak/s", Align::Right),
    ]);
    for p in view.processes.iter().take(processes) {
        let peak = p.rate.iter().copied().max().unwrap_or(0) as f64 / view.bucket_s;
        // Faults whose mode the trace does not say (a Windows trace's hard faults).
        let (user, kernel) = if p.user + p.kernel == 0 && p.faults > 0 {
            ("–".to_string(), "–".to_string())
        } else {
            (p.user.to_string(), p.kernel.to_string())
        };
        table.row(vec![
            p.pid.to_string(),
            p.comm.clone(),
            p.faults.to_string(),
            p.minor.to_string(),
            p.major.to_string(),
            user,
            kernel,
            format!("{peak:.0}"),
        ]);
    }
    let mut out = format!("{} faults, {} major\n\n", view.total, view.major);
    out.push_str(&table.render(0));
    for p in view.processes.iter().take(processes.min(3)) {
        for s in p.stacks.iter().take(stacks) {
            out.push_str(&format!(
                "  {} × {}: {}\n",
                s.count,
                p.comm,
                summarize_stack(&s.stack, 4)
            ));
        }
    }
    out
}

pub fn procs_text(view: &ProcsView, slowest: usize) -> String {
    let mut out = format!("{} processes\n", view.processes.len());
    let created: u64 = view.created.iter().sum();
    let ended: u64 = view.ended.iter().sum();
    let peak = |v: &[u64]| v.iter().copied().max().unwrap_or(0) as f64 / view.bucket_s;
    out.push_str(&format!(
        "{created} created (peak {:.0}/s), {ended} ended (peak {:.0}/s)\n\n",
        peak(&view.created),
        peak(&view.ended)
    ));
    let mut table = Table::new(&[
        ("pid", Align::Right),
        ("ppid", Align::Right),
        ("process", Align::Left),
        ("start", Align::Right),
        ("end", Align::Right),
        ("duration", Align::Right),
    ]);
    for pid in view.slowest.iter().take(slowest) {
        if let Some(p) = view.processes.iter().find(|p| p.pid == *pid) {
            table.row(vec![
                p.pid.to_string(),
                p.ppid.map_or("—".into(), |x| x.to_string()),
                p.comm.clone(),
                format::opt(p.start_s, 3),
                format::opt(p.end_s, 3),
                p.duration_s.map_or("—".into(), format::seconds),
            ]);
        }
    }
    if !table.is_empty() {
        out.push_str("slowest launches:\n");
        out.push_str(&table.render(2));
    }
    let tree = tree_lines(view);
    if !tree.is_empty() {
        out.push_str("\ntree:\n");
        for line in tree.iter().take(60) {
            out.push_str(&format!("  {line}\n"));
        }
        if tree.len() > 60 {
            out.push_str(&format!("  … {} more\n", tree.len() - 60));
        }
    }
    out
}

pub fn syscalls_text(view: &SyscallsView, processes: usize, per_process: usize) -> String {
    let mut out = String::new();
    if let Some(note) = &view.paths_note {
        out.push_str(&format!("note: {note}\n"));
    }
    for p in view.processes.iter().take(processes) {
        out.push_str(&format!("\n{} ({})\n", p.comm, p.pid));
        let mut table = Table::new(&[
            ("syscall", Align::Left),
            ("count", Align::Right),
            ("time", Align::Right),
            ("errors", Align::Left),
            ("called from", Align::Left),
        ]);
        for s in p.syscalls.iter().take(per_process) {
            let errors = s
                .errors
                .iter()
                .map(|(e, n)| format!("{e} {n}"))
                .collect::<Vec<_>>()
                .join(", ");
            let site = s
                .sites
                .first()
                .map_or(String::new(), |c| summarize_stack(&user_part(&c.stack), 2));
            table.row(vec![
                s.name.clone(),
                s.count.to_string(),
                format::seconds(s.time_s),
                errors,
                site,
            ]);
        }
        out.push_str(&table.render(2));
        for path in p.paths.iter().take(per_process) {
            let missing = path.errors.get("ENOENT").copied().unwrap_or(0);
            out.push_str(&format!(
                "  {} × {}: {} found, {} missing{}\n",
                path.pattern,
                path.count,
                path.found,
                missing,
                if path.failed > missing {
                    format!(", {} other failures", path.failed - missing)
                } else {
                    String::new()
                }
            ));
        }
    }
    out
}

/// Drops the kernel's syscall entry frames, keeping where the program
/// called from (frames after the last `entry_SYSCALL`-like frame).
fn user_part(stack: &[String]) -> Vec<String> {
    match stack
        .iter()
        .rposition(|n| n.starts_with("entry_SYSCALL") || n.starts_with("do_syscall"))
    {
        Some(i) => stack[i + 1..].to_vec(),
        None => stack.to_vec(),
    }
}

pub fn timeline_text(view: &TimelineView) -> String {
    let mut table = Table::new(&[
        ("from", Align::Right),
        ("cpu", Align::Right),
        ("busiest", Align::Left),
        ("faults", Align::Right),
        ("blocked", Align::Right),
        ("starts", Align::Right),
        ("exits", Align::Right),
    ]);
    // Enough decimals to write each bucket's start exactly, to the millisecond:
    // 1 s → 0.0, 0.25 s → 0.25, 10 ms → 0.01 (and a `--from` of 0.125 s → 0.125).
    let exact = |d: usize| {
        let scale = 10f64.powi(d as i32);
        view.buckets
            .iter()
            .all(|b| ((b.start_s * scale).round() - b.start_s * scale).abs() < 1e-6)
    };
    let decimals = (1..=3).find(|&d| exact(d)).unwrap_or(3);
    for b in &view.buckets {
        let busiest = b
            .cpu
            .iter()
            .take(3)
            .map(|p| format!("{} {}", p.comm, format::seconds(p.cpu_s)))
            .collect::<Vec<_>>()
            .join(", ");
        table.row(vec![
            format!("{:.decimals$} s", b.start_s),
            format::seconds(b.cpu_s),
            busiest,
            b.faults.to_string(),
            format::seconds(b.blocked_s),
            b.starts.to_string(),
            b.exits.to_string(),
        ]);
    }
    table.render(0)
}

/// Findings ranked by cost, each with its evidence and fix.
pub fn findings_text(findings: &[Finding]) -> String {
    if findings.is_empty() {
        return "no findings: none of the detectors' signatures is in this trace\n".into();
    }
    let mut out = String::new();
    for (i, f) in findings.iter().enumerate() {
        out.push_str(&format!(
            "{}. [{}] {} — {}\n   cost {} ({:.1}% of the time examined); culprit: {}\n",
            i + 1,
            f.severity.as_str(),
            f.id,
            f.title,
            format::seconds(f.cost_s),
            f.cost_share * 100.0,
            culprit_text(f)
        ));
        let evidence: Vec<String> = f
            .evidence
            .iter()
            .filter(|(_, v)| !v.is_null() && !v.is_array())
            .map(|(k, v)| format!("{k}={}", compact(v)))
            .collect();
        if !evidence.is_empty() {
            out.push_str(&format!("   evidence: {}\n", evidence.join(", ")));
        }
        if !f.stack.is_empty() {
            out.push_str(&format!(
                "   stack: {}\n",
                f.stack
                    .iter()
                    .take(6)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(" ← ")
            ));
        }
        out.push_str(&format!("   fix: {}\n", f.fix));
    }
    out
}

pub fn culprit_text(f: &Finding) -> String {
    let mut parts = Vec::new();
    if let Some(c) = &f.culprit.comm {
        parts.push(c.clone());
    }
    if let Some(p) = f.culprit.pid {
        parts.push(format!("pid {p}"));
    }
    if let Some(cg) = &f.culprit.cgroup {
        parts.push(format!("cgroup {cg}"));
    }
    if parts.is_empty() {
        "unknown".into()
    } else {
        parts.join(", ")
    }
}

fn compact(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Number(n) => match n.as_f64() {
            Some(x) if n.is_f64() => format!("{x:.3}")
                .trim_end_matches('0')
                .trim_end_matches('.')
                .to_string(),
            _ => n.to_string(),
        },
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The parent/child tree as indented lines (`pid comm duration`), roots
/// first; children of a process in start order.
pub fn tree_lines(view: &ProcsView) -> Vec<String> {
    use std::collections::HashMap;
    let known: std::collections::HashSet<i32> = view.processes.iter().map(|p| p.pid).collect();
    let mut children: HashMap<i32, Vec<&ProcView>> = HashMap::new();
    let mut roots = Vec::new();
    for p in &view.processes {
        match p.ppid.filter(|pp| known.contains(pp) && *pp != p.pid) {
            Some(pp) => children.entry(pp).or_default().push(p),
            None => roots.push(p),
        }
    }
    let mut lines = Vec::new();
    let mut stack: Vec<(&ProcView, usize)> = roots.into_iter().rev().map(|p| (p, 0)).collect();
    let mut seen = std::collections::HashSet::new();
    while let Some((p, depth)) = stack.pop() {
        if !seen.insert(p.pid) {
            continue;
        }
        let duration = p
            .duration_s
            .map_or(String::new(), |d| format!(" ({:.3} s)", d));
        lines.push(format!(
            "{}{} {}{duration}",
            "  ".repeat(depth),
            p.pid,
            p.comm
        ));
        if let Some(kids) = children.get(&p.pid) {
            for k in kids.iter().rev() {
                stack.push((k, depth + 1));
            }
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use slowlab_model::findings::{Culprit, Severity};

    #[test]
    fn the_process_tree_nests_children_under_their_parent_in_start_order() {
        let proc = |pid, ppid, comm: &str, duration_s| ProcView {
            pid,
            ppid,
            comm: comm.into(),
            start_s: None,
            exec_s: None,
            end_s: None,
            duration_s,
            threads: 1,
        };
        let view = ProcsView {
            first_bucket_s: 0.0,
            processes: vec![
                proc(10, Some(1), "make", None),
                proc(30, Some(10), "cc", Some(2.0)),
                proc(31, Some(10), "ld", Some(0.5)),
                proc(40, Some(30), "as", None),
                proc(50, None, "cron", None),
            ],
            bucket_s: 1.0,
            created: vec![],
            ended: vec![],
            slowest: vec![],
        };
        assert_eq!(
            tree_lines(&view),
            [
                "10 make",
                "  30 cc (2.000 s)",
                "    40 as",
                "  31 ld (0.500 s)",
                "50 cron"
            ]
        );
    }

    #[test]
    fn findings_show_rank_severity_evidence_and_fix() {
        let mut evidence = serde_json::Map::new();
        evidence.insert("launches".into(), serde_json::json!(40));
        evidence.insert("check_us".into(), serde_json::json!(1.23456));
        let f = Finding {
            id: "linear-probe-names".into(),
            title: "sh probes numbered names".into(),
            severity: Severity::High,
            cost_s: 2.5,
            cost_share: 0.31,
            culprit: Culprit {
                pid: Some(9),
                comm: Some("sh".into()),
                cgroup: None,
            },
            evidence,
            stack: vec!["stat".into(), "main".into()],
            fix: "use unique names".into(),
        };
        let text = findings_text(&[f]);
        assert!(
            text.starts_with("1. [high] linear-probe-names — sh probes"),
            "{text}"
        );
        assert!(
            text.contains("cost 2.50 s (31.0% of the time examined); culprit: sh, pid 9"),
            "{text}"
        );
        assert!(text.contains("launches=40"), "{text}");
        assert!(text.contains("check_us=1.235"), "{text}");
        assert!(text.contains("stack: stat ← main"), "{text}");
        assert!(findings_text(&[]).contains("no findings"));
    }

    #[test]
    fn timeline_buckets_shorter_than_a_second_keep_their_start_apart() {
        let bucket = |start_s: f64| slowlab_model::views::timeline::Bucket {
            start_s,
            cpu: Vec::new(),
            cpu_s: 0.0,
            faults: 0,
            blocked_s: 0.0,
            starts: 0,
            exits: 0,
        };
        let view = |bucket_s: f64| TimelineView {
            bucket_s,
            buckets: vec![bucket(0.0), bucket(bucket_s), bucket(2.0 * bucket_s)],
        };
        let text = timeline_text(&view(0.01));
        assert!(text.contains("0.01 s") && text.contains("0.02 s"), "{text}");
        let text = timeline_text(&view(1.0));
        assert!(text.contains("1.0 s") && text.contains("2.0 s"), "{text}");
        let text = timeline_text(&view(0.25));
        assert!(text.contains("0.25 s") && text.contains("0.50 s"), "{text}");
        let text = timeline_text(&view(0.005));
        assert!(
            text.contains("0.005 s") && text.contains("0.010 s"),
            "{text}"
        );
    }

    #[test]
    fn syscall_sites_start_in_the_program() {
        let stack: Vec<String> = [
            "__x64_sys_newfstatat",
            "do_syscall_64",
            "entry_SYSCALL_64",
            "stat",
            "main",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(user_part(&stack), vec!["stat", "main"]);
    }
}
