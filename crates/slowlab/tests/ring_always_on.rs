//! `slowlab record --ring` left on (issue 40, "Always on", perf backend;
//! the first two and the idle ring with the bpf backend too):
//! `slowlab record --save` from another process writes a snapshot that
//! `slowlab analyze` reads, and says so in one line when no recorder runs;
//! a `cmd-slower:` trigger fires once per slow episode with the seconds
//! before and after it in its snapshot, which says how to ask for the slow
//! process's critical path (the eBPF recorder's makes it the default); a tiny ring left running for a
//! minute and a half under process churn, with saves and triggers, keeps
//! its memory, its files and its snapshots bounded; and a full disk stops
//! a snapshot with a clear line, not the recording; left with nothing to
//! record, a ring sleeps until it has something to do.
//!
//! Every test holds `one_recording_at_a_time()` and skips with its reason
//! where perf cannot record (the full-disk test also where no tmpfs can be
//! mounted).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use common::ring::{
    a_save_is_refused_on_a_full_disk, analyze, named_sleep, on_a_small_disk, perf_of, save_for,
    settled_level, Recorder,
};
use common::{one_recording_at_a_time, snapshots_of, status_kib, Workload};

#[test]
fn save_from_another_shell_writes_a_snapshot_analyze_reads() {
    require_perf!();
    save_from_another_shell(&["--backend", "perf"]);
}

#[test]
fn save_from_another_shell_writes_a_snapshot_of_the_bpf_recorder() {
    require_perf!();
    save_from_another_shell(&["--backend", "bpf"]);
}

/// `--save` answers with a snapshot of a `--ring 3` recording (with `backend`'s
/// options), which analyze reads, and says in one line when no recorder runs.
fn save_from_another_shell(backend: &[&str]) {
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("s.data");
    // Nothing runs for it yet: one line that says how to start one.
    let out = save_for(&trace);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no ring recorder"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    // Samples on a timer: the check below that the snapshot holds samples would depend on
    // what else runs, since an idle CPU stops the tick.
    let args = [
        &["--ring", "3", "--no-paths", "--samples-on", "timer"],
        backend,
    ]
    .concat();
    let rec = Recorder::start(&trace, &dir.path().join("s.err"), &args, &[]);
    std::thread::sleep(Duration::from_secs(2));
    let t0 = Instant::now();
    let out = rec.save();
    let saved = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        rec.err()
    );
    eprintln!("--save answered in {:?}: {saved}", t0.elapsed());
    let snaps = snapshots_of(&trace);
    assert_eq!(snaps, vec![PathBuf::from(&saved)], "{}", rec.err());
    let v = analyze(&snaps[0], &[]);
    assert!(v["samples"].as_u64().unwrap_or(0) > 0, "{v}");
    // About the last 3 s: the ring's seconds, and what the recording's chunks add.
    let span = v["duration_s"].as_f64().expect("a duration");
    assert!((1.5..=5.0).contains(&span), "{span} s in the snapshot");
    // A second save is a second snapshot.
    let out = rec.save();
    assert!(out.status.success(), "{}", rec.err());
    assert_eq!(snapshots_of(&trace).len(), 2);
    let (status, err) = rec.stop();
    assert_eq!(status, 130, "{err}");
    assert!(err.contains("for slowlab record --save"), "{err}");
    // Gone with the recorder: its state file, and its answer.
    let want = slowlab_record::absolute_output(&trace);
    assert!(!slowlab_record::recorders().iter().any(|r| r.output == want));
    let out = save_for(&trace);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no ring recorder"));
    assert!(trace.exists());
}

#[test]
fn a_stale_recorder_file_is_detected_and_removed() {
    require_perf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("stale.data");
    // A process that has exited: its pid is not running.
    let mut gone = Command::new("true").spawn().expect("true runs");
    let pid = gone.id();
    gone.wait().expect("reaped");
    let run = Path::new("/run/slowlab");
    if std::fs::create_dir_all(run).is_err() {
        slowlab_testkit::skip(format_args!("/run/slowlab cannot be created"));
        return;
    }
    let state = run.join(format!("record.{pid}.json"));
    let info = slowlab_record::RecorderInfo {
        pid,
        output: slowlab_record::absolute_output(&trace),
        socket: run.join(format!("record.{pid}.sock")),
        ring_seconds: 5,
    };
    std::fs::write(&state, serde_json::to_vec(&info).expect("json")).expect("state file");
    let out = save_for(&trace);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no ring recorder is running"), "{err}");
    assert!(!state.exists(), "the stale state file was removed");
}

