//! From two snapshots and the recording's findings to the report: one
//! verdict per check, and the findings most costly first.
//!
//! A standing condition that the recording shows costing time absorbs the
//! detector's finding about it (its cost, severity, stack and evidence
//! under `recorded`): a permission watcher matches the `notify-permission`
//! findings whose watcher is its process; a memory cgroup the
//! `memcg-thrash` findings whose process is inside it (or whose cgroup is
//! it). A condition the recording did not see costing anything is still
//! reported (it slows things whenever they touch it) at low severity with
//! no cost, and its title says it was idle. The other findings of the
//! recording are listed as the detectors wrote them.

use serde_json::{json, Map, Value};
use slowlab_model::findings::{Culprit, Finding, Severity};

use crate::cpu_throttle::Throttled;
use crate::memcg::Thrashing;
use crate::notify::PermissionWatcher;
use crate::pressure::Stalled;
use crate::{
    cpu_throttle, exit_code, memcg, namespaces, pressure, Check, Report, Snapshot, Verdict,
};

/// What the short system-wide recording found.
#[derive(Clone, Copy, Debug)]
pub struct Recording<'a> {
    /// Every detector's findings over the trace.
    pub findings: &'a [Finding],
    /// The time the trace covers (shorter than the snapshots' window,
    /// which also holds starting and stopping the recorder).
    pub seconds: f64,
}

