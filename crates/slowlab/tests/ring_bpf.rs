//! `slowlab record --backend bpf --ring` left on (issue 40): a tiny ring left running for
//! 45 s under process churn, with saves every few seconds, keeps its memory, its files
//! and its snapshots bounded, each snapshot at most about the ring's seconds up to the
//! moment it was asked for, and the mappings of its own processes only; a full
//! disk stops a snapshot with a clear line, leaves no partial file, and recording goes on;
//! a short ring saves on a disk far smaller than the most a window may hold; a process
//! blocked for longer than the ring keeps has its wait, with its stack and the lock it
//! waits on, in a snapshot.
//! (`ring_always_on.rs` runs `--save`, a trigger and an idle ring with this backend too.)
//!
//! Every test holds `one_recording_at_a_time()` and skips with its reason where perf (and
//! so the eBPF recorder) cannot record, or no tmpfs can be mounted.

mod common;

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::ring::{
    a_save_is_refused_on_a_full_disk, analyze, named_sleep, on_a_small_disk, settled_level,
    Recorder, Tmpfs,
};
use common::{json, one_recording_at_a_time, slowlab, snapshots_of, status_kib, Workload};

#[test]
fn a_process_blocked_longer_than_the_ring_keeps_has_its_wait_in_a_snapshot() {
    require_perf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("hung.data");
    // Records enough to cut the window's chunks often: it then keeps about its 2 s (on an
    // idle machine one chunk may hold more).
    let _churn = Workload::start("while :; do /bin/true; sleep 0.01; done", None);
    let rec = Recorder::start(
        &trace,
        &dir.path().join("hung.err"),
        &["--backend", "bpf", "--ring", "2", "--no-paths"],
        &[],
    );
    // It goes to sleep once, after the recording started, and not again: by the save the
    // window (2 s) has moved past its one switch.
    let name = format!("hung{}", std::process::id() % 100_000);
    let exe = named_sleep(dir.path(), &name);
    let hung = Workload::start(&format!("exec {} 60", exe.display()), None);
    // A process whose main thread waits on a lock its other thread keeps (and sleeps).
    let script = dir.path().join("locked.py");
    std::fs::write(
        &script,
        "import threading, time\n\
         lock = threading.Lock()\n\
         def keep():\n    with lock:\n        time.sleep(60)\n\
         threading.Thread(target=keep).start()\n\
         time.sleep(0.2)\n\
         lock.acquire()\n",
    )
    .expect("script");
    let locked = Workload::start(&format!("exec python3 {}", script.display()), None);
    std::thread::sleep(Duration::from_secs(5));
    let out = rec.save();
    assert!(out.status.success(), "{}", rec.err());
    let snapshot = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let (status, err) = rec.stop();
    assert_eq!(status, 130, "{err}");
    // Symbolized: the wait's kind comes from its kernel stack (do_nanosleep).
    let critical_path = |pid: u32| {
        let out = slowlab()
            .args(["analyze", "--json", "--critical-path", "--root"])
            .arg(pid.to_string())
            .arg(&snapshot)
            .output()
            .expect("analyze runs");
        json(&out)
    };
    // The lock's waiter: its futex call's entry came before the window too, and says
    // what it waits on.
    let v = critical_path(locked.pid());
    let resource = &v["segments"][0]["resource"];
    assert_eq!(resource["kind"], "futex", "{v}");
    assert!(resource["address"].is_string(), "the lock's address: {v}");
    let v = critical_path(hung.pid());
    assert_eq!(v["root"]["comm"], name.as_str(), "{v}");
    let wall = v["wall_s"].as_f64().expect("wall_s");
    let sleep = v["breakdown"]["blocked"]["sleep"].as_f64().expect("sleep");
    eprintln!("{name}: {wall:.2} s in the snapshot, {sleep:.2} s of it asleep");
    assert!(
        (1.5..4.0).contains(&wall),
        "the snapshot holds the window, not the process's 5 s since its one switch: {v}"
    );
    // Without its blocking switch, its time was "not known" (blocked, other).
    assert!(sleep >= 0.99 * wall, "its wait is a sleep: {v}");
    assert_eq!(v["unknown_s"].as_f64(), Some(0.0), "{v}");
}

