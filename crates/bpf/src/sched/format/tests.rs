//! The scheduler recording's format: records and sections written and read back.

use super::*;

fn raw(kind: u8, time: u64, tid: u32, a: u32, kstack: i32, comm: Option<&str>) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend_from_slice(&time.to_le_bytes());
    r.extend_from_slice(&tid.to_le_bytes());
    r.extend_from_slice(&a.to_le_bytes());
    r.extend_from_slice(&7u32.to_le_bytes());
    r.extend_from_slice(&1u16.to_le_bytes());
    r.push(kind);
    r.push(2);
    r.extend_from_slice(&kstack.to_le_bytes());
    r.extend_from_slice(&(-14i32).to_le_bytes());
    if let Some(c) = comm {
        let mut b = [0u8; COMM_LEN];
        b[..c.len()].copy_from_slice(c.as_bytes());
        r.extend_from_slice(&b);
    }
    r
}

#[test]
fn samples_on_the_tick_are_said_and_read_back() {
    let end = SchedEnd {
        stop_ns: 300,
        dropped: 0,
        stacks_lost: 0,
        records: 0,
    };
    let mut w = SchedWriter::new(Vec::new(), 100, 200, 2, 250).unwrap();
    w.samples_on_tick().unwrap();
    let log = parse_sched(&w.finish(end).unwrap()).unwrap();
    assert!(log.warnings.is_empty(), "{:?}", log.warnings);
    assert!(log.samples_on_tick);
    assert_eq!(log.sample_freq, 250);
    let w = SchedWriter::new(Vec::new(), 100, 200, 2, 1000).unwrap();
    let log = parse_sched(&w.finish(end).unwrap()).unwrap();
    assert!(!log.samples_on_tick, "no SAMPLES section: a timer's");
}

#[test]
fn a_written_recording_reads_back() {
    let mut w = SchedWriter::new(Vec::new(), 100, 200, 2, 1000).unwrap();
    w.thread(10, 11, "worker").unwrap();
    w.record(&raw(1, 150, 11, 12, 3, None)).unwrap();
    w.maps(10, "00400000-00401000 r-xp 00000000 08:01 5 /bin/x\n")
        .unwrap();
    w.record(&raw(5, 160, 12, 12, -1, Some("newname"))).unwrap();
    w.stack(3, true, &[0xffff_0001, 0xffff_0002]).unwrap();
    w.command(12, &["sh".into(), "-c".into(), "true".into()])
        .unwrap();
    let cpu_times = slowlab_model::host_steal::CpuTimes {
        wanted: 250,
        stolen: 40,
    };
    w.steal(cpu_times).unwrap();
    let end = SchedEnd {
        stop_ns: 300,
        dropped: 4,
        stacks_lost: 1,
        records: 2,
    };
    let bytes = w.finish(end).unwrap();
    let log = parse_sched(&bytes).unwrap();
    assert!(log.warnings.is_empty(), "{:?}", log.warnings);
    assert_eq!(
        (log.start_mono_ns, log.nr_cpus, log.sample_freq),
        (100, 2, 1000)
    );
    assert_eq!(log.records.len(), 2);
    let s = &log.records.to_vec()[0];
    assert_eq!(
        (s.kind, s.tid, s.a, s.b, s.c),
        (RecordKind::Switch, 11, 12, 7, 2)
    );
    assert_eq!((s.kstack, s.ustack), (Some(3), None));
    assert_eq!(log.records.to_vec()[1].comm(), Some("newname"));
    // The maps hold from the second record on.
    let second = log.records.positions().nth(1);
    assert_eq!(Some(log.maps[0].from_record), second);
    assert_eq!(log.records.time_at(log.maps[0].from_record), Some(160));
    assert_eq!(log.threads[0].comm, "worker");
    assert_eq!(
        log.command,
        Some((12, vec!["sh".into(), "-c".into(), "true".into()]))
    );
    assert_eq!(log.stacks[0].addrs, vec![0xffff_0001, 0xffff_0002]);
    assert_eq!(log.cpu_times, Some(cpu_times));
    assert_eq!(log.end, Some(end));
}