/// Builds the report. `seconds`: the time between the two snapshots;
/// `recorded`: what the recording found, or why there is no recording.
pub fn judge(
    before: &Snapshot,
    after: &Snapshot,
    seconds: f64,
    recorded: Result<Recording<'_>, &str>,
) -> Report {
    let mut unmatched: Vec<Finding> = recorded.map(|r| r.findings.to_vec()).unwrap_or_default();
    let mut checks = Vec::new();
    let mut findings = Vec::new();

    let watchers = permission_watchers(before, after);
    let unreadable = before.notify.unreadable.max(after.notify.unreadable);
    for w in &watchers {
        let matched = take(&mut unmatched, |f| {
            f.id == "notify-permission"
                && (f.evidence.get("watcher_pid") == Some(&json!(w.pid))
                    || f.culprit.pid == Some(w.pid))
        });
        findings.push(watcher_finding(w, &matched, recorded.is_ok()));
    }
    checks.push(check(
        "fanotify-permission",
        !watchers.is_empty(),
        (unreadable, after.notify.processes),
        format!(
            "{} fanotify permission watcher(s), {} notification-only group(s) among {} processes",
            watchers.len(),
            after.notify.notification_groups,
            after.notify.processes
        ),
    ));

    let heavy: Vec<_> = after.notify.heavy_inotify().cloned().collect();
    for h in &heavy {
        findings.push(standing(
            "inotify-watches",
            format!("{} (pid {}) holds {} inotify watches", h.comm, h.pid, h.watches),
            0.0,
            0.0,
            Some(h.pid),
            Some(&h.comm),
            None,
            map(json!({"pid": h.pid, "comm": h.comm, "watches": h.watches, "instances": h.instances, "threshold": crate::notify::MANY_INOTIFY_WATCHES})),
            format!("stop {} or narrow what it watches (every event under a watched directory queues work for it); `ls -l /proc/{}/fd | grep inotify` shows its instances", h.comm, h.pid),
        ));
    }
    let top = after.notify.inotify.first().map_or(String::new(), |h| {
        format!("; most: {} (pid {}) with {}", h.comm, h.pid, h.watches)
    });
    checks.push(check(
        "inotify-watches",
        !heavy.is_empty(),
        (unreadable, after.notify.processes),
        format!(
            "{} process(es) hold inotify watches{top}; reported from {}",
            after.notify.inotify.len(),
            crate::notify::MANY_INOTIFY_WATCHES
        ),
    ));

    checks.push(match (&before.memcg, &after.memcg) {
        (Ok(b), Ok(a)) => {
            let thrashing = memcg::thrashing(b, a, seconds);
            for t in &thrashing {
                let matched = take(&mut unmatched, |f| {
                    f.id == "memcg-thrash"
                        && (f
                            .culprit
                            .pid
                            .is_some_and(|p| t.cgroup.processes.iter().any(|q| q.pid == p))
                            || f.culprit.cgroup.as_deref() == Some(t.cgroup.name.as_str()))
                });
                findings.push(memcg_finding(t, &matched, seconds));
            }
            let versions: std::collections::BTreeSet<String> =
                a.iter().map(|s| format!("v{}", s.version)).collect();
            check(
                "memory-cgroups",
                !thrashing.is_empty(),
                (0, 0),
                format!(
                    "{} limited memory cgroup(s) ({}), {} near the limit and refaulting",
                    a.len(),
                    if versions.is_empty() {
                        "none limited".to_string()
                    } else {
                        versions.into_iter().collect::<Vec<_>>().join(", ")
                    },
                    thrashing.len()
                ),
            )
        }
        (Err(e), _) | (_, Err(e)) => skipped("memory-cgroups", e),
    });

    checks.push(match (&before.cpu, &after.cpu) {
        (Ok(b), Ok(a)) => {
            let throttled = cpu_throttle::throttled(b, a, seconds);
            for t in &throttled {
                findings.push(throttle_finding(t, seconds));
            }
            check(
                "cpu-throttling",
                !throttled.is_empty(),
                (0, 0),
                format!(
                    "{} cgroup(s) with CPU bandwidth counters, {} throttled",
                    a.len(),
                    throttled.len()
                ),
            )
        }
        (Err(e), _) | (_, Err(e)) => skipped("cpu-throttling", e),
    });

    checks.push(match (&before.pressure, &after.pressure) {
        (Ok(b), Ok(a)) => {
            let stalled = pressure::stalled(b, a, seconds);
            for s in &stalled {
                findings.push(pressure_finding(s, seconds));
            }
            check(
                "pressure",
                !stalled.is_empty(),
                (0, 0),
                format!(
                    "{} of cpu, memory, io stalled past their threshold",
                    stalled.len()
                ),
            )
        }
        (Err(e), _) | (_, Err(e)) => skipped("pressure", e),
    });

    for p in &after.sizes.large {
        let (what, fix) = if p.mappings >= crate::process_size::MANY_MAPPINGS {
            (
                format!("{} memory mappings", p.mappings),
                format!("find why {} maps so much (fewer, larger mappings); `wc -l /proc/{}/maps` shows the count", p.comm, p.pid),
            )
        } else {
            (
                format!("{} threads", p.threads),
                format!("have {} use a bounded pool of threads; `ls /proc/{}/task | wc -l` shows the count", p.comm, p.pid),
            )
        };
        findings.push(standing(
            "large-process",
            format!("{} (pid {}) has {what}", p.comm, p.pid),
            0.0,
            0.0,
            Some(p.pid),
            Some(&p.comm),
            None,
            map(
                json!({"pid": p.pid, "comm": p.comm, "mappings": p.mappings, "threads": p.threads}),
            ),
            fix,
        ));
    }
    checks.push(check(
        "large-processes",
        !after.sizes.large.is_empty(),
        (after.sizes.unreadable, after.sizes.processes),
        format!(
            "{} of {} processes at {} mappings or {} threads",
            after.sizes.large.len(),
            after.sizes.processes,
            crate::process_size::MANY_MAPPINGS,
            crate::process_size::MANY_THREADS
        ),
    ));

    let churn = namespaces::churn(&before.namespaces, &after.namespaces, seconds);
    let churning = churn.per_s >= namespaces::CHURN_PER_S;
    if churning {
        findings.push(standing(
            "namespace-churn",
            format!("{} namespaces made and {} destroyed in {seconds:.1} s ({:.1}/s)", churn.made, churn.destroyed, churn.per_s),
            0.0,
            0.0,
            None,
            None,
            None,
            map(json!({"made": churn.made, "destroyed": churn.destroyed, "per_s": churn.per_s, "by_kind": churn.by_kind})),
            "reuse namespaces (a pool of sandboxes) instead of making one per task; `lsns` shows who holds them".to_string(),
        ));
    }
    checks.push(check(
        "namespace-churn",
        churning,
        (
            before
                .namespaces
                .unreadable
                .max(after.namespaces.unreadable),
            after.namespaces.processes,
        ),
        format!(
            "{} made, {} destroyed ({:.1}/s; reported from {})",
            churn.made,
            churn.destroyed,
            churn.per_s,
            namespaces::CHURN_PER_S
        ),
    ));

    checks.push(match recorded {
        Ok(rec) => check(
            "recording",
            !unmatched.is_empty(),
            (0, 0),
            format!(
                "{} finding(s) from the detectors over {:.1} s, {} of them about the conditions above",
                rec.findings.len(),
                rec.seconds,
                rec.findings.len() - unmatched.len()
            ),
        ),
        Err(why) => skipped("recording", why),
    });
    findings.extend(unmatched);
    findings.sort_by(|a, b| {
        b.cost_s
            .total_cmp(&a.cost_s)
            .then(b.severity.cmp(&a.severity))
            .then_with(|| a.id.cmp(&b.id))
            .then_with(|| a.title.cmp(&b.title))
    });
    Report {
        seconds,
        exit_code: exit_code(&checks, &findings),
        checks,
        findings,
    }
}

/// Share of the processes that, unreadable, make a check skipped: as root
/// only a process exiting mid-read is unreadable; as another user, most
/// are.
pub const UNREADABLE_SKIP_SHARE: f64 = 0.05;

