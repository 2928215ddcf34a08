//! The answer's words for CPU time: one piece per process and wait, its
//! functions named inside it.

use super::*;

fn root() -> PathRoot {
    PathRoot {
        pid: 1,
        tid: 1,
        comm: "make".into(),
        start_s: 0.0,
    }
}

/// `seconds` on a CPU in `function` of process `pid` (`comm`), of a path of
/// `wall_s`.
fn on_cpu(pid: i32, comm: &str, function: &str, seconds: f64, wall_s: f64) -> PathPart {
    PathPart {
        pid,
        comm: comm.into(),
        state: SegmentState::Cpu,
        kind: None,
        function: Some(function.into()),
        via: None,
        resource: None,
        via_resource: None,
        waiter: None,
        holding: None,
        seconds,
        share: seconds / wall_s,
    }
}

/// Parts as `parts` gives them: largest first.
fn largest_first(mut parts: Vec<PathPart>) -> Vec<PathPart> {
    parts.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
    parts
}

#[test]
fn a_compiler_spread_over_many_functions_is_one_piece_with_its_largest_named() {
    // Three compilers, each 40 functions of 0.5 s, and one a hot spot of 4 s, in a
    // 100 s path: none of the parts reaches 3%, but the compilers' CPU is 64%.
    let wall = 100.0;
    let mut parts = Vec::new();
    for pid in [10, 11, 12] {
        for f in 0..40 {
            parts.push(on_cpu(pid, "cc1", &format!("f{f:02}"), 0.5, wall));
        }
    }
    parts.push(on_cpu(11, "cc1", "hot", 4.0, wall));
    let parts = largest_first(parts);
    let answer = sentence(&root(), wall, &parts, None);
    assert_eq!(
        answer,
        "`make` ran 100.00 s: 64% on a CPU in cc1 (hot 4%, f00 2%, f01 2%, the rest 57%)"
    );
}

#[test]
fn a_piece_nearly_all_in_one_function_is_named_by_it_alone() {
    let wall = 10.0;
    let parts = largest_first(vec![
        on_cpu(20, "producer", "slow_digest", 9.2, wall),
        on_cpu(20, "producer", "memcpy", 0.5, wall),
        on_cpu(1, "make", "main", 0.3, wall),
    ]);
    assert_eq!(
        sentence(&root(), wall, &parts, None),
        "`make` ran 10.00 s: 97% on a CPU in producer (slow_digest), 3% on a CPU in main"
    );
}

#[test]
fn the_roots_own_functions_are_named_with_their_shares() {
    let wall = 1.0;
    let parts = largest_first(vec![
        on_cpu(1, "make", "parse", 0.5, wall),
        on_cpu(1, "make", "hash", 0.3, wall),
        on_cpu(1, "make", "stat", 0.2, wall),
    ]);
    assert_eq!(
        sentence(&root(), wall, &parts, None),
        "`make` ran 1.00 s: 100% on a CPU (parse 50%, hash 30%, stat 20%)"
    );
}

#[test]
fn parts_of_equal_time_come_in_the_same_order_every_time() {
    // Eight threads of one process runnable for the same time: the hash map that
    // groups them iterates in another order each time it is made.
    let segments: Vec<Segment> = (0..8)
        .map(|i| Segment {
            from_s: f64::from(i),
            to_s: f64::from(i) + 0.5,
            pid: 7,
            tid: 70 + i,
            comm: format!("worker-{i}"),
            state: SegmentState::Runnable,
            kind: None,
            top_function: None,
            woken_by: None,
            ended_by: None,
            ran_instead: None,
            blocked_in: None,
            depth: 1,
            via: None,
            waiter: None,
            resource: None,
            via_resource: None,
            holding: None,
            unknown: false,
        })
        .collect();
    let order = |parts: Vec<PathPart>| parts.into_iter().map(|p| p.comm).collect::<Vec<_>>();
    let first = order(parts(&segments, 8.0));
    for _ in 0..20 {
        assert_eq!(order(parts(&segments, 8.0)), first);
    }
    assert_eq!(first[0], "worker-0");
}
