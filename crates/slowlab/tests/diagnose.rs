//! `slowlab diagnose` and `slowlab lab --trace` on real recordings: each
//! scenario's detector fires on a trace of its pathological variant and
//! stays silent on its control; the same pathologies made another way
//! (a shell script probing numbered names, a Python scan of a file mapping
//! and a `cat` of a big file in a small memory cgroup, network namespaces
//! churned with `ip netns`) are named too; ordinary work (a tar
//! extraction, a small cargo build) yields no finding that blames it (a
//! busy machine's `cpu-starvation` by other processes is true, and only
//! printed), and the cargo
//! build's critical path is the compiler on a CPU; and the HTML report
//! loads in headless Chromium without errors, showing a hostile process
//! name as text; with `--json`, stdout is the JSON alone, whatever the command
//! prints. Tests skip, with the reason, where perf or root is missing.

use std::path::Path;
use std::process::Command;

mod common;
use common::{is_root, one_recording_at_a_time, slowlab};

/// Runs `slowlab diagnose -o DIR --json -- CMD` ([`common::diagnose`]);
/// returns the findings.
fn diagnose(dir: &Path, cmd: &[&str]) -> Vec<serde_json::Value> {
    common::diagnose(dir, cmd).findings
}

/// [`diagnose`] with more options (before the command).
fn diagnose_with(dir: &Path, options: &[&str], cmd: &[&str]) -> Vec<serde_json::Value> {
    common::diagnose_with(dir, options, cmd).findings
}

/// The findings that blame the workload itself. A `cpu-starvation` finding
/// whose culprit (the process that ran instead) is outside the workload is
/// true on a busy machine — other work took the CPUs — so it is printed,
/// not counted; one that blames the workload's own processes counts.
fn blaming_the_workload(findings: &[serde_json::Value], workload: &[&str]) -> Vec<String> {
    findings
        .iter()
        .filter(|f| {
            let outside = f["id"] == "cpu-starvation"
                && !workload.contains(&f["culprit"]["comm"].as_str().unwrap_or(""));
            if outside {
                eprintln!("note: the machine is busy: {}", f["title"]);
            }
            !outside
        })
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect()
}