/// Found, ok, or skipped when nothing was found and at least
/// [`UNREADABLE_SKIP_SHARE`] of the `processes` could not be read.
fn check(id: &str, found: bool, (unreadable, processes): (u32, u32), detail: String) -> Check {
    let (verdict, detail) = if found {
        (Verdict::Found, detail)
    } else if unreadable as f64 >= UNREADABLE_SKIP_SHARE * (unreadable + processes).max(1) as f64 {
        (
            Verdict::Skipped,
            format!("{unreadable} processes cannot be read by this user: run as root (sudo) to check them all; {detail}"),
        )
    } else {
        (Verdict::Ok, detail)
    };
    Check {
        id: id.to_string(),
        verdict,
        detail,
    }
}

fn skipped(id: &str, why: &str) -> Check {
    Check {
        id: id.to_string(),
        verdict: Verdict::Skipped,
        detail: why.to_string(),
    }
}

/// The watchers of either snapshot, each once.
fn permission_watchers(before: &Snapshot, after: &Snapshot) -> Vec<PermissionWatcher> {
    let mut out = before.notify.permission_watchers.clone();
    for w in &after.notify.permission_watchers {
        if !out.iter().any(|o| o.pid == w.pid && o.fd == w.fd) {
            out.push(w.clone());
        }
    }
    out
}

/// Removes and returns the findings `pred` matches.
fn take(findings: &mut Vec<Finding>, pred: impl Fn(&Finding) -> bool) -> Vec<Finding> {
    let (matched, rest): (Vec<Finding>, Vec<Finding>) =
        std::mem::take(findings).into_iter().partition(|f| pred(f));
    *findings = rest;
    matched
}