#[test]
fn a_tiny_bpf_ring_left_running_keeps_memory_files_and_snapshots_bounded() {
    require_perf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().expect("temp dir");
    // Process churn: new processes (and new stacks, faults, paths) all the time.
    let churn = Workload::start(
        "while :; do /bin/true; ls / >/dev/null; sleep 0.005; done",
        None,
    );
    let trace = dir.path().join("tiny.data");
    // The window's records are capped at 8 MiB: under this churn that is less than the
    // ring's 2 s, so the cap, not the rate, bounds the memory.
    const CAP: u64 = 8 << 20;
    let rec = Recorder::start(
        &trace,
        &dir.path().join("tiny.err"),
        &["--backend", "bpf", "--ring", "2", "--keep-snapshots", "3"],
        &[("SLOWLAB_BPF_RING_MAX_BYTES", &CAP.to_string())],
    );
    const RUN: Duration = Duration::from_secs(45);
    let started = Instant::now();
    // (seconds, slowlab's anonymous memory in KiB, bytes and files beside the trace)
    let mut samples: Vec<(f64, u64, u64, usize)> = Vec::new();
    let mut next_save = 5;
    while started.elapsed() < RUN {
        std::thread::sleep(Duration::from_secs(1));
        if started.elapsed().as_secs() >= next_save {
            let asked_ns = slowlab_bpf::monotonic_ns();
            let out = rec.save();
            assert!(out.status.success(), "{}", rec.err());
            // The records reach the moment of the request (`--save`'s own start is among
            // them), though under this churn they lag behind the drain's reads.
            let snapshot = String::from_utf8_lossy(&out.stdout).trim().to_string();
            let log = slowlab_bpf::sched::read_sched(snapshot.as_ref()).expect("readable");
            let newest = log.records.iter().map(|r| r.time_ns).max().unwrap_or(0);
            assert!(
                newest >= asked_ns,
                "{snapshot}: its newest record is {:.3} s before the save was asked for",
                (asked_ns - newest) as f64 / 1e9
            );
            next_save += 5;
        }
        let (mut bytes, mut files) = (0, 0);
        for e in std::fs::read_dir(dir.path()).expect("list").flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with("tiny.data") {
                bytes += e.metadata().map(|m| m.len()).unwrap_or(0);
                files += 1;
            }
        }
        let anon = status_kib(rec.pid(), "RssAnon:");
        samples.push((started.elapsed().as_secs_f64(), anon, bytes, files));
    }
    drop(churn);
    let (status, err) = rec.stop();
    assert_eq!(status, 130, "{err}");
    for s in samples.iter().step_by(10) {
        eprintln!(
            "{:5.1} s: slowlab {} KiB anonymous, {} files, {:.1} MB",
            s.0,
            s.1,
            s.3,
            s.2 as f64 / 1e6
        );
    }
    // The window is full, and the allocator has what it keeps, after ~10 s: from 15 s on,
    // the second half's settled level (median) of slowlab's memory is no higher than the
    // first's but for noise, and no sample is higher than the start's by much more than the cap.
    let settled = &samples[15..];
    let half = settled.len() / 2;
    let level = |r: &[(f64, u64, u64, usize)]| settled_level(r.iter().map(|s| s.1));
    let (first, second) = (level(&settled[..half]), level(&settled[half..]));
    let (start, most) = (samples[0].1, samples.iter().map(|s| s.1).max().unwrap_or(0));
    eprintln!("slowlab anonymous memory: {start} KiB at 1 s, level {first} → {second} KiB, at most {most} KiB");
    assert!(
        second <= first + 4096,
        "slowlab grew: {first} → {second} KiB"
    );
    assert!(
        most <= start + 4 * CAP / 1024,
        "slowlab reached {most} KiB from {start} KiB"
    );
    // Three snapshots (a cgroup note beside each at most), one more while the oldest goes,
    // and a partial file; each snapshot the cap's records and their stacks.
    let most_files = samples.iter().map(|s| s.3).max().unwrap_or(0);
    assert!(most_files <= 2 * 4 + 1, "{most_files} files");
    let most_bytes = samples.iter().map(|s| s.2).max().unwrap_or(0);
    assert!(most_bytes <= 5 * (CAP + (8 << 20)), "{most_bytes} bytes");
    let snaps = snapshots_of(&trace);
    assert_eq!(snaps.len(), 3, "--keep-snapshots 3: {err}");
    assert!(err.contains("removed the oldest snapshot"), "{err}");
    for s in snaps.iter().chain([&trace]) {
        // The processes whose mappings it holds are those its threads and records reach:
        // a process gone before the window is let go of, also when the kernel's report of
        // its last mappings came after its exit; and one the records have not reached yet
        // (they lagged behind the reports under this churn) is not in it either.
        let log = slowlab_bpf::sched::read_sched(s).expect("snapshot readable");
        assert!(
            log.cpu_times.is_some(),
            "{}: no STEAL section (the machine's CPU time over its window)",
            s.display()
        );
        let reached: HashSet<u32> = log
            .threads
            .iter()
            .map(|t| t.pid)
            .chain(log.records.iter().flat_map(|r| [r.tid, r.a]))
            .collect();
        let mapped: HashSet<u32> = log.maps.iter().map(|m| m.pid).collect();
        let unreached = mapped.difference(&reached).count();
        eprintln!(
            "{}: mappings of {} processes, {unreached} of them not in its records",
            s.display(),
            mapped.len()
        );
        assert!(
            unreached <= 10,
            "{}: mappings of {unreached} processes its threads and records do not reach",
            s.display()
        );
        let v = analyze(s, &[]);
        let span = v["duration_s"].as_f64().unwrap_or(0.0);
        assert!(
            v["samples"].as_u64().unwrap_or(0) > 0 && (0.1..=4.0).contains(&span),
            "{}: at most about the ring's 2 s, {span} s: {v}",
            s.display()
        );
    }
}