fn ids(findings: &[serde_json::Value]) -> Vec<String> {
    findings
        .iter()
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn lab_trace_detectors_fire_on_pathological_and_stay_silent_on_control() {
    lab_trace_checks("perf", b"PERFILE2");
}

#[test]
fn lab_trace_with_the_bpf_recorder_fires_and_stays_silent_as_with_perf() {
    lab_trace_checks("bpf", b"SLSCHED\x01");
}

/// `lab --tiny --trace` recorded by `backend`: every scenario that can run here is
/// checked, its traces are that backend's (they start with `magic`), and its
/// detector fires on the pathological trace and stays silent on the control's.
fn lab_trace_checks(backend: &str, magic: &[u8]) {
    require_perf!();
    require_root!("the scenarios and the eBPF recorder need root");
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let out = slowlab()
        .args([
            "lab",
            "--tiny",
            "--json",
            "-",
            "--backend",
            backend,
            "--trace",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let checks: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON check per line"))
        .collect();
    assert_eq!(checks.len(), 5, "{stderr}");
    let mut ran = 0;
    for c in &checks {
        let id = c["id"].as_str().unwrap();
        if c["status"] == "skipped" {
            slowlab_testkit::skip(format_args!("{id}: {}", c["reason"]));
            continue;
        }
        ran += 1;
        assert_eq!(
            c["fired"], true,
            "{id}: detector silent on the pathological trace: {c}"
        );
        assert_eq!(
            c["silent"], true,
            "{id}: detector fired on the control trace: {c}"
        );
        let run_dir = dir.path().join(format!("{id}-pathological"));
        for variant in ["pathological", "control"] {
            let trace = dir.path().join(format!("{id}-{variant}/trace.data"));
            let mut head = Vec::new();
            if let Ok(f) = std::fs::File::open(&trace) {
                let _ = std::io::Read::read_to_end(&mut std::io::Read::take(f, 8), &mut head);
            }
            assert!(
                head.starts_with(magic),
                "{id}-{variant}: not the {backend} backend's trace"
            );
            // perf's have the paths of their syscalls beside them (the eBPF recorder's
            // have them inside).
            let paths = dir.path().join(format!("{id}-{variant}/trace.data.paths"));
            assert_eq!(
                paths.exists(),
                backend == "perf",
                "{id}-{variant}: {}",
                paths.display()
            );
        }
        let findings: serde_json::Value =
            serde_json::from_slice(&std::fs::read(run_dir.join("findings.json")).unwrap()).unwrap();
        let f = findings
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["id"] == c["detector"])
            .expect("the finding is in findings.json");
        assert!(f["cost_s"].as_f64().unwrap() > 0.0, "{f}");
        assert!(!f["fix"].as_str().unwrap().is_empty());
        assert!(run_dir.join("report.html").exists());
    }
    assert!(ran >= 3, "only {ran} scenarios could be traced: {stderr}");
    assert!(out.status.success(), "{stderr}");
    // Nothing of the recording's own is left beside the runs.
    let runs: Vec<String> = checks
        .iter()
        .flat_map(|c| {
            let id = c["id"].as_str().unwrap_or_default();
            [format!("{id}-pathological"), format!("{id}-control")]
        })
        .collect();
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(runs.contains(&name), "{name} left in the lab's directory");
    }
}

#[test]
fn what_the_command_prints_goes_to_stderr_and_stdout_is_the_json_alone() {
    require_perf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    // What it prints is not in its command line, which the summary repeats.
    let said = "42 from the command";
    let cmd = ["sh", "-c", "echo $((6 * 7)) from the command"];
    // One run: `common::diagnose` checks that stdout is findings.json's JSON.
    let d = common::diagnose(&dir.path().join("one"), &cmd);
    assert!(d.stderr.contains(said), "{}", d.stderr);
    // Runs repeated: stdout is the summary's JSON, each run's line is on stderr.
    let out = slowlab()
        .args(["diagnose", "--json", "--repeat", "2", "-o"])
        .arg(dir.path().join("two"))
        .arg("--")
        .args(cmd)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not the summary's JSON alone ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert_eq!(
        summary["runs"].as_array().map(Vec::len),
        Some(2),
        "{summary}"
    );
    assert_eq!(stderr.matches(said).count(), 2, "{stderr}");
}

#[test]
fn a_shell_script_probing_numbered_names_is_found() {
    require_perf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    // 120 launches, each looking for the first free log.N and taking it.
    let script = format!(
        "for i in $(seq 120); do sh -c 'n=0; while [ -e {0}/log.$n ]; do n=$((n+1)); done; : > {0}/log.$n'; done",
        logs.display()
    );
    let findings = diagnose(&dir.path().join("d"), &["sh", "-c", &script]);
    let f = findings
        .iter()
        .find(|f| f["id"] == "linear-probe-names")
        .unwrap_or_else(|| panic!("not found: {:?}", ids(&findings)));
    assert_eq!(f["culprit"]["comm"], "sh");
    assert!(
        f["title"].as_str().unwrap().contains("log.N"),
        "the folded name pattern: {f}"
    );
    assert!(f["evidence"]["launches"].as_u64().unwrap() >= 100, "{f}");
}

/// Scans a file mapping one byte per page, 16 times: capped at 32 MiB, a
/// pass over 64 MiB takes 30–80 ms here, so the scan spends well over the
/// detector's minimum fault time (4 passes were too few to count on).
const SCAN: &str = r#"
import mmap, sys
with open(sys.argv[1], "rb") as f:
    m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    for _ in range(16):
        s = 0
        for i in range(0, len(m), 4096):
            s += m[i]
"#;

