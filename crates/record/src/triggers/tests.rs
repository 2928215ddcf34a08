//! The triggers' tests: parsing, episodes, `/proc` reading.

use super::*;

const PSI: &str = "some avg10=45.10 avg60=12.00 avg300=3.00 total=123456\n\
                   full avg10=1.00 avg60=0.00 avg300=0.00 total=100\n";

#[test]
fn triggers_parse_and_print_back() {
    let t: Trigger = "psi-cpu>30%".parse().expect("parses");
    assert_eq!(
        t,
        Trigger::Psi {
            resource: Pressure::Cpu,
            above: 30.0
        }
    );
    assert_eq!(t.to_string(), "psi-cpu>30%");
    let t: Trigger = "psi-memory>7.5".parse().expect("no % is a percentage too");
    assert_eq!(t.to_string(), "psi-memory>7.5%");
    let t: Trigger = "cmd-slower:make>2s".parse().expect("parses");
    assert_eq!(
        t,
        Trigger::CmdSlower {
            name: "make".into(),
            longer_than: Duration::from_secs(2)
        }
    );
    let t: Trigger = "cmd-slower:a>b>500ms".parse().expect("the last > splits");
    assert_eq!(
        t,
        Trigger::CmdSlower {
            name: "a>b".into(),
            longer_than: Duration::from_millis(500)
        }
    );
    assert_eq!(t.to_string(), "cmd-slower:a>b>0.5s");
}

