//! `slowlab record --backend bpf` (the eBPF scheduler recorder) on real recordings:
//! - a pipeline with a slow producer recorded by both backends gives the same
//!   critical-path answer: the path is the producer's CPU in `slow_digest`;
//! - a ring buffer made tiny on purpose loses records, and the loss is counted and shown
//!   by `record` and by `analyze`;
//! - a thread that blocks at two call sites in turn, reached through frames of the same
//!   sizes, gets each site's stacks, blocking and waking, though the recorder reuses a
//!   thread's stacks from its last event at the same site;
//! - a mutex held by one thread and waited on by another (a chain of two mutexes ending in
//!   CPU work) is named as that mutex, by its address, held by the same thread under both
//!   backends (the eBPF recorder's futex records give the wait its word and op);
//! - `diagnose --backend bpf` on the slow producer names the same culprit as `diagnose`
//!   with perf, rooted at the command it ran;
//! - an fsync loop waits for storage under both backends, and the `io-wait` finding names
//!   the same device, from the disk requests each recorded;
//! - a detector's syscall called from two sites through frames of the same sizes keeps
//!   each site's stack when the thread's last one is reused;
//! - `--backend auto` records with bpf here, and with perf for DWARF stacks;
//! - a stack map too small for the recording loses nothing: it is emptied into the file;
//! - the faults of a memset in libc name the same function under both backends;
//! - a shell testing 50 missing paths makes the same failed stat calls under both backends,
//!   and both name the 50 paths (perf's path capture beside the trace, bpf's records in it)
//!   (the detectors' syscalls, with their return values);
//! - a command's recording takes the syscalls from the raw `sys_enter`/`sys_exit`
//!   tracepoints (they detach at once), a recording of the machine from each syscall's own.
//!
//! Tests skip, with the reason, where perf is missing or the process is not root (the
//! recorder loads BPF programs).

use std::path::Path;
use std::process::Command;

mod common;
use common::{one_recording_at_a_time, slowlab};

/// `analyze --critical-path --json` of a trace, rooted at the recorded `sh`.
fn critical_path(trace: &Path) -> serde_json::Value {
    let out = slowlab()
        .arg("analyze")
        .arg(trace)
        .args(["--critical-path", "--json"])
        .output()
        .unwrap();
    common::json(&out)
}

/// The largest part of the path on a CPU: (comm, function).
fn top_cpu(path: &serde_json::Value) -> (String, String) {
    let parts = path["parts"].as_array().unwrap();
    let top = parts.iter().find(|p| p["state"] == "cpu").unwrap();
    (
        top["comm"].as_str().unwrap_or("").to_string(),
        top["function"].as_str().unwrap_or("").to_string(),
    )
}