fn map(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

#[allow(clippy::too_many_arguments)]
fn standing(
    id: &str,
    title: String,
    cost_s: f64,
    cost_share: f64,
    pid: Option<i32>,
    comm: Option<&str>,
    cgroup: Option<&str>,
    evidence: Map<String, Value>,
    fix: String,
) -> Finding {
    Finding {
        id: id.to_string(),
        title,
        severity: Severity::from_share(cost_share),
        cost_s,
        cost_share: cost_share.clamp(0.0, 1.0),
        culprit: Culprit {
            pid,
            comm: comm.map(String::from),
            cgroup: cgroup.map(String::from),
        },
        evidence,
        stack: Vec::new(),
        fix,
    }
}

/// The recorded findings' cost, share, stack and evidence.
fn absorbed(matched: &[Finding]) -> (f64, f64, Vec<String>, Value) {
    let cost: f64 = matched.iter().map(|f| f.cost_s).sum();
    let share: f64 = matched.iter().map(|f| f.cost_share).sum();
    let stack = matched.first().map(|f| f.stack.clone()).unwrap_or_default();
    let evidence: Vec<Value> = matched
        .iter()
        .map(|f| json!({"id": f.id, "title": f.title, "cost_s": f.cost_s, "evidence": f.evidence}))
        .collect();
    (cost, share, stack, Value::Array(evidence))
}

fn watcher_finding(w: &PermissionWatcher, matched: &[Finding], recorded: bool) -> Finding {
    let targets: Vec<&str> = w.marks.iter().map(|m| m.target.as_str()).collect();
    let (cost, share, stack, recorded_evidence) = absorbed(matched);
    let waits: u64 = matched
        .iter()
        .filter_map(|f| f.evidence.get("waits")?.as_u64())
        .sum();
    let costing = !matched.is_empty();
    let status = if costing {
        format!("costing time: {waits} file operations waited {:.0} ms for its answer during the recording", cost * 1e3)
    } else if recorded {
        "idle during the recording (no file operation waited for it)".to_string()
    } else {
        "not measured (no recording)".to_string()
    };
    let mut f = standing(
        "fanotify-permission-watcher",
        format!("{} (pid {}) holds every file open under {} until it answers: {status}", w.comm, w.pid, targets.join(", ")),
        cost,
        share,
        Some(w.pid),
        Some(&w.comm),
        None,
        map(json!({
            "pid": w.pid, "comm": w.comm, "fd": w.fd, "marks": w.marks,
            "costing": costing, "waits": waits, "wait_s": cost, "recorded": recorded_evidence,
        })),
        format!(
            "stop {} (pid {}) or exclude {} from what it scans, or have it watch with FAN_OPEN instead of FAN_OPEN_PERM; `cat /proc/{}/fdinfo/{}` shows its marks",
            w.comm, w.pid, targets.join(", "), w.pid, w.fd
        ),
    );
    f.stack = stack;
    if costing {
        f.severity = f.severity.max(Severity::Medium);
    }
    f
}

fn memcg_finding(t: &Thrashing, matched: &[Finding], seconds: f64) -> Finding {
    let cg = &t.cgroup;
    let (cost, share, stack, recorded_evidence) = absorbed(matched);
    let procs: Vec<String> = cg
        .processes
        .iter()
        .map(|p| format!("{} ({})", p.comm, p.pid))
        .collect();
    let first = cg.processes.first();
    let limit_file = if cg.version == 1 {
        "memory.limit_in_bytes"
    } else {
        "memory.max"
    };
    let mut f = standing(
        "memcg-at-limit",
        format!(
            "memory cgroup {} (v{}) is at {:.0}% of its {} MiB limit and re-read {} MiB it had evicted in {seconds:.1} s ({:.1} MiB/s){}; inside: {}",
            cg.name,
            cg.version,
            t.usage_share * 100.0,
            cg.limit_bytes >> 20,
            t.refaulted_bytes >> 20,
            t.refault_bytes_per_s / (1024.0 * 1024.0),
            if matched.is_empty() { String::new() } else { format!("; its processes spent {:.0} ms getting pages in", cost * 1e3) },
            if procs.is_empty() { "no process".to_string() } else { procs.join(", ") },
        ),
        cost,
        share,
        first.map(|p| p.pid),
        first.map(|p| p.comm.as_str()),
        Some(&cg.name),
        map(json!({
            "cgroup": cg.name, "dir": cg.shown_dir, "version": cg.version,
            "limit_bytes": cg.limit_bytes, "usage_bytes": cg.usage_bytes, "usage_share": t.usage_share,
            "refaulted_bytes": t.refaulted_bytes, "refault_bytes_per_s": t.refault_bytes_per_s,
            "processes": cg.processes, "recorded": recorded_evidence,
        })),
        format!(
            "raise the limit above the working set ({}/{limit_file}) or shrink the working set; `cat {}/memory.stat` shows more",
            cg.shown_dir, cg.shown_dir
        ),
    );
    f.stack = stack;
    f.severity = f.severity.max(Severity::Medium);
    f
}

fn throttle_finding(t: &Throttled, seconds: f64) -> Finding {
    let cg = &t.cgroup;
    let first = cg.processes.first();
    let procs: Vec<String> = cg
        .processes
        .iter()
        .map(|p| format!("{} ({})", p.comm, p.pid))
        .collect();
    let quota = if cg.version == 1 {
        "cpu.cfs_quota_us"
    } else {
        "cpu.max"
    };
    standing(
        "cpu-throttled",
        format!(
            "cgroup {} was throttled by its CPU quota for {:.0} ms of {seconds:.1} s ({} of {} periods){}",
            cg.name,
            t.throttled_s * 1e3,
            t.throttled_periods,
            t.periods,
            if procs.is_empty() { String::new() } else { format!("; inside: {}", procs.join(", ")) }
        ),
        t.throttled_s,
        t.throttled_share,
        first.map(|p| p.pid),
        first.map(|p| p.comm.as_str()),
        Some(&cg.name),
        map(json!({
            "cgroup": cg.name, "dir": cg.shown_dir, "version": cg.version,
            "throttled_s": t.throttled_s, "throttled_share": t.throttled_share,
            "periods": t.periods, "throttled_periods": t.throttled_periods, "processes": cg.processes,
        })),
        format!("raise or remove the CPU quota ({}/{quota}); `cat {}/cpu.stat` shows the throttling", cg.shown_dir, cg.shown_dir),
    )
}

fn pressure_finding(s: &Stalled, seconds: f64) -> Finding {
    let fix = match s.resource.as_str() {
        "cpu" => "more runnable work than CPUs: `top` or `slowlab record` then `slowlab analyze TRACE --procs` shows who takes them; lower its priority (nice) or its CPUs",
        "memory" => "tasks wait for reclaim or refaults: the memory-cgroups check and `cat /proc/meminfo` show where; add memory or run less at once",
        _ => "tasks wait for storage: `iostat -x 1` shows the device, `slowlab analyze TRACE --waits` who waits",
    };
    standing(
        &format!("pressure-{}", s.resource),
        format!(
            "some tasks were stalled on {} for {:.0}% of the {seconds:.1} s window{}",
            s.resource,
            s.some_share * 100.0,
            s.full_share
                .filter(|f| *f > 0.0)
                .map_or(String::new(), |f| format!(
                    " (all of them for {:.0}%)",
                    f * 100.0
                ))
        ),
        s.some_share * seconds,
        s.some_share,
        None,
        None,
        None,
        map(
            json!({"resource": s.resource, "some_share": s.some_share, "full_share": s.full_share, "threshold": s.threshold, "file": format!("/proc/pressure/{}", s.resource)}),
        ),
        fix.to_string(),
    )
}

#[cfg(test)]
mod tests;
