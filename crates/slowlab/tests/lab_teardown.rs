//! `slowlab lab teardown-lock` run for real: at tiny size, the JSON result
//! and the direction of the effect; then Ctrl-C (once, and twice) while the
//! holder processes are alive, also while `--trace` records them (the
//! interrupted run's directory is removed, the next is not started); a holder
//! started by the test says it is ready only once in its own namespace. Every
//! test checks that no holder process outlives slowlab. Holders are recognised by their command line and by a
//! per-test tag in the environment they inherit.
//!
//! Needs root (network namespaces); without it each test prints SKIP.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod common;
use common::{finish, result_json};

const SLOWLAB: &str = env!("CARGO_BIN_EXE_slowlab");
const TAG_VAR: &str = "SLOWLAB_TEST_TAG";

/// The runs measure lock stalls: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn tag(name: &str) -> String {
    format!("lab-teardown-{name}-{}", std::process::id())
}

/// Live holder processes carrying `tag` (zombies have no command line).
fn holders(tag: &str) -> Vec<u32> {
    let marker = format!("{TAG_VAR}={tag}");
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if !contains(&cmdline, b"teardown-holder") {
            continue;
        }
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        if environ.split(|&b| b == 0).any(|v| v == marker.as_bytes()) {
            found.push(pid);
        }
    }
    found
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn start(tag: &str, args: &[&str]) -> Child {
    Command::new(SLOWLAB)
        .args(["lab", "teardown-lock", "--json", "-"])
        .args(args)
        .env(TAG_VAR, tag)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run slowlab")
}

fn assert_no_holder_left(tag: &str, seen: &[u32]) {
    // Killed holders take a while to go: each one's network namespace is
    // torn down under the global lock this scenario is about, one after
    // the other. Gone within the deadline is not left behind.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut left = holders(tag);
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        left = holders(tag);
    }
    assert!(left.is_empty(), "holder processes left behind: {left:?}");
    for pid in seen {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        assert!(
            !contains(&cmdline, b"teardown-holder"),
            "holder {pid} is still alive"
        );
    }
}

#[test]
fn tiny_run_stalls_the_monitor_more_with_namespaces_and_leaves_nothing() {
    require_root!("teardown-lock needs root (network namespaces)");
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tag = tag("tiny");
    let out = finish(start(&tag, &["--tiny"]), Duration::from_secs(120));
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = result_json(&out, "teardown-lock");
    if r["status"] == "skipped" {
        let reason = r["reason"].as_str().unwrap_or_default();
        assert!(
            !reason.starts_with("failed"),
            "the scenario failed: {reason}"
        );
        slowlab_testkit::skip(format_args!("teardown-lock was skipped here: {reason}"));
        return;
    }
    assert_eq!(r["status"], "ran");
    assert!(r["affected"].is_boolean(), "{r}");
    let h = &r["headline"];
    assert_eq!(h["unit"], "s");
    let (path, control) = (
        h["pathological"].as_f64().unwrap(),
        h["control"].as_f64().unwrap(),
    );
    // Robust at 100 processes: the namespaces' teardown holds rtnl longer
    // than any plain-process call takes (ratios of 7× to 1000× seen).
    assert!(
        path > control,
        "max stall with namespaces {path} s, without {control} s"
    );
    // A plain process's longest call: well under the pathological stalls, though the
    // host may pause this virtual CPU for tens of ms at any time.
    assert!(control < 0.25, "the control stalled {control} s");
    let variants = r["variants"].as_array().unwrap();
    let names: Vec<_> = variants
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["netns-holders", "plain-holders"]);
    assert_eq!(variants[0]["role"], "pathological");
    assert_eq!(variants[1]["role"], "control");
    let lines: Vec<&str> = r["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    for expected in [
        "Process creation took ",
        "Process destruction took ",
        "Monitor blocked for ",
    ] {
        let count = lines.iter().filter(|l| l.contains(expected)).count();
        assert!(
            count >= 2 && count % 2 == 0,
            "`{expected}` once per variant and round in {lines:#?}"
        );
    }
    assert_no_holder_left(&tag, &[]);
}

