//! The trace views of `slowlab analyze` (`--waits`, `--faults`, `--procs`,
//! `--syscalls`, `--offcpu-flamegraph`) on real recordings of small
//! programs whose answer is known: a thread blocked on a pipe for 200 ms
//! and who woke it, 1,000 touched pages, 50 child processes, 500 checks of
//! missing files. Each test records with `slowlab record` and skips, with
//! the reason, where perf cannot record. A time range or filter a view cannot
//! take is a one-line error, on a committed trace.

use std::path::{Path, PathBuf};

mod common;
use common::{json, one_recording_at_a_time, slowlab};

/// Records `cmd` into `dir/t.data`; returns the trace path.
fn record(dir: &Path, cmd: &[&str]) -> PathBuf {
    let trace = dir.join("t.data");
    let out = slowlab()
        .args(["record", "-o"])
        .arg(&trace)
        .arg("--")
        .args(cmd)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "record failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    trace
}

fn analyze(trace: &Path, args: &[&str]) -> serde_json::Value {
    let out = slowlab()
        .arg("analyze")
        .arg(trace)
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    json(&out)
}

/// Compiles a C program with frame pointers.
fn compile(dir: &Path, name: &str, source: &str) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let exe = dir.join(name);
    let st = std::process::Command::new("cc")
        .args(["-O1", "-fno-omit-frame-pointer", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg("-lpthread")
        .status()
        .unwrap();
    assert!(st.success(), "cc failed on {name}.c");
    exe
}

const PIPE_WAIT: &str = r#"
#include <pthread.h>
#include <unistd.h>
static int fds[2];
static void *reader(void *arg) { char c; (void)arg; read(fds[0], &c, 1); return 0; }
int main(void) {
    pthread_t t;
    pipe(fds);
    pthread_create(&t, 0, reader, 0);
    usleep(200000);
    write(fds[1], "x", 1);
    pthread_join(t, 0);
    return 0;
}
"#;

#[test]
fn waits_show_the_blocked_pipe_reader_and_the_thread_that_woke_it() {
    require_perf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path(), "pipewait", PIPE_WAIT);
    let trace = record(dir.path(), &[exe.to_str().unwrap()]);
    let v = analyze(&trace, &["--waits", "--filter", "process=pipewait"]);
    assert_eq!(v["has_sched_events"], true);
    let threads = v["threads"].as_array().unwrap();
    let pid = threads[0]["pid"].as_i64().unwrap();
    // The reader: a thread other than the main one, blocked ≥ 150 ms in a
    // pipe read, woken by the main thread (tid = pid) writing to the pipe.
    let reader = threads
        .iter()
        .find(|t| t["tid"].as_i64() != Some(pid))
        .expect("the reader thread");
    let wait = reader["waits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| {
            w["stack"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f.as_str().unwrap().contains("pipe_read"))
        })
        .unwrap_or_else(|| panic!("no pipe wait: {reader}"));
    let s = wait["wait_s"].as_f64().unwrap();
    assert!((0.15..0.5).contains(&s), "blocked {s} s");
    let waker = &wait["wakers"][0];
    assert_eq!(waker["tid"].as_i64(), Some(pid), "{wait}");
    assert!(
        waker["stack"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f.as_str().unwrap().contains("pipe_write")),
        "the waker's stack is in the pipe write: {waker}"
    );
    // The off-CPU flame graph has that wait.
    let svg = dir.path().join("off.svg");
    let out = slowlab()
        .arg("analyze")
        .arg(&trace)
        .args(["--filter", "process=pipewait", "--offcpu-flamegraph"])
        .arg(&svg)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("<svg") && text.contains("pipe_read"));
}

// It lives a few milliseconds: gone, on a busy machine, before the eBPF recorder (the
// default backend) could read its /proc maps, its code is named from the mappings the
// kernel reported (CI once had all 1,007 faults' user frames unnamed before it did).
const TOUCH_PAGES: &str = r#"
#include <sys/mman.h>
__attribute__((noinline)) void touch_pages(char *p, int n) {
    for (int i = 0; i < n; i++) p[i * 4096] = 1;
}
int main(void) {
    char *p = mmap(0, 1000 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    touch_pages(p, 1000);
    return 0;
}
"#;

#[test]
fn faults_count_the_touched_pages_at_their_stack() {
    require_perf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path(), "touch", TOUCH_PAGES);
    let trace = record(dir.path(), &[exe.to_str().unwrap()]);
    let v = analyze(&trace, &["--faults", "--filter", "process=touch"]);
    assert_eq!(v["has_fault_events"], true);
    let p = &v["processes"][0];
    assert_eq!(p["comm"], "touch");
    let faults = p["faults"].as_u64().unwrap();
    // 1,000 pages plus the loader's few dozen.
    assert!((1000..1300).contains(&faults), "{faults} faults");
    let top = &p["stacks"][0];
    assert!(top["count"].as_u64().unwrap() >= 1000, "{top}");
    assert!(
        top["stack"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "touch_pages"),
        "{top}"
    );
}

