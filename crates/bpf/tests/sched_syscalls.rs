//! The scheduler recorder's syscall records, from its two ways of taking them (root or
//! CAP_BPF+CAP_PERFMON needed; otherwise `SKIP:`): the raw `sys_enter`/`sys_exit`
//! programs, which pick the recorded syscalls by their x86-64 numbers, record each of
//! the 23 syscalls as the programs on each syscall's own tracepoints do (the same
//! arguments, paths and return values), and leave out a 32-bit call whose number is a
//! recorded 64-bit one's.

#![cfg(target_arch = "x86_64")]

use std::sync::atomic::AtomicU32;

use slowlab_bpf::sched::format::{RecordKind, RecordedSyscall};
use slowlab_bpf::sched::{read_sched, SchedOptions, SchedRecorder};

#[path = "support/sched.rs"]
mod sched_support;

/// What a recording holds of one thread's syscalls, in order: the kind of record, the
/// syscall, its arguments (a wait's first three as its record keeps them), and its path or
/// return value.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Entry(RecordedSyscall, [u64; 3]),
    Path(RecordedSyscall, String),
    Exit(RecordedSyscall, i64),
}

/// The paths the child looks up, none of which exists; static, so that the pointers in the
/// two recordings' arguments are the same.
const PATHS: [&std::ffi::CStr; 11] = [
    c"/nonexistent/slowlab-syscalls/open",
    c"/nonexistent/slowlab-syscalls/openat",
    c"/nonexistent/slowlab-syscalls/stat",
    c"/nonexistent/slowlab-syscalls/lstat",
    c"/nonexistent/slowlab-syscalls/fstatat",
    c"/nonexistent/slowlab-syscalls/statx",
    c"/nonexistent/slowlab-syscalls/access",
    c"/nonexistent/slowlab-syscalls/faccessat",
    c"/nonexistent/slowlab-syscalls/faccessat2",
    c"/nonexistent/slowlab-syscalls/unlink",
    c"/nonexistent/slowlab-syscalls/unlinkat",
];

/// What the stat family would write to (they fail before), and the futex woken.
static mut STAT_BUF: [u8; 512] = [0; 512];
static FUTEX_WORD: AtomicU32 = AtomicU32::new(0);

/// A forked child's calls of each recorded syscall, once, with harmless arguments (paths
/// that do not exist, sizes the kernel refuses, signal 0); then, if `int_0x80`, a 32-bit
/// `write(-1, 0, 0)`, whose number (4) is the 64-bit `stat`'s. Returns the child's pid and
/// whether it ended well (a kernel without 32-bit syscalls kills it at the `int 0x80`).
fn call_each_syscall(int_0x80: bool) -> (u32, bool) {
    let p = |i: usize| PATHS[i].as_ptr() as libc::c_long;
    let buf = std::ptr::addr_of_mut!(STAT_BUF) as libc::c_long;
    let futex_word = FUTEX_WORD.as_ptr();
    const AT_FDCWD: libc::c_long = libc::AT_FDCWD as libc::c_long;
    // SAFETY: the child makes raw syscalls on memory allocated before the fork and ends
    // with _exit; nothing it calls allocates or takes a lock.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        unsafe {
            let me = libc::syscall(libc::SYS_getpid);
            libc::syscall(libc::SYS_open, p(0), libc::O_RDONLY, 0);
            libc::syscall(libc::SYS_openat, AT_FDCWD, p(1), libc::O_RDONLY, 0);
            libc::syscall(libc::SYS_stat, p(2), buf);
            libc::syscall(libc::SYS_lstat, p(3), buf);
            libc::syscall(libc::SYS_newfstatat, AT_FDCWD, p(4), buf, 0);
            libc::syscall(libc::SYS_statx, AT_FDCWD, p(5), 0, 0xfff, buf);
            libc::syscall(libc::SYS_access, p(6), libc::F_OK);
            libc::syscall(libc::SYS_faccessat, AT_FDCWD, p(7), libc::F_OK);
            libc::syscall(libc::SYS_faccessat2, AT_FDCWD, p(8), libc::F_OK, 0);
            libc::syscall(libc::SYS_unlink, p(9));
            libc::syscall(libc::SYS_unlinkat, AT_FDCWD, p(10), 0);
            // Length 0 and an unaligned address: refused.
            libc::syscall(
                libc::SYS_mmap,
                0,
                0,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                -1,
                0,
            );
            libc::syscall(libc::SYS_munmap, 1, 4096);
            libc::syscall(libc::SYS_unshare, 0);
            // CLONE_SIGHAND without CLONE_VM, and no clone_args: refused.
            libc::syscall(libc::SYS_clone, libc::CLONE_SIGHAND, 0, 0, 0, 0);
            libc::syscall(libc::SYS_clone3, 0, 0);
            libc::syscall(libc::SYS_kill, me, 0);
            libc::syscall(libc::SYS_tgkill, me, me, 0);
            libc::syscall(libc::SYS_tkill, me, 0);
            libc::syscall(libc::SYS_futex, futex_word, libc::FUTEX_WAKE, 1, 0, 0, 0);
            libc::syscall(libc::SYS_wait4, -1, 0, libc::WNOHANG, 0);
            libc::syscall(
                libc::SYS_waitid,
                libc::P_ALL,
                0,
                0,
                libc::WEXITED | libc::WNOHANG,
                0,
            );
            libc::syscall(libc::SYS_flock, -1, libc::LOCK_SH);
            if int_0x80 {
                let _ret: i64;
                // rbx (the first argument) is LLVM's: swapped in and out around the call.
                std::arch::asm!("xchg {fd}, rbx", "int 0x80", "xchg {fd}, rbx",
                    fd = inout(reg) -1i64 => _, inlateout("rax") 4i64 => _ret,
                    in("rcx") 0i64, in("rdx") 0i64);
            }
            libc::_exit(0);
        }
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    (
        pid as u32,
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
    )
}

