//! The ring window's tests: what a snapshot holds, and how stacks leave the kernel's map
//! and memory.

use super::*;
use std::path::Path;

use crate::sched::format::{parse_sched, SchedEnd, SchedLog};

fn rec(kind: RecordKind, time_ns: u64, tid: u32, a: u32, kstack: Option<u32>) -> SchedRecord {
    SchedRecord {
        time_ns,
        tid,
        a,
        b: 0,
        cpu: 0,
        kind,
        c: 0,
        kstack,
        ustack: None,
        value: 0,
        ip: 0,
        extra: None,
    }
}

/// The raw bytes of a record as the program writes it.
fn raw(r: &SchedRecord) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&r.time_ns.to_le_bytes());
    b.extend_from_slice(&r.tid.to_le_bytes());
    b.extend_from_slice(&r.a.to_le_bytes());
    b.extend_from_slice(&r.b.to_le_bytes());
    b.extend_from_slice(&r.cpu.to_le_bytes());
    b.push(1); // SWITCH
    b.push(r.c);
    b.extend_from_slice(&r.kstack.map_or(-1, |s| s as i32).to_le_bytes());
    b.extend_from_slice(&r.ustack.map_or(-1, |s| s as i32).to_le_bytes());
    b
}

/// A writer into a window of `window_ms` (and `max_bytes`) given `seconds` of
/// switches, ten a second, each second's in a section of its own naming stack `second`.
fn a_window(window_ms: u64, max_bytes: u64, seconds: u64) -> SchedWriter<Sink> {
    a_window_spilling(window_ms, max_bytes, seconds, None)
}

/// The same, keeping its chunks in `spill` when given.
fn a_window_spilling(
    window_ms: u64,
    max_bytes: u64,
    seconds: u64,
    spill: Option<File>,
) -> SchedWriter<Sink> {
    let header = Header {
        start_mono_ns: 1,
        start_real_ns: 2,
        nr_cpus: 2,
        sample_freq: 99,
        samples_on_tick: false,
    };
    let options = RingOptions {
        window: Duration::from_millis(window_ms),
        max_bytes,
        spill: spill.is_some(),
    };
    let sink = Sink::Window(Box::new(Window::new(
        header,
        options,
        spill.map(Spill::new),
    )));
    let mut w = SchedWriter::new(sink, 1, 2, 2, 99).unwrap();
    let Sink::Window(win) = w.out_mut() else {
        unreachable!()
    };
    win.clear_written();
    win.note_thread(10, 10, "old");
    win.note_thread(20, 20, "young");
    win.note_mappings(10, "r-xp /bin/old\n");
    for second in 0..seconds {
        add_second(&mut w, second, second as u32);
    }
    w
}

/// Second `second` of the writer's switches, ten of them naming `stack`, in a chunk of
/// its own (with, in seconds 0 and 1, the processes `a_window` tells of).
fn add_second(w: &mut SchedWriter<Sink>, second: u64, stack: u32) {
    for i in 0..10 {
        let t = second * 1_000_000_000 + i * 100_000_000 + 1;
        let r = rec(RecordKind::Switch, t, 20, 0, Some(stack));
        w.record(&raw(&r)).unwrap();
        window(w).note_record(&r);
    }
    let win = window(w);
    if second == 0 {
        win.note_record(&rec(RecordKind::Exit, 500_000_000, 10, 10, None));
        // Processes whose mappings are reported after their exit (the kernel's
        // reports come in a ring of their own): one mapped before, one not.
        win.note_mappings(10, "r-xp /bin/old /lib/late.so\n");
        win.note_record(&rec(RecordKind::Exit, 600_000_000, 30, 30, None));
        win.note_mappings(30, "r-xp /bin/gone\n");
        // A process whose pid is used again, below.
        win.note_mappings(40, "r-xp /bin/first\n");
        win.note_record(&rec(RecordKind::Exit, 700_000_000, 40, 40, None));
    }
    if second == 1 {
        // Within the window of the first one's exit.
        let mut fork = rec(RecordKind::Fork, 1_000_000_000, 20, 40, None);
        fork.b = 40;
        win.note_record(&fork);
        win.note_mappings(40, "r-xp /bin/second\n");
    }
    w.flush_events().unwrap();
    window(w).cut().unwrap();
}

