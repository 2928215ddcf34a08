//! `slowlab record` stopped by signals, as a script stops it: started by a
//! non-interactive shell with `&` (so with SIGINT ignored) and signalled by
//! pid. SIGINT, SIGTERM and SIGHUP each leave a readable trace and no perf;
//! SIGKILL of slowlab leaves no perf (nor the command it ran) once perf
//! has closed its events (seconds at most; an orphan would run on); the eBPF
//! recorder exits with 128 + the signal, or its command's code (128 + the
//! signal that killed it); a perf that will not stop is killed on the second signal, or
//! after the grace period, with a message saying what was kept, and so is the eBPF
//! recorder's command that will not stop; and
//! half a minute of `--ring 3` under a busy file workload keeps every file it
//! writes bounded while its snapshots hold 2–5 s.
//!
//! Every test holds `one_recording_at_a_time()`, also those with a fake
//! perf (a script that ignores the signals), which record nothing: their
//! slowlab and their polling of /proc would land in a real system-wide
//! recording beside them. Each skips with its reason where perf cannot
//! record.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{one_recording_at_a_time, slowlab, snapshots_of, status_kib, Workload};

/// slowlab started as `sh -c 'slowlab ARGS & …'` would start it.
struct Background {
    shell: Child,
    pid: i32,
    stderr: PathBuf,
}

/// Starts `slowlab ARGS` from a non-interactive `sh` with `&` (POSIX: the
/// background command starts with SIGINT and SIGQUIT ignored), its stderr
/// into `stderr`, with the variables of `env` set (PATH among them, for a fake perf).
fn background(args: &[&str], stderr: &Path, env: &[(&str, &str)]) -> Background {
    let script = r#""$0" "$@" 2>"$SLOWLAB_ERR" & echo $!; wait $!; echo "status $?""#;
    // These are perf's signals and perf's group: `record` records with perf unless the
    // test asks for a backend.
    let args: Vec<&str> = match args.split_first() {
        Some((&"record", rest)) if !rest.contains(&"--backend") => {
            [&["record", "--backend", "perf"][..], rest].concat()
        }
        _ => args.to_vec(),
    };
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_slowlab"))
        .args(&args)
        .env("SLOWLAB_ERR", stderr)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        // The shell's own "Killed" notes.
        .stderr(Stdio::null())
        .envs(env.iter().copied());
    let mut shell = cmd.spawn().expect("sh starts");
    let mut out = BufReader::new(shell.stdout.take().expect("piped"));
    let mut line = String::new();
    out.read_line(&mut line).expect("the shell prints the pid");
    let pid = line.trim().parse().expect("a pid");
    shell.stdout = Some(out.into_inner());
    Background {
        shell,
        pid,
        stderr: stderr.to_owned(),
    }
}

impl Drop for Background {
    /// A test that failed half-way stops its slowlab (SIGINT, then SIGKILL 20 s later), so
    /// that no recording outlives it; `finish` has already waited for it otherwise.
    fn drop(&mut self) {
        common::interrupt_then_kill(self.pid, &mut self.shell);
    }
}

impl Background {
    fn signal(&self, sig: i32) {
        // SAFETY: signalling the slowlab this test started.
        unsafe { libc::kill(self.pid, sig) };
    }

