//! The walk on real hangs: each test starts one of `programs/hangs.c`'s
//! modes, walks it until the expected chain shows (the threads block a
//! moment after they say "ready") and checks every hop's owner. Needs root
//! and gcc; skips with the reason otherwise.

mod support;

use std::path::Path;

use slowlab_hang::{walk, EndsIn, HangError, HangReport, Options, ThreadChain, WaitKind};
use support::{can_run, eventually, Hang};

fn report(pid: i32) -> HangReport {
    walk(Path::new("/"), pid, &Options::default()).expect("walk")
}

/// The first chain that `pick` accepts, walking until one does.
fn chain_of(pid: i32, pick: impl Fn(&ThreadChain) -> bool) -> (HangReport, ThreadChain) {
    let found = eventually(|| {
        let r = report(pid);
        let c = r.threads.iter().find(|c| pick(c)).cloned()?;
        Some((r, c))
    });
    found.unwrap_or_else(|| panic!("no matching chain; last walk: {:#?}", report(pid)))
}

fn comms(c: &ThreadChain) -> Vec<&str> {
    c.chain.iter().map(|h| h.comm.as_str()).collect()
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
fn abba_deadlock_is_one_cycle_with_both_members() {
    let bin = need!();
    let hang = Hang::start(&bin, "abba", &[]);
    let (r, c) = chain_of(hang.pid, |c| c.cycle);
    assert_eq!(r.exit_code(), 3);
    assert_eq!(c.ends_in, EndsIn::Cycle);
    let mut members = comms(&c);
    members.sort();
    assert_eq!(members, ["main", "worker"]);
    for hop in &c.chain {
        let w = hop.waits_on.as_ref().unwrap();
        assert_eq!(w.kind, WaitKind::Mutex, "{hop:?}");
        assert_eq!(w.function.as_deref(), Some("transfer"), "{hop:?}");
        let owner = w.held_by.unwrap();
        assert_ne!(owner.tid, hop.tid);
        assert!(c.chain.iter().any(|h| h.tid == owner.tid));
    }
    // Both threads report the cycle.
    assert_eq!(r.threads.iter().filter(|t| t.cycle).count(), 2);
    let text = slowlab_hang::render::text(&r);
    assert!(text.contains(": deadlock"), "{text}");
}

#[test]
fn a_mutex_held_by_a_sleeping_thread_names_its_owner() {
    let bin = need!();
    let hang = Hang::start(&bin, "sleeper", &[]);
    let (r, c) = chain_of(hang.pid, |c| c.comm == "main" && c.chain.len() == 2);
    assert_eq!(r.exit_code(), 1);
    assert_eq!(comms(&c), ["main", "holder"]);
    assert_eq!(c.ends_in, EndsIn::Sleeping);
    let w = c.waits_on.as_ref().unwrap();
    assert_eq!(w.kind, WaitKind::Mutex);
    assert_eq!(w.function.as_deref(), Some("wait_for_lock"));
    assert_eq!(w.held_by.unwrap().tid, c.chain[1].tid);
    assert!(c.chain[0].kernel_stack.iter().any(|f| f.contains("futex")));
    assert!(c.chain[1]
        .user_stack
        .iter()
        .any(|f| f.contains("hold_and_sleep")));
    assert!(c.chain[0]
        .syscall
        .as_ref()
        .is_some_and(|s| s.name == "futex"));
}

#[test]
fn a_thread_id_walks_its_whole_process() {
    let bin = need!();
    let hang = Hang::start(&bin, "sleeper", &[]);
    let (_, c) = chain_of(hang.pid, |c| c.comm == "main" && c.chain.len() == 2);
    let holder = c.chain[1].tid;
    let r = report(holder);
    assert_eq!(r.pid, hang.pid);
    assert!(r.threads.iter().any(|t| t.comm == "main"));
    assert!(r
        .warnings
        .iter()
        .any(|w| w.contains("is a thread of process")));
}

#[test]
fn every_kind_of_glibc_mutex_names_its_owner() {
    let bin = need!();
    for kind in ["normal", "recursive", "errorcheck", "robust", "pi"] {
        let hang = Hang::start(&bin, "kind", &[kind]);
        let (_, c) = chain_of(hang.pid, |c| c.comm == "main" && c.chain.len() == 2);
        assert_eq!(comms(&c), ["main", "holder"], "{kind}");
        let w = c.waits_on.as_ref().unwrap();
        assert_eq!(w.kind, WaitKind::Mutex, "{kind}");
        assert_eq!(c.ends_in, EndsIn::Sleeping, "{kind}");
        if kind == "pi" {
            let call = c.chain[0].syscall.as_ref().unwrap();
            // FUTEX_LOCK_PI (6) or FUTEX_LOCK_PI2 (13), private.
            assert!(
                ["0x86", "0x8d"].contains(&call.args[1].as_str()),
                "{call:?}"
            );
            assert!(w.detail.contains("priority-inheritance"), "{}", w.detail);
        }
    }
}

#[test]
fn a_pipe_whose_writer_is_stopped_ends_in_stopped() {
    let bin = need!();
    let hang = Hang::start(&bin, "pipe", &[]);
    let (_, c) = chain_of(hang.pid, |c| c.ends_in == EndsIn::Stopped);
    assert_eq!(comms(&c), ["reader", "writer"]);
    let w = c.waits_on.as_ref().unwrap();
    assert_eq!(w.kind, WaitKind::Pipe);
    assert!(w.path.as_deref().unwrap().starts_with("pipe:["));
    assert_ne!(c.chain[1].pid, hang.pid, "the writer is the child process");
}

#[test]
fn a_flock_held_by_a_sleeping_process_names_it() {
    let bin = need!();
    let hang = Hang::start(&bin, "flock", &["{dir}/lock"]);
    let (_, c) = chain_of(hang.pid, |c| {
        c.waits_on
            .as_ref()
            .is_some_and(|w| w.kind == WaitKind::FileLock)
    });
    assert_eq!(comms(&c), ["waiter", "locker"]);
    assert_eq!(c.ends_in, EndsIn::Sleeping);
    let w = c.waits_on.as_ref().unwrap();
    assert!(w.path.as_deref().unwrap().ends_with("/lock"));
    assert!(w.detail.contains("FLOCK"), "{}", w.detail);
}

#[test]
fn a_parent_waiting_for_a_child_stuck_opening_a_fifo() {
    let bin = need!();
    let hang = Hang::start(&bin, "fifo", &["{dir}/fifo"]);
    let (_, c) = chain_of(hang.pid, |c| {
        c.chain.len() == 2
            && c.chain[1]
                .waits_on
                .as_ref()
                .is_some_and(|w| w.kind == WaitKind::Fifo)
    });
    assert_eq!(comms(&c), ["parent", "opener"]);
    assert_eq!(c.waits_on.as_ref().unwrap().kind, WaitKind::Child);
    assert_eq!(c.ends_in, EndsIn::Unknown);
    let fifo = c.chain[1].waits_on.as_ref().unwrap();
    assert!(fifo.path.as_deref().unwrap().ends_with("/fifo"));
    assert!(
        fifo.detail.contains("no process has it open for writing"),
        "{}",
        fifo.detail
    );
}

#[test]
fn a_unix_socket_client_reaches_the_servers_lock_holder() {
    let bin = need!();
    let hang = Hang::start(&bin, "unix", &[]);
    let (_, c) = chain_of(hang.pid, |c| c.chain.len() == 3);
    assert_eq!(comms(&c), ["client", "handler", "holder"]);
    assert_eq!(c.waits_on.as_ref().unwrap().kind, WaitKind::UnixSocket);
    assert_eq!(c.chain[1].waits_on.as_ref().unwrap().kind, WaitKind::Mutex);
    assert_ne!(c.chain[1].pid, hang.pid);
    assert_eq!(c.chain[1].pid, c.chain[2].pid);
    assert_eq!(c.ends_in, EndsIn::Sleeping);
}

#[test]
fn a_loopback_tcp_client_reaches_the_server_process() {
    let bin = need!();
    let hang = Hang::start(&bin, "tcp", &[]);
    let (_, c) = chain_of(hang.pid, |c| c.chain.len() == 2);
    assert_eq!(comms(&c), ["client", "server"]);
    let w = c.waits_on.as_ref().unwrap();
    assert_eq!(w.kind, WaitKind::Socket);
    assert!(w.path.as_deref().unwrap().starts_with("socket:["));
    assert_ne!(c.chain[1].pid, hang.pid);
    assert_eq!(c.ends_in, EndsIn::Sleeping);
}

/// Two threads of one process share their descriptors: each holds "the
/// other end" of the pipe the other is in. The writer is really stuck in a
/// page fault that userfaultfd leaves unserved, holding the pipe's mutex,
/// so the reader waits for that mutex (uninterruptibly), not for data: no
/// deadlock between them.
#[test]
fn a_writer_stuck_in_a_userfault_is_no_deadlock() {
    let bin = need!();
    let hang = Hang::start(&bin, "userfault", &[]);
    let (r, c) = chain_of(hang.pid, |c| c.comm == "main" && c.chain.len() == 2);
    assert_eq!(comms(&c), ["main", "writer"]);
    assert!(!c.cycle);
    assert_eq!(r.exit_code(), 1);
    // Uninterruptible in the pipe's read: its mutex, held by the writer.
    let w = c.waits_on.as_ref().unwrap();
    assert_eq!(w.kind, WaitKind::KernelLock, "{w:?}");
    assert!(w.detail.contains("the pipe's mutex"), "{}", w.detail);
    let fault = c.chain[1].waits_on.as_ref().unwrap();
    assert!(fault.detail.contains("userfaultfd"), "{}", fault.detail);
    assert_eq!(c.ends_in, EndsIn::Unknown);
}

/// A job waits for a token on a pipe that make and the other jobs hold
/// too; make waits for any of its children. Following the most telling
/// holder leads back to the job, but that loop is made of "any of" waits
/// (the sleeping job could return a token): no deadlock.
#[test]
fn a_loop_through_any_of_waits_is_no_deadlock() {
    let bin = need!();
    let hang = Hang::start(&bin, "jobserver", &[]);
    let (r, c) = chain_of(hang.pid, |c| {
        c.comm == "job"
            && c.waits_on
                .as_ref()
                .is_some_and(|w| w.kind == WaitKind::Pipe)
    });
    assert!(!c.cycle, "{c:#?}");
    assert_ne!(c.ends_in, EndsIn::Cycle);
    assert_eq!(r.exit_code(), 1);
    let last = c.chain.last().unwrap().waits_on.as_ref().unwrap();
    assert!(last.detail.contains("not a deadlock by itself"), "{c:#?}");
}

#[test]
fn a_reader_waits_for_the_rwlocks_writer() {
    let bin = need!();
    let hang = Hang::start(&bin, "rwlock", &[]);
    let (_, c) = chain_of(hang.pid, |c| c.comm == "main" && c.chain.len() == 2);
    assert_eq!(comms(&c), ["main", "writer"]);
    assert_eq!(c.waits_on.as_ref().unwrap().kind, WaitKind::Rwlock);
    assert_eq!(c.ends_in, EndsIn::Sleeping);
}

#[test]
fn join_follows_the_joined_thread_to_its_lock_holder() {
    let bin = need!();
    let hang = Hang::start(&bin, "join", &[]);
    let (_, c) = chain_of(hang.pid, |c| c.comm == "main" && c.chain.len() == 3);
    assert_eq!(comms(&c), ["main", "worker", "holder"]);
    assert_eq!(c.waits_on.as_ref().unwrap().kind, WaitKind::Join);
    assert_eq!(c.ends_in, EndsIn::Sleeping);
}

#[test]
fn condition_variable_waiters_have_no_owner_but_each_other() {
    let bin = need!();
    let hang = Hang::start(&bin, "threads", &["3"]);
    // All three on the condition variable (each passes through the mutex
    // first); the sleeping main thread is not blocked.
    let on_condvar = |c: &ThreadChain| {
        c.waits_on
            .as_ref()
            .is_some_and(|w| w.kind == WaitKind::Condvar)
    };
    let r = eventually(|| {
        let r = report(hang.pid);
        (r.threads.len() == 3 && r.threads.iter().all(on_condvar)).then_some(r)
    })
    .unwrap_or_else(|| panic!("not all on the condvar: {:#?}", report(hang.pid)));
    let c = &r.threads[0];
    let w = c.waits_on.as_ref().unwrap();
    assert!(w.held_by.is_none());
    assert!(w.detail.contains("no owner by nature"), "{}", w.detail);
    assert!(w.detail.contains("also waiting on it"), "{}", w.detail);
    assert_eq!(c.ends_in, EndsIn::Unknown);
}

#[test]
fn a_process_in_another_pid_namespace_is_named_by_both_pids() {
    let bin = need!();
    let works = std::process::Command::new("unshare")
        .args(["--pid", "--fork", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !works {
        slowlab_testkit::skip("unshare --pid does not work here");
        return;
    }
    let hang = Hang::start_wrapped(&["unshare", "--pid", "--fork"], &bin, "sleeper", &[]);
    let (r, c) = chain_of(hang.pid, |c| c.comm == "main" && c.chain.len() == 2);
    assert_eq!(r.ns_pid, vec![hang.pid, 1]);
    assert_eq!(comms(&c), ["main", "holder"]);
    let holder = c.chain[1].ns_tid.as_ref().expect("the holder's ids");
    assert_eq!(holder[0], c.chain[1].tid);
    assert!(holder[1] > 1 && holder[1] < 10, "{holder:?}");
    let text = slowlab_hang::render::text(&r);
    assert!(text.contains(", pid 1 in its namespace"), "{text}");
}

fn counter(path: &Path) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn the_target_keeps_running_after_the_walk() {
    let bin = need!();
    let hang = Hang::start(&bin, "sleeper", &["{dir}/counter"]);
    let file = hang.dir.path().join("counter");
    for _ in 0..5 {
        let r = report(hang.pid);
        assert!(r.threads.iter().all(|t| t.state != "stopped"));
    }
    let before = counter(&file);
    let advanced = eventually(|| (counter(&file) > before + 3).then_some(()));
    assert!(
        advanced.is_some(),
        "the ticker stopped counting at {before}"
    );
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", hang.pid)).unwrap();
    assert!(!stat.contains(") T "), "{stat}");
}

#[test]
fn a_pid_that_does_not_exist_is_a_clear_error() {
    let max: i32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(4_194_304);
    let err = walk(Path::new("/"), max + 1, &Options::default()).unwrap_err();
    assert!(matches!(err, HangError::NoSuchProcess(_)), "{err}");
    assert_eq!(err.to_string(), format!("no process {}", max + 1));
}

#[test]
fn a_kernel_thread_is_refused_with_where_to_look() {
    // kthreadd is pid 2 in the initial pid namespace.
    let stat = std::fs::read_to_string("/proc/2/stat").unwrap_or_default();
    if !stat.contains("(kthreadd)") {
        slowlab_testkit::skip("pid 2 is not kthreadd here (a pid namespace?)");
        return;
    }
    let err = walk(Path::new("/"), 2, &Options::default()).unwrap_err();
    assert!(matches!(err, HangError::KernelThread { .. }), "{err}");
    assert!(err.to_string().contains("/proc/2/stack"), "{err}");
}

#[test]
fn a_zombie_is_refused_naming_its_parent() {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id() as i32;
    let zombie = eventually(|| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.contains(") Z ").then_some(())
    });
    assert!(zombie.is_some());
    let err = walk(Path::new("/"), pid, &Options::default()).unwrap_err();
    let _ = child.wait();
    assert!(matches!(err, HangError::Zombie { .. }), "{err}");
    assert!(
        err.to_string()
            .contains(&format!("slowlab hang {}", std::process::id())),
        "{err}"
    );
}

#[test]
fn processes_that_exit_during_the_walk_give_an_error_or_a_report_never_a_panic() {
    for _ in 0..30 {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 0.00$RANDOM"])
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        std::thread::spawn(move || {
            let _ = child.wait();
        });
        for _ in 0..20 {
            match walk(Path::new("/"), pid, &Options { all_threads: true }) {
                Ok(_)
                | Err(HangError::NoSuchProcess(_))
                | Err(HangError::Exited(_))
                | Err(HangError::Zombie { .. })
                // Without root: the child between fork and exec is not
                // dumpable, so its /proc files are root's.
                | Err(HangError::NotPermitted { .. }) => {}
                Err(e) => panic!("unexpected error for an exiting process: {e}"),
            }
        }
    }
}