#[test]
fn a_syscall_record_has_a_value_and_no_stacks() {
    let mut enter = raw(8, 150, 11, 0x80, 0, None);
    enter[23] = 1; // futex
    enter[24..32].copy_from_slice(&0x7f00_1234_5678u64.to_le_bytes());
    let (r, n) = decode_record(&enter).unwrap();
    assert_eq!(n, RECORD_LEN);
    assert_eq!(
        (r.kind, r.value, r.a, r.b),
        (RecordKind::SysEnter, 0x7f00_1234_5678, 0x80, 7)
    );
    assert_eq!((r.kstack, r.ustack), (None, None));
    assert_eq!(RecordedSyscall::from_u8(r.c), Some(RecordedSyscall::Futex));
    let mut exit = raw(9, 160, 11, 0, 0, None);
    exit[23] = 4;
    exit[24..32].copy_from_slice(&(-11i64).to_le_bytes());
    let (r, _) = decode_record(&exit).unwrap();
    assert_eq!((r.kind, r.value as i64), (RecordKind::SysExit, -11));
    assert_eq!(
        RecordedSyscall::from_u8(r.c).map(|s| s.name()),
        Some("flock")
    );
    assert_eq!(RecordedSyscall::from_u8(0), None);
    let mut block = raw(10, 170, 11, 0x80_0001, 0, None);
    block[23] = block_flags::COMPLETE | block_flags::WRITE;
    block[24..32].copy_from_slice(&123_456u64.to_le_bytes());
    let (r, _) = decode_record(&block).unwrap();
    assert_eq!(
        (r.kind, r.a, r.b, r.value),
        (RecordKind::Block, 0x80_0001, 7, 123_456)
    );
    assert_eq!(r.kstack, None);
    let mut fault = raw(11, 180, 11, 10, 5, None);
    fault.extend_from_slice(&0x7f00_0000_1000u64.to_le_bytes());
    let (r, n) = decode_record(&fault).unwrap();
    assert_eq!(
        (r.kind, n, r.value),
        (RecordKind::MajorFault, 40, 0x7f00_0000_1000)
    );
    assert_eq!(r.kstack, Some(5));
    assert!(decode_record(&fault[..36]).is_none());
    let mut fault = raw(12, 190, 11, 10, 5, None);
    fault[23] = 1;
    fault.extend_from_slice(&0x7f00_0000_2000u64.to_le_bytes());
    fault.extend_from_slice(&0x5555_0000_1234u64.to_le_bytes());
    let (r, n) = decode_record(&fault).unwrap();
    assert_eq!((r.kind, n, r.c), (RecordKind::PageFault, 48, 1));
    assert_eq!(
        (r.value, r.ip, r.b),
        (0x7f00_0000_2000, 0x5555_0000_1234, 7)
    );
    assert_eq!(RecordedSyscall::from_u8(5), Some(RecordedSyscall::Openat));
    assert_eq!(
        RecordedSyscall::from_u8(23).map(|s| s.name()),
        Some("tkill")
    );
    assert_eq!(RecordedSyscall::from_u8(24), None);
    let mut call = raw(13, 200, 11, 10, -1, None);
    call[23] = 14; // mmap
    call[28..32].copy_from_slice(&3i32.to_le_bytes());
    for a in 1..=6u64 {
        call.extend_from_slice(&(a * 0x100).to_le_bytes());
    }
    let (r, n) = decode_record(&call).unwrap();
    assert_eq!((r.kind, n, r.ustack), (RecordKind::SysCall, 80, Some(3)));
    assert_eq!(r.args(), [0x100, 0x200, 0x300, 0x400, 0x500, 0x600]);
}

#[test]
fn a_path_record_is_as_long_as_its_path_rounded_to_8_bytes() {
    let path = b"/etc/ld.so.cache"; // 16 bytes: no padding
    let long = b"/nonexistent/slowlab-17"; // 23 bytes: one byte of padding
    for (p, len) in [(&path[..], 48), (&long[..], 56)] {
        let mut rec = raw(14, 210, 11, 10, 0, None);
        rec[16..20].copy_from_slice(&(p.len() as u32).to_le_bytes());
        rec[23] = 9; // newfstatat
        rec[24..28].copy_from_slice(&(path_flags::TRUNCATED as u32).to_le_bytes());
        rec.extend_from_slice(p);
        rec.resize(len, 0);
        // A record after it must be found where it starts.
        rec.extend_from_slice(&raw(2, 220, 11, 12, 3, None));
        let (r, n) = decode_record(&rec).unwrap();
        assert_eq!((r.kind, n), (RecordKind::Path, len));
        assert_eq!(r.path().map(str::as_bytes), Some(p));
        assert_eq!((r.c, r.value, r.kstack), (9, path_flags::TRUNCATED, None));
        assert_eq!(decode_record(&rec[n..]).unwrap().0.kind, RecordKind::Waking);
        assert!(decode_record(&rec[..len - 1]).is_none(), "a cut path");
    }
}

