//! Helpers shared by the integration tests: the binary (with its symbol
//! cache in the build's scratch directory), whether we are
//! root, whether perf can record here (and why not), one recording at a
//! time, JSON from a successful run, and waiting for a `slowlab lab` child
//! with a deadline and picking its scenario's result line; the small C
//! programs of `tests/fixtures/why`, built once per test binary, and
//! `slowlab diagnose` on one of them (findings, critical path, whether it
//! adds up to the program's own wall time);
//! a ring recording's snapshots and a process's memory; a shell loop in the
//! background that dies with the test ([`Workload`]), and a recording a failed
//! test left running stopped as a user would ([`interrupt_then_kill`]); `ring`: a ring
//! recording in the background and a small tmpfs to fill;
//! `browser`: driving a page in headless Chromium.
#![allow(dead_code)]

pub mod browser;
pub mod ring;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A shell loop run in the background, in a process group of its own, killed with
/// its group when dropped: at the test's end, and also when an assertion fails
/// half-way (a loop that outlived its test kept the next tests' recordings busy).
/// The shell is also killed when the test's thread ends without the drop, as when
/// the test binary itself is killed: a churn loop once outlived its killed test
/// binary by 74 minutes and failed the next CI runs' timing tests.
pub struct Workload(Child);

impl Workload {
    /// Starts `sh -c script` in `dir` (the test process's working directory when `None`).
    pub fn start(script: &str, dir: Option<&Path>) -> Workload {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(script).process_group(0);
        let test_process = std::process::id() as libc::pid_t;
        // SAFETY: prctl and getppid are async-signal-safe; nothing is allocated.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The test died between the fork and the prctl: no signal will come.
                if libc::getppid() != test_process {
                    libc::_exit(1);
                }
                Ok(())
            })
        };
        if let Some(d) = dir {
            cmd.current_dir(d);
        }
        Workload(cmd.spawn().expect("the workload starts"))
    }

    /// The shell's pid (the program's, when the script `exec`s it).
    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        // SAFETY: the workload's own process group.
        unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