fn window(w: &mut SchedWriter<Sink>) -> &mut Window {
    match w.out_mut() {
        Sink::Window(win) => win,
        Sink::File(_) => unreachable!(),
    }
}

fn stack(id: u32) -> MapStack {
    (u64::from(id) << 8, id, false, vec![0x1000 + u64::from(id)])
}

/// The stacks a snapshot of the window into `file` holds (`in_map` in the kernel's map):
/// id, kernel or not, addresses.
fn snapshot_stacks(
    win: &mut Window,
    file: &Path,
    in_map: Vec<MapStack>,
) -> Vec<(u32, bool, Vec<u64>)> {
    win.write(file, in_map, SchedEnd::default(), None, None)
        .unwrap();
    let log = parse_sched(&std::fs::read(file).unwrap()).unwrap();
    log.stacks
        .iter()
        .map(|s| (s.id, s.kernel, s.addrs.clone()))
        .collect()
}

#[test]
fn a_ring_commands_process_is_the_snapshots_command_unless_the_snapshot_is_about_another() {
    let dir = tempfile::tempdir().unwrap();
    let mut drain = crate::sched::drain::Drain::new(a_window(2_500, 1 << 30, 1));
    // `record --ring -- make`: the command's process, told as it starts.
    drain.command(7, &["make".into()]);
    add_second(&mut drain.writer, 1, 1);
    let win = window(&mut drain.writer);
    let (plain, about) = (dir.path().join("plain"), dir.path().join("about"));
    win.write(&plain, Vec::new(), SchedEnd::default(), None, None)
        .unwrap();
    let slow = (9, vec!["slow".to_string()]);
    win.write(&about, Vec::new(), SchedEnd::default(), Some(&slow), None)
        .unwrap();
    let command = |file: &Path| parse_sched(&std::fs::read(file).unwrap()).unwrap().command;
    assert_eq!(command(&plain), Some((7, vec!["make".to_string()])));
    // A trigger's snapshot about process 9: its COMMAND is read, not the ring's.
    assert_eq!(command(&about), Some(slow));
}

#[test]
fn a_snapshot_holds_the_last_seconds_with_their_threads_and_stacks() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = a_window(2_500, 1 << 30, 10);
    let file = dir.path().join("snap");
    let in_map = (0..10).map(stack).collect();
    let info = window(&mut w)
        .write(&file, in_map, SchedEnd::default(), None, None)
        .unwrap();
    assert!(!dir.path().join("snap.partial").exists());
    let log = parse_sched(&std::fs::read(&file).unwrap()).unwrap();
    assert!(log.warnings.is_empty(), "{:?}", log.warnings);
    // The chunks that ended within 2.5 s of the newest record: seconds 7, 8 and 9.
    assert_eq!(info.records, 30);
    assert_eq!(log.records.len(), 30);
    assert_eq!(log.records.to_vec()[0].time_ns, 7_000_000_001);
    assert_eq!(log.end.unwrap().records, 30);
    let ids: Vec<u32> = log.stacks.iter().map(|s| s.id).collect();
    assert_eq!(ids, [7, 8, 9], "only the stacks the window names");
    assert_eq!(log.stacks[0].addrs, [0x1007]);
    // The thread that exited in second 0 is gone, with its mappings (those reported
    // after its exit too); the live one stays, as does the process that took pid 40.
    let tids: Vec<u32> = log.threads.iter().map(|t| t.tid).collect();
    assert_eq!(tids, [20]);
    let maps: Vec<(u32, &str)> = log.maps.iter().map(|m| (m.pid, m.text.as_str())).collect();
    assert_eq!(maps, [(40, "r-xp /bin/second\n")]);
    assert_eq!(
        (log.start_mono_ns, log.nr_cpus, log.sample_freq),
        (1, 2, 99)
    );
}