/// Runs `slowlab diagnose` on `program` (a shell command line `exec`ed with
/// `{data}` replaced by a 64 MiB file) inside a fresh cgroup v1 memory
/// cgroup limited to 32 MiB, the file's page cache dropped first so that its
/// pages are first touched inside the cgroup; checks that `memcg-thrash`
/// names the program, the cgroup and its limit. Skips without root or the
/// cgroup v1 memory controller. `options`: diagnose's, e.g. the backend.
fn thrash_in_a_small_cgroup(tag: &str, options: &[&str], program: &str, comm: &str) {
    let v1 = Path::new("/sys/fs/cgroup/memory");
    if !is_root() || !v1.join("memory.limit_in_bytes").exists() {
        slowlab_testkit::skip(format_args!(
            "needs root and the cgroup v1 memory controller"
        ));
        return;
    }
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data.bin");
    std::fs::write(&data, vec![1u8; 64 << 20]).unwrap();
    let cgroup = v1.join(format!("slowlab-test-{tag}-{}", std::process::id()));
    std::fs::create_dir(&cgroup).unwrap();
    // Removed even when the test fails; a cgroup whose last task is still
    // exiting refuses removal (EBUSY) for a moment, which once left one behind.
    struct Remove<'a>(&'a Path);
    impl Drop for Remove<'_> {
        fn drop(&mut self) {
            for _ in 0..100 {
                if std::fs::remove_dir(self.0).is_ok() || !self.0.exists() {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            eprintln!("could not remove {}", self.0.display());
        }
    }
    let _cleanup = Remove(&cgroup);
    std::fs::write(cgroup.join("memory.limit_in_bytes"), "33554432").unwrap();
    let _ = Command::new("sync").status();
    let _ = std::fs::write("/proc/sys/vm/drop_caches", "1");
    let cmd = format!(
        "echo $$ > {}/cgroup.procs && exec {}",
        cgroup.display(),
        program.replace("{data}", &data.to_string_lossy())
    );
    let findings = diagnose_with(&dir.path().join("d"), options, &["sh", "-c", &cmd]);
    let f = findings
        .iter()
        .find(|f| f["id"] == "memcg-thrash")
        .unwrap_or_else(|| panic!("not found: {:?}", ids(&findings)));
    assert!(
        f["culprit"]["comm"].as_str().unwrap().starts_with(comm),
        "{f}"
    );
    let name = cgroup.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        f["culprit"]["cgroup"].as_str().unwrap().ends_with(&name),
        "the cgroup is named: {f}"
    );
    assert_eq!(f["evidence"]["limit_bytes"], 33554432);
}

#[test]
fn a_python_scan_in_a_small_memory_cgroup_is_found() {
    require_perf!();
    if Command::new("python3").arg("-V").output().is_err() {
        slowlab_testkit::skip(format_args!("python3 is not installed"));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("scan.py");
    std::fs::write(&script, SCAN).unwrap();
    let program = format!("python3 {} {{data}}", script.display());
    thrash_in_a_small_cgroup("scan", &[], &program, "python");
}

#[test]
fn cat_of_a_big_file_in_a_small_memory_cgroup_is_found() {
    require_perf!();
    // Sixteen passes: without the limit all but the first come from the
    // page cache; with it, every pass reads the file from disk again (a pass
    // takes ~40 ms on this machine's fast virtual disk).
    let program = format!("cat{} > /dev/null", " {data}".repeat(16));
    thrash_in_a_small_cgroup("cat", &[], &program, "cat");
}

#[test]
fn cat_of_a_big_file_in_a_small_memory_cgroup_is_found_with_the_bpf_recorder() {
    require_perf!();
    // The cgroup notes are written beside the eBPF recorder's trace too.
    let program = format!("cat{} > /dev/null", " {data}".repeat(16));
    thrash_in_a_small_cgroup("cat-bpf", &["--backend", "bpf"], &program, "cat");
}

/// Deletes, on drop, every named network namespace whose name starts with
/// the prefix (what the churn script made, also when it failed half-way).
struct NamedNamespaces(String);

impl Drop for NamedNamespaces {
    fn drop(&mut self) {
        let Ok(dir) = std::fs::read_dir("/run/netns") else {
            return;
        };
        for entry in dir.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(&self.0) {
                let _ = Command::new("ip").args(["netns", "del", &name]).status();
            }
        }
    }
}