/// Stops a process a test left running (it failed half-way) as a user would: SIGINT to
/// `pid`, so that it removes what it made (a recording's socket and state file, its
/// perf), then SIGKILL if `waited` has not ended 20 s later. `waited` is the child whose
/// end says `pid` is gone: the same process, or the shell that runs it.
pub fn interrupt_then_kill(pid: i32, waited: &mut Child) {
    if waited.try_wait().ok().flatten().is_some() {
        return;
    }
    // SAFETY: signalling a process this test started.
    unsafe { libc::kill(pid, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(20);
    while waited.try_wait().ok().flatten().is_none() {
        if Instant::now() > deadline {
            // SAFETY: as above.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let _ = waited.wait();
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The binary, keeping its symbol cache in the build's scratch directory
/// (not the user's `~/.cache`): shared by the tests, so most of them read
/// symbols from it, as users' second runs do.
pub fn slowlab() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_slowlab"));
    cmd.env(
        "SLOWLAB_CACHE_DIR",
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("symbol-cache"),
    );
    cmd
}

/// The JSON a successful run printed on stdout.
pub fn json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

/// System-wide recordings would see each other's workloads: one at a time.
pub static PERF_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Takes [`PERF_LOCK`], surviving a test that panicked while holding it.
pub fn one_recording_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    PERF_LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Why perf-based tests cannot run here, if they cannot.
pub fn perf_unavailable() -> Option<String> {
    if Command::new("perf").arg("--version").output().is_err() {
        return Some("perf is not installed".into());
    }
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok())
        .unwrap_or(2);
    if !is_root() && paranoid > -1 {
        return Some(format!("not root and perf_event_paranoid = {paranoid}"));
    }
    if Command::new("cc").arg("--version").output().is_err() {
        return Some("no C compiler for the workload".into());
    }
    None
}

/// Skips the calling test (with the reason on stderr) when perf cannot
/// record here.
#[macro_export]
macro_rules! require_perf {
    () => {
        if let Some(why) = common::perf_unavailable() {
            slowlab_testkit::skip(format_args!("{why}"));
            return;
        }
    };
}

/// Skips the calling test unless it runs as root, saying why it needs root
/// (the arguments are `format_args!`'s).
#[macro_export]
macro_rules! require_root {
    ($($why:tt)+) => {
        if !common::is_root() {
            slowlab_testkit::skip(format_args!($($why)+));
            return;
        }
    };
}

/// Skips the calling test (with the reason on stderr) when the eBPF recorder
/// cannot run here: it needs root.
#[macro_export]
macro_rules! require_bpf {
    () => {
        require_root!("the eBPF recorder needs root")
    };
}

/// Waits for the child, killing it (and failing the test) after `limit`.
pub fn finish(mut child: Child, limit: Duration) -> Output {
    let deadline = Instant::now() + limit;
    while child.try_wait().expect("wait failed").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("wait failed");
            panic!(
                "slowlab did not finish in {limit:?}; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("wait failed")
}

/// The JSON line of scenario `id` in `slowlab lab --json -` output.
pub fn result_json(out: &Output, id: &str) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let quoted = format!("\"{id}\"");
    let line = stdout
        .lines()
        .find(|l| l.contains(&quoted))
        .unwrap_or_else(|| {
            panic!(
                "no {id} result in stdout: {stdout}\nstderr: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    serde_json::from_str(line).expect("the result is not JSON")
}

/// Compiles the C program `tests/fixtures/REL_SRC` into `dir/name` with
/// frame pointers and no inlining, so every function keeps its own frames
/// in sampled stacks.
pub fn compile_workload(rel_src: &str, dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let exe = dir.join(name);
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel_src);
    let st = Command::new("cc")
        .args(["-O1", "-fno-omit-frame-pointer", "-fno-inline", "-o"])
        .arg(&exe)
        .arg(src)
        .status()
        .expect("cc");
    assert!(st.success(), "cc {rel_src} failed");
    exe
}

/// The program `tests/fixtures/why/NAME.c`, compiled (once per test
/// binary) with frame pointers and debug information into the build's
/// scratch directory.
pub fn why_program(name: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    let out = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("why")
        .join(name);
    let mut built = BUILT
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if !built.iter().any(|b| b == name) {
        let src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/why")
            .join(format!("{name}.c"));
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        // Built to a name of its own, then renamed: test binaries running
        // at once never run a half-written program.
        let tmp = out.with_extension(format!("tmp{}", std::process::id()));
        let st = Command::new("cc")
            .args(["-O1", "-g", "-fno-omit-frame-pointer", "-pthread", "-o"])
            .arg(&tmp)
            .arg(&src)
            .status()
            .unwrap();
        assert!(st.success(), "cc {name}.c failed");
        std::fs::rename(&tmp, &out).unwrap();
        built.push(name.to_string());
    }
    out
}

/// What `slowlab diagnose` said about one command: its findings, its
/// critical path, and the command's own measured wall time.
pub struct Diagnosis {
    pub findings: Vec<serde_json::Value>,
    pub path: serde_json::Value,
    /// What the program measured itself (`wall_s=` on its stderr).
    pub wall_s: Option<f64>,
    /// What slowlab and the program printed on stderr.
    pub stderr: String,
}

/// Runs `slowlab diagnose --json -o DIR -- CMD…`: the findings (stdout, the
/// same as `DIR/findings.json`), the critical path
/// (`DIR/critical_path.json`), and `wall_s=` from stderr.
pub fn diagnose(dir: &Path, cmd: &[&str]) -> Diagnosis {
    diagnose_with(dir, &[], cmd)
}

/// [`diagnose`] with more options (before the command).
pub fn diagnose_with(dir: &Path, options: &[&str], cmd: &[&str]) -> Diagnosis {
    let out = slowlab()
        .args(["diagnose", "--json", "-o"])
        .arg(dir)
        .args(options)
        .arg("--")
        .args(cmd)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "diagnose failed: {stderr}");
    let findings: serde_json::Value = serde_json::from_slice(&out.stdout).expect("findings JSON");
    let on_disk: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("findings.json")).unwrap()).unwrap();
    assert_eq!(findings, on_disk, "stdout and findings.json agree");
    let path: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("critical_path.json")).unwrap()).unwrap();
    let wall_s = stderr
        .lines()
        .find_map(|l| l.strip_prefix("wall_s="))
        .and_then(|v| v.trim().parse().ok());
    Diagnosis {
        findings: findings.as_array().unwrap().clone(),
        path,
        wall_s,
        stderr,
    }
}

/// The ids of the findings, in their order.
pub fn ids(d: &Diagnosis) -> Vec<&str> {
    d.findings
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect()
}