/// `slowlab __child teardown-holder --parent PID [--netns]`, run by the test itself: the
/// child, its stdout's first line and the network namespace it is in then.
fn holder_started_by_us(parent: u32, netns: bool) -> (Child, String, PathBuf) {
    let mut cmd = Command::new(SLOWLAB);
    cmd.args([
        "__child",
        "teardown-holder",
        "--parent",
        &parent.to_string(),
    ]);
    if netns {
        cmd.arg("--netns");
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("cannot run slowlab");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let ns = std::fs::read_link(format!("/proc/{}/ns/net", child.id())).unwrap_or_default();
    (child, line.trim_end().to_string(), ns)
}

#[test]
fn a_holder_says_ready_once_it_is_in_a_network_namespace_of_its_own() {
    require_root!("teardown-lock needs root (network namespaces)");
    // Its namespaces take the lock the other tests time.
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let ours = std::fs::read_link("/proc/self/ns/net").unwrap();
    let me = std::process::id();
    let mut namespaces = Vec::new();
    for netns in [true, true, false] {
        let (mut holder, said, ns) = holder_started_by_us(me, netns);
        assert_eq!(said, "ready");
        // Still running after it said so: it holds the namespace until killed.
        assert!(holder.try_wait().unwrap().is_none(), "the holder ended");
        assert_eq!(
            ns == ours,
            !netns,
            "with --netns {netns}: {ns:?} (ours {ours:?})"
        );
        namespaces.push(ns);
        holder.kill().unwrap();
        holder.wait().unwrap();
    }
    assert_ne!(namespaces[0], namespaces[1], "two holders, one namespace");
    // Started by another process than the one it names: it says why and ends, as it
    // would if its starter were already gone.
    let (mut holder, said, _) = holder_started_by_us(1, true);
    assert!(!said.is_empty() && said != "ready", "{said:?}");
    assert!(!holder.wait().unwrap().success());
}

/// Starts the quick run, waits until at least `alive` holders run, sends
/// SIGINT (`extra` more after `gap`), and checks the exit and the cleanup.
fn interrupt_while_holders_are_alive(name: &str, extra: usize, gap: Duration) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tag = tag(name);
    let mut child = start(&tag, &[]);
    let pid = child.id() as libc::pid_t;
    let deadline = Instant::now() + Duration::from_secs(60);
    let seen = loop {
        let seen = holders(&tag);
        if seen.len() >= 200 {
            break seen;
        }
        if let Ok(Some(_)) = child.try_wait() {
            // Ended before the holders came up: only a skip is acceptable.
            let out = child.wait_with_output().expect("wait failed");
            let r = result_json(&out, "teardown-lock");
            let reason = r["reason"].as_str().unwrap_or_default();
            assert!(
                r["status"] == "skipped" && !reason.starts_with("failed"),
                "slowlab ended before 200 holders were up: {r}"
            );
            slowlab_testkit::skip(format_args!("teardown-lock was skipped here: {reason}"));
            return;
        }
        if Instant::now() > deadline {
            // SAFETY: our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let out = finish(child, Duration::from_secs(10));
            panic!(
                "no 200 holders appeared within a minute (saw {}); stderr: {}",
                seen.len(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // SAFETY: our own child.
    unsafe { libc::kill(pid, libc::SIGINT) };
    for _ in 0..extra {
        std::thread::sleep(gap);
        // SAFETY: our own child (it has not been waited for yet).
        unsafe { libc::kill(pid, libc::SIGINT) };
    }
    let out = finish(child, Duration::from_secs(60));
    assert_eq!(
        out.status.code(),
        Some(130),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_no_holder_left(&tag, &seen);
    if extra == 0 {
        // One Ctrl-C: the run ends normally, saying what happened.
        let r = result_json(&out, "teardown-lock");
        assert_eq!(r["status"], "skipped");
        let reason = r["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("interrupted"), "{reason}");
    }
}

#[test]
fn ctrl_c_while_the_holders_are_alive_kills_them_and_exits_130() {
    require_root!("teardown-lock needs root (network namespaces)");
    interrupt_while_holders_are_alive("sigint", 0, Duration::ZERO);
}

#[test]
fn a_second_ctrl_c_still_kills_every_holder() {
    require_root!("teardown-lock needs root (network namespaces)");
    interrupt_while_holders_are_alive("sigint-twice", 1, Duration::from_millis(1));
}

#[test]
fn ctrl_c_while_tracing_leaves_no_run_that_looks_complete() {
    require_root!("teardown-lock and its recording need root");
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _one = common::one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let tag = tag("trace");
    let mut child = start(&tag, &["--tiny", "--trace", dir.path().to_str().unwrap()]);
    let pid = child.id() as libc::pid_t;
    let deadline = Instant::now() + Duration::from_secs(60);
    // The pathological run under its recording: its holders are up.
    while holders(&tag).len() < 50 {
        if let Ok(Some(_)) = child.try_wait() {
            let out = child.wait_with_output().expect("wait failed");
            panic!(
                "lab ended before its holders were up: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(Instant::now() < deadline, "no holders within a minute");
        std::thread::sleep(Duration::from_millis(5));
    }
    // SAFETY: our own child.
    unsafe { libc::kill(pid, libc::SIGINT) };
    let out = finish(child, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        left.is_empty(),
        "runs left after the interrupt: {left:?}; {stderr}"
    );
    assert_no_holder_left(&tag, &[]);
}