#[test]
fn namespaces_churned_with_ip_netns_are_found() {
    require_perf!();
    require_root!("`ip netns add` needs root");
    if Command::new("ip").arg("-V").output().is_err() {
        slowlab_testkit::skip(format_args!("ip (iproute2) is not installed"));
        return;
    }
    if Command::new("python3").arg("-V").output().is_err() {
        slowlab_testkit::skip(format_args!(
            "python3 is not installed (it holds the namespaces open)"
        ));
        return;
    }
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("slowlab-test-{}-", std::process::id());
    let _cleanup = NamedNamespaces(prefix.clone());
    // 1,000 namespaces made with `ip netns add` and deleted with one
    // `ip -batch` while a Python process holds them all open; when it is
    // killed they go at once, and the kernel tears the batch down holding
    // rtnl. Meanwhile two loops add new namespaces, one `ip` at a time: each
    // needs rtnl to register its loopback device.
    let (ready, batch) = (dir.path().join("ready"), dir.path().join("batch"));
    let hold = "import os, sys, time; fds = [os.open(p, os.O_RDONLY) for p in sys.argv[2:]]; \
                open(sys.argv[1], 'w').close(); time.sleep(600)";
    let script = format!(
        "set -e
         for i in $(seq 1000); do ip netns add {prefix}a$i; done
         python3 -c \"{hold}\" {ready} /run/netns/{prefix}a* &
         holder=$!
         while [ ! -e {ready} ]; do sleep 0.05; done
         for i in $(seq 1000); do echo \"netns del {prefix}a$i\"; done > {batch}
         ip -batch {batch}
         kill $holder
         for i in $(seq 150); do ip netns add {prefix}b$i; done &
         for i in $(seq 150); do ip netns add {prefix}c$i; done
         wait || true
         for i in $(seq 150); do ip netns del {prefix}b$i; ip netns del {prefix}c$i; done",
        ready = ready.display(),
        batch = batch.display()
    );
    let findings = diagnose(&dir.path().join("d"), &["sh", "-c", &script]);
    let f = findings
        .iter()
        .find(|f| f["id"] == "serialized-teardown")
        .unwrap_or_else(|| panic!("not found: {:?}", ids(&findings)));
    assert!(
        f["title"].as_str().unwrap().contains("(ip"),
        "the ip processes are the ones stalled: {f}"
    );
    assert!(
        f["evidence"]["worker_comm"]
            .as_str()
            .unwrap()
            .starts_with("kworker"),
        "{f}"
    );
    assert!(
        f["evidence"]["teardown_function"].as_str().unwrap() != "",
        "{f}"
    );
}

/// A new directory on /dev/shm when that is a tmpfs.
fn tmpfs_dir() -> Option<tempfile::TempDir> {
    let mounts = std::fs::read_to_string("/proc/mounts").ok()?;
    let tmpfs = mounts.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() > 2 && f[1] == "/dev/shm" && f[2] == "tmpfs"
    });
    tmpfs.then(|| tempfile::tempdir_in("/dev/shm").ok())?
}

