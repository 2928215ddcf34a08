use super::*;

#[test]
fn stack_walk_goes_innermost_first() {
    let mut t = Trace::default();
    t.stacks.push(StackNode::new(None, FrameIdx(7)));
    t.stacks
        .push(StackNode::new(Some(StackIdx(0)), FrameIdx(9)));
    let frames: Vec<_> = t.stack_frames(Some(StackIdx(1))).collect();
    assert_eq!(frames, vec![FrameIdx(9), FrameIdx(7)]);
    assert_eq!(t.stack_frames(None).count(), 0);
}

#[test]
fn periods_of_one_value_take_no_room_and_read_as_a_vector() {
    let mut p = Periods::default();
    assert!(p.is_empty());
    for _ in 0..1000 {
        p.push(250_000);
    }
    assert!(matches!(p.0, PeriodsRepr::Same { len: 1000, .. }));
    assert_eq!((p.len(), p[0], p[999]), (1000, 250_000, 250_000));
    assert_eq!(serde_json::to_string(&p).unwrap().len(), 1 + 7 * 1000);
    // Another value: each sample's own from there on, earlier ones kept.
    p.push(7);
    p.push(250_000);
    assert!(matches!(p.0, PeriodsRepr::Each(_)));
    assert_eq!(
        (p.len(), p[999], p[1000], p[1001]),
        (1002, 250_000, 7, 250_000)
    );
    assert_eq!(p.iter().sum::<u64>(), 1001 * 250_000 + 7);
    let json = serde_json::to_string(&p).unwrap();
    let back: Periods = serde_json::from_str(&json).unwrap();
    assert_eq!(
        back.iter().collect::<Vec<_>>(),
        p.iter().collect::<Vec<_>>()
    );
    let same: Periods = serde_json::from_str("[3,3,3]").unwrap();
    assert!(matches!(same.0, PeriodsRepr::Same { value: 3, len: 3 }));
    assert_eq!(serde_json::to_string(&same).unwrap(), "[3,3,3]");
}

#[test]
fn the_mean_period_of_one_value_of_several_and_of_damaged_ones() {
    assert_eq!(Periods::default().mean(), None);
    let same: Periods = [250_000, 250_000].into_iter().collect();
    assert_eq!(same.mean(), Some(250_000.0));
    let each: Periods = [1, 2, 6].into_iter().collect();
    assert_eq!(each.mean(), Some(3.0));
    // Periods of 2^63 overflow a u64 sum; the mean is still theirs.
    let damaged: Periods = [1 << 63, 1 << 63, 0].into_iter().collect();
    let mean = damaged.mean().expect("a mean");
    assert!((mean / (2f64.powi(64) / 3.0) - 1.0).abs() < 1e-12, "{mean}");
}

#[test]
#[should_panic(expected = "period 3 of 3")]
fn a_period_past_the_end_is_out_of_range() {
    let p: Periods = [5, 5, 5].into_iter().collect();
    let _ = p[3];
}