#[test]
fn a_recording_cut_short_reads_what_is_there_and_says_so() {
    let mut w = SchedWriter::new(Vec::new(), 1, 2, 1, 99).unwrap();
    w.record(&raw(2, 150, 11, 12, 3, None)).unwrap();
    w.flush_events().unwrap();
    let mut bytes = w.out_mut().clone();
    bytes.extend_from_slice(&[1, 0, 0, 0, 200, 0]);
    let log = parse_sched(&bytes).unwrap();
    assert_eq!(log.records.len(), 1);
    assert!(log.end.is_none());
    assert_eq!(log.warnings.len(), 2, "{:?}", log.warnings);
    assert!(parse_sched(b"PERFILE2").is_err());
}

#[test]
fn a_maps_line_gives_its_range_offset_and_path() {
    let line = "7f00a000-7f00c000 r-xp 00002000 08:01 1234   /usr/lib/libc.so.6";
    assert_eq!(
        parse_maps_line(line),
        Some(MapsLine {
            start: 0x7f00_a000,
            end: 0x7f00_c000,
            offset: 0x2000,
            path: Some("/usr/lib/libc.so.6"),
        })
    );
    let anonymous = parse_maps_line("1000-2000 r-xp 00000000 00:00 0").unwrap();
    assert_eq!((anonymous.start, anonymous.path), (0x1000, None));
    let spaced = "1000-2000 r-xp 00000000 08:01 77 /opt/My App/bin/app (deleted)";
    assert_eq!(
        parse_maps_line(spaced).unwrap().path,
        Some("/opt/My App/bin/app")
    );
    assert_eq!(parse_maps_line("not a maps line"), None);
    assert_eq!(parse_maps_line(""), None);
}

#[test]
fn a_decoded_record_takes_64_bytes_whatever_its_kind() {
    // A trace of minutes is millions of records: what only a few kinds carry is boxed.
    assert_eq!(std::mem::size_of::<SchedRecord>(), 64);
}

#[test]
fn a_head_written_by_userspace_reads_back_as_the_program_would_have_written_it() {
    let head = |kind, c, tail| Head {
        time_ns: 1_000_000_007,
        tid: 4242,
        a: 9,
        b: 11,
        cpu: 1,
        kind,
        c,
        tail,
    };
    let (switch, len) =
        decode_record(&head(KIND_SWITCH, 2, Head::stacks(Some(5), None)).bytes()).unwrap();
    assert_eq!(len, RECORD_LEN);
    assert_eq!(
        (switch.time_ns, switch.tid, switch.a, switch.b, switch.cpu),
        (1_000_000_007, 4242, 9, 11, 1)
    );
    assert_eq!((switch.kind, switch.c), (RecordKind::Switch, 2));
    assert_eq!((switch.kstack, switch.ustack), (Some(5), None));
    let (enter, _) = decode_record(&head(KIND_SYS_ENTER, 3, 0x7f00_1234_5678).bytes()).unwrap();
    assert_eq!((enter.kind, enter.c), (RecordKind::SysEnter, 3));
    assert_eq!(enter.value, 0x7f00_1234_5678);
    assert_eq!((enter.kstack, enter.ustack), (None, None));
}

