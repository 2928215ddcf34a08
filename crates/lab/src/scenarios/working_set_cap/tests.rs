//! working-set-cap's unit tests: the original program's lines, the
//! verdict, telling an OOM kill apart, where the file goes, the scanner's
//! arguments. The cgroup counters are tested with `crate::cgroup`.
//!
//! What they do not do: make a cgroup or run the scanner (the integration
//! test `lab_working_set` does, as root).

use std::path::Path;

use super::*;
use crate::cgroup::CgroupVersion;
use crate::measure::parse_child_output;

fn scan(scans_per_s: f64) -> Scan {
    Scan {
        scans_per_s,
        scans: scans_per_s,
        seconds: 1.0,
        warmup_s: 0.2,
        faults_per_scan: 0.0,
        disk_mib_per_scan: 0.0,
        limit_hits: None,
    }
}

fn measured(normal: f64, capped: f64) -> Measured {
    Measured {
        normal: scan(normal),
        capped: scan(capped),
        pageout: scan(30.0),
        anon: AnonResult::OomKilled { oom_kills: 1 },
        resident_after_drop: 0.0,
        version: CgroupVersion::V1,
    }
}

#[test]
fn the_line_matches_the_original_program() {
    let m = measured(10200.0, 13.0);
    let lines = lines(&m);
    assert_eq!(
        lines[0],
        "10200 scans/s normal, 13 scans/s capped: 785 times as long."
    );
    assert_eq!(
        lines[1],
        "30 scans/s with MADV_PAGEOUT before every scan: 340 times as long."
    );
    assert_eq!(
        lines[3],
        "Anonymous memory in the 32 MiB cgroup: OOM-killed: anonymous memory cannot be paged out without swap."
    );
    assert_eq!(rate(6.25), "6.2");
}

#[test]
fn affected_when_capped_is_many_times_slower() {
    let r = judge(&measured(10200.0, 13.0));
    assert_eq!(r.affected, Some(true));
    let h = r.headline.unwrap();
    assert!((h.ratio - 10200.0 / 13.0).abs() < 1e-9);
    assert_eq!(h.pathological, 13.0);
    assert_eq!(h.control, 10200.0);
    assert_eq!(r.variants.len(), 4);
    let anon = &r.variants[3];
    assert_eq!(anon.value, None);
    assert_eq!(anon.note.as_deref(), Some(OOM_NOTE));
    let r = judge(&measured(10200.0, 5000.0));
    assert_eq!(r.affected, Some(false));
}

fn report(scans_per_s: f64) -> Outcome {
    Outcome::Report(
        parse_child_output(
            format!("slowlab-report {{\"scans_per_s\":{scans_per_s}}}\n").as_bytes(),
        )
        .unwrap(),
    )
}

#[test]
fn an_oom_kill_needs_sigkill_and_the_counter() {
    let killed = || Outcome::Signalled {
        signal: libc::SIGKILL,
        stderr: String::new(),
    };
    assert_eq!(
        AnonResult::judge(killed(), Some(1), false).unwrap(),
        AnonResult::OomKilled { oom_kills: 1 }
    );
    assert_eq!(
        AnonResult::judge(killed(), Some(0), false).unwrap(),
        AnonResult::Killed {
            signal: libc::SIGKILL,
            oom_kills: Some(0)
        }
    );
    let swapped = AnonResult::judge(report(4.0), Some(0), true).unwrap();
    assert!(swapped.text().contains("has swap"), "{}", swapped.text());
    assert!(AnonResult::judge(
        Outcome::Failed {
            status: "exit status: 1".into(),
            stderr: "boom".into()
        },
        None,
        false
    )
    .is_err());
}

#[test]
fn the_file_goes_to_a_disk_filesystem() {
    if let Ok(dir) = scan_dir(Path::new("/dev/shm")) {
        assert!(!system::is_memory_filesystem(&dir));
    }
    let err = scan_dir(Path::new("/nonexistent-slowlab"))
        .err()
        .map(|e| e.to_string());
    if let Some(err) = err {
        assert!(err.contains("not a directory"), "{err}");
    }
}

#[test]
fn scanner_arguments() {
    let args = scan_args(Memory::File, Some(Path::new("/x/f")), 1.0, true);
    assert_eq!(
        args,
        vec![
            "working-set-scan",
            "--memory",
            "file",
            "--mib",
            "64",
            "--seconds",
            "1",
            "--file",
            "/x/f",
            "--pageout"
        ]
    );
}
