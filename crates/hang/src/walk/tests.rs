use super::*;
use std::os::unix::fs::FileExt;

/// A fake `/proc` with process 100 (pid 7 in a namespace of its own;
/// the owner words hold those inner ids): threads 100 and 101 in an ABBA
/// deadlock, 102 asleep, 103 waiting on a word whose owner field names
/// a thread that does not exist;
/// its memory is a sparse `mem` file holding the mutexes.
fn fake_proc() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("proc/100");
    let threads = [
        (
            100,
            "main",
            "202 0x1000 0x80 0x2 0x0 0x0 0x0 0x7ff0 0x401000",
        ),
        (
            101,
            "worker",
            "202 0x2000 0x80 0x2 0x0 0x0 0x0 0x7ff0 0x401000",
        ),
        (
            102,
            "napper",
            "230 0x0 0x0 0x7ff0 0x7ff0 0x0 0x0 0x7ff0 0x401000",
        ),
        (
            103,
            "orphan",
            "202 0x3000 0x80 0x2 0x0 0x0 0x0 0x7ff0 0x401000",
        ),
    ];
    for (tid, comm, syscall) in threads {
        let t = p.join(format!("task/{tid}"));
        std::fs::create_dir_all(&t).unwrap();
        let stat = format!("{tid} ({comm}) S 1 100 100 0 -1 4194560 0 0 0 0");
        std::fs::write(t.join("stat"), &stat).unwrap();
        std::fs::write(t.join("syscall"), syscall).unwrap();
        std::fs::write(t.join("stack"), "[<0>] futex_wait_queue+0x60/0x90\n").unwrap();
        // In a pid namespace of its own: tids 7 to 10 there.
        let status = format!("Name:\t{comm}\nTgid:\t100\nNSpid:\t{tid}\t{}\n", tid - 93);
        std::fs::write(t.join("status"), status).unwrap();
        if tid == 100 {
            std::fs::write(p.join("stat"), &stat).unwrap();
            std::fs::write(p.join("syscall"), syscall).unwrap();
        }
    }
    std::fs::write(
        p.join("status"),
        "Name:\tmain\nTgid:\t100\nPPid:\t1\nNSpid:\t100\t7\n",
    )
    .unwrap();
    std::fs::write(p.join("maps"), "").unwrap();
    let mem = std::fs::File::create(p.join("mem")).unwrap();
    for (addr, value) in [
        (0x1000u64, 2i32),
        (0x1008, 8), // worker, as its namespace numbers it
        (0x2000, 2),
        (0x2008, 7),
        (0x3000, 2),
        (0x3008, 555),
    ] {
        mem.write_all_at(&value.to_le_bytes(), addr).unwrap();
    }
    dir
}

#[test]
fn a_fake_abba_deadlock_is_a_cycle_and_a_dead_owner_ends_the_chain() {
    let root = fake_proc();
    let report = walk(root.path(), 100, &Options::default()).unwrap();
    assert_eq!(report.ns_pid, vec![100, 7]);
    assert_eq!(report.thread_count, 4);
    let tids: Vec<i32> = report.threads.iter().map(|t| t.tid).collect();
    assert_eq!(tids, [100, 101, 103], "the sleeper is not blocked");
    assert_eq!(report.exit_code(), 3);
    let main = &report.threads[0];
    assert!(main.cycle);
    assert_eq!(
        main.chain.iter().map(|h| h.tid).collect::<Vec<_>>(),
        [100, 101]
    );
    let w = main.waits_on.as_ref().unwrap();
    assert_eq!(w.kind, WaitKind::Mutex);
    assert_eq!(w.address.as_deref(), Some("0x1000"));
    let orphan = &report.threads[2];
    assert_eq!(orphan.ends_in, EndsIn::Unknown);
    // Without a stack to say it is a mutex, a dead thread's id in the
    // owner's place is not trusted: the owner stays unknown.
    let w = orphan.waits_on.as_ref().unwrap();
    assert_eq!((w.kind, w.held_by), (WaitKind::Futex, None));
    let text = crate::render::text(&report);
    assert!(
        text.contains("main [100] waits on mutex 0x1000 held by worker [101], which waits on mutex 0x2000 held by main [100]: deadlock"),
        "{text}"
    );
    let all = walk(root.path(), 100, &Options { all_threads: true }).unwrap();
    let napper = all.threads.iter().find(|t| t.tid == 102).unwrap();
    assert_eq!(napper.ends_in, EndsIn::Sleeping);
}

#[test]
fn fake_bad_targets_are_clear_errors() {
    let root = fake_proc();
    let err = walk(root.path(), 999, &Options::default()).unwrap_err();
    assert_eq!(err.to_string(), "no process 999");
    let p = root.path().join("proc/100");
    std::fs::write(
        p.join("stat"),
        "100 (main) Z 42 100 100 0 -1 4194560 0 0 0 0",
    )
    .unwrap();
    for tid in [101, 102, 103] {
        std::fs::remove_dir_all(p.join(format!("task/{tid}"))).unwrap();
    }
    let err = walk(root.path(), 100, &Options::default()).unwrap_err();
    assert!(err.to_string().contains("slowlab hang 42"), "{err}");
    std::fs::write(
        p.join("stat"),
        "100 (kworker/0:1) I 2 0 0 0 -1 69238880 0 0 0 0",
    )
    .unwrap();
    let err = walk(root.path(), 100, &Options::default()).unwrap_err();
    assert!(matches!(err, HangError::KernelThread { .. }), "{err}");
}