#[test]
fn a_cmd_slower_trigger_fires_once_per_episode_with_the_seconds_around_it() {
    require_perf!();
    trigger_fires_once_per_episode(&["--backend", "perf"]);
}

#[test]
fn a_cmd_slower_trigger_fires_once_per_episode_with_the_bpf_recorder() {
    require_perf!();
    trigger_fires_once_per_episode(&["--backend", "bpf"]);
}

/// A `cmd-slower:` trigger of a ring recording (with `backend`'s options) fires once per
/// slow episode, each snapshot holding the slow process and the seconds after it; one
/// still due when the recording stops is said not to be saved.
fn trigger_fires_once_per_episode(backend: &[&str]) {
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().expect("temp dir");
    let name = format!("slowtrig{}", std::process::id() % 100_000);
    let exe = named_sleep(dir.path(), &name);
    let trace = dir.path().join("t.data");
    let trigger = format!("cmd-slower:{name}>2s");
    // The snapshot must reach ~6.5 s back (3 s of the slow process, 3 s
    // after it). perf's buffers are sized for 0.75 to 1.5 times the seconds
    // at the average CPU's rate, and the CPU that forks the process may be
    // twice as busy (CI once lost the fork with `--ring 10`): 20 s leaves
    // the busiest CPU at least 7.5 s.
    let args = [
        &[
            "--ring",
            "20",
            "--no-paths",
            "--trigger",
            &trigger,
            "--after",
            "3",
        ],
        backend,
    ]
    .concat();
    let rec = Recorder::start(&trace, &dir.path().join("t.err"), &args, &[]);
    let fired = format!("trigger {trigger} fired");
    // A process of another name that runs longer in the snapshot than the slow one: the
    // trace's longest-running process, not what the snapshot is about.
    let _bystander = Workload::start("exec sleep 60", None);
    // Quick ones: nothing.
    for _ in 0..2 {
        let st = Command::new(&exe).arg("0.5").status().expect("runs");
        assert!(st.success());
    }
    // One slow one: one snapshot, 3 s after it crossed 2 s.
    let started = Instant::now();
    let mut slow = Command::new(&exe).arg("3").spawn().expect("runs");
    let slow_pid = slow.id();
    assert!(slow.wait().expect("waits").success());
    let ended = Instant::now();
    rec.wait_for("slowlab: snapshot ", 1, Duration::from_secs(30));
    let snapped = Instant::now();
    // Two slow ones at once: one episode, one more snapshot.
    let a = Command::new(&exe).arg("2.5").spawn().expect("runs");
    let b = Command::new(&exe).arg("3").spawn().expect("runs");
    for mut c in [a, b] {
        assert!(c.wait().expect("waits").success());
    }
    rec.wait_for("slowlab: snapshot ", 2, Duration::from_secs(30));
    // A third episode, the recording stopped before its snapshot is due: said, not saved.
    let mut c = Command::new(&exe).arg("2.5").spawn().expect("runs");
    rec.wait_for(&fired, 3, Duration::from_secs(30));
    let (status, err) = rec.stop();
    assert!(c.wait().expect("waits").success());
    assert_eq!(status, 130, "{err}");
    assert_eq!(err.matches(&fired).count(), 3, "{err}");
    assert_eq!(err.matches(&format!("for trigger {trigger}")).count(), 2);
    assert!(
        err.contains(&format!("the snapshot of trigger {trigger} was not saved")),
        "{err}"
    );
    eprintln!(
        "slow process ran {:.1} s; its snapshot was written {:.1} s after it ended",
        ended.duration_since(started).as_secs_f64(),
        snapped.duration_since(ended).as_secs_f64()
    );
    let snaps = snapshots_of(&trace);
    assert_eq!(snaps.len(), 2, "{err}");
    // The first holds the slow process (start and end) and the seconds
    // after it ended.
    let v = analyze(&snaps[0], &["--procs"]);
    let procs = v["processes"].as_array().expect("processes");
    let slow: Vec<&serde_json::Value> = procs
        .iter()
        .filter(|p| p["comm"] == name.as_str())
        .filter(|p| p["duration_s"].as_f64().is_some_and(|d| d > 2.5))
        .collect();
    assert_eq!(slow.len(), 1, "the slow process: {v}");
    let span = analyze(&snaps[0], &[])["duration_s"]
        .as_f64()
        .expect("a duration");
    let p = slow[0];
    eprintln!("snapshot 1: {span:.2} s; slow process: {p}");
    let start = p["start_s"].as_f64().expect("a start");
    let end = p["end_s"].as_f64().expect("an end");
    assert!(start > 0.0, "the snapshot starts before the process: {p}");
    assert!(
        span - end >= 1.5,
        "at least 1.5 s after the process ended: {span:.2} s in all, it ended at {end:.2}"
    );
    // Its line says how to ask why the slow process was slow, and that works.
    let ask = format!(
        "slowlab analyze {} --critical-path --root {slow_pid}",
        snaps[0].display()
    );
    assert!(err.contains(&ask), "no `{ask}` in: {err}");
    let root = |extra: &[&str]| {
        analyze(&snaps[0], &[&["--critical-path"], extra].concat())["root"].clone()
    };
    let asked = root(&["--root", &slow_pid.to_string()]);
    assert_eq!(asked["comm"], name.as_str(), "{asked}");
    // What it was doing when the trigger fired, said then and kept beside the snapshot
    // (a wait that began before the window is named there only).
    let now = format!("slowlab:   now {name} [{slow_pid}] sleeps on a timer (clock_nanosleep)");
    assert!(err.contains(&now), "no `{now}` in: {err}");
    let waits_file = slowlab_record::side_file(&snaps[0], "waits.txt");
    let waits = std::fs::read_to_string(&waits_file).unwrap_or_default();
    assert!(
        waits.contains(&format!("{name} [{slow_pid}]: sleeping"))
            && waits.contains("clock_nanosleep"),
        "{}: {waits}",
        waits_file.display()
    );
    assert!(err.contains(&waits_file.display().to_string()), "{err}");
    // The eBPF recorder's snapshot names it as its command, so that its critical path is
    // the default one (perf's snapshot cannot: it is perf's file).
    if backend.contains(&"bpf") {
        let default = root(&[]);
        assert_eq!(default["pid"], slow_pid, "the default root: {default}");
    }
}

