//! The path capture's one program on the raw `sys_enter` tracepoint
//! (`CaptureOptions::raw_enter`, what a command's recording uses: it takes the syscalls
//! perf does not record) against its programs on each syscall's own tracepoint: a thread
//! calls every captured syscall x86-64 has by its number (libc's `SYS_*`, not the
//! capture's own table), each on paths of its own under a directory that does not exist,
//! under each capture in turn; both must record the same paths, for the same syscalls and
//! arguments. Root or CAP_BPF+CAP_PERFMON needed (otherwise `SKIP:`); x86-64 only.

mod support;

use std::ffi::CString;

use slowlab_bpf::{read_paths, CaptureOptions, Syscall};
use support::{serial, start_or_skip};

/// Every captured syscall x86-64 has: its capture name, its number, and its path
/// arguments' places (the others are 0, or AT_FDCWD for a directory fd).
#[cfg(target_arch = "x86_64")]
const CALLS: &[(&str, libc::c_long, &[usize])] = &[
    ("open", libc::SYS_open, &[0]),
    ("newstat", libc::SYS_stat, &[0]),
    ("newlstat", libc::SYS_lstat, &[0]),
    ("access", libc::SYS_access, &[0]),
    ("execve", libc::SYS_execve, &[0]),
    ("truncate", libc::SYS_truncate, &[0]),
    ("chdir", libc::SYS_chdir, &[0]),
    ("rename", libc::SYS_rename, &[0, 1]),
    ("mkdir", libc::SYS_mkdir, &[0]),
    ("rmdir", libc::SYS_rmdir, &[0]),
    ("creat", libc::SYS_creat, &[0]),
    ("link", libc::SYS_link, &[0, 1]),
    ("unlink", libc::SYS_unlink, &[0]),
    ("symlink", libc::SYS_symlink, &[0, 1]),
    ("readlink", libc::SYS_readlink, &[0]),
    ("chmod", libc::SYS_chmod, &[0]),
    ("chown", libc::SYS_chown, &[0]),
    ("lchown", libc::SYS_lchown, &[0]),
    ("mknod", libc::SYS_mknod, &[0]),
    ("statfs", libc::SYS_statfs, &[0]),
    ("chroot", libc::SYS_chroot, &[0]),
    ("inotify_add_watch", libc::SYS_inotify_add_watch, &[1]),
    ("openat", libc::SYS_openat, &[1]),
    ("mkdirat", libc::SYS_mkdirat, &[1]),
    ("mknodat", libc::SYS_mknodat, &[1]),
    ("fchownat", libc::SYS_fchownat, &[1]),
    ("newfstatat", libc::SYS_newfstatat, &[1]),
    ("unlinkat", libc::SYS_unlinkat, &[1]),
    ("renameat", libc::SYS_renameat, &[1, 3]),
    ("linkat", libc::SYS_linkat, &[1, 3]),
    ("symlinkat", libc::SYS_symlinkat, &[0, 2]),
    ("readlinkat", libc::SYS_readlinkat, &[1]),
    ("fchmodat", libc::SYS_fchmodat, &[1]),
    ("faccessat", libc::SYS_faccessat, &[1]),
    ("utimensat", libc::SYS_utimensat, &[1]),
    ("renameat2", libc::SYS_renameat2, &[1, 3]),
    ("execveat", libc::SYS_execveat, &[1]),
    ("statx", libc::SYS_statx, &[1]),
    ("openat2", libc::SYS_openat2, &[1]),
    ("faccessat2", libc::SYS_faccessat2, &[1]),
    ("fchmodat2", libc::SYS_fchmodat2, &[1]),
];

/// What a capture recorded of this thread's calls: (syscall, argument, path), in order.
type Seen = Vec<(String, u8, String)>;

/// Calls every syscall of CALLS once from a thread of its own under a capture made with
/// `options`; what it recorded of that thread, and the syscalls it says it attached.
#[cfg(target_arch = "x86_64")]
fn calls_under(test: &str, options: &CaptureOptions) -> Option<(Seen, Vec<Syscall>)> {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("paths.slp");
    let capture = start_or_skip(test, &out, options)?;
    let tid = std::thread::spawn(|| {
        // Under a directory that does not exist: every call fails (ENOENT, or EBADF for
        // inotify's fd), and changes nothing.
        let path = |name: &str, arg: usize| {
            CString::new(format!("/nonexistent/slowlab-raw/{name}.{arg}")).expect("no NUL")
        };
        for &(name, nr, paths) in CALLS {
            let owned: Vec<CString> = paths.iter().map(|&a| path(name, a)).collect();
            let mut args: [libc::c_long; 6] = [0; 6];
            // The *at calls' directory fds: AT_FDCWD; inotify's fd: -1.
            if paths.iter().any(|&a| a > 0) {
                args[0] = if name == "inotify_add_watch" {
                    -1
                } else {
                    libc::c_long::from(libc::AT_FDCWD)
                };
                if paths == [1, 3] {
                    args[2] = libc::c_long::from(libc::AT_FDCWD);
                }
                if paths == [0, 2] {
                    args[1] = libc::c_long::from(libc::AT_FDCWD);
                }
            }
            for (&a, p) in paths.iter().zip(&owned) {
                args[a] = p.as_ptr() as libc::c_long;
            }
            // SAFETY: each path is a valid C string alive across the call, the other
            // arguments are 0 or a directory fd; every call fails on the missing
            // directory before it could write through a pointer.
            unsafe { libc::syscall(nr, args[0], args[1], args[2], args[3], args[4], args[5]) };
        }
        // SAFETY: gettid has no preconditions.
        unsafe { libc::gettid() as u32 }
    })
    .join()
    .expect("the calling thread");
    let stats = capture.stop().expect("stop");
    let log = read_paths(&out).expect("read capture");
    let seen = log
        .events
        .iter()
        .filter(|e| e.tid == tid)
        .map(|e| (e.syscall.name().to_string(), e.arg, e.path.clone()))
        .collect();
    Some((seen, stats.attached))
}

#[test]
#[cfg(target_arch = "x86_64")]
fn the_raw_sys_enter_program_captures_what_the_syscalls_own_tracepoints_do() {
    let _serial = serial();
    let test = "raw sys_enter against the syscalls' tracepoints";
    let Some((own, own_attached)) = calls_under(test, &CaptureOptions::default()) else {
        return;
    };
    let raw_options = CaptureOptions {
        raw_enter: true,
        ..CaptureOptions::default()
    };
    let Some((raw, raw_attached)) = calls_under(test, &raw_options) else {
        return;
    };
    assert_eq!(raw, own, "the same calls, arguments and paths both ways");
    // Every call that this kernel has a tracepoint for, each path argument once.
    for &(name, _, paths) in CALLS {
        let Some(syscall) = Syscall::from_name(name) else {
            panic!("{name} is not a captured syscall");
        };
        if !own_attached.contains(&syscall) {
            eprintln!("{name}: this kernel has no tracepoint for it; not compared");
            continue;
        }
        assert!(raw_attached.contains(&syscall), "{name}: said attached");
        let got: Vec<&str> = raw
            .iter()
            .filter(|(s, _, _)| s == name)
            .map(|(_, _, p)| p.as_str())
            .collect();
        let want: Vec<String> = paths
            .iter()
            .map(|a| format!("/nonexistent/slowlab-raw/{name}.{a}"))
            .collect();
        assert_eq!(got, want, "{name}");
    }
    assert_eq!(
        raw_attached, own_attached,
        "the same syscalls said attached"
    );
}