#[test]
fn ordinary_work_has_no_findings() {
    require_perf!();
    let _one = one_recording_at_a_time();
    // The work runs on tmpfs. On a disk's file system the work can find a
    // real pathology of the machine, which is not what this test is about:
    // on an ext4 /tmp where many files had been created and deleted, this
    // tar spent 99% of its CPU in openat, in ext4's `recently_deleted` scan
    // of the inode table (1 s for 3,000 files), and `kernel-dominated` said
    // so, rightly.
    let dir = match tmpfs_dir() {
        Some(d) => d,
        None => {
            eprintln!("note: /dev/shm is not a tmpfs: the work runs in the default temp directory, whose file system may slow it");
            tempfile::tempdir().unwrap()
        }
    };
    // A tar extraction of 3,000 small files.
    let src = dir.path().join("src");
    for d in 0..30 {
        let sub = src.join(format!("d{d}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..100 {
            std::fs::write(
                sub.join(format!("f{f}.txt")),
                format!("{d} {f}\n").repeat(50),
            )
            .unwrap();
        }
    }
    let tar = dir.path().join("src.tar");
    let st = Command::new("tar")
        .arg("cf")
        .arg(&tar)
        .arg("-C")
        .arg(dir.path())
        .arg("src")
        .status()
        .unwrap();
    assert!(st.success());
    let into = dir.path().join("x");
    std::fs::create_dir(&into).unwrap();
    let findings = diagnose(
        &dir.path().join("tar"),
        &[
            "tar",
            "xf",
            tar.to_str().unwrap(),
            "-C",
            into.to_str().unwrap(),
        ],
    );
    let blamed = blaming_the_workload(&findings, &["tar"]);
    assert!(blamed.is_empty(), "tar: {blamed:?}");
    // A small cargo build (a crate without dependencies).
    if Command::new("cargo").arg("-V").output().is_err() {
        slowlab_testkit::skip(format_args!("cargo build: cargo is not on PATH"));
        return;
    }
    let krate = dir.path().join("k");
    std::fs::create_dir_all(krate.join("src")).unwrap();
    std::fs::write(
        krate.join("Cargo.toml"),
        "[package]\nname = \"k\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[workspace]\n",
    )
    .unwrap();
    let mut main = String::from("fn main() {\n");
    for i in 0..300 {
        main.push_str(&format!("    println!(\"{{}}\", {i} * 7 + {i} / 3);\n"));
    }
    main.push_str("}\n");
    std::fs::write(krate.join("src/main.rs"), main).unwrap();
    let manifest = krate.join("Cargo.toml");
    let target = dir.path().join("target");
    // A first build reads the toolchain (rustc's libLLVM, std) from disk on a
    // fresh machine: that *is* waiting for storage (io-wait names it, ~18%
    // of the build here with the page cache dropped). Warm it up with a
    // build of its own, so that what is diagnosed is the ordinary build.
    let warm = Command::new("cargo")
        .args(["build", "-q", "--offline", "--manifest-path"])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(dir.path().join("warm-up"))
        .status()
        .unwrap();
    assert!(warm.success());
    let findings = diagnose(
        &dir.path().join("cargo"),
        &[
            "cargo",
            "build",
            "--offline",
            "--manifest-path",
            manifest.to_str().unwrap(),
            "--target-dir",
            target.to_str().unwrap(),
        ],
    );
    let workload = ["cargo", "rustc", "cc", "ld", "collect2", "build-script-bu"];
    let blamed = blaming_the_workload(&findings, &workload);
    assert!(blamed.is_empty(), "cargo build: {blamed:?}");
    // Cargo waits for its jobs in a timed wait (a poll loop): the critical
    // path still runs through the compiler and linker on a CPU.
    let cp: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("cargo").join("critical_path.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(cp["root"]["comm"], "cargo");
    // On a CPU or waiting for one: another process on this 2-core machine (a test
    // beside this one) turns compiler time into runnable time, not into a wait.
    let wall = cp["wall_s"].as_f64().unwrap();
    let cpu =
        cp["breakdown"]["cpu"].as_f64().unwrap() + cp["breakdown"]["runnable"].as_f64().unwrap();
    let tools: f64 = cp["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| (p["state"] == "cpu" || p["state"] == "runnable") && p["comm"] != "cargo")
        .map(|p| p["seconds"].as_f64().unwrap())
        .sum();
    assert!(
        cpu > 0.5 * wall && tools > 0.4 * wall,
        "cpu {cpu} s, compiler and linker {tools} s of {wall} s: {}",
        cp["summary"]
    );
}

#[test]
fn the_report_loads_in_chromium_and_shows_a_hostile_name_as_text() {
    require_perf!();
    let chromium = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok());
    let Some(chromium) = chromium else {
        slowlab_testkit::skip(format_args!(
            "Chromium is not installed (scripts/setup.sh installs it)"
        ));
        return;
    };
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    // A busy process whose name is markup (a comm holds 15 bytes).
    let hostile = dir.path().join("<script>alert(");
    std::fs::copy("/usr/bin/yes", &hostile).unwrap();
    let script = format!("timeout 0.5 '{}' > /dev/null; true", hostile.display());
    let report_dir = dir.path().join("d");
    diagnose(&report_dir, &["sh", "-c", &script]);
    let report = report_dir.join("report.html");
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(!html.contains("<script>alert("), "the name is escaped");
    assert!(
        html.contains("\\u003cscript>alert("),
        "the name is in the page's data"
    );
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=3000",
            "--dump-dom",
        ])
        .arg(format!("file://{}", report.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        dom.contains("findings") || dom.contains("Findings"),
        "the page rendered: {log}"
    );
    assert!(!dom.contains("<script>alert("), "no injected element");
    assert!(
        dom.contains("&lt;script&gt;alert("),
        "the name is in the page as text"
    );
    let errors: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("CONSOLE") && (l.contains("Error") || l.contains("Uncaught")))
        .collect();
    assert!(errors.is_empty(), "console errors: {errors:?}");
}