#[test]
fn a_snapshot_says_the_hosts_steal_over_its_window_from_the_last_reading_before_it() {
    use slowlab_model::host_steal::CpuTimes;
    let dir = tempfile::tempdir().unwrap();
    let mut w = a_window(2_500, 1 << 30, 0);
    // Read at the start of each second: 100 ticks wanted, 10 stolen, a second.
    let read = |second: u64| CpuTimes {
        wanted: 100 * second,
        stolen: 10 * second,
    };
    for second in 0..10 {
        window(&mut w).note_cpu_times(second * 1_000_000_000, read(second));
        add_second(&mut w, second, second as u32);
    }
    assert_eq!(
        window(&mut w).cpu_times.len(),
        3,
        "the readings of seconds 7 to 9, the window's"
    );
    let file = dir.path().join("snap");
    let now = CpuTimes {
        wanted: 1_050,
        stolen: 120,
    };
    let info = window(&mut w)
        .write(&file, Vec::new(), SchedEnd::default(), None, Some(now))
        .unwrap();
    // From second 7's reading (700, 70), at the window's start (its first record is at
    // 7 s + 1 ns), to now.
    let over_the_window = CpuTimes {
        wanted: 350,
        stolen: 50,
    };
    let log = parse_sched(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(log.cpu_times, Some(over_the_window));
    assert_eq!(info.cpu_times, Some(over_the_window));
    // Without the counters now, nothing is said.
    window(&mut w)
        .write(&file, Vec::new(), SchedEnd::default(), None, None)
        .unwrap();
    let log = parse_sched(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(log.cpu_times, None);
}

#[test]
fn the_bytes_allowed_bound_the_window_too() {
    let mut all = a_window(60_000, 1 << 30, 10);
    let per_second = window(&mut all).bytes() / 10;
    assert_eq!(window(&mut all).chunks.len(), 10, "a minute holds them all");
    let mut w = a_window(60_000, 3 * per_second + 10, 10);
    assert!(window(&mut w).bytes() <= 3 * per_second + 10);
    assert_eq!(window(&mut w).chunks.len(), 3);
    assert_eq!(window(&mut w).chunks[0].first_ns, 7_000_000_001);
}

#[test]
fn stacks_nothing_names_leave_the_map_then_memory() {
    let mut w = a_window(2_500, 1 << 30, 10);
    let win = window(&mut w);
    let in_map: Vec<MapStack> = (0..12).map(stack).collect();
    let mut evicted = win.stacks().eviction_pass(in_map);
    evicted.sort();
    let want: Vec<u64> = [0u64, 1, 2, 3, 4, 5, 6, 10, 11]
        .iter()
        .map(|id| id << 8)
        .collect();
    assert_eq!(evicted, want, "named by no record of the window");
    assert!(win.stacks().knows_key(7 << 8) && !win.stacks().knows_key(6 << 8));
    assert_eq!(win.stacks().known(), 12, "frames kept a pass longer");
    assert!(win.stacks().eviction_pass(Vec::new()).is_empty());
    assert_eq!(win.stacks().known(), 3, "then only the named ones");
}

#[test]
fn a_stack_goes_once_the_window_moves_past_the_last_record_naming_it() {
    // Seconds 7, 8 and 9 kept, naming stacks 7, 8 and 9, all learned from the map.
    let mut w = a_window(2_500, 1 << 30, 10);
    let in_map: Vec<MapStack> = (7..10).map(stack).collect();
    assert!(window(&mut w).stacks().eviction_pass(in_map).is_empty());
    // Second 10 names stack 9 again, and second 11 stack 7 again: the window lets go
    // of seconds 7 and 8 (the first named 7, the second 8) and keeps 9 to 11.
    add_second(&mut w, 10, 9);
    add_second(&mut w, 11, 7);
    let win = window(&mut w);
    assert_eq!(win.chunks.len(), 3);
    assert_eq!(
        win.stacks().eviction_pass(Vec::new()),
        [8 << 8],
        "only 8 is named no more"
    );
    assert!(
        !win.stacks().knows_key(8 << 8)
            && win.stacks().knows_key(7 << 8)
            && win.stacks().knows_key(9 << 8)
    );
    assert_eq!(win.stacks().known(), 3, "8's frames a pass longer");
    // A record in the ring buffer named it after all: it stays while named.
    let late = rec(RecordKind::Switch, 11_950_000_000, 20, 0, Some(8));
    win.note_record(&late);
    assert!(win.stacks().eviction_pass(Vec::new()).is_empty());
    assert_eq!(win.stacks().known(), 3);
    // Seconds 12 to 15, naming stack 99: the chunks naming 7, 8 and 9 go (second 12's
    // named 8, for the late record), and so do those stacks, from the map at one pass
    // and from memory at the next.
    for second in 12..16 {
        add_second(&mut w, second, 99);
    }
    let win = window(&mut w);
    assert_eq!(win.chunks[0].first_ns, 13_000_000_001);
    let mut evicted = win.stacks().eviction_pass(Vec::new());
    evicted.sort_unstable();
    assert_eq!(evicted, [7 << 8, 9 << 8], "8 was out of the map already");
    assert!(win.stacks().eviction_pass(Vec::new()).is_empty());
    assert_eq!(win.stacks().known(), 0);
}

#[test]
fn a_stack_sent_in_the_ring_is_kept_while_the_window_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = a_window(2_500, 1 << 30, 10);
    let win = window(&mut w);
    // The window names stacks 7, 8 and 9; 8 came through the ring, 3 too but unnamed.
    win.stacks().note_sent(8, true, &[0xffff_ffff_8100_0008]);
    win.stacks().note_sent(3, false, &[0x3003]);
    let in_map = [7, 9].into_iter().map(stack).collect();
    assert_eq!(
        snapshot_stacks(win, &dir.path().join("snap"), in_map),
        [
            (7, false, vec![0x1007]),
            (8, true, vec![0xffff_ffff_8100_0008]),
            (9, false, vec![0x1009])
        ]
    );
    // Not in the kernel's map, so nothing to delete there; the unnamed one is
    // forgotten a pass later (a record in the ring may still name it), the named
    // one kept.
    let evicted = win.stacks().eviction_pass(Vec::new());
    assert!(evicted.is_empty(), "{evicted:?}");
    assert_eq!(win.stacks().known(), 4, "7, 8, 9, and 3 a pass longer");
    assert!(win.stacks().eviction_pass(Vec::new()).is_empty());
    assert_eq!(win.stacks().known(), 3, "7, 8 and 9");
}

#[test]
fn a_snapshot_that_cannot_be_written_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = a_window(2_500, 1 << 30, 3);
    let file = dir.path().join("missing-dir").join("snap");
    assert!(window(&mut w)
        .write(&file, Vec::new(), SchedEnd::default(), None, None)
        .is_err());
    assert!(!file.exists());
    assert!(!dir.path().join("missing-dir").exists());
}