/// One record of each kind, with what its bytes can carry.
fn one_of_each_kind() -> Vec<SchedRecord> {
    let base = |kind, time_ns| SchedRecord {
        time_ns,
        tid: 11,
        a: 10,
        b: 7,
        cpu: 1,
        kind,
        c: 2,
        kstack: Some(3),
        ustack: Some(4),
        value: 0,
        ip: 0,
        extra: None,
    };
    let valued = |kind, time_ns, value| SchedRecord {
        kstack: None,
        ustack: None,
        value,
        ..base(kind, time_ns)
    };
    let named = |kind, time_ns, comm: &str| SchedRecord {
        extra: Some(Box::new(RecordExtra::Comm(comm.into()))),
        ..base(kind, time_ns)
    };
    let path = "/nonexistent/slowlab-17";
    vec![
        base(RecordKind::Switch, 100),
        base(RecordKind::Waking, 101),
        base(RecordKind::Sample, 102),
        base(RecordKind::Fork, 103),
        named(RecordKind::Exec, 104, "newname"),
        base(RecordKind::Exit, 105),
        named(RecordKind::Rename, 106, "renamed"),
        valued(RecordKind::SysEnter, 107, 0x7f00_1234_5678),
        valued(RecordKind::SysExit, 108, (-11i64) as u64),
        valued(RecordKind::Block, 109, 2048),
        SchedRecord {
            value: 0x7f00_0000_1000,
            ..base(RecordKind::MajorFault, 110)
        },
        SchedRecord {
            value: 0x7f00_0000_2000,
            ip: 0x40_1000,
            ..base(RecordKind::PageFault, 111)
        },
        SchedRecord {
            extra: Some(Box::new(RecordExtra::Args([1, 2, 3, 4, 5, 6]))),
            kstack: None,
            ..base(RecordKind::SysCall, 112)
        },
        SchedRecord {
            b: path.len() as u32,
            extra: Some(Box::new(RecordExtra::Path(path.into()))),
            ..valued(RecordKind::Path, 113, path_flags::TRUNCATED)
        },
    ]
}

#[test]
fn records_kept_as_their_bytes_decode_as_they_were_and_are_found_by_kind() {
    let all = one_of_each_kind();
    let kept = SchedRecords::from(all.clone());
    assert_eq!(kept.len(), 14);
    assert_eq!(kept.to_vec(), all);
    let at: Vec<RecordAt> = kept.positions().collect();
    let times: Vec<u64> = at.iter().filter_map(|&p| kept.time_at(p)).collect();
    assert_eq!(times, (100..114).collect::<Vec<u64>>());
    assert_eq!(kept.kind_at(at[12]), Some(RecordKind::SysCall));
    assert_eq!(
        kept.get(at[4])
            .and_then(|r| r.comm().map(String::from))
            .as_deref(),
        Some("newname")
    );
    let paths: Vec<SchedRecord> = kept.of_kind(RecordKind::Path).collect();
    assert_eq!(paths, [all[13].clone()]);
    assert_eq!(kept.get(at[13] + 1000), None);
}

#[test]
fn a_batch_damaged_inside_keeps_its_records_before_the_damage_and_the_batches_after() {
    let mut w = SchedWriter::new(Vec::new(), 1, 2, 1, 99).unwrap();
    w.record(&raw(2, 150, 11, 12, 3, None)).unwrap();
    w.flush_events().unwrap();
    let mut bytes = w.out_mut().clone();
    // A batch of two records, then one of no known kind, then one more.
    let mut body = raw(1, 160, 11, 12, 3, None);
    body.extend_from_slice(&raw(3, 170, 11, 12, 3, None));
    body.extend_from_slice(&raw(99, 180, 11, 12, 3, None));
    body.extend_from_slice(&raw(1, 190, 11, 12, 3, None));
    bytes.extend_from_slice(&1u32.to_le_bytes());
    bytes.extend_from_slice(&(body.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&body);
    // Then a whole batch after it.
    let mut after = SchedWriter::new(Vec::new(), 1, 2, 1, 99).unwrap();
    after.record(&raw(2, 200, 11, 12, 3, None)).unwrap();
    after.flush_events().unwrap();
    bytes.extend_from_slice(&after.out_mut()[SCHED_MAGIC.len() + HEADER_LEN..]);
    let log = parse_sched(&bytes).unwrap();
    let times: Vec<u64> = log.records.iter().map(|r| r.time_ns).collect();
    assert_eq!(times, [150, 160, 170, 200]);
    assert!(
        log.warnings
            .iter()
            .any(|w| w.starts_with("a batch of records ends in a damaged record")),
        "{:?}",
        log.warnings
    );
}