/// One look at a running recorder.
struct Sample {
    secs: f64,
    /// slowlab's resident memory, and its anonymous part (KiB).
    rss: u64,
    anon: u64,
    /// perf's pid and anonymous memory (KiB): its own, not the ring buffers.
    perf: i32,
    perf_anon: u64,
    bytes: u64,
    files: usize,
}

#[test]
fn a_tiny_ring_left_running_keeps_memory_files_and_snapshots_bounded() {
    require_perf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().expect("temp dir");
    let name = format!("slowtiny{}", std::process::id() % 100_000);
    let exe = named_sleep(dir.path(), &name);
    // Process churn: a new process every few milliseconds, each looking for its
    // libraries in 8 directories that do not exist, paths for the path capture.
    let churn = Workload::start(
        "export LD_LIBRARY_PATH=/nonexistent/1:/nonexistent/2:/nonexistent/3:/nonexistent/4:\
         /nonexistent/5:/nonexistent/6:/nonexistent/7:/nonexistent/8; while :; do /bin/true; done",
        None,
    );
    let trace = dir.path().join("tiny.data");
    let trigger = format!("cmd-slower:{name}>1s");
    // perf keeps a little memory with every snapshot: replaced after 1 MiB
    // here (64 MiB by default), so the bound is seen within the test.
    const GROWTH: u64 = 1 << 20;
    // The paths the capture holds in memory, bounded by their bytes (32 MiB by default)
    // or their age: a quarter MiB here, which the churn's paths (megabytes a second)
    // fill many times over in the window. Held by their age, their memory would follow
    // the churn's pace, which the host moves by megabytes (CI once measured 27 to 34 MB
    // this way).
    const PATH_BYTES: u64 = 256 << 10;
    let rec = Recorder::start(
        &trace,
        &dir.path().join("tiny.err"),
        &[
            "--backend",
            "perf",
            "--ring",
            "2",
            "--trigger",
            &trigger,
            "--after",
            "0.5",
            "--keep-snapshots",
            "3",
        ],
        &[
            ("SLOWLAB_PERF_GROWTH_LIMIT_BYTES", &GROWTH.to_string()),
            ("SLOWLAB_PATH_RING_MAX_BYTES", &PATH_BYTES.to_string()),
        ],
    );
    const RUN: Duration = Duration::from_secs(90);
    let started = Instant::now();
    let mut samples: Vec<Sample> = Vec::new();
    let mut slow: Option<Child> = None;
    // A save every 10 s from 5 s on, a slow process every 15 s.
    let (mut next_save, mut next_slow) = (5, 15);
    while started.elapsed() < RUN {
        std::thread::sleep(Duration::from_secs(1));
        let secs = started.elapsed().as_secs();
        if secs >= next_save {
            let out = rec.save();
            assert!(out.status.success(), "{}", rec.err());
            next_save += 10;
        }
        if secs >= next_slow && slow.is_none() {
            slow = Some(Command::new(&exe).arg("1.5").spawn().expect("runs"));
            next_slow += 15;
        }
        if let Some(c) = slow.as_mut() {
            if c.try_wait().expect("wait").is_some() {
                slow = None;
            }
        }
        let (mut bytes, mut files) = (0, 0);
        for e in std::fs::read_dir(dir.path()).expect("list").flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with("tiny.data") && n != "tiny.err" {
                bytes += e.metadata().map(|m| m.len()).unwrap_or(0);
                files += 1;
            }
        }
        let perf = perf_of(rec.pid()).unwrap_or(0);
        samples.push(Sample {
            secs: started.elapsed().as_secs_f64(),
            rss: status_kib(rec.pid(), "VmRSS:"),
            anon: status_kib(rec.pid(), "RssAnon:"),
            perf,
            perf_anon: if perf > 0 {
                status_kib(perf, "RssAnon:")
            } else {
                0
            },
            bytes,
            files,
        });
    }
    drop(churn);
    if let Some(mut c) = slow {
        let _ = c.wait();
    }
    let (status, err) = rec.stop();
    assert_eq!(status, 130, "{err}");
    for s in samples.iter().step_by(10) {
        eprintln!(
            "{:5.1} s: slowlab {} KiB ({} KiB anonymous), perf {} KiB anonymous, {} files, {:.1} MB",
            s.secs,
            s.rss,
            s.anon,
            s.perf_anon,
            s.files,
            s.bytes as f64 / 1e6
        );
    }
    // Each half's settled level (the median: snapshots make peaks of several
    // MiB and the allocator's trims make dips, which a sample may or may not
    // catch): a leak raises it. And the highest peak.
    let half = samples.len() / 2;
    let level = |f: fn(&Sample) -> u64, r: &[Sample]| settled_level(r.iter().map(f));
    let max = |f: fn(&Sample) -> u64, r: &[Sample]| r.iter().map(f).max().unwrap_or(0);
    let (anon_1, anon_2) = (
        level(|s| s.anon, &samples[..half]),
        level(|s| s.anon, &samples[half..]),
    );
    let (rss_1, rss_2) = (
        level(|s| s.rss, &samples[..half]),
        level(|s| s.rss, &samples[half..]),
    );
    let rss_most = max(|s| s.rss, &samples);
    // The least of a perf in its stride: a perf's first and last samples may catch it
    // starting up or tearing down (a save replaces it), with less memory than it runs on.
    let perf_least = samples
        .iter()
        .enumerate()
        .filter(|&(i, s)| {
            let same = |j: Option<usize>| j.and_then(|j| samples.get(j)).map(|o| o.perf);
            s.perf > 0
                && same(i.checked_sub(1)) == Some(s.perf)
                && same(Some(i + 1)) == Some(s.perf)
        })
        .map(|(_, s)| s.perf_anon)
        .min()
        .unwrap_or(0);
    let perf_most = max(|s| s.perf_anon, &samples);
    let most_bytes = max(|s| s.bytes, &samples);
    let most_files = samples.iter().map(|s| s.files).max().unwrap_or(0);
    let restarts = err.matches("starting a new perf").count();
    eprintln!(
        "slowlab RSS level {rss_1} → {rss_2} KiB (anonymous {anon_1} → {anon_2}), at most {rss_most} KiB; perf anonymous {perf_least}–{perf_most} KiB ({restarts} perf restarts); at most {most_files} files and {:.1} MB",
        most_bytes as f64 / 1e6
    );
    // slowlab: the second half's level no higher than the first's, but
    // for noise, and no peak near what a leak would reach.
    assert!(
        anon_2 <= anon_1 + 2048,
        "slowlab grew: {anon_1} → {anon_2} KiB anonymous"
    );
    assert!(rss_2 <= rss_1 + 2048, "slowlab grew: {rss_1} → {rss_2} KiB");
    assert!(rss_most < 200 << 10, "slowlab reached {rss_most} KiB");
    // perf: replaced before it grows by more than GROWTH, plus what one
    // snapshot adds and its first snapshot's one-time growth (together
    // under 1 MiB). Not replaced, it grows by ~130 KiB a snapshot, over
    // 2 MiB in this test.
    assert!(
        perf_most <= perf_least + GROWTH / 1024 + 1024,
        "perf grew: {perf_least} → {perf_most} KiB"
    );
    // Three snapshots with their side files (the paths, the cgroups, a trigger's
    // waits), one more while the oldest is removed, the partial file and a dump under
    // way.
    assert!(most_files <= 4 * 4 + 2, "{most_files} files");
    let snaps = snapshots_of(&trace);
    assert_eq!(snaps.len(), 3, "--keep-snapshots 3: {err}");
    let fired = err.matches(&format!("trigger {trigger} fired")).count();
    assert!(fired >= 4, "a trigger per slow process: {fired}\n{err}");
    assert!(err.contains("removed the oldest snapshot"), "{err}");
    for s in &snaps {
        let v = analyze(s, &[]);
        assert!(
            v["samples"].as_u64().unwrap_or(0) > 0,
            "{}: {v}",
            s.display()
        );
        // The paths held to their bound (header and end record besides), and near
        // it: the churn filled it, so their memory was pinned, not the churn's pace.
        let paths = std::fs::metadata(slowlab_record::side_file(s, "paths"))
            .map(|m| m.len())
            .unwrap_or(0);
        assert!(
            (PATH_BYTES * 3 / 4..=PATH_BYTES + 64).contains(&paths),
            "{}: {paths} bytes of paths, bound {PATH_BYTES}",
            s.display()
        );
    }
}

