//! `slowlab hang` end to end: the binary on scripted hangs (the programs of
//! `crates/hang/tests/programs/hangs.c`), its text, its JSON schema, its
//! exit codes (0 nothing blocked, 1 chains, 3 a deadlock, 2 could not
//! inspect) and its one-line errors. Needs root and gcc for the hangs.

#[path = "../../hang/tests/support/mod.rs"]
mod support;

use std::process::{Command, Output};

use serde_json::Value;
use support::{can_run, eventually, Hang};

fn slowlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_slowlab"))
        .args(args)
        .output()
        .expect("run slowlab")
}

fn hang(pid: i32, extra: &[&str]) -> Output {
    let pid = pid.to_string();
    let mut args = vec!["hang", pid.as_str()];
    args.extend_from_slice(extra);
    slowlab(&args)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

macro_rules! need {
    () => {
        match can_run() {
            Ok(b) => b,
            Err(why) => {
                slowlab_testkit::skip(why);
                return;
            }
        }
    };
}

#[test]
fn a_deadlock_is_one_sentence_and_exit_status_3() {
    let bin = need!();
    let h = Hang::start(&bin, "abba", &[]);
    let out = eventually(|| {
        let o = hang(h.pid, &[]);
        (o.status.code() == Some(3)).then_some(o)
    })
    .expect("exit status 3 for a deadlock");
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.starts_with("main ["))
        .unwrap_or_else(|| panic!("no chain from main:\n{text}"));
    assert!(
        line.contains("waits on mutex 0x")
            && line.contains("(in transfer) held by worker [")
            && line.ends_with("]: deadlock"),
        "{line}"
    );
    assert!(text.contains("kernel: futex"), "{text}");
    assert!(text.contains("user:"), "{text}");
}

#[test]
fn json_follows_the_documented_schema() {
    let bin = need!();
    let h = Hang::start(&bin, "sleeper", &[]);
    let (out, json) = eventually(|| {
        let o = hang(h.pid, &["--json"]);
        let v: Value = serde_json::from_slice(&o.stdout).ok()?;
        let main = v["threads"]
            .as_array()?
            .iter()
            .find(|t| t["comm"] == "main")?;
        (main["chain"].as_array()?.len() == 2).then(|| (o, v.clone()))
    })
    .expect("a two-hop chain from main");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(json["pid"], h.pid);
    let t = json["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["comm"] == "main")
        .unwrap();
    for key in [
        "tid", "comm", "state", "waits_on", "chain", "cycle", "ends_in",
    ] {
        assert!(t.get(key).is_some(), "thread without {key}: {t}");
    }
    assert_eq!(t["waits_on"]["kind"], "mutex");
    assert!(t["waits_on"]["address"].as_str().unwrap().starts_with("0x"));
    assert!(t["waits_on"]["detail"].is_string());
    assert_eq!(t["cycle"], false);
    assert_eq!(t["ends_in"], "sleeping");
    for hop in t["chain"].as_array().unwrap() {
        for key in [
            "pid",
            "tid",
            "comm",
            "state",
            "waits_on",
            "syscall",
            "kernel_stack",
            "user_stack",
        ] {
            assert!(hop.get(key).is_some(), "hop without {key}: {hop}");
        }
    }
    let owner = &t["chain"][1];
    assert_eq!(owner["comm"], "holder");
    assert_eq!(t["waits_on"]["held_by"]["tid"], owner["tid"]);
    assert_eq!(owner["syscall"]["name"], "clock_nanosleep");
    assert_eq!(owner["waits_on"]["kind"], "timer");
}

#[test]
fn a_process_blocked_on_nothing_exits_0_and_all_threads_lists_it() {
    let mut child = Command::new("sleep").arg("100").spawn().unwrap();
    let pid = child.id() as i32;
    // Until `sleep` is in its nanosleep it is running (exec, the loader), and "0 blocked"
    // is said of that too: wait for the timer, then ask without `--all-threads`.
    let seen = eventually(|| {
        let all = hang(pid, &["--all-threads"]);
        stdout(&all)
            .contains("sleeps on a timer")
            .then(|| (hang(pid, &[]), all))
    });
    let _ = child.kill();
    let _ = child.wait();
    let (out, all) = seen.expect("sleep seen sleeping on a timer with --all-threads");
    assert_eq!(all.status.code(), Some(0), "{}", stdout(&all));
    assert!(stdout(&out).contains("0 blocked"), "{}", stdout(&out));
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

/// An error is exit status 2 and one line on stderr, nothing on stdout.
fn one_line_error(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(2), "{}", stderr(out));
    assert!(out.stdout.is_empty());
    let err = stderr(out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn bad_targets_are_one_line_errors_with_status_2() {
    let err = one_line_error(&slowlab(&["hang", "999999999"]));
    assert!(err.contains("no process 999999999"), "{err}");
    if std::fs::read_to_string("/proc/2/comm").is_ok_and(|c| c.trim() == "kthreadd") {
        let err = one_line_error(&slowlab(&["hang", "2"]));
        assert!(err.contains("kernel thread"), "{err}");
    }
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id() as i32;
    eventually(|| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()?
            .contains(") Z ")
            .then_some(())
    });
    let out = hang(pid, &[]);
    let _ = child.wait();
    let err = one_line_error(&out);
    assert!(err.contains("zombie"), "{err}");
}

#[test]
fn without_permission_it_says_what_to_run_instead() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || Command::new("setpriv").arg("--version").output().is_err()
    {
        slowlab_testkit::skip("needs root and setpriv to run as another user");
        return;
    }
    // Root's init, walked as nobody.
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_slowlab"))
        .args(["hang", "1"])
        .output()
        .unwrap();
    let err = one_line_error(&out);
    assert!(err.contains("sudo slowlab hang 1"), "{err}");
}