#[test]
fn procs_have_fifty_children_with_their_parent_and_lifetimes() {
    require_perf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let trace = record(
        dir.path(),
        &["sh", "-c", "for i in $(seq 50); do /bin/true; done"],
    );
    let v = analyze(&trace, &["--procs"]);
    let procs = v["processes"].as_array().unwrap();
    let children: Vec<&serde_json::Value> = procs.iter().filter(|p| p["comm"] == "true").collect();
    assert_eq!(children.len(), 50, "{} `true` processes", children.len());
    let parent = children[0]["ppid"].as_i64().expect("a parent");
    let sh = procs
        .iter()
        .find(|p| p["pid"].as_i64() == Some(parent))
        .expect("the parent is in the trace");
    assert_eq!(sh["comm"], "sh");
    for c in &children {
        assert_eq!(c["ppid"].as_i64(), Some(parent));
        let d = c["duration_s"].as_f64().expect("a lifetime");
        assert!(d > 0.0 && d < 1.0, "{c}");
    }
    let created: u64 = v["created"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert!(created >= 51, "{created} launches counted");
}

#[test]
fn syscalls_count_missing_files_and_fold_their_names() {
    require_perf!();
    let _one = one_recording_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("absent");
    let script = format!(
        "i=0; while [ $i -lt 500 ]; do [ -e {}.$i ]; i=$((i+1)); done",
        base.display()
    );
    let trace = record(dir.path(), &["sh", "-c", &script]);
    let v = analyze(&trace, &["--syscalls", "--filter", "process=sh"]);
    // The shell that made the most stat calls: the test's, not another `sh` on the
    // machine (the recording is system-wide; CI's picked one that had more kinds of call).
    let stats_of = |p: &serde_json::Value| -> u64 {
        p["syscalls"].as_array().map_or(0, |calls| {
            calls
                .iter()
                .filter(|s| s["name"] == "newfstatat" || s["name"] == "newstat")
                .map(|s| s["count"].as_u64().unwrap_or(0))
                .sum()
        })
    };
    let p = v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .max_by_key(|p| stats_of(p))
        .unwrap()
        .clone();
    // dash's `[ -e ]` is a newfstatat: 500 of them from one call site,
    // failing with ENOENT (the loader adds its own failing lookups).
    let stat = p["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "newfstatat" || s["name"] == "newstat")
        .unwrap_or_else(|| panic!("no stat calls: {}", p["syscalls"]));
    assert!(
        stat["errors"]["ENOENT"].as_u64().unwrap_or(0) >= 500,
        "{stat}"
    );
    assert!(
        stat["sites"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["count"] == 500),
        "one site made the 500 checks: {stat}"
    );
    if v["paths_note"].is_string() && v["paths_matched"] == 0 {
        slowlab_testkit::skip(format_args!("paths: {}", v["paths_note"]));
        return;
    }
    // Numbers in the names fold into N (the temporary directory's too).
    let folded = p["paths"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["pattern"].as_str().unwrap().ends_with("/absent.N"))
        .unwrap_or_else(|| {
            panic!(
                "no pattern …/absent.N among {}",
                p["paths"].as_array().unwrap().len()
            )
        });
    assert_eq!(folded["first"], format!("{}.0", base.display()));
    assert_eq!(folded["last"], format!("{}.499", base.display()));
    assert_eq!(folded["count"], 500);
    assert_eq!(folded["failed"], 500);
    assert_eq!(folded["errors"]["ENOENT"], 500);
}

#[test]
fn a_range_or_filter_a_view_cannot_take_is_a_one_line_error() {
    let fixture =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../perf/tests/fixtures/hot-fp.perfdata");
    for (args, says) in [
        (&["--from", "NaN"][..], "`NaN` is not a duration"),
        (&["--to=-1"], "`-1` is not a duration"),
        (
            &["--from", "2", "--to", "1"],
            "--from 2 is not before --to 1",
        ),
        (
            &["--findings", "--from", "1"],
            "--findings runs the detectors on the whole trace",
        ),
        (&["--findings", "--filter", "pid=1"], "do not apply to it"),
        (
            &["--critical-path", "--to", "1"],
            "choose it with --root PID",
        ),
    ] {
        let out = slowlab()
            .arg("analyze")
            .arg(&fixture)
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}
