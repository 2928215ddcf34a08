//! teardown-lock's unit tests: combining rounds, the original program's
//! lines, the verdict, the monitor's windows, and that the ioctl works.
//!
//! What they do not do: start holders or namespaces (the integration test
//! `lab_teardown` does, as root).

use super::monitor::list_interfaces;
use super::*;

fn measured(kind: Kind, max_s: f64) -> Measured {
    let stats = CallStats {
        calls: 300,
        total_s: max_s * 3.0,
        max_s,
    };
    Measured {
        kind,
        n: 1000,
        creation_s: 2.5,
        destruction_s: 0.125,
        tail_s: 0.6,
        all: stats,
        during_creation: CallStats::default(),
        during_destruction: stats,
        realtime: true,
        tail_timed_out: false,
        round_max_s: vec![max_s],
    }
}

#[test]
fn rounds_combine_into_means_and_the_worst_stall() {
    let mut a = measured(Kind::Netns, 0.1);
    a.creation_s = 2.0;
    let mut b = measured(Kind::Netns, 0.002);
    b.creation_s = 4.0;
    b.tail_timed_out = true;
    let m = combine(&[a, b]).unwrap();
    assert_eq!(m.creation_s, 3.0);
    assert_eq!(m.all.max_s, 0.1);
    assert_eq!(m.all.calls, 600);
    assert_eq!(m.round_max_s, vec![0.1, 0.002]);
    assert!(m.tail_timed_out);
    assert!(combine(&[]).is_none());
    let line = verdict_line(&m, &measured(Kind::Plain, 0.0001));
    assert_eq!(
        line,
        "Maximum monitor stall 0.100 s with network namespaces, 0.000100 s without \
         (worst of 2 rounds each): 1000 times as long."
    );
}

#[test]
fn the_lines_match_the_original_program() {
    let lines = variant_lines(&measured(Kind::Netns, 0.231));
    assert_eq!(
        lines,
        vec![
            "Process creation took 2.500 s (2.500 ms per process).",
            "Process destruction took 0.125 s (0.125 ms per process).",
            "Monitor blocked for 0.693 s total, maximum was 0.231 s.",
        ]
    );
}

#[test]
fn seconds_keep_three_significant_digits() {
    assert_eq!(seconds(1.2345), "1.234");
    assert_eq!(seconds(0.0412), "0.0412");
    assert_eq!(seconds(0.0000213), "0.0000213");
    assert_eq!(seconds(0.0), "0.000");
    assert_eq!(seconds(12.5), "12.500");
}

#[test]
fn affected_when_the_stall_is_long_and_many_times_the_control() {
    let r = judge(
        1000,
        &measured(Kind::Netns, 0.2),
        &measured(Kind::Plain, 0.00002),
    );
    assert_eq!(r.affected, Some(true));
    let h = r.headline.unwrap();
    assert!((h.ratio - 10_000.0).abs() < 1e-6, "{}", h.ratio);
    assert_eq!(r.variants[0].name, "netns-holders");
    assert_eq!(r.variants[0].role, Role::Pathological);
    assert_eq!(r.variants[1].role, Role::Control);
    assert_eq!(r.variants[0].value, Some(0.2));
}

#[test]
fn a_large_ratio_of_tiny_stalls_is_not_a_stall() {
    let r = judge(
        100,
        &measured(Kind::Netns, 0.0005),
        &measured(Kind::Plain, 0.00001),
    );
    assert_eq!(r.affected, Some(false));
    let r = judge(
        100,
        &measured(Kind::Netns, 0.05),
        &measured(Kind::Plain, 0.01),
    );
    assert_eq!(r.affected, Some(false));
}

#[test]
fn stats_count_only_the_calls_in_the_window() {
    let samples = [
        Sample {
            start_s: 0.0,
            duration_s: 0.5,
        },
        Sample {
            start_s: 1.0,
            duration_s: 0.1,
        },
        Sample {
            start_s: 2.0,
            duration_s: 0.2,
        },
    ];
    let s = stats_between(&samples, 1.0, 2.5);
    assert_eq!(s.calls, 2);
    assert!((s.total_s - 0.3).abs() < 1e-12);
    assert_eq!(s.max_s, 0.2);
}

#[test]
fn the_ioctl_works_here() {
    // SAFETY: as in monitor_calls.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0);
    // SAFETY: fresh descriptor.
    let socket = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    list_interfaces(&socket).unwrap();
}