#[test]
fn a_stack_node_takes_8_bytes_and_reads_and_writes_as_before() {
    assert_eq!(std::mem::size_of::<StackNode>(), 8);
    let root = StackNode::new(None, FrameIdx(7));
    let child = StackNode::new(Some(StackIdx(0)), FrameIdx(9));
    assert_eq!((root.parent(), child.parent()), (None, Some(StackIdx(0))));
    let json = serde_json::to_string(&[root, child]).unwrap();
    assert_eq!(
        json,
        r#"[{"parent":null,"frame":7},{"parent":0,"frame":9}]"#
    );
    // Files written before nodes lost their depth still read.
    let old = r#"[{"parent":null,"frame":7,"depth":0},{"parent":0,"frame":9,"depth":1}]"#;
    let read: Vec<StackNode> = serde_json::from_str(old).unwrap();
    assert_eq!(read, vec![root, child]);
    // The stored "none" is not a parent a damaged file can name.
    let odd: StackNode = serde_json::from_str(r#"{"parent":4294967295,"frame":1}"#).unwrap();
    assert_eq!(odd.parent(), None);
}

#[test]
fn an_event_takes_48_bytes_with_the_windows_fields() {
    // The perf reader holds millions: the Windows fields fit in the
    // padding of their variants, and a syscall's six arguments are out of
    // line (they took an event from 48 to 80 bytes).
    assert_eq!(std::mem::size_of::<Event>(), 48);
    assert_eq!(std::mem::size_of::<EventKind>(), 24);
}

#[test]
fn linux_events_read_and_write_without_the_windows_fields() {
    let linux = [
        r#"{"type":"switch","prev_tid":1,"prev_state":2,"next_tid":3,"next_prio":120}"#,
        r#"{"type":"page_fault","address":4096,"ip":8192,"error_code":6,"user":true}"#,
        r#"{"type":"syscall_enter","name":1,"args":[0,0,0,0,0,0]}"#,
        r#"{"type":"syscall_exit","name":1,"ret":-2}"#,
    ];
    for json in linux {
        let kind: EventKind = serde_json::from_str(json).unwrap();
        match kind {
            EventKind::Switch { windows, .. } => assert_eq!(windows, None),
            EventKind::PageFault { windows_kind, .. } => assert_eq!(windows_kind, None),
            EventKind::SyscallEnter { file_op, .. } | EventKind::SyscallExit { file_op, .. } => {
                assert_eq!(file_op, None)
            }
            _ => unreachable!(),
        }
        assert_eq!(serde_json::to_string(&kind).unwrap(), json);
    }
}

#[test]
fn windows_fields_read_and_write_by_name_and_number() {
    let switch = EventKind::Switch {
        prev_tid: 1,
        prev_state: 2,
        next_tid: 3,
        next_prio: 120,
        windows: Some(WindowsSwitchOut {
            state: WindowsThreadState::WAITING,
            wait_reason: WindowsWaitReason::WR_PAGE_IN,
        }),
    };
    let fault = EventKind::PageFault {
        address: 1,
        ip: 2,
        error_code: 4,
        user: true,
        windows_kind: Some(WindowsFaultKind::DemandZero),
    };
    let create = EventKind::SyscallEnter {
        name: StrIdx(1),
        args: Box::new([0; 6]),
        file_op: Some(FileOp::Create),
    };
    let json: Vec<String> = [&switch, &fault, &create]
        .iter()
        .map(|k| serde_json::to_string(k).unwrap())
        .collect();
    assert!(
        json[0].ends_with(r#""windows":{"state":5,"wait_reason":9}}"#),
        "{}",
        json[0]
    );
    assert!(
        json[1].ends_with(r#""windows_kind":"demand_zero"}"#),
        "{}",
        json[1]
    );
    assert!(json[2].ends_with(r#""file_op":"create"}"#), "{}", json[2]);
    for j in &json {
        let back: EventKind = serde_json::from_str(j).unwrap();
        assert_eq!(&serde_json::to_string(&back).unwrap(), j);
    }
}

#[test]
fn windows_states_and_wait_reasons_have_their_kernel_names() {
    assert_eq!(WindowsThreadState::WAITING.name(), Some("Waiting"));
    assert_eq!(
        WindowsThreadState(9).name(),
        Some("WaitingForProcessInSwap")
    );
    assert_eq!(WindowsThreadState(10).name(), None);
    assert_eq!(WindowsWaitReason::WR_QUEUE.name(), Some("WrQueue"));
    assert_eq!(WindowsWaitReason(38).name(), Some("WrDeferredPreempt"));
    assert_eq!(WindowsWaitReason(200).name(), None);
    let paging: Vec<u8> = (0..=255)
        .filter(|&r| WindowsWaitReason(r).is_paging())
        .collect();
    assert_eq!(paging, [1, 2, 3, 8, 9, 10]);
    let names = |r: &[u8]| -> Vec<_> {
        r.iter()
            .map(|&r| WindowsWaitReason(r).name().unwrap())
            .collect()
    };
    assert_eq!(
        names(&paging),
        [
            "FreePage",
            "PageIn",
            "PoolAllocation",
            "WrFreePage",
            "WrPageIn",
            "WrPoolAllocation"
        ]
    );
}
