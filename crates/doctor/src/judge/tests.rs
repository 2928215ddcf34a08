use super::*;
use crate::memcg::{MemcgState, ProcName};
use crate::namespaces::NamespaceSet;
use crate::notify::{MarkKind, NotifyScan, PermissionMark, PermissionWatcher};
use crate::process_size::SizeScan;

fn snapshot() -> Snapshot {
    Snapshot {
        notify: NotifyScan {
            processes: 10,
            ..NotifyScan::default()
        },
        memcg: Ok(Vec::new()),
        cpu: Ok(Vec::new()),
        pressure: Ok(Vec::new()),
        sizes: SizeScan::default(),
        namespaces: NamespaceSet::default(),
    }
}

fn watcher(pid: i32) -> PermissionWatcher {
    PermissionWatcher {
        pid,
        comm: "scanner".into(),
        fd: 5,
        marks: vec![PermissionMark {
            kind: MarkKind::Mount,
            target: "/srv".into(),
            mask: 0x10000,
            events: vec!["open".into()],
        }],
    }
}

fn recorded(id: &str, pid: i32, cost_s: f64, evidence: Value) -> Finding {
    Finding {
        id: id.into(),
        title: format!("{id} recorded"),
        severity: Severity::Medium,
        cost_s,
        cost_share: 0.1,
        culprit: Culprit {
            pid: Some(pid),
            comm: Some("x".into()),
            cgroup: None,
        },
        evidence: map(evidence),
        stack: vec!["fanotify_get_response".into()],
        fix: "f".into(),
    }
}

fn checked<'a>(r: &'a Report, id: &str) -> &'a Check {
    r.checks.iter().find(|c| c.id == id).unwrap()
}

/// A recording of 2.5 s that found `findings`.
fn found(findings: &[Finding]) -> Result<Recording<'_>, &'static str> {
    Ok(Recording {
        findings,
        seconds: 2.5,
    })
}

#[test]
fn a_clean_machine_has_no_findings_and_exits_0() {
    let s = snapshot();
    let r = judge(&s, &s, 3.0, found(&[]));
    assert!(r.findings.is_empty());
    assert!(
        r.checks.iter().all(|c| c.verdict == Verdict::Ok),
        "{:?}",
        r.checks
    );
    assert_eq!(r.exit_code, 0);
    assert_eq!(r.checks.len(), 8);
    // The window is the snapshots' (3.0 s); the detectors saw the trace's.
    assert_eq!(r.seconds, 3.0);
    let rec = &checked(&r, "recording").detail;
    assert!(rec.contains("over 2.5 s"), "{rec}");
}

#[test]
fn a_watcher_the_recording_saw_costing_time_absorbs_that_finding() {
    let mut s = snapshot();
    s.notify.permission_watchers = vec![watcher(42)];
    let other = recorded("io-wait", 7, 0.5, json!({}));
    let rec = vec![
        recorded(
            "notify-permission",
            42,
            0.2,
            json!({"watcher_pid": 42, "waits": 300}),
        ),
        other.clone(),
    ];
    let r = judge(&s, &s, 3.0, found(&rec));
    assert_eq!(r.findings.len(), 2, "{:#?}", r.findings);
    assert_eq!(r.findings[0], other, "most costly first");
    let w = &r.findings[1];
    assert_eq!(w.id, "fanotify-permission-watcher");
    assert!(w.title.contains("costing time: 300"), "{}", w.title);
    assert!(w.title.contains("/srv") && w.title.contains("scanner"));
    assert_eq!(w.cost_s, 0.2);
    assert_eq!(w.evidence["costing"], true);
    assert_eq!(w.stack, vec!["fanotify_get_response"]);
    assert_eq!(checked(&r, "fanotify-permission").verdict, Verdict::Found);
    assert!(checked(&r, "recording").detail.contains("1 of them about"));
    assert_eq!(r.exit_code, 1);
}

#[test]
fn an_idle_watcher_is_reported_as_idle() {
    let mut s = snapshot();
    s.notify.permission_watchers = vec![watcher(42)];
    // A permission finding about another watcher is not this one's.
    let rec = vec![recorded(
        "notify-permission",
        43,
        0.2,
        json!({"watcher_pid": 43}),
    )];
    let r = judge(&s, &s, 3.0, found(&rec));
    let w = r
        .findings
        .iter()
        .find(|f| f.id == "fanotify-permission-watcher")
        .unwrap();
    assert!(w.title.contains("idle during the recording"), "{}", w.title);
    assert_eq!((w.cost_s, w.severity), (0.0, Severity::Low));
    assert_eq!(w.evidence["costing"], false);
    assert_eq!(r.findings.len(), 2);
}

#[test]
fn a_thrashing_cgroup_names_its_processes_and_takes_the_recorded_cost() {
    let cg = |refaulted_pages| MemcgState {
        version: 1,
        name: "/capped".into(),
        shown_dir: "/sys/fs/cgroup/memory/capped".into(),
        limit_bytes: 16 << 20,
        usage_bytes: 16 << 20,
        refaulted_pages,
        processes: vec![ProcName {
            pid: 99,
            comm: "cat".into(),
        }],
    };
    let mut before = snapshot();
    before.memcg = Ok(vec![cg(0)]);
    let mut after = snapshot();
    after.memcg = Ok(vec![cg(10_000)]);
    let rec = vec![recorded("memcg-thrash", 99, 1.5, json!({}))];
    let r = judge(&before, &after, 3.0, found(&rec));
    assert_eq!(r.findings.len(), 1, "{:#?}", r.findings);
    let f = &r.findings[0];
    assert_eq!(f.id, "memcg-at-limit");
    assert_eq!(f.culprit.cgroup.as_deref(), Some("/capped"));
    assert!(f.title.contains("cat (99)"), "{}", f.title);
    assert_eq!(f.cost_s, 1.5);
    assert!(
        f.fix
            .contains("/sys/fs/cgroup/memory/capped/memory.limit_in_bytes"),
        "{}",
        f.fix
    );
    assert_eq!(checked(&r, "memory-cgroups").verdict, Verdict::Found);
}

#[test]
fn what_cannot_be_checked_is_skipped_with_its_reason_and_exits_2() {
    let mut s = snapshot();
    s.pressure = Err("no psi here".into());
    s.notify.unreadable = 3; // of 10 readable: above the share
    let r = judge(&s, &s, 3.0, Err("perf is not installed"));
    assert!(r.findings.is_empty());
    assert_eq!(checked(&r, "pressure").detail, "no psi here");
    assert_eq!(checked(&r, "recording").verdict, Verdict::Skipped);
    assert_eq!(checked(&r, "recording").detail, "perf is not installed");
    let f = checked(&r, "fanotify-permission");
    assert_eq!(f.verdict, Verdict::Skipped);
    assert!(f.detail.contains("run as root"), "{}", f.detail);
    assert_eq!(r.exit_code, 2);
}
