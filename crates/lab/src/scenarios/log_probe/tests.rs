//! log-probe's unit tests: the original's progress line, sampling lines,
//! probing writers, the verdict, and the check cost.
//!
//! What they do not do: launch children (the integration test `lab_cli`
//! runs the scenario).

use super::child::find_and_create_log;
use super::*;

#[test]
fn the_batch_line_matches_the_original() {
    assert_eq!(
        batch_line(0.214, 4000),
        "0.21 seconds elapsed for 10 launches (4000 total)"
    );
}

#[test]
fn sample_lines_spreads_and_keeps_the_last() {
    let lines: Vec<String> = (1..=100).map(|i| i.to_string()).collect();
    assert_eq!(sample_lines(&lines, 4), vec!["25", "50", "75", "100"]);
    assert_eq!(sample_lines(&lines[..3], 5).len(), 3);
}

#[test]
fn probing_writers_take_the_first_free_name() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..3 {
        assert_eq!(
            find_and_create_log(Naming::Probe, dir.path()).unwrap(),
            i + 1
        );
    }
    // Three writers in one process all find a free name in order.
    for i in 0..3 {
        assert!(dir.path().join(format!("name.{i}.dat")).exists());
    }
    assert!(!dir.path().join("name.3.dat").exists());
}

#[test]
fn affected_by_the_naming_cost_with_the_launch_totals_as_headline() {
    use crate::testutil::sweep_result;
    use slowlab_model::results::Verdict;
    // Finding names: quadratic with probing, linear with unique names.
    let probe = sweep_result(Verdict::Superlinear, 2.0, &[(500, 0.05), (1000, 0.2)]);
    let unique = sweep_result(Verdict::Linear, 1.0, &[(500, 0.01), (1000, 0.02)]);
    let totals = |per_launch: f64, extra: f64| {
        vec![
            LaunchTotals {
                n: 500,
                cpu_s: 500.0 * per_launch,
                wall_s: 1.0,
            },
            LaunchTotals {
                n: 1000,
                cpu_s: 1000.0 * per_launch + extra,
                wall_s: 2.0,
            },
        ]
    };
    let r = judge(
        &[
            ("probe-names", Role::Pathological, probe),
            ("unique-names", Role::Control, unique),
        ],
        &[totals(1e-3, 0.25), totals(1e-3, 0.0)],
        0.5e-6,
    );
    assert_eq!(r.affected, Some(true));
    let h = r.headline.unwrap();
    assert_eq!(h.metric, "CPU time of 1000 launches");
    assert!((h.ratio - 1.25).abs() < 1e-9, "{}", h.ratio);
    // 1 ms per launch against 0.5 µs per check: equal at 4,000 launches.
    assert!(
        r.explanation
            .contains("overtakes launching after about 4000 launches"),
        "{}",
        r.explanation
    );
    assert!(
        r.explanation.contains("probing adds 0.25 s"),
        "{}",
        r.explanation
    );
    assert!(r.variants[0]
        .note
        .as_deref()
        .unwrap()
        .contains("finding their log name"));
}

#[test]
fn the_check_cost_is_a_plausible_number_of_microseconds() {
    let dir = tempfile::tempdir().unwrap();
    let cost = measure_check_cost(dir.path()).unwrap();
    assert!(cost > 1e-8 && cost < 1e-3, "{cost}");
    assert!(!dir.path().join("check-cost").exists());
}