#[test]
fn a_full_disk_stops_a_snapshot_of_the_bpf_recorder_not_the_recording() {
    require_perf!();
    let _one = one_recording_at_a_time();
    let errs = tempfile::tempdir().expect("temp dir");
    // A snapshot is said to need 16 KiB, less than two seconds of this machine's records,
    // so that the second save gets past the check and the disk fills while it is written.
    let need: u64 = 16 << 10;
    // Samples on a timer: an idle CPU stops the tick, and the snapshots below must hold
    // samples whatever else runs.
    let args = ["--backend", "bpf", "--ring", "2", "--samples-on", "timer"];
    // 256 MiB: once room is made again, a snapshot and the trace at the stop both fit
    // even on a busy machine (two seconds of a busy machine's records can be tens of MB).
    let Some((fs, rec, trace)) = on_a_small_disk(256, need, &args, errs.path()) else {
        return;
    };
    std::thread::sleep(Duration::from_secs(3));
    // 1. Less free than a snapshot needs: nothing is written, the ring is kept.
    let fill = a_save_is_refused_on_a_full_disk(&fs, &rec, need);
    assert!(snapshots_of(&trace).is_empty());
    // 2. Room by the check, not for the snapshot: the write fails and leaves nothing.
    std::fs::remove_file(&fill).expect("unfill");
    let fill = fs.fill(need);
    let out = rec.save();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}\n{}", rec.err());
    assert!(err.contains("No space left"), "{err}");
    assert!(err.contains("recording goes on"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    let names: Vec<String> = std::fs::read_dir(fs.path())
        .expect("list")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["fill"], "nothing half-written is left");
    // 3. Space again: a readable snapshot, and a readable trace at the end.
    std::fs::remove_file(&fill).expect("unfill");
    std::thread::sleep(Duration::from_secs(1));
    let out = rec.save();
    assert!(out.status.success(), "{}", rec.err());
    let snap = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let v = analyze(&snap, &[]);
    assert!(v["samples"].as_u64().unwrap_or(0) > 0, "{v}");
    let (status, err) = rec.stop();
    assert_eq!(status, 130, "{err}");
    let v = analyze(&trace, &[]);
    assert!(v["samples"].as_u64().unwrap_or(0) > 0, "{v}");
}

#[test]
fn a_short_ring_saves_on_a_disk_smaller_than_the_most_a_window_holds() {
    require_perf!();
    let _one = one_recording_at_a_time();
    // 96 MiB: two seconds of this machine's records fit many times over, the 512 MiB a
    // window may hold at most do not (a snapshot was refused, asking for 544 MB free).
    let fs = match Tmpfs::mount(96) {
        Ok(fs) => fs,
        Err(why) => {
            slowlab_testkit::skip(format_args!("cannot mount a tmpfs: {why}"));
            return;
        }
    };
    let errs = tempfile::tempdir().expect("temp dir");
    let trace = fs.path().join("r.data");
    let args = ["--backend", "bpf", "--ring", "2", "--samples-on", "timer"];
    let rec = Recorder::start(&trace, &errs.path().join("r.err"), &args, &[]);
    std::thread::sleep(Duration::from_secs(3));
    let out = rec.save();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stderr),
        rec.err()
    );
    let snap = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert!(analyze(&snap, &[])["samples"].as_u64().unwrap_or(0) > 0);
    let (status, err) = rec.stop();
    assert_eq!(status, 130, "{err}");
}