#[test]
fn bad_triggers_teach_the_syntax_in_one_line() {
    for bad in [
        "psi-disk>3%",
        "psi-cpu>300%",
        "psi-cpu>x",
        "psi-cpu",
        "cmd-slower:make",
        "cmd-slower:>2s",
        "cmd-slower:make>two",
        "load>3",
        "",
    ] {
        let e = bad.parse::<Trigger>().unwrap_err();
        assert!(e.contains("e.g. --trigger 'psi-cpu>30%'"), "{bad}: {e}");
        assert!(e.starts_with(&format!("bad trigger `{bad}`")), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }
}

#[test]
fn psi_text_gives_some_avg10() {
    assert_eq!(parse_psi_some_avg10(PSI), Some(45.10));
    // cpu has no `full` line on older kernels.
    assert_eq!(
        parse_psi_some_avg10("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"),
        Some(0.0)
    );
    assert_eq!(parse_psi_some_avg10("full avg10=3.00\n"), None);
    assert_eq!(parse_psi_some_avg10(""), None);
}

#[test]
fn this_kernel_has_the_pressure_files_or_says_how_to_get_them() {
    let t = vec![Trigger::Psi {
        resource: Pressure::Io,
        above: 20.0,
    }];
    match check_available(&t) {
        Ok(()) => {
            let text = std::fs::read_to_string("/proc/pressure/io").expect("readable");
            assert!(parse_psi_some_avg10(&text).is_some(), "{text}");
        }
        Err(e) => assert!(e.contains("psi=1"), "{e}"),
    }
}

/// The looks at which a `psi-io>20%` trigger fires, reading `texts`
/// one after the other as `poll` reads the kernel's file.
fn psi_episode(texts: &[&str]) -> Vec<usize> {
    let mut armed = Armed {
        trigger: "psi-io>20%".parse().expect("parses"),
        in_episode: false,
    };
    let mut fired_at = Vec::new();
    for (i, text) in texts.iter().enumerate() {
        let seen = parse_psi_some_avg10(text)
            .filter(|&v| v > 20.0)
            .map(|v| (format!("{v}"), None));
        if let Some(f) = armed.update(seen) {
            assert_eq!(f.trigger, "psi-io>20%");
            fired_at.push(i);
        }
    }
    fired_at
}

#[test]
fn a_psi_trigger_fires_once_per_episode_and_re_arms_when_it_clears() {
    let low = "some avg10=5.00 avg60=1.00 avg300=0.00 total=1\n";
    let high = "some avg10=25.00 avg60=1.00 avg300=0.00 total=1\n";
    let edge = "some avg10=20.00 avg60=1.00 avg300=0.00 total=1\n";
    assert_eq!(
        psi_episode(&[low, high, high, high, edge, low, high, high]),
        vec![1, 6]
    );
    assert_eq!(psi_episode(&[low, edge, low]), Vec::<usize>::new());
}

#[test]
fn stat_lines_give_name_and_start_even_with_odd_names() {
    let s = parse_stat("1234 (my (odd) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 3 1 0 0 20 0 1 0 98765 1000 10 18446744073709551615").expect("parses");
    assert_eq!(s.comm, "my (odd) name");
    assert_eq!(s.start_ticks, 98765);
    assert!(parse_stat("garbage").is_none());
}

#[test]
fn long_names_compare_by_their_first_15_bytes() {
    assert_eq!(truncate_comm("a-very-long-process-name"), "a-very-long-pro");
    assert_eq!(truncate_comm("make"), "make");
}

#[test]
fn a_slow_process_fires_once_while_it_runs_and_re_arms_after_it_ends() {
    let mut w = Watch::new(&["cmd-slower:make>2s".parse().expect("parses")]);
    let tps = w.ticks_per_second;
    let up = 1000 * tps;
    let mut fired = Vec::new();
    // (pid, name, seconds it has run) at each look.
    let looks: [&[(u32, &str, u64)]; 6] = [
        &[(10, "make", 1), (9, "bash", 100)],
        &[(10, "make", 3)],
        &[(10, "make", 4), (11, "make", 5)],
        &[(9, "bash", 100)],
        &[(12, "cc1", 9), (13, "make", 1)],
        &[(13, "make", 3)],
    ];
    for (i, look) in looks.iter().enumerate() {
        w.processes = look
            .iter()
            .map(|&(pid, comm, secs)| {
                let seen = Seen {
                    comm: comm.into(),
                    start_ticks: up - secs * tps,
                };
                (pid, seen)
            })
            .collect();
        let seen = w.slower("make", Duration::from_secs(2), up);
        if let Some(f) = w.armed[0].update(seen) {
            fired.push((i, f.seen, f.subject.map(|s| s.pid)));
        }
    }
    assert_eq!(
        fired,
        vec![
            (1, "make (pid 10) has run 3.0 s".into(), Some(10)),
            (5, "make (pid 13) has run 3.0 s".into(), Some(13))
        ]
    );
}

#[test]
fn listing_this_machine_sees_this_process() {
    let mut w = Watch::new(&[]);
    let up = boot_ticks(w.ticks_per_second).expect("boot clock");
    w.list_processes(Path::new("/proc"), up);
    let me = w
        .processes
        .get(&std::process::id())
        .expect("this process is listed");
    assert!(me.start_ticks <= up);
}

#[test]
fn the_next_look_is_the_soonest_of_the_kinds_armed_and_none_without_triggers() {
    let start = Instant::now();
    assert_eq!(Watch::new(&[]).next_look(), None);
    let mut psi = Watch::new(&["psi-cpu>30%".parse().expect("parses")]);
    psi.last_psi = Some(start);
    psi.last_proc = Some(start);
    // The process listing's half second is not for a PSI trigger.
    assert_eq!(psi.next_look(), Some(start + PSI_POLL));
    let mut both = Watch::new(&[
        "psi-io>20%".parse().expect("parses"),
        "cmd-slower:make>2s".parse().expect("parses"),
    ]);
    both.last_psi = Some(start);
    both.last_proc = Some(start);
    assert_eq!(both.next_look(), Some(start + PROC_POLL));
    // Never looked: at once.
    let never = Watch::new(&["psi-memory>10%".parse().expect("parses")]);
    assert!(never.next_look().expect("a look") <= Instant::now());
    let mut scheduled = Scheduled::new(Duration::from_secs(5));
    assert_eq!(scheduled.next(&Watch::new(&[])), None);
    scheduled.pending.push((
        start + Duration::from_millis(200),
        Due {
            why: "test".into(),
            subject: None,
        },
    ));
    assert_eq!(
        scheduled.next(&both),
        Some(start + Duration::from_millis(200))
    );
    scheduled.pending.clear();
}