fn record(backend: &str, out: &Path, extra: &[&str], cmd: &[&str]) -> std::process::Output {
    let o = slowlab()
        .args(["record", "--backend", backend, "-o"])
        .arg(out)
        .args(extra)
        .arg("--")
        .args(cmd)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{backend}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// The (process, function) on the CPU most of each backend's critical path: the
/// producer's slow_digest, and the same under both.
fn both_name_slow_digest(answers: &[(String, String)]) {
    assert_eq!(
        answers[0],
        ("producer".to_string(), "slow_digest".to_string())
    );
    assert_eq!(answers[0], answers[1], "perf and bpf disagree");
}

/// The shell script of a pipeline whose slow end is the producer: ~0.35 s of its work, so
/// that a stall of the machine's is a small share of it (ci26: `sh` spun 70 ms on the task
/// list's lock, its run 0.31 s where half the work took ~0.2 s, and the producer's share
/// of the path fell to 0.59).
fn slow_pipeline() -> String {
    let producer = common::why_program("producer");
    format!("{} 40 6000000 | sort > /dev/null", producer.display())
}

#[test]
fn both_backends_find_the_slow_producer_on_the_critical_path() {
    require_perf!();
    require_bpf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let script = slow_pipeline();
    let cmd = ["sh", "-c", script.as_str()];
    let mut answers = Vec::new();
    for backend in ["perf", "bpf"] {
        let trace = dir.path().join(format!("{backend}.data"));
        let recorded = record(backend, &trace, &[], &cmd);
        let said = String::from_utf8_lossy(&recorded.stderr).into_owned();
        let path = critical_path(&trace);
        assert_eq!(path["root"]["comm"], "sh", "{backend}: {}", path["summary"]);
        let in_producer: f64 = path["parts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["comm"] == "producer")
            .map(|p| p["share"].as_f64().unwrap())
            .sum();
        assert!(
            in_producer > 0.6,
            "{backend}: {}\nthe recording said: {said}",
            path["summary"]
        );
        answers.push(top_cpu(&path));
    }
    both_name_slow_digest(&answers);
}

#[test]
fn a_tiny_ring_loses_events_and_says_how_many() {
    require_bpf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("tiny.data");
    // One page of ring (~100 records) against 200 processes started one after another
    // (each a fork, an exec, an exit, switches and wake-ups), run by SCHED_FIFO on the one
    // CPU the recorder runs on too, so its drain thread cannot run until they are done.
    // (A pipe burst on two CPUs lost nothing most of the time: the drain kept up.)
    let o = Command::new("taskset")
        .args(["-c", "0", env!("CARGO_BIN_EXE_slowlab")])
        .args(["record", "--backend", "bpf", "-o"])
        .arg(&trace)
        .args([
            "--bpf-ring-bytes",
            "4096",
            "--",
            "chrt",
            "-f",
            "1",
            "sh",
            "-c",
        ])
        .arg("for i in $(seq 200); do /bin/true; done")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stderr = String::from_utf8_lossy(&o.stderr);
    let lost: u64 = stderr
        .split("events lost")
        .next()
        .and_then(|s| s.rsplit(' ').nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of lost events in: {stderr}"));
    assert!(lost > 0, "{stderr}");
    // `analyze` shows the same count.
    let out = slowlab()
        .arg("analyze")
        .arg(&trace)
        .args(["--critical-path"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains(&format!("{lost} events were lost")), "{said}");
}

/// (waits whose stack has a frame that `is_it`, wake-ups whose waker's stack has one) over
/// all threads of `analyze --waits --json`. Match names whole where another program's
/// frames could share a part (every kernel's `rwsem_down_read_slowpath` has `down` in it).
fn waits_in(trace: &Path, is_it: impl Fn(&str) -> bool) -> (u64, u64) {
    waits_whose_stack(trace, |frames| frames.iter().any(|f| is_it(f)))
}

/// (waits whose stack's frames, innermost first, are `such`, wake-ups whose waker's are)
/// over all threads of `analyze --waits --json`.
fn waits_whose_stack(trace: &Path, such: impl Fn(&[&str]) -> bool) -> (u64, u64) {
    let out = slowlab()
        .arg("analyze")
        .arg(trace)
        .args(["--waits", "--json", "--top", "10000"])
        .output()
        .unwrap();
    let view = common::json(&out);
    let has = |stack: &serde_json::Value| {
        let frames: Vec<&str> = stack
            .as_array()
            .map(|f| f.iter().filter_map(|n| n.as_str()).collect())
            .unwrap_or_default();
        such(&frames)
    };
    let (mut waits, mut wakes) = (0, 0);
    for t in view["threads"].as_array().unwrap() {
        for w in t["waits"].as_array().unwrap() {
            if has(&w["stack"]) {
                waits += w["count"].as_u64().unwrap();
            }
            for k in w["wakers"].as_array().unwrap() {
                if has(&k["stack"]) {
                    wakes += k["count"].as_u64().unwrap();
                }
            }
        }
    }
    (waits, wakes)
}

#[test]
fn reused_stacks_keep_two_sites_apart() {
    require_bpf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let program = common::compile_workload("bpf/two_sites.c", dir.path(), "two_sites");
    let trace = dir.path().join("two.data");
    let rounds = 2000u64;
    let o = record(
        "bpf",
        &trace,
        &[],
        &[program.to_str().unwrap(), &rounds.to_string()],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    let (a, b) = (
        waits_in(&trace, |f| f == "site_a"),
        waits_in(&trace, |f| f == "site_b"),
    );
    // The parent blocks at each site about as often (a bounce whose byte is back before
    // the read does not block, so not every round), and wakes the child from each about as
    // often. Stacks reused across the sites would put nearly all of them on one.
    for (what, a, b) in [("waits", a.0, b.0), ("wake-ups", a.1, b.1)] {
        assert!(
            a.min(b) >= rounds / 10 && a.min(b) * 3 >= a.max(b) * 2,
            "{what} at site_a {a}, at site_b {b} in {rounds} rounds\n{stderr}"
        );
    }
    // The kernel stacks begin where perf's do, at the tracepoint's caller: not in the
    // recorder's program and the kernel's bpf_trace_run that called it. (Deeper, such
    // frames are an interrupted program's: the recorder's reader woken by the interrupt a
    // program's ring submit raised, as CI once saw.)
    let begins_in_the_recorder = |frames: &[&str]| {
        frames
            .iter()
            .take(2)
            .any(|f| f.starts_with("bpf_trace_run") || f.starts_with("bpf_prog_"))
    };
    assert_eq!(
        waits_whose_stack(&trace, begins_in_the_recorder),
        (0, 0),
        "{stderr}"
    );
}

/// The calls of `syscall` by the processes named `comm` whose stack has `function`, from
/// `analyze --syscalls --json`'s call sites.
fn calls_from(trace: &Path, comm: &str, syscall: &str, function: &str) -> u64 {
    let view = syscalls_view(trace);
    let mut calls = 0;
    for p in view["processes"].as_array().unwrap() {
        if p["comm"] != comm {
            continue;
        }
        for s in p["syscalls"].as_array().unwrap() {
            if s["name"] != syscall {
                continue;
            }
            for site in s["sites"].as_array().unwrap() {
                let has = site["stack"]
                    .as_array()
                    .is_some_and(|f| f.iter().any(|n| n.as_str() == Some(function)));
                if has {
                    calls += site["count"].as_u64().unwrap();
                }
            }
        }
    }
    calls
}

#[test]
fn reused_call_stacks_keep_two_sites_apart() {
    require_bpf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let program = common::compile_workload("bpf/two_call_sites.c", dir.path(), "two_call_sites");
    let trace = dir.path().join("calls.data");
    let rounds = 1000u64;
    record(
        "bpf",
        &trace,
        &[],
        &[program.to_str().unwrap(), &rounds.to_string()],
    );
    // Every round calls access() from each site once, through the same frames: a stack
    // reused across the sites would put nearly all the calls on one of them.
    let a = calls_from(&trace, "two_call_sites", "access", "site_a");
    let b = calls_from(&trace, "two_call_sites", "access", "site_b");
    assert!(
        a.min(b) * 10 >= rounds * 9 && a.max(b) <= rounds,
        "access from site_a {a}, from site_b {b} in {rounds} rounds"
    );
}

/// The mutex the critical path followed longest to its holder: (the mutex's address, the
/// holder's comm, seconds of the path reached through it).
fn longest_mutex(path: &serde_json::Value) -> Option<(u64, String, f64)> {
    let mut by: Vec<(u64, String, f64)> = Vec::new();
    for s in path["segments"].as_array().unwrap() {
        let r = &s["via_resource"];
        if r["kind"] != "mutex" {
            continue;
        }
        let Some(addr) = r["address"]
            .as_str()
            .and_then(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).ok())
        else {
            continue;
        };
        let holder = r["holder"]["comm"].as_str().unwrap_or("").to_string();
        let secs = s["to_s"].as_f64().unwrap() - s["from_s"].as_f64().unwrap();
        match by.iter_mut().find(|b| b.0 == addr && b.1 == holder) {
            Some(b) => b.2 += secs,
            None => by.push((addr, holder, secs)),
        }
    }
    by.into_iter().max_by(|a, b| a.2.total_cmp(&b.2))
}

#[test]
fn both_backends_name_the_mutex_and_its_holder() {
    require_perf!();
    require_bpf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let program = common::why_program("lock_chain");
    let mut holders = Vec::new();
    for backend in ["perf", "bpf"] {
        let trace = dir.path().join(format!("{backend}.data"));
        let o = record(backend, &trace, &[], &[program.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        // The mutex "crunch" holds, as the program printed it.
        let lock_b = stderr
            .lines()
            .find_map(|l| l.trim().strip_prefix("lock_b=0x"))
            .and_then(|a| u64::from_str_radix(a, 16).ok())
            .unwrap_or_else(|| panic!("no lock_b= in {stderr}"));
        let path = critical_path(&trace);
        let wall = path["wall_s"].as_f64().unwrap();
        let (addr, holder, secs) = longest_mutex(&path)
            .unwrap_or_else(|| panic!("{backend}: no mutex on the path: {}", path["summary"]));
        assert_eq!(addr, lock_b, "{backend}: {}", path["summary"]);
        assert!(
            secs > 0.5 * wall,
            "{backend}: {secs} of {wall} s: {}",
            path["summary"]
        );
        holders.push(holder);
    }
    assert_eq!(holders[0], "crunch");
    assert_eq!(
        holders[0], holders[1],
        "perf and bpf name different holders"
    );
}

#[test]
fn diagnose_with_either_backend_names_the_slow_producer() {
    require_perf!();
    require_bpf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let script = slow_pipeline();
    let mut answers = Vec::new();
    for backend in ["perf", "bpf"] {
        let out = dir.path().join(backend);
        let o = slowlab()
            .args(["diagnose", "--backend", backend, "-o"])
            .arg(&out)
            .args(["--", "sh", "-c", script.as_str()])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{backend}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let text = std::fs::read_to_string(out.join("critical_path.json")).unwrap();
        let path: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(path["root"]["comm"], "sh", "{backend}: {}", path["summary"]);
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(stdout.contains("slow_digest"), "{backend}: {stdout}");
        answers.push(top_cpu(&path));
    }
    both_name_slow_digest(&answers);
}

#[test]
fn an_fsync_loop_waits_for_the_same_device_under_both_backends() {
    require_perf!();
    require_bpf!();
    let Some(dir) = common::disk_tempdir() else {
        return;
    };
    let _one = one_recording_at_a_time();
    let program = common::why_program("fsync_loop");
    let file = dir.path().join("data");
    let mut devices = Vec::new();
    for backend in ["perf", "bpf"] {
        let out = dir.path().join(backend);
        let o = slowlab()
            .args(["diagnose", "--json", "--backend", backend, "-o"])
            .arg(&out)
            .arg("--")
            .arg(&program)
            .arg(&file)
            .arg("300")
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{backend}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let findings = common::json(&o);
        let f = findings
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["id"] == "io-wait")
            .unwrap_or_else(|| panic!("{backend}: no io-wait in {findings}"));
        assert_eq!(f["culprit"]["comm"], "fsync_loop", "{backend}: {f}");
        let e = &f["evidence"];
        // The device comes from the disk requests during the waits: those completed, or
        // those issued when perf kept none of their completions (it keeps 0 to 12 of
        // ~900 here).
        assert!(e["device"].is_string(), "{backend}: {f}");
        assert!(e["device_requests"].as_u64().unwrap() > 0, "{backend}: {f}");
        devices.push(e["device"].clone());
    }
    assert_eq!(
        devices[0], devices[1],
        "perf and bpf name different devices"
    );
}

/// `analyze --syscalls --json` of a trace.
fn syscalls_view(trace: &Path) -> serde_json::Value {
    let out = slowlab()
        .arg("analyze")
        .arg(trace)
        .args(["--syscalls", "--json"])
        .output()
        .unwrap();
    common::json(&out)
}

/// The process of a syscalls view that took paths of `pattern`: the test's shell, not
/// another `sh` on the machine (each backend's recording is system-wide, and a CI run
/// has other shells at work).
fn process_taking<'a>(view: &'a serde_json::Value, pattern: &str) -> &'a serde_json::Value {
    view["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| {
            p["paths"]
                .as_array()
                .is_some_and(|paths| paths.iter().any(|path| path["pattern"] == pattern))
        })
        .unwrap_or_else(|| panic!("no process took {pattern}: {view:#}"))
}

/// (calls, ENOENT failures) of `syscall` by `process` (of a syscalls view).
fn failed_calls(process: &serde_json::Value, syscall: &str) -> (u64, u64) {
    let (mut calls, mut enoent) = (0, 0);
    for s in process["syscalls"].as_array().unwrap() {
        if s["name"] == syscall {
            calls += s["count"].as_u64().unwrap();
            enoent += s["errors"]["ENOENT"].as_u64().unwrap_or(0);
        }
    }
    (calls, enoent)
}

/// The paths of `pattern` `process` took: (calls, of which failed), and the first and
/// last path.
fn paths_taken(process: &serde_json::Value, pattern: &str) -> (u64, u64, String) {
    let (mut calls, mut failed, mut ends) = (0, 0, String::new());
    for path in process["paths"].as_array().unwrap() {
        if path["pattern"] == pattern {
            calls += path["count"].as_u64().unwrap();
            failed += path["failed"].as_u64().unwrap();
            ends = format!("{} .. {}", path["first"], path["last"]);
        }
    }
    (calls, failed, ends)
}

#[test]
fn both_backends_see_the_same_failed_stat_calls_and_their_paths() {
    require_perf!();
    require_bpf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    // `[ -e ]` is the shell's own: one stat of a missing path each.
    let script = "for i in $(seq 50); do [ -e /nonexistent/slowlab-$i ]; done; true";
    let mut seen = Vec::new();
    for backend in ["perf", "bpf"] {
        let trace = dir.path().join(format!("{backend}.data"));
        record(backend, &trace, &[], &["sh", "-c", script]);
        let view = syscalls_view(&trace);
        let shell = process_taking(&view, "/nonexistent/slowlab-N");
        assert_eq!(shell["comm"], "sh", "{backend}");
        let stats = ["newfstatat", "statx", "newstat", "stat"]
            .iter()
            .map(|s| failed_calls(shell, s))
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        assert!(stats.1 >= 50, "{backend}: {stats:?}");
        // perf's from the path capture beside the trace, bpf's from inside it.
        let paths = paths_taken(shell, "/nonexistent/slowlab-N");
        assert_eq!(
            paths,
            (
                50,
                50,
                "\"/nonexistent/slowlab-1\" .. \"/nonexistent/slowlab-50\"".into()
            ),
            "{backend}: the missing paths"
        );
        seen.push(stats);
    }
    assert_eq!(seen[0], seen[1], "perf and bpf saw different stat calls");
}

#[test]
fn the_recorders_own_syscalls_are_left_out_of_its_trace() {
    require_bpf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("self.data");
    // In 1.5 s the recorder reads /proc (each process's cgroup, the new processes' maps)
    // hundreds of times, and waits for its command.
    let script = "for i in $(seq 20); do [ -e /nonexistent/slowlab-$i ]; done; sleep 1.5";
    record("bpf", &trace, &[], &["sh", "-c", script]);
    let view = syscalls_view(&trace);
    let (_, missing) = failed_calls(
        process_taking(&view, "/nonexistent/slowlab-N"),
        "newfstatat",
    );
    assert!(missing >= 20, "the command's calls: {missing}");
    let recorders: Vec<String> = view["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["comm"].as_str().unwrap_or("").to_string())
        .filter(|c| ["slowlab", "slowlab-sched", "cgroup-notes"].contains(&c.as_str()))
        .collect();
    assert!(recorders.is_empty(), "the recorder's calls: {recorders:?}");
}

#[test]
fn auto_records_with_bpf_here_and_with_perf_for_dwarf_stacks() {
    require_perf!();
    require_bpf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let magic = |p: &Path| std::fs::read(p).unwrap()[..8].to_vec();
    let trace = dir.path().join("auto.data");
    let out = record("auto", &trace, &[], &["true"]);
    assert_eq!(
        magic(&trace),
        b"SLSCHED\x01",
        "root with kernel BTF: the eBPF recorder"
    );
    assert!(!String::from_utf8_lossy(&out.stderr).contains("recording with perf"));
    let trace = dir.path().join("dwarf.data");
    let out = record("auto", &trace, &["--call-graph", "dwarf"], &["true"]);
    assert_eq!(magic(&trace), b"PERFILE2", "DWARF stacks: perf");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("recording with perf: only perf copies user stacks"),
        "{err}"
    );
}

#[test]
fn a_small_stack_map_keeps_every_stack_while_it_is_emptied_into_the_file() {
    require_perf!();
    require_bpf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let churn = common::why_program("stack_churn");
    let trace = dir.path().join("churn.data");
    // 1,000 waits from 1,000 distinct user stacks over ~6 s, into a map of 512: unless the
    // map is emptied into the file as it fills, at least ~500 of them find it full and
    // their stacks go through the ring instead (1 KiB records). (The site reuse is off: it
    // cannot tell apart recursions deeper than the links it compares.)
    let out = record(
        "bpf",
        &trace,
        &["--bpf-stack-entries", "512", "--bpf-no-reuse"],
        &[churn.to_str().unwrap(), "1000"],
    );
    let (waits, _) = waits_in(&trace, |f| f == "down");
    eprintln!("{waits} of the 1,000 waits have their stack");
    assert!(waits >= 950, "{waits} of 1,000 waits have their stack");
    few_through_the_ring(&out, 50, dir.path(), "512", "6");
    // 3,000 distinct stacks in ~0.5 s into a map of 4,096 (buckets well filled): a flush
    // moves thousands of stacks, more than one batch of the map, which holds at most
    // 1,024 and often fewer (it stops at a bucket that does not fit).
    let trace = dir.path().join("burst.data");
    let out = record(
        "bpf",
        &trace,
        &["--bpf-stack-entries", "4096", "--bpf-no-reuse"],
        &[churn.to_str().unwrap(), "3000", "100"],
    );
    let (waits, _) = waits_in(&trace, |f| f == "down");
    eprintln!("{waits} of the 3,000 waits have their stack");
    assert!(waits >= 2900, "{waits} of 3,000 waits have their stack");
    few_through_the_ring(&out, 150, dir.path(), "4096", "1");
}

/// Checks that at most `most` stacks of the recording `out` came through the ring, as a map
/// of `entries` emptied into the file as it fills lets them. Past `most`, the machine's
/// other processes may be the cause (each new process brings new stacks): a recording of
/// `sleep SECS` alone with the same map tells. If it has more than `most` too, the machine
/// is too busy for the count to say anything of the flush, and the check is skipped with
/// that reason; if not, it fails.
fn few_through_the_ring(
    out: &std::process::Output,
    most: u64,
    dir: &Path,
    entries: &str,
    secs: &str,
) {
    let in_ring = stacks_through_the_ring(out);
    if in_ring <= most {
        return;
    }
    let idle = dir.join(format!("idle-{entries}.data"));
    let alone = stacks_through_the_ring(&record(
        "bpf",
        &idle,
        &["--bpf-stack-entries", entries, "--bpf-no-reuse"],
        &["sleep", secs],
    ));
    assert!(
        alone > most,
        "{in_ring} stacks came through the ring (the machine alone: {alone} in {secs} s)\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    slowlab_testkit::skip(format_args!(
        "the map's flush not checked: other processes alone sent {alone} stacks through the \
         ring of a map of {entries} in {secs} s (of {in_ring} with the test's)"
    ));
}

/// How many stacks of a recording the stack map could not take, so that they came through
/// the ring: its summary line says so when they are 1% of its stacks or more (fewer read
/// as 0).
fn stacks_through_the_ring(out: &std::process::Output) -> u64 {
    let err = String::from_utf8_lossy(&out.stderr);
    let Some(at) = err.find(" of them through the ring") else {
        return 0;
    };
    let before = &err[..at];
    let digits = &before[before.rfind(' ').map_or(0, |i| i + 1)..];
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no count before {at}: {err}"))
}

#[test]
fn stacks_a_tiny_stack_map_cannot_take_come_through_the_ring() {
    require_perf!();
    require_bpf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let churn = common::why_program("stack_churn");
    // 300 waits of 1 ms from distinct user stacks (a few stacks each, with the wake-ups'),
    // into a map of 16 that the drain empties at most every pass: most find it full, and
    // without the ring's STACK records they would have no stack. Into a file, and into a
    // ring's window (which keeps only the stacks its records name).
    for (name, extra) in [("file", vec![]), ("ring", vec!["--ring", "30"])] {
        let trace = dir.path().join(format!("{name}.data"));
        let mut args = vec!["--bpf-stack-entries", "16", "--bpf-no-reuse"];
        args.extend(extra);
        let out = record(
            "bpf",
            &trace,
            &args,
            &[churn.to_str().unwrap(), "300", "1000"],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("have no stack"), "{name}: {err}");
        assert!(stacks_through_the_ring(&out) > 0, "{name}: {err}");
        let (waits, _) = waits_in(&trace, |f| f == "down");
        assert_eq!(waits, 300, "{name}: waits in down() with their stack");
    }
}

/// The stack of the most faults of the processes named `comm`, innermost first, from
/// `analyze --faults --json`.
fn top_fault_stack(trace: &Path, comm: &str) -> Vec<String> {
    let out = slowlab()
        .arg("analyze")
        .arg(trace)
        .args(["--faults", "--json", "--filter"])
        .arg(format!("process={comm}"))
        .output()
        .unwrap();
    let view = common::json(&out);
    let stacks = view["processes"][0]["stacks"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let top = stacks
        .iter()
        .max_by_key(|s| s["count"].as_u64().unwrap_or(0))
        .unwrap_or_else(|| panic!("no fault stacks: {view}"));
    top["stack"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn faults_in_a_system_library_are_named_alike_under_both_backends() {
    require_perf!();
    require_bpf!();
    if Command::new("python3").arg("-V").output().is_err() {
        slowlab_testkit::skip(format_args!("python3 is not installed"));
        return;
    }
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    // 200 buffers of 1 MiB, zeroed by libc's memset: most faults are there.
    let script = "x = [bytearray(1 << 20) for i in range(200)]";
    let mut tops = Vec::new();
    for backend in ["perf", "bpf"] {
        let trace = dir.path().join(format!("{backend}.data"));
        record(backend, &trace, &[], &["python3", "-c", script]);
        let top = top_fault_stack(&trace, "python3");
        eprintln!("{backend}: {top:?}");
        // The kernel's fault entry, then the user function that faulted.
        assert_eq!(
            top[..2],
            ["exc_page_fault", "asm_exc_page_fault"],
            "{backend}"
        );
        tops.push(top[2].clone());
    }
    // Named by the same symbolizer: libc's own symbol, its debug file's, or the same
    // "(no symbols)" line when the machine has neither.
    assert_eq!(
        tops[0], tops[1],
        "perf and bpf name the faulting function differently"
    );
}

/// The tracepoints the links of process `pid` are attached to (`tp_name` in
/// /proc/PID/fdinfo), once the recorder has attached its page-fault programs, which come
/// after the syscalls' (sched/attach.rs); `None` if the process ends first.
fn attached_tracepoints(pid: u32) -> Option<Vec<String>> {
    common::link_tracepoints(pid, |names| names.iter().any(|n| n == "page_fault_user"))
}

#[test]
fn a_commands_recording_takes_its_syscalls_from_the_raw_tracepoints_the_machines_from_their_own() {
    require_bpf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let per_syscall = |n: &String| n.starts_with("sys_enter_") || n.starts_with("sys_exit_");
    let raw = |n: &String| n == "sys_enter" || n == "sys_exit";

    // The machine's recording (no command): stopped with SIGINT.
    let mut machine = slowlab()
        .args(["record", "--backend", "bpf", "-o"])
        .arg(dir.path().join("machine.slr"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let names = attached_tracepoints(machine.id());
    common::interrupt_then_kill(machine.id() as i32, &mut machine);
    let names = names.expect("the machine's recorder attached its programs");
    assert!(
        names.iter().any(|n| n == "sys_enter_openat")
            && names.iter().any(|n| n == "sys_exit_futex")
            && !names.iter().any(raw),
        "the machine's recording: {names:?}"
    );

    // A command's: its syscalls from the raw tracepoints, and recorded.
    let trace = dir.path().join("command.slr");
    let command = slowlab()
        .args(["record", "--backend", "bpf", "-o"])
        .arg(&trace)
        .args(["--", "sh", "-c", "sleep 1; cat /dev/null"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let names = attached_tracepoints(command.id());
    let out = common::finish(command, std::time::Duration::from_secs(60));
    slowlab_testkit::assert_succeeded(&out);
    let names = names.expect("the command's recorder attached its programs");
    assert!(
        names.iter().filter(|n| raw(n)).count() == 2 && !names.iter().any(per_syscall),
        "the command's recording: {names:?}"
    );
    let v = syscalls_view(&trace);
    let openats: u64 = v["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .filter(|p| p["comm"] == "cat")
        .flat_map(|p| p["syscalls"].as_array().cloned().unwrap_or_default())
        .filter(|s| s["name"] == "openat")
        .map(|s| s["count"].as_u64().unwrap_or(0))
        .sum();
    assert!(
        openats >= 2,
        "cat's openat calls (its libc, /dev/null): {v}"
    );
}