#[test]
fn a_full_disk_stops_a_snapshot_not_the_recording() {
    require_perf!();
    let _one = one_recording_at_a_time();
    let errs = tempfile::tempdir().expect("temp dir");
    // A snapshot is said to need 64 KiB, less than a dump of a full ring
    // (at least 64 KiB per CPU and the headers), so that the second save
    // gets past the check and the disk fills while perf writes it.
    let need: u64 = 64 << 10;
    let Some((fs, rec, trace)) = on_a_small_disk(
        96,
        need,
        &["--backend", "perf", "--ring", "2", "--no-paths"],
        errs.path(),
    ) else {
        return;
    };
    let perf = perf_of(rec.pid()).expect("perf runs");
    // The ring fills.
    std::thread::sleep(Duration::from_secs(4));
    // 1. Less free than a snapshot needs: perf is not asked, the ring kept.
    let fill = a_save_is_refused_on_a_full_disk(&fs, &rec, need);
    assert_eq!(perf_of(rec.pid()), Some(perf), "the same perf records on");
    assert!(snapshots_of(&trace).is_empty());
    // 2. Room by the check, not for the dump: perf fails, its partial
    // files go, a new perf records.
    std::fs::remove_file(&fill).expect("unfill");
    let fill = fs.fill(need);
    let out = rec.save();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}\n{}", rec.err());
    assert!(err.contains("the disk filled while perf wrote"), "{err}");
    assert!(rec.err().contains("recording goes on with a new ring"));
    let names: Vec<String> = std::fs::read_dir(fs.path())
        .expect("list")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names.iter().any(|n| n.starts_with("f.data.partial.")) && snapshots_of(&trace).is_empty(),
        "nothing half-written looks like a snapshot: {names:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let new_perf = loop {
        if let Some(p) = perf_of(rec.pid()).filter(|&p| p != perf) {
            break p;
        }
        assert!(Instant::now() < deadline, "no new perf: {}", rec.err());
        std::thread::sleep(Duration::from_millis(100));
    };
    // 3. Space again: a readable snapshot, and a readable trace at the end.
    std::fs::remove_file(&fill).expect("unfill");
    std::thread::sleep(Duration::from_secs(3));
    let out = rec.save();
    assert!(out.status.success(), "{}", rec.err());
    let snap = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let v = analyze(&snap, &[]);
    assert!(v["samples"].as_u64().unwrap_or(0) > 0, "{v}");
    assert_eq!(perf_of(rec.pid()), Some(new_perf));
    let (status, err) = rec.stop();
    assert_eq!(status, 130, "{err}");
    let v = analyze(&trace, &[]);
    assert!(v["samples"].as_u64().unwrap_or(0) > 0, "{v}");
}