/// The finding `id`, or a failure listing those there are.
pub fn finding<'a>(d: &'a Diagnosis, id: &str) -> &'a serde_json::Value {
    d.findings
        .iter()
        .find(|f| f["id"] == id)
        .unwrap_or_else(|| panic!("no {id} finding: {:?}\n{}", ids(d), d.stderr))
}

/// A share of the path's wall time: `f` picks seconds from its breakdown.
pub fn share(d: &Diagnosis, f: impl Fn(&serde_json::Value) -> f64) -> f64 {
    f(&d.path["breakdown"]) / d.path["wall_s"].as_f64().unwrap()
}

/// The breakdown sums to `wall_s`, segments are in time order and cover
/// it, and `wall_s` is the program's own wall time within 10%.
pub fn assert_adds_up(d: &Diagnosis) {
    let p = &d.path;
    let wall = p["wall_s"].as_f64().unwrap();
    let b = &p["breakdown"];
    let blocked: f64 = ["lock", "io", "sleep", "ipc", "fault", "other"]
        .iter()
        .map(|k| b["blocked"][k].as_f64().unwrap())
        .sum();
    let sum = b["cpu"].as_f64().unwrap() + b["runnable"].as_f64().unwrap() + blocked;
    assert!((sum - wall).abs() < 1e-6 * wall.max(1.0), "{sum} vs {wall}");
    let segs = p["segments"].as_array().unwrap();
    let covered: f64 = segs
        .iter()
        .map(|s| s["to_s"].as_f64().unwrap() - s["from_s"].as_f64().unwrap())
        .sum();
    assert!(
        (covered - wall).abs() < 1e-6 * wall.max(1.0),
        "{covered} vs {wall}"
    );
    for w in segs.windows(2) {
        assert!(w[0]["to_s"].as_f64() <= w[1]["from_s"].as_f64().map(|v| v + 1e-9));
    }
    if let Some(measured) = d.wall_s {
        assert!(
            // The path also holds the start and exit the program does not measure.
            (wall - measured).abs() <= 0.1 * measured + 0.05,
            "critical path {wall} s vs measured {measured} s"
        );
    }
}

/// The snapshots `OUTPUT.<digits>` beside `output`, oldest first.
pub fn snapshots_of(output: &Path) -> Vec<PathBuf> {
    let dir = output.parent().expect("a directory");
    let prefix = format!(
        "{}.",
        output.file_name().and_then(|n| n.to_str()).expect("a name")
    );
    let mut snaps: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("list")
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix(&prefix))
                .is_some_and(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit()))
        })
        .collect();
    snaps.sort();
    snaps
}

/// A `/proc/PID/status` field in KiB (`VmRSS`, `RssAnon`).
pub fn status_kib(pid: i32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            let l = s.lines().find(|l| l.starts_with(field))?;
            l.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}

/// A temporary directory on a disk file system (under /var/tmp), where
/// fsync waits for the device; `None`, with the reason printed, when
/// /var/tmp is tmpfs or ramfs (fsync costs nothing there).
pub fn disk_tempdir() -> Option<tempfile::TempDir> {
    let base = Path::new("/var/tmp");
    let fs = Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(base)
        .output()
        .unwrap();
    let fs = String::from_utf8_lossy(&fs.stdout).trim().to_string();
    if fs == "tmpfs" || fs == "ramfs" {
        slowlab_testkit::skip(format_args!(
            "{} is {fs}; fsync costs nothing there",
            base.display()
        ));
        return None;
    }
    Some(tempfile::tempdir_in(base).unwrap())
}

/// The tracepoints `pid`'s BPF links are on (the `tp_name` of each in its fdinfo), once
/// `attached` says they are all there; `None` if that does not happen within 30 s, or the
/// process ends first.
pub fn link_tracepoints(pid: u32, attached: impl Fn(&[String]) -> bool) -> Option<Vec<String>> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let names: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fdinfo"))
            .ok()?
            .flatten()
            .filter_map(|e| std::fs::read_to_string(e.path()).ok())
            .flat_map(|info| {
                info.lines()
                    .filter_map(|l| l.strip_prefix("tp_name:"))
                    .map(|n| n.trim().to_string())
                    .collect::<Vec<_>>()
            })
            .collect();
        if attached(&names) {
            return Some(names);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}