#[test]
fn the_windows_chunks_are_kept_packed_and_written_as_they_came() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = a_window(60_000, 1 << 30, 0);
    let mut times = Vec::new();
    for i in 0..4_000u64 {
        let t = 1_000_000_000 + i * 37_003;
        let r = rec(
            RecordKind::Switch,
            t,
            20 + (i % 5) as u32,
            0,
            Some(i as u32 % 40),
        );
        w.record(&raw(&r)).unwrap();
        window(&mut w).note_record(&r);
        times.push(t);
    }
    w.flush_events().unwrap();
    let win = window(&mut w);
    win.cut().unwrap();
    // 4,000 records of 32 bytes, and the sections' heads: held in a third of that or less.
    assert!(win.bytes() > 4_000 * 32, "{}", win.bytes());
    assert!(
        win.bytes_in_memory() * 3 < win.bytes(),
        "{} in memory for {}",
        win.bytes_in_memory(),
        win.bytes()
    );
    let file = dir.path().join("snap");
    let in_map = (0..40).map(stack).collect();
    let info = win
        .write(&file, in_map, SchedEnd::default(), None, None)
        .unwrap();
    let log = parse_sched(&std::fs::read(&file).unwrap()).unwrap();
    assert!(log.warnings.is_empty(), "{:?}", log.warnings);
    assert_eq!(info.records, 4_000);
    let written: Vec<u64> = log.records.iter().map(|r| r.time_ns).collect();
    assert_eq!(written, times);
    assert_eq!(log.records.to_vec()[3_999].kstack, Some(3_999 % 40));
}

#[test]
fn the_frames_of_forgotten_stacks_leave_the_arena_and_the_others_keep_theirs() {
    let dir = tempfile::tempdir().unwrap();
    // The window names stacks 7, 8 and 9; 8 and 9 came through the ring, around 40,000
    // stacks nothing names.
    let mut w = a_window(2_500, 1 << 30, 10);
    let win = window(&mut w);
    win.stacks().note_sent(8, false, &[0x8008, 0x8009]);
    for id in 1_000..41_000u32 {
        win.stacks()
            .note_sent(id, false, &[u64::from(id), u64::from(id) + 1]);
    }
    win.stacks().note_sent(9, true, &[0xffff_ffff_8100_0009]);
    assert_eq!(win.stacks().frames_held(), 80_003);
    // A pass spares the unnamed, the next forgets them: their 80,000 frames are holes,
    // more than the frames kept, and the arena is packed again.
    assert!(win.stacks().eviction_pass(Vec::new()).is_empty());
    assert!(win.stacks().eviction_pass(Vec::new()).is_empty());
    assert_eq!(win.stacks().known(), 2);
    assert_eq!(win.stacks().frames_held(), 3);
    assert_eq!(
        snapshot_stacks(win, &dir.path().join("snap"), vec![stack(7)]),
        [
            (7, false, vec![0x1007]),
            (8, false, vec![0x8008, 0x8009]),
            (9, true, vec![0xffff_ffff_8100_0009])
        ]
    );
}