#[test]
fn an_idle_ring_sleeps_until_it_has_something_to_do() {
    require_perf!();
    // Its loop woke 20 times a second when it slept a fixed 50 ms, and the cgroup notes
    // 5 times; now ~7: the loop twice, the notes five times (perf's own threads, another
    // process, are not counted).
    idle_ring_sleeps(&["--backend", "perf"], 14.0);
}

#[test]
fn an_idle_ring_sleeps_until_it_has_something_to_do_with_the_bpf_recorder() {
    require_perf!();
    // Its loops woke 45 times a second when each slept a fixed 50 ms (the control loop,
    // the drain) or 200 ms (the cgroup notes); now ~11: the control loop twice, the drain
    // four times and the notes five.
    idle_ring_sleeps(&["--backend", "bpf"], 25.0);
}

/// A `--ring 5` recording (with `backend`'s options) on a quiet machine wakes its own
/// threads fewer than `most` times a second, and still answers a save.
fn idle_ring_sleeps(backend: &[&str], most: f64) {
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("idle.data");
    let args = [&["--ring", "5", "--no-paths"], backend].concat();
    let rec = Recorder::start(&trace, &dir.path().join("idle.err"), &args, &[]);
    // Past the cgroup notes' first 2 s, when every process is new to them.
    std::thread::sleep(Duration::from_secs(3));
    let (before, start) = (wakeups(rec.pid()), Instant::now());
    std::thread::sleep(Duration::from_secs(4));
    let per_second = (wakeups(rec.pid()) - before) as f64 / start.elapsed().as_secs_f64();
    eprintln!("an idle ring recorder ({backend:?}): {per_second:.1} wake-ups a second");
    assert!(
        per_second < most,
        "{per_second:.1} wake-ups a second with nothing to record"
    );
    // Asleep, it still answers a save, which wakes the loop (and perf, or the drain).
    let out = rec.save();
    assert!(out.status.success(), "{}", rec.err());
    let (status, err) = rec.stop();
    assert_eq!(status, 130, "{err}");
}

/// The times each thread of `pid` was put on a CPU (each a wake-up), summed: the third
/// field of each thread's `schedstat`.
fn wakeups(pid: i32) -> u64 {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the recorder's threads");
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().nth(2)?.parse::<u64>().ok())
        .sum()
}
