//! notify-buffer's unit tests: the verdicts from given costs, failures
//! and event counts.
//!
//! What they do not do: mount, watch or create files (the integration test
//! `lab_cli` runs the scenario).

use super::*;

fn costs(values: [f64; 5]) -> Vec<Option<f64>> {
    values.iter().map(|&v| Some(v)).collect()
}

#[test]
fn equal_buffers_are_not_affected_and_the_permission_watcher_is_named() {
    let r = judge(
        &costs([2e-6, 2.8e-6, 2.9e-6, 7.5e-6, 4e-6]),
        &[None, None, None, None, None],
        &[0, 1, 1, 1, 1],
        1000,
    );
    assert_eq!(r.affected, Some(false));
    let h = r.headline.unwrap();
    assert!((h.ratio - 2.9 / 2.8).abs() < 1e-9);
    assert!(
        r.explanation.contains("makes no difference"),
        "{}",
        r.explanation
    );
    assert!(
        r.explanation.contains("on another CPU makes every file open 3.8× as slow (2.0× with the watcher on the same CPU)"),
        "{}",
        r.explanation
    );
    assert_eq!(r.variants.len(), 5);
}

#[test]
fn a_large_buffer_twice_as_slow_is_affected() {
    let r = judge(
        &costs([2e-6, 3e-6, 6.1e-6, 7e-6, 5e-6]),
        &[None, None, None, None, None],
        &[0; 5],
        1000,
    );
    assert_eq!(r.affected, Some(true));
}

#[test]
fn a_failed_permission_watcher_is_reported_not_fatal() {
    let mut c = costs([2e-6, 2.1e-6, 2.1e-6, 0.0, 0.0]);
    c[PERMISSION_OTHER_CPU] = None;
    c[PERMISSION_SAME_CPU] = None;
    let reason = Some("fanotify_init: Invalid argument".to_string());
    let failures = [None, None, None, reason.clone(), reason];
    let r = judge(&c, &failures, &[0; 5], 1000);
    assert_eq!(r.affected, Some(false));
    assert!(r.explanation.contains("could not run"), "{}", r.explanation);
    assert_eq!(r.variants[PERMISSION_OTHER_CPU].value, None);
}