#[test]
fn what_exited_before_the_window_stays_out_of_a_snapshot_before_it_is_let_go() {
    let dir = tempfile::tempdir().unwrap();
    // A window of 500 ms; a chunk every 100 ms for 1 s, so the window's start moves by
    // less than the second after which the window lets go of what exited before it.
    let mut w = a_window(500, 1 << 30, 0);
    for i in 0..10u64 {
        let r = rec(RecordKind::Switch, i * 100_000_000 + 1, 20, 0, Some(1));
        w.record(&raw(&r)).unwrap();
        window(&mut w).note_record(&r);
        if i == 1 {
            // Process 10 ("old", mapped) exits at 150 ms.
            window(&mut w).note_record(&rec(RecordKind::Exit, 150_000_000, 10, 10, None));
        }
        w.flush_events().unwrap();
        window(&mut w).cut().unwrap();
    }
    let file = dir.path().join("snap");
    let info = window(&mut w)
        .write(&file, vec![stack(1)], SchedEnd::default(), None, None)
        .unwrap();
    assert!(info.first_ns >= 400_000_000, "{info:?}");
    let log = parse_sched(&std::fs::read(&file).unwrap()).unwrap();
    let tids: Vec<u32> = log.threads.iter().map(|t| t.tid).collect();
    assert_eq!(tids, [20]);
    assert!(log.maps.is_empty(), "{:?}", log.maps);
}

#[test]
fn a_window_forgotten_holds_only_what_came_after_in_its_next_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    // A minute's window holds all of seconds 0 to 4 (stacks 0 to 4); forgotten, then
    // seconds 5 and 6 come (stacks 5 and 6, and 2 again).
    let mut w = a_window(60_000, 1 << 30, 5);
    window(&mut w).forget().unwrap();
    assert_eq!(window(&mut w).bytes(), 0);
    assert_eq!(window(&mut w).chunks.len(), 0);
    // (Stack 6, which nothing names, is in the map too.)
    let gone: Vec<u64> = [0u64, 1, 3, 4, 6].iter().map(|id| id << 8).collect();
    add_second(&mut w, 5, 5);
    add_second(&mut w, 6, 2);
    let in_map: Vec<MapStack> = (0..7).map(stack).collect();
    let file = dir.path().join("run");
    let info = window(&mut w)
        .write(&file, in_map.clone(), SchedEnd::default(), None, None)
        .unwrap();
    let log = parse_sched(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(info.records, 20);
    assert_eq!(log.records.to_vec()[0].time_ns, 5_000_000_001);
    let ids: Vec<u32> = log.stacks.iter().map(|s| s.id).collect();
    assert_eq!(ids, [2, 5], "only the stacks of what came after");
    // The thread that exited in second 0 stays out; the live one is named.
    let tids: Vec<u32> = log.threads.iter().map(|t| t.tid).collect();
    assert_eq!(tids, [20]);
    // The stacks only the forgotten records named leave the kernel's map.
    let mut evicted = window(&mut w).stacks().eviction_pass(in_map);
    evicted.sort_unstable();
    assert_eq!(evicted, gone);
}