    /// slowlab's exit status (as `wait` reports it) and stderr; kills it
    /// and fails after `limit`.
    fn finish(mut self, limit: Duration) -> (i32, String) {
        let deadline = Instant::now() + limit;
        while self.shell.try_wait().expect("wait").is_none() {
            if Instant::now() > deadline {
                self.signal(libc::SIGKILL);
                let _ = self.shell.wait();
                panic!(
                    "slowlab did not exit within {limit:?}; stderr: {}",
                    std::fs::read_to_string(&self.stderr).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut rest = String::new();
        if let Some(mut out) = self.shell.stdout.take() {
            out.read_to_string(&mut rest).expect("read");
        }
        let status = rest
            .trim()
            .strip_prefix("status ")
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status in {rest:?}"));
        (
            status,
            std::fs::read_to_string(&self.stderr).unwrap_or_default(),
        )
    }
}

/// State, parent and flags of a process, `None` once it is gone.
fn proc_stat(pid: i32) -> Option<(char, i32, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let f: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    Some((
        f.first()?.chars().next()?,
        f.get(1)?.parse().ok()?,
        f.get(6)?.parse().ok()?,
    ))
}

/// Dead: gone, a zombie, or exiting (killed, the kernel tearing down its
/// events); it runs no more code of its own.
fn is_dead(pid: i32) -> bool {
    const PF_EXITING: u64 = 0x4;
    match proc_stat(pid) {
        None => true,
        Some((state, _, flags)) => matches!(state, 'Z' | 'X') || flags & PF_EXITING != 0,
    }
}

/// How long until every one of `pids` is dead, looking every 10 ms; `None` if one still
/// runs after `limit`.
fn all_dead_within(pids: &[i32], limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if pids.iter().all(|&p| is_dead(p)) {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

fn cmdline(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

fn children(pid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&p| proc_stat(p).is_some_and(|(s, ppid, _)| ppid == pid && s != 'Z'))
        .collect()
}

/// Waits for a child of `pid` whose command line contains `what`.
fn wait_for_child(pid: i32, what: &str, limit: Duration) -> i32 {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(c) = children(pid)
            .into_iter()
            .find(|&c| cmdline(c).contains(what))
        {
            return c;
        }
        assert!(
            Instant::now() < deadline,
            "no `{what}` under pid {pid} after {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until `file` (slowlab's stderr) holds `needle`, looking every
/// 100 ms: cheaper than scanning /proc, whose every open is an event of the
/// recording (and would inflate the event rate a ring is sized from).
fn wait_for_text(file: &Path, needle: &str, limit: Duration) {
    let deadline = Instant::now() + limit;
    while !std::fs::read_to_string(file).is_ok_and(|t| t.contains(needle)) {
        assert!(
            Instant::now() < deadline,
            "no `{needle}` in {} after {limit:?}",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The background-shell precondition the tests rely on.
fn background_commands_ignore_sigint() -> bool {
    let out = Command::new("sh")
        .arg("-c")
        .arg("sleep 5 & grep SigIgn /proc/$!/status; kill $!")
        .output()
        .expect("sh runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let mask = text
        .split_whitespace()
        .nth(1)
        .and_then(|m| u64::from_str_radix(m, 16).ok())
        .unwrap_or(0);
    mask & (1 << (libc::SIGINT - 1)) != 0
}

#[test]
fn int_term_and_hup_stop_a_background_recording_with_a_readable_trace() {
    require_perf!();
    assert!(
        background_commands_ignore_sigint(),
        "sh should start `cmd &` with SIGINT ignored"
    );
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().expect("temp dir");
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        let t0 = Instant::now();
        let trace = dir.path().join(format!("sig{sig}.data"));
        let err = dir.path().join(format!("sig{sig}.err"));
        let bg = background(
            &["record", "--freq", "499", "-o", trace.to_str().unwrap()],
            &err,
            &[],
        );
        let perf = wait_for_child(bg.pid, "perf record", Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(1500));
        bg.signal(sig);
        let (status, stderr) = bg.finish(Duration::from_secs(60));
        assert_eq!(status, 128 + sig, "signal {sig}: {stderr}");
        assert!(stderr.contains("wrote"), "signal {sig}: {stderr}");
        assert!(is_dead(perf), "perf {perf} outlived slowlab");
        assert!(!Path::new(&format!("{}.partial", trace.display())).exists());
        let out = slowlab()
            .args(["analyze", "--json", "--no-symbols"])
            .arg(&trace)
            .output()
            .expect("analyze runs");
        let v = common::json(&out);
        assert!(
            v["samples"].as_u64().unwrap_or(0) > 100,
            "signal {sig}: {v}"
        );
        assert!(
            v["warnings"].as_array().is_some_and(|w| w.is_empty()),
            "a finished trace: {v}"
        );
        let paths = dir.path().join(format!("sig{sig}.data.paths"));
        if paths.exists() {
            let log = slowlab_bpf::read_paths(&paths).expect("paths readable");
            assert!(log.end.is_some(), "the path capture was stopped cleanly");
        }
        eprintln!("signal {sig}: stopped and written in {:?}", t0.elapsed());
    }
}

#[test]
fn sigkill_of_slowlab_leaves_no_perf_and_no_command_running() {
    require_perf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("k.data");
    let bg = background(
        &[
            "record",
            "-o",
            trace.to_str().unwrap(),
            "--",
            "sleep",
            "120",
        ],
        &dir.path().join("k.err"),
        &[],
    );
    let perf = wait_for_child(bg.pid, "perf record", Duration::from_secs(30));
    let sleep = wait_for_child(perf, "sleep 120", Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(1000));
    bg.signal(libc::SIGKILL);
    // perf's exit closes its events one by one, each waiting for the tracing's grace
    // period: seconds on a busy machine. An orphan would run on for 120 s.
    let took = all_dead_within(&[perf, sleep], Duration::from_secs(10));
    let (perf_dead, sleep_dead) = (is_dead(perf), is_dead(sleep));
    if !sleep_dead {
        // SAFETY: the test's own stray, killed so that none is left.
        unsafe { libc::kill(sleep, libc::SIGKILL) };
    }
    let (status, _) = bg.finish(Duration::from_secs(30));
    assert!(
        perf_dead,
        "perf {perf} still ran 10 s after slowlab was killed"
    );
    assert!(
        sleep_dead,
        "the command still ran 10 s after slowlab was killed"
    );
    assert_eq!(status, 128 + libc::SIGKILL);
    assert!(
        !trace.exists(),
        "an unfinished trace must not look finished"
    );
    eprintln!("slowlab killed; perf and the command dead after {took:?}");
}

#[test]
fn sigkill_of_slowlab_leaves_no_command_running_with_the_bpf_recorder() {
    require_bpf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("k.slr");
    // A shell and its child: the command's whole group must go, not only its leader.
    let bg = background(
        &[
            "record",
            "--backend",
            "bpf",
            "-o",
            trace.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "sleep 120; true",
        ],
        &dir.path().join("k.err"),
        &[],
    );
    let sh = wait_for_child(bg.pid, "sleep 120; true", Duration::from_secs(30));
    let sleep = wait_for_child(sh, "sleep", Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(500));
    bg.signal(libc::SIGKILL);
    // The guard in the command's group kills it as slowlab's files close; an orphan
    // would run on for 120 s.
    let took = all_dead_within(&[sh, sleep], Duration::from_secs(10));
    let (sh_dead, sleep_dead) = (is_dead(sh), is_dead(sleep));
    for (pid, dead) in [(sh, sh_dead), (sleep, sleep_dead)] {
        if !dead {
            // SAFETY: the test's own strays, killed so that none is left.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
    let (status, _) = bg.finish(Duration::from_secs(30));
    assert_eq!(status, 128 + libc::SIGKILL);
    assert!(
        sh_dead,
        "the command still ran 10 s after slowlab was killed"
    );
    assert!(
        sleep_dead,
        "the command's child still ran 10 s after slowlab was killed"
    );
    assert!(
        !trace.exists(),
        "an unfinished trace must not look finished"
    );
    eprintln!("slowlab killed; the command and its child dead after {took:?}");
}

/// A `perf` that ignores SIGINT and SIGTERM, in a directory to put first
/// on PATH.
#[test]
fn the_bpf_recorder_exits_as_a_shell_would() {
    require_bpf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().expect("temp dir");
    // Stopped by a signal, without a command and with one: 128 + the signal.
    for (sig, command) in [
        (libc::SIGTERM, &[][..]),
        (libc::SIGINT, &["--", "sleep", "120"]),
    ] {
        let trace = dir.path().join(format!("s{sig}.data"));
        let err = dir.path().join(format!("s{sig}.err"));
        let args = [
            &["record", "--backend", "bpf", "-o", trace.to_str().unwrap()][..],
            command,
        ]
        .concat();
        let bg = background(&args, &err, &[]);
        if command.is_empty() {
            wait_for_text(&err, "press Ctrl-C to stop", Duration::from_secs(30));
        } else {
            wait_for_child(bg.pid, "sleep 120", Duration::from_secs(30));
        }
        bg.signal(sig);
        let (status, stderr) = bg.finish(Duration::from_secs(60));
        assert_eq!(status, 128 + sig, "signal {sig}: {stderr}");
        assert!(stderr.contains("wrote"), "signal {sig}: {stderr}");
    }
    // The command's own end: its exit code, or 128 + the signal that killed it, said.
    for (script, code, says) in [
        ("exit 3", 3, None),
        ("kill -SEGV $$", 139, Some("sh was killed by SIGSEGV")),
    ] {
        let out = slowlab()
            .args(["record", "--backend", "bpf", "-o"])
            .arg(dir.path().join("c.data"))
            .args(["--", "sh", "-c", script])
            .output()
            .expect("slowlab runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{script}: {stderr}");
        assert_eq!(
            says.is_some_and(|s| stderr.contains(s)),
            says.is_some(),
            "{stderr}"
        );
    }
}

/// The eBPF recorder's command that ignores the first stop signal: the second kills it and
/// ends slowlab at once, without the trace (as the perf backend kills perf's group), in a
/// recording into a file and in ring mode. Before, slowlab waited on for the command
/// (file) or took no notice (ring).
#[test]
fn a_second_signal_ends_a_bpf_recording_whose_command_does_not_stop() {
    require_bpf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().expect("temp dir");
    for mode in [&[][..], &["--ring", "5"][..]] {
        let name = if mode.is_empty() { "file" } else { "ring" };
        let trace = dir.path().join(format!("{name}.data"));
        let err = dir.path().join(format!("{name}.err"));
        // `; :` keeps sh from exec'ing sleep: the sleep is the group's second process.
        let args = [
            &["record", "--backend", "bpf", "-o", trace.to_str().unwrap()][..],
            mode,
            &["--", "sh", "-c", "trap '' INT TERM; sleep 300; :"],
        ]
        .concat();
        let bg = background(&args, &err, &[]);
        let bg_pid = bg.pid;
        let sh = wait_for_child(bg.pid, "trap", Duration::from_secs(30));
        let sleep = wait_for_child(sh, "sleep 300", Duration::from_secs(10));
        bg.signal(libc::SIGINT);
        wait_for_text(
            &err,
            "SIGINT: passed on to sh; the recording ends when it exits",
            Duration::from_secs(10),
        );
        std::thread::sleep(Duration::from_millis(500));
        assert!(
            !is_dead(sleep) && !is_dead(bg.pid),
            "{name}: the command ignores SIGINT, and slowlab waits for it"
        );
        let second = Instant::now();
        bg.signal(libc::SIGINT);
        let (status, stderr) = bg.finish(Duration::from_secs(20));
        assert!(
            second.elapsed() < Duration::from_secs(5),
            "{name}: {:?}",
            second.elapsed()
        );
        assert_eq!(status, 130, "{name}: {stderr}");
        assert!(
            stderr.contains("SIGINT again: sh had not stopped and was killed"),
            "{name}: {stderr}"
        );
        assert!(
            all_dead_within(&[sh, sleep], Duration::from_secs(5)).is_some(),
            "{name}: the command's group is killed"
        );
        assert!(!trace.exists(), "{name}: no trace");
        assert!(
            !dir.path().join(format!("{name}.data.partial")).exists(),
            "{name}: the unfinished file is removed"
        );
        // A ring's control socket and state file (`slowlab record --save`'s way in).
        let mut run_dirs = vec![
            PathBuf::from("/run/slowlab"),
            std::env::temp_dir().join("slowlab-0"),
        ];
        run_dirs
            .extend(std::env::var_os("XDG_RUNTIME_DIR").map(|x| PathBuf::from(x).join("slowlab")));
        for d in run_dirs {
            for file in ["sock", "json"].map(|ext| d.join(format!("record.{}.{ext}", bg_pid))) {
                assert!(!file.exists(), "{name}: {} left behind", file.display());
            }
        }
    }
}

fn stubborn_perf(dir: &Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    let perf = bin.join("perf");
    std::fs::write(
        &perf,
        // As perf does, it copies the vDSO into /tmp (and says where, for the test).
        "#!/bin/sh\n# stands for a perf that does not stop\ntrap '' INT TERM\n: > \"$3\"\n\
         mktemp /tmp/perf-vdso.so-XXXXXX > \"$3.vdso\"\nexec sleep 300\n",
    )
    .expect("write the fake perf");
    std::fs::set_permissions(&perf, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn a_second_signal_kills_a_perf_that_does_not_stop_and_says_what_was_kept() {
    require_perf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().expect("temp dir");
    let path = stubborn_perf(dir.path());
    let trace = dir.path().join("s.data");
    let bg = background(
        &["record", "--no-paths", "-o", trace.to_str().unwrap()],
        &dir.path().join("s.err"),
        &[("PATH", &path)],
    );
    let perf = wait_for_child(bg.pid, "sleep 300", Duration::from_secs(30));
    bg.signal(libc::SIGINT);
    std::thread::sleep(Duration::from_millis(700));
    assert!(!is_dead(perf), "the fake perf ignores SIGINT");
    let second = Instant::now();
    bg.signal(libc::SIGINT);
    let (status, stderr) = bg.finish(Duration::from_secs(10));
    assert!(
        second.elapsed() < Duration::from_secs(3),
        "{:?}",
        second.elapsed()
    );
    assert_eq!(status, 130, "{stderr}");
    assert!(stderr.contains("SIGINT came again"), "{stderr}");
    assert!(stderr.contains("nothing was kept"), "{stderr}");
    assert!(is_dead(perf));
    assert!(!trace.exists());
    assert!(
        !dir.path().join("s.data.partial").exists(),
        "the unfinished file is removed"
    );
    assert_vdso_copy_removed(&dir.path().join("s.data.partial.vdso"));
}

#[test]
fn a_perf_that_does_not_finish_is_killed_after_the_grace_period() {
    require_perf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().expect("temp dir");
    let path = stubborn_perf(dir.path());
    let trace = dir.path().join("g.data");
    let bg = background(
        &["record", "--no-paths", "-o", trace.to_str().unwrap()],
        &dir.path().join("g.err"),
        &[("PATH", &path), ("SLOWLAB_STOP_GRACE_SECS", "3")],
    );
    let perf = wait_for_child(bg.pid, "sleep 300", Duration::from_secs(30));
    let stop = Instant::now();
    bg.signal(libc::SIGTERM);
    let (status, stderr) = bg.finish(Duration::from_secs(60));
    let took = stop.elapsed();
    // The grace is 3 s here (30 s by default); perf's CPU is looked at once a second.
    assert!(
        (Duration::from_secs(3)..Duration::from_secs(10)).contains(&took),
        "killed after {took:?}"
    );
    assert_eq!(status, 128 + libc::SIGTERM, "{stderr}");
    assert!(
        stderr.contains("still not done 3 s after the stop"),
        "{stderr}"
    );
    assert!(is_dead(perf));
    assert!(!trace.exists());
    assert_vdso_copy_removed(&dir.path().join("g.data.partial.vdso"));
}

/// The fake perf's copy of the vDSO, whose name it wrote into `said`, is gone.
fn assert_vdso_copy_removed(said: &Path) {
    let copy = std::fs::read_to_string(said).expect("the fake perf says its copy");
    assert!(
        !Path::new(copy.trim()).exists(),
        "perf killed, its copy of the vDSO is removed: {copy}"
    );
}

/// Per CPU, the first and last event time of a trace (`perf script`).
fn cpu_spans(trace: &Path) -> Vec<(f64, f64)> {
    let out = Command::new("perf")
        .args(["script", "-F", "cpu,time", "-i"])
        .arg(trace)
        .output()
        .expect("perf script runs");
    assert!(
        out.status.success() && !out.stdout.is_empty(),
        "perf script -i {}: {}",
        trace.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut spans: std::collections::BTreeMap<String, (f64, f64)> = Default::default();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let mut w = line.split_whitespace();
        let (Some(cpu), Some(t)) = (w.next(), w.next()) else {
            continue;
        };
        let Ok(t) = t.trim_end_matches(':').parse::<f64>() else {
            continue;
        };
        let e = spans.entry(cpu.to_string()).or_insert((t, t));
        e.0 = e.0.min(t);
        e.1 = e.1.max(t);
    }
    spans.into_values().collect()
}

/// Seconds over which every CPU of a trace has events.
fn complete_seconds(trace: &Path) -> f64 {
    let spans = cpu_spans(trace);
    let from = spans.iter().map(|s| s.0).fold(f64::MIN, f64::max);
    let to = spans.iter().map(|s| s.1).fold(f64::MIN, f64::max);
    to - from
}

/// The documented bound of a `.paths` side file in ring mode
/// (`slowlab_bpf::DEFAULT_RING_MAX_BYTES` plus header and end record).
const PATHS_BOUND: u64 = slowlab_bpf::DEFAULT_RING_MAX_BYTES + 64;

#[test]
fn half_a_minute_of_ring_mode_under_busy_file_work_keeps_every_file_bounded() {
    require_perf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().expect("temp dir");
    // Two shells creating and removing 200 files in a loop, as fast as
    // they can; in tmpfs when there is one: on ext4, hundreds of thousands
    // of recently deleted inodes slow every file creation on that file
    // system for minutes after (`recently_deleted`), other tests' too.
    let shm = Path::new("/dev/shm");
    let churn = if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .expect("workload dir");
    let mut work = Vec::new();
    for i in 0..2 {
        let wdir = churn.path().join(format!("work{i}"));
        std::fs::create_dir_all(&wdir).expect("mkdir");
        work.push(Workload::start(
            "while :; do i=0; while [ $i -lt 200 ]; do : > f$i; i=$((i+1)); done; rm -f f*; done",
            Some(&wdir),
        ));
    }
    std::thread::sleep(Duration::from_secs(1));
    let trace = dir.path().join("r.data");
    let err = dir.path().join("r.err");
    let bg = background(
        &["record", "--ring", "3", "-o", trace.to_str().unwrap()],
        &err,
        &[],
    );
    wait_for_text(&err, "ring buffers of", Duration::from_secs(60));
    let perf = wait_for_child(bg.pid, "--overwrite", Duration::from_secs(60));
    let started = Instant::now();
    let (mut biggest_partial, mut rss_max, mut total_max) = (0u64, 0u64, 0u64);
    let mut sent = 0;
    // Half a minute: nine windows of ~3.4 s, each snapshot a window's worth.
    while started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_secs(1));
        let secs = started.elapsed().as_secs();
        if (secs >= 10 && sent == 0) || (secs >= 20 && sent == 1) {
            bg.signal(libc::SIGUSR2);
            sent += 1;
        }
        let mut total = 0;
        let (mut partial, mut snapshots_done) = (0, 0);
        for entry in std::fs::read_dir(dir.path()).expect("list").flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
            total += size;
            if name == "r.data.partial" {
                partial = size;
            }
            if name.starts_with("r.data.20") && !name.ends_with(".paths") {
                snapshots_done += 1;
            }
            assert!(
                name != "r.data.paths" && name != "r.data",
                "nothing is written under the final names before the stop"
            );
            if name.ends_with(".paths") {
                assert!(size <= PATHS_BOUND, "{name}: {size} bytes");
            }
        }
        // While a snapshot is being dumped (on a busy machine that takes
        // seconds) the partial file holds it until perf renames it; between
        // dumps it must stay empty.
        if snapshots_done == sent {
            biggest_partial = biggest_partial.max(partial);
        }
        total_max = total_max.max(total);
        rss_max = rss_max.max(status_kib(bg.pid, "VmRSS:"));
    }
    bg.signal(libc::SIGINT);
    let (status, stderr) = bg.finish(Duration::from_secs(120));
    drop(work);
    eprintln!("{stderr}");
    assert_eq!(status, 130, "{stderr}");
    assert!(is_dead(perf));
    // perf writes nothing between dumps; slowlab keeps only the window.
    assert!(
        biggest_partial < 1 << 20,
        "the partial file grew to {biggest_partial}"
    );
    assert!(
        rss_max < 200 << 10,
        "slowlab's memory grew to {rss_max} KiB"
    );
    let mut snapshots = snapshots_of(&trace);
    assert_eq!(snapshots.len(), 2, "one file per SIGUSR2: {stderr}");
    snapshots.push(trace.clone());
    for snap in &snapshots {
        let size = std::fs::metadata(snap).map(|m| m.len()).unwrap_or(0);
        let paths = PathBuf::from(format!("{}.paths", snap.display()));
        let paths_size = std::fs::metadata(&paths).map(|m| m.len()).unwrap_or(0);
        eprintln!(
            "{}: {:.1} MB; paths {:.1} MB",
            snap.display(),
            size as f64 / 1e6,
            paths_size as f64 / 1e6
        );
        if paths.exists() {
            let log = slowlab_bpf::read_paths(&paths).expect("readable paths");
            let end = log.end.expect("a finished side file");
            let window = (end.stop_ns - log.start_monotonic_ns) as f64 / 1e9;
            assert!(window <= 4.6, "{}: paths of {window:.2} s", paths.display());
            assert!(paths_size <= PATHS_BOUND);
        }
    }
    eprintln!(
        "ring for half a minute: directory at most {:.1} MB (two snapshots and their side files \
         included), partial file at most {biggest_partial} bytes, slowlab at most {rss_max} KiB",
        total_max as f64 / 1e6
    );
}

/// Threads that each stat a missing name 60 times every 5 ms: a steady
/// rate of syscall events (most of the trace's, ~50,000 a second) that
/// does not depend on how much CPU is free. Thread `i` is pinned to CPU
/// `i` (modulo the CPUs): a snapshot holds the span of its busiest CPU,
/// and two threads left to share one CPU halve that CPU's span.
fn steady_stats(
    stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Vec<std::thread::JoinHandle<()>> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    (0..2)
        .map(|i| {
            let stop = std::sync::Arc::clone(stop);
            std::thread::spawn(move || {
                // SAFETY: a zeroed cpu_set_t with one CPU set, for this thread.
                unsafe {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(i % cpus, &mut set);
                    libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
                }
                let name =
                    std::ffi::CString::new("/nonexistent/slowlab-ring-test").expect("no NUL");
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    for _ in 0..60 {
                        // SAFETY: a valid C string and a stat buffer the call writes.
                        unsafe {
                            let mut st: libc::stat = std::mem::zeroed();
                            libc::stat(name.as_ptr(), &mut st);
                        }
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            })
        })
        .collect()
}

#[test]
fn ring_3_snapshots_hold_2_to_5_seconds() {
    require_perf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().expect("temp dir");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let threads = steady_stats(&stop);
    std::thread::sleep(Duration::from_secs(1));
    let trace = dir.path().join("r3.data");
    let err = dir.path().join("r3.err");
    let bg = background(
        &["record", "--ring", "3", "-o", trace.to_str().unwrap()],
        &err,
        &[],
    );
    wait_for_text(&err, "ring buffers of", Duration::from_secs(60));
    // Each snapshot empties perf's buffers: wait more than they hold.
    for _ in 0..2 {
        std::thread::sleep(Duration::from_secs(6));
        bg.signal(libc::SIGUSR2);
    }
    std::thread::sleep(Duration::from_secs(6));
    bg.signal(libc::SIGINT);
    let (status, stderr) = bg.finish(Duration::from_secs(60));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    eprintln!("{stderr}");
    assert_eq!(status, 130, "{stderr}");
    let mut snapshots = snapshots_of(&trace);
    assert_eq!(snapshots.len(), 2, "one file per SIGUSR2: {stderr}");
    snapshots.push(trace);
    for snap in &snapshots {
        let held = complete_seconds(snap);
        eprintln!("{}: {held:.2} s on every CPU", snap.display());
        assert!(
            (2.0..=5.0).contains(&held),
            "{}: {held:.2} s",
            snap.display()
        );
    }
}

/// A test's background loop dies with the thread that started it even when its
/// drop never runs, as when the test binary is killed from outside: the loop
/// must not outlive it and load the next tests.
#[test]
fn a_tests_workload_dies_with_the_thread_that_started_it_without_its_drop() {
    // Its loop would land in another test's recording.
    let _one = one_recording_at_a_time();
    let (started, pid) = std::sync::mpsc::channel();
    let thread = std::thread::spawn(move || {
        let work = Workload::start("while :; do sleep 0.05; done", None);
        started.send(work.pid() as i32).unwrap();
        // As a killed process leaves it: never dropped.
        std::mem::forget(work);
        std::thread::sleep(Duration::from_millis(200));
    });
    let pid: i32 = pid.recv().unwrap();
    assert!(!is_dead(pid), "the loop runs while its thread does");
    thread.join().unwrap();
    let died = all_dead_within(&[pid], Duration::from_secs(5)).is_some();
    let state = proc_stat(pid);
    // SAFETY: the loop's own process group, killed when the assertion below is to fail.
    unsafe { libc::kill(-pid, libc::SIGKILL) };
    assert!(
        died,
        "the loop {pid} ran on after its thread ended: {state:?}"
    );
    // Reaped here: the forgotten child is this process's.
    // SAFETY: waiting for a child of this process, with no status asked.
    unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
}
