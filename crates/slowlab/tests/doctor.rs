//! `slowlab doctor` on real conditions set up here and removed after, even
//! when an assertion fails (guards kill what they started and remove what
//! they made): a fanotify permission watcher on a tmpfs in a private mount
//! namespace with a shell opening a file under it, and a cgroup v1/v2
//! memory cgroup at its limit re-reading a file bigger than the limit.
//! Doctor must name the watcher (process and mount) as costing time, and
//! the cgroup with its process; a run after both are gone must report
//! neither. Root and perf are needed; without them each test skips.

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The prefix of everything these tests make, which the clean run must not
/// see.
const TAG: &str = "slowlab-doctor-test";

/// Kills a process group and reaps its leader when dropped.
struct Group(Child);

impl Drop for Group {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the group this test started.
        unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

/// A memory cgroup removed (its processes killed first) when dropped.
struct Cgroup(PathBuf);

impl Drop for Cgroup {
    fn drop(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let procs = std::fs::read_to_string(self.0.join("cgroup.procs")).unwrap_or_default();
            for pid in procs
                .split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok())
            {
                // SAFETY: kill(2) on a process in the cgroup this test made.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            if std::fs::remove_dir(&self.0).is_ok() || !self.0.exists() {
                return;
            }
            if Instant::now() > deadline {
                eprintln!("cannot remove {}", self.0.display());
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Skips (and returns None) unless root and perf are here.
fn ready() -> Option<std::sync::MutexGuard<'static, ()>> {
    if !common::is_root() {
        slowlab_testkit::skip("doctor's checks and recording need root");
        return None;
    }
    if let Some(why) = common::perf_unavailable() {
        slowlab_testkit::skip(why);
        return None;
    }
    Some(common::one_recording_at_a_time())
}

/// Runs `slowlab doctor --json --seconds 3`: the report and the run time.
fn doctor() -> (Value, Duration) {
    let started = Instant::now();
    let child = common::slowlab()
        .args(["doctor", "--json", "--seconds", "3"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start slowlab doctor");
    let out = common::finish(child, Duration::from_secs(120));
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("doctor took {took:?}; stderr:\n{stderr}");
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON report ({e}); stderr: {stderr}"));
    assert_eq!(
        out.status.code(),
        report["exit_code"].as_i64().map(|c| c as i32),
        "the exit status is the report's"
    );
    (report, took)
}

fn check<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no check {id}: {report:#}"))
}

fn findings<'a>(report: &'a Value, id: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(move |f| f["id"] == id)
}

#[test]
fn a_permission_watcher_costing_time_is_named_with_its_mount() {
    let Some(_lock) = ready() else { return };
    let dir = tempfile::Builder::new().prefix(TAG).tempdir().unwrap();
    let mount = dir.path().to_path_buf();
    // In a private mount namespace: a tmpfs on `mount`, the lab's
    // permission watcher on it (stdin: fd 3, the test's pipe; it stops when
    // that closes), then a loop opening a file under it.
    let script = r#"set -e
exec 3<&0
mount -t tmpfs slowlab-doctor-test "$0"
echo data > "$0/f"
"$1" __child notify-watcher --buffer 65536 --mount-point "$0" <&3 &
echo "watcher $!"
while :; do read -r x < "$0/f"; done"#;
    let child = Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            script,
        ])
        .arg(&mount)
        .arg(env!("CARGO_BIN_EXE_slowlab"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("start unshare");
    let mut group = Group(child);
    let mut lines = BufReader::new(group.0.stdout.take().unwrap()).lines();
    let (mut watcher, mut is_ready) = (None, false);
    while watcher.is_none() || !is_ready {
        let line = lines
            .next()
            .expect("the watcher said neither its pid nor ready")
            .unwrap();
        if let Some(pid) = line.strip_prefix("watcher ") {
            watcher = pid.trim().parse::<i64>().ok();
        }
        is_ready |= line == "ready";
    }
    let watcher = watcher.unwrap();

    let (report, took) = doctor();
    let ours: Vec<&Value> = findings(&report, "fanotify-permission-watcher")
        .filter(|f| f["culprit"]["pid"] == watcher)
        .collect();
    assert_eq!(
        ours.len(),
        1,
        "the watcher {watcher} is not named: {report:#}"
    );
    let f = ours[0];
    let target = mount.to_str().unwrap();
    assert_eq!(f["evidence"]["marks"][0]["target"], target, "{f:#}");
    assert_eq!(f["evidence"]["marks"][0]["events"][0], "open", "{f:#}");
    assert!(f["title"].as_str().unwrap().contains(target), "{f:#}");
    assert_eq!(f["evidence"]["costing"], true, "classified idle: {f:#}");
    assert!(f["evidence"]["waits"].as_u64().unwrap() >= 20, "{f:#}");
    assert!(f["cost_s"].as_f64().unwrap() > 0.0, "{f:#}");
    assert!(f["fix"]
        .as_str()
        .unwrap()
        .contains(&format!("pid {watcher}")));
    assert_eq!(check(&report, "fanotify-permission")["verdict"], "found");
    assert!(
        findings(&report, "notify-permission").all(|f| f["evidence"]["watcher_pid"] != watcher),
        "the recorded finding is folded into the watcher's: {report:#}"
    );
    assert_eq!(report["exit_code"], 1);
    eprintln!("fanotify watcher found in {took:?}");
}

/// Where memory cgroups can be made: the v1 hierarchy, or cgroup v2 with
/// the memory controller for its children.
fn memory_root() -> Option<(PathBuf, &'static str)> {
    let v1 = Path::new("/sys/fs/cgroup/memory");
    if v1.join("memory.limit_in_bytes").exists() {
        return Some((v1.to_path_buf(), "memory.limit_in_bytes"));
    }
    let v2 = Path::new("/sys/fs/cgroup");
    std::fs::read_to_string(v2.join("cgroup.subtree_control"))
        .ok()
        .filter(|c| c.split_whitespace().any(|c| c == "memory"))
        .map(|_| (v2.to_path_buf(), "memory.max"))
}

#[test]
fn a_memory_cgroup_at_its_limit_rereading_a_file_is_named_with_its_process() {
    let Some(_lock) = ready() else { return };
    let Some((cgroup_root, limit_file)) = memory_root() else {
        slowlab_testkit::skip("no memory cgroup hierarchy where one can be made");
        return;
    };
    // On disk, not tmpfs: re-reading evicted pages must read them again.
    let dir = tempfile::Builder::new()
        .prefix(TAG)
        .tempdir_in("/var/tmp")
        .unwrap();
    let file = dir.path().join("data");
    let chunk: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8 + 1).collect();
    let mut data = std::fs::File::create(&file).unwrap();
    for _ in 0..64 {
        std::io::Write::write_all(&mut data, &chunk).unwrap();
    }
    data.sync_all().unwrap();
    // Out of the page cache (where it is charged to this test's cgroup), so
    // that the reader's cgroup is charged for every page it reads.
    // SAFETY: posix_fadvise on a descriptor we own.
    let rc = unsafe {
        libc::posix_fadvise(
            std::os::fd::AsRawFd::as_raw_fd(&data),
            0,
            0,
            libc::POSIX_FADV_DONTNEED,
        )
    };
    assert_eq!(rc, 0, "posix_fadvise");
    drop(data);

    let name = format!("{TAG}-{}", std::process::id());
    let cg_dir = cgroup_root.join(&name);
    std::fs::create_dir(&cg_dir).unwrap();
    let cgroup = Cgroup(cg_dir.clone());
    std::fs::write(cg_dir.join(limit_file), (16u64 << 20).to_string()).unwrap();
    let script = r#"echo $$ > "$0/cgroup.procs" && exec sh -c 'while :; do cat "$0" > /dev/null; done' "$1""#;
    let child = Command::new("sh")
        .args(["-c", script])
        .arg(&cg_dir)
        .arg(&file)
        .process_group(0)
        .spawn()
        .expect("start the reader");
    let reader = child.id() as i64;
    let _group = Group(child);
    // Let it fill the cgroup.
    std::thread::sleep(Duration::from_millis(1500));

    let (report, took) = doctor();
    let cgroup_name = format!("/{name}");
    let ours: Vec<&Value> = findings(&report, "memcg-at-limit")
        .filter(|f| f["culprit"]["cgroup"] == cgroup_name.as_str())
        .collect();
    assert_eq!(
        ours.len(),
        1,
        "the cgroup {cgroup_name} is not named: {report:#}"
    );
    let f = ours[0];
    let procs = f["evidence"]["processes"].as_array().unwrap();
    assert!(
        procs.iter().any(|p| p["pid"] == reader),
        "the reader {reader} is not named: {f:#}"
    );
    assert!(f["title"].as_str().unwrap().contains(&cgroup_name), "{f:#}");
    assert!(
        f["evidence"]["usage_share"].as_f64().unwrap() >= 0.9,
        "{f:#}"
    );
    assert!(
        f["fix"].as_str().unwrap().contains(limit_file),
        "the fix says which limit to raise: {f:#}"
    );
    assert_eq!(check(&report, "memory-cgroups")["verdict"], "found");
    assert_eq!(report["exit_code"], 1);
    drop(cgroup);
    eprintln!("memory cgroup found in {took:?}");
}

#[test]
fn without_the_conditions_doctor_reports_neither() {
    let Some(_lock) = ready() else { return };
    let (report, took) = doctor();
    for id in ["fanotify-permission", "memory-cgroups", "recording"] {
        assert_ne!(check(&report, id)["verdict"], "skipped", "{report:#}");
    }
    // Other programs on this machine may show; nothing of these tests may
    // (their guards have removed it, and they hold the same lock).
    let text = report.to_string();
    assert!(
        !text.contains(TAG),
        "a test's condition is still here: {report:#}"
    );
    for f in findings(&report, "fanotify-permission-watcher") {
        eprintln!("note: a permission watcher of this machine: {}", f["title"]);
    }
    for f in findings(&report, "memcg-at-limit") {
        eprintln!("note: a memory cgroup of this machine: {}", f["title"]);
    }
    eprintln!("clean run took {took:?}");
}