#[test]
fn a_spilling_window_keeps_its_chunks_and_stacks_in_its_file_and_snapshots_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let spill_path = dir.path().join("spill");
    let spill = File::options()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&spill_path)
        .unwrap();
    let mut kept = a_window(60_000, 1 << 30, 5);
    let mut spilled = a_window_spilling(60_000, 1 << 30, 5, Some(spill));
    let in_map: Vec<MapStack> = (0..7).map(stack).collect();
    // A window that keeps its stacks learns the kernel's map at the snapshot; the drain
    // moves the map's stacks into a spilling window's chunks instead, as into a file.
    let snapshot = |w: &mut SchedWriter<Sink>, name: &str, stacks: &[u32]| {
        let file = dir.path().join(name);
        let in_map = if window(w).spills() {
            for &id in stacks {
                let (_, id, kernel, addrs) = stack(id);
                w.stack(id, kernel, &addrs).unwrap();
            }
            window(w).cut().unwrap();
            Vec::new()
        } else {
            in_map.clone()
        };
        window(w)
            .write(&file, in_map, SchedEnd::default(), None, None)
            .unwrap();
        parse_sched(&std::fs::read(&file).unwrap()).unwrap()
    };
    let sorted_stacks = |log: &SchedLog| {
        let mut stacks: Vec<_> = log
            .stacks
            .iter()
            .map(|s| (s.id, s.kernel, s.addrs.clone()))
            .collect();
        stacks.sort();
        stacks
    };
    // Nothing of the five seconds is in memory, not even a stack: all of it is in the file.
    let win = window(&mut spilled);
    assert_eq!(win.bytes_in_memory(), 0);
    assert!(win.bytes() > 50 * 32, "{}", win.bytes());
    assert_eq!(win.bytes_spilled(), win.bytes());
    assert_eq!(std::fs::metadata(&spill_path).unwrap().len(), win.bytes());
    assert!(win.stacks().named().is_empty() && win.stacks().known() == 0);
    let (from_spill, from_memory) = (
        snapshot(&mut spilled, "spilled", &[0, 1, 2, 3, 4]),
        snapshot(&mut kept, "kept", &[]),
    );
    assert_eq!(from_spill.records, from_memory.records);
    assert_eq!(from_spill.threads, from_memory.threads);
    assert_eq!(from_spill.maps, from_memory.maps);
    assert_eq!(sorted_stacks(&from_spill), sorted_stacks(&from_memory));
    assert_eq!(from_spill.records.len(), 50);
    // Forgotten, the file gives its space back; what comes after is written as before.
    window(&mut spilled).forget().unwrap();
    assert_eq!(std::fs::metadata(&spill_path).unwrap().len(), 0);
    window(&mut kept).forget().unwrap();
    for w in [&mut kept, &mut spilled] {
        add_second(w, 5, 5);
        add_second(w, 6, 6);
    }
    let (from_spill, from_memory) = (
        snapshot(&mut spilled, "spilled-after", &[5, 6]),
        snapshot(&mut kept, "kept-after", &[]),
    );
    assert_eq!(from_spill.records.len(), 20);
    assert_eq!(from_spill.records, from_memory.records);
    assert_eq!(sorted_stacks(&from_spill), sorted_stacks(&from_memory));
    assert_eq!(from_spill.records.to_vec()[0].time_ns, 5_000_000_001);
}

#[test]
fn a_chunk_the_spill_file_cannot_take_is_an_error() {
    // A file opened read-only takes no chunk: the cut says so (as a full disk would).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spill");
    std::fs::write(&path, b"").unwrap();
    let read_only = File::open(&path).unwrap();
    let mut w = a_window_spilling(60_000, 1 << 30, 0, Some(read_only));
    let r = rec(RecordKind::Switch, 1, 20, 0, Some(1));
    w.record(&raw(&r)).unwrap();
    window(&mut w).note_record(&r);
    w.flush_events().unwrap();
    assert!(window(&mut w).cut().is_err());
}

/// A SYS_ENTER (`enter`) or SYS_EXIT record of futex (syscall 1) by `tid`: its first
/// argument `value`, and the low bits of its second and third in `a` and `b`.
fn futex(enter: bool, time_ns: u64, tid: u32, value: u64) -> (SchedRecord, Vec<u8>) {
    let kind = if enter {
        RecordKind::SysEnter
    } else {
        RecordKind::SysExit
    };
    let r = SchedRecord {
        a: 0x80,
        b: 2,
        c: 1,
        kstack: None,
        value,
        ..rec(kind, time_ns, tid, 0, None)
    };
    let mut b = raw(&r);
    b[22] = if enter { 8 } else { 9 };
    b[24..32].copy_from_slice(&value.to_le_bytes());
    (r, b)
}