/// Records `call_each_syscall` with `raw_syscalls` on or off; `None` when the recorder
/// cannot run here (said with `SKIP:`).
fn record(raw_syscalls: bool, int_0x80: bool) -> Option<(Vec<Seen>, bool)> {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("syscalls.slr");
    let options = SchedOptions {
        raw_syscalls,
        ..SchedOptions::default()
    };
    let recorder =
        sched_support::start_or_skip("syscall records", || SchedRecorder::start(&out, &options))?;
    let (child, ended_well) = call_each_syscall(int_0x80);
    recorder.stop().expect("the stop");
    let log = read_sched(&out).expect("the recording reads back");
    let syscall = |c| RecordedSyscall::from_u8(c).expect("a recorded syscall");
    // The child's pid (kill's, tgkill's and tkill's arguments) differs between recordings.
    let arg = |v: u64| if v == u64::from(child) { 0 } else { v };
    let mut seen: Vec<Seen> = log
        .records
        .iter()
        .filter(|r| r.tid == child)
        .filter_map(|r| match r.kind {
            RecordKind::SysCall => {
                let a = r.args();
                Some(Seen::Entry(syscall(r.c), [arg(a[0]), arg(a[1]), arg(a[2])]))
            }
            RecordKind::SysEnter => Some(Seen::Entry(
                syscall(r.c),
                [arg(r.value), arg(u64::from(r.a)), arg(u64::from(r.b))],
            )),
            RecordKind::Path => Some(Seen::Path(syscall(r.c), r.path()?.to_string())),
            RecordKind::SysExit => Some(Seen::Exit(syscall(r.c), r.value as i64)),
            _ => None,
        })
        .collect();
    // The fork's return in the child.
    if seen.first() == Some(&Seen::Exit(RecordedSyscall::Clone, 0)) {
        seen.remove(0);
    }
    Some((seen, ended_well))
}

#[test]
fn the_raw_syscall_programs_record_what_the_per_syscall_tracepoints_do() {
    let Some((tracepoints, _)) = record(false, false) else {
        return;
    };
    let Some((raw, _)) = record(true, false) else {
        return;
    };
    // Each of the 23, entered and exited once (a path after the entry of those with one).
    for s in RecordedSyscall::ALL {
        let entries = raw
            .iter()
            .filter(|e| matches!(e, Seen::Entry(c, _) if *c == s))
            .count();
        let exits = raw
            .iter()
            .filter(|e| matches!(e, Seen::Exit(c, _) if *c == s))
            .count();
        assert_eq!(
            (entries, exits),
            (1, 1),
            "{s:?} in the raw recording: {raw:#?}"
        );
    }
    let paths = raw.iter().filter(|e| matches!(e, Seen::Path(..))).count();
    assert_eq!(paths, 11, "{raw:#?}");
    assert!(
        raw.contains(&Seen::Exit(
            RecordedSyscall::Openat,
            -i64::from(libc::ENOENT)
        )),
        "{raw:#?}"
    );
    assert_eq!(raw, tracepoints);
}

#[test]
fn a_32_bit_syscall_is_not_taken_for_the_64_bit_one_of_its_number() {
    let Some((raw, ended_well)) = record(true, true) else {
        return;
    };
    if !ended_well {
        slowlab_testkit::skip(format_args!(
            "32-bit syscalls: this kernel ran no `int 0x80` (no IA32 emulation)"
        ));
        return;
    }
    // The one 64-bit stat only: `int 0x80`'s 4 is write.
    let stats = raw
        .iter()
        .filter(|e| matches!(e, Seen::Entry(RecordedSyscall::Newstat, _)))
        .count();
    assert_eq!(stats, 1, "{raw:#?}");
}