#[test]
fn a_thread_blocked_since_before_the_window_has_its_blocking_switch_at_its_start() {
    let mut w = a_window(1_500, u64::MAX, 0);
    window(&mut w).note_thread(50, 50, "hung");
    window(&mut w).note_thread(60, 60, "woken");
    // Thread 50 blocks (state index 1, sleeping) with kernel stack 7 and user stack 8,
    // and never runs again; thread 60 blocks and is switched in again.
    let blocks = |t: u64, tid: u32| SchedRecord {
        c: 1,
        ustack: Some(8),
        ..rec(RecordKind::Switch, t, tid, 0, Some(7))
    };
    // Thread 70 exits: its last switch (state index 6, EXIT_ZOMBIE) comes after its EXIT,
    // and is no wait.
    let last = SchedRecord {
        c: 6,
        ..rec(RecordKind::Switch, 90_000_000, 70, 0, Some(7))
    };
    let records = [
        blocks(50_000_000, 50),
        blocks(60_000_000, 60),
        rec(RecordKind::Switch, 70_000_000, 20, 60, None),
        rec(RecordKind::Exit, 80_000_000, 70, 70, None),
        last,
    ];
    // Thread 50 waits in a futex call it entered before it blocked; thread 80 blocks
    // after a futex call that returned.
    window(&mut w).note_thread(80, 80, "idle");
    let calls = [
        futex(true, 40_000_000, 50, 0x7f00_1234),
        futex(true, 10_000_000, 80, 0x7f00_9999),
        futex(false, 20_000_000, 80, 0),
    ];
    for (r, bytes) in &calls {
        w.record(bytes).unwrap();
        window(&mut w).note_record(r);
    }
    for r in records.iter().chain([&blocks(30_000_000, 80)]) {
        w.record(&raw(r)).unwrap();
        window(&mut w).note_record(r);
    }
    for second in 0..4 {
        add_second(&mut w, second, second as u32);
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hung.data");
    let in_map: Vec<MapStack> = (0..9).map(stack).collect();
    let read = |win: &mut Window, in_map: Vec<MapStack>| -> SchedLog {
        win.write(&file, in_map, SchedEnd::default(), None, None)
            .unwrap();
        parse_sched(&std::fs::read(&file).unwrap()).unwrap()
    };
    let log = read(window(&mut w), in_map.clone());
    // The window holds seconds 2 and 3. It begins at its start with thread 80's blocking
    // switch (the older), alone, then thread 50's futex entry and blocking switch, with
    // their states, stacks and arguments; nothing of threads 60 and 70.
    let head: Vec<_> = log.records.to_vec()[..3]
        .iter()
        .map(|r| (r.kind, r.tid, r.a, r.c, r.kstack, r.ustack, r.value))
        .collect();
    assert_eq!(
        head,
        [
            (RecordKind::Switch, 80, 0, 1, Some(7), Some(8), 0),
            (RecordKind::SysEnter, 50, 0x80, 1, None, None, 0x7f00_1234),
            (RecordKind::Switch, 50, 0, 1, Some(7), Some(8), 0),
        ],
        "{:?}",
        &log.records.to_vec()[..4]
    );
    assert_eq!(log.records.to_vec()[3].time_ns, 2_000_000_001);
    assert!(
        log.records.to_vec()[..3]
            .iter()
            .all(|r| r.time_ns == 2_000_000_001),
        "at the window's start"
    );
    assert!(log.records.to_vec()[3..]
        .iter()
        .all(|r| ![50, 60, 70, 80].contains(&r.tid)));
    let ids: Vec<u32> = log.stacks.iter().map(|s| s.id).collect();
    assert!(ids.contains(&7) && ids.contains(&8), "its stacks: {ids:?}");
    assert!(log.threads.iter().any(|t| t.tid == 50), "its thread");
    // Once it runs, a snapshot has no such switch.
    let runs = rec(RecordKind::Switch, 4_000_000_001, 20, 50, None);
    w.record(&raw(&runs)).unwrap();
    window(&mut w).note_record(&runs);
    add_second(&mut w, 4, 4);
    let log = read(window(&mut w), in_map);
    assert_eq!(
        log.records.to_vec()[0].tid,
        80,
        "{:?}",
        log.records.to_vec()[0]
    );
    assert_eq!(
        log.records.to_vec()[1].tid,
        20,
        "{:?}",
        log.records.to_vec()[1]
    );
    assert_eq!(log.records.iter().filter(|r| r.tid == 50).count(), 0);
}
