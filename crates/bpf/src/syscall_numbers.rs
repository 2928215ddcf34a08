//! The x86-64 numbers of the syscalls whose paths the capture's one program on the raw
//! `sys_enter` tracepoint takes ([`CaptureOptions::raw_enter`](crate::CaptureOptions::raw_enter)):
//! the captured syscalls perf does not record, by the name their tracepoint gives them.
//! From the kernel's `arch/x86/entry/syscalls/syscall_64.tbl`; `tests/capture_raw.rs`
//! checks each against libc's `SYS_*` by calling it. `build.rs` includes this file to write
//! the program's table, so it uses nothing but `core`. Those perf records (`openat`,
//! `newstat`, …) keep their own tracepoints, and syscalls x86-64 does not have (`stat`,
//! `lstat`: other architectures' names) are not here.

/// (name, number) of every captured syscall x86-64 has that perf does not record.
pub const X86_64: &[(&str, u32)] = &[
    ("execve", 59),
    ("truncate", 76),
    ("chdir", 80),
    ("rename", 82),
    ("mkdir", 83),
    ("rmdir", 84),
    ("creat", 85),
    ("link", 86),
    ("symlink", 88),
    ("readlink", 89),
    ("chmod", 90),
    ("chown", 92),
    ("lchown", 94),
    ("mknod", 133),
    ("statfs", 137),
    ("chroot", 161),
    ("inotify_add_watch", 254),
    ("mkdirat", 258),
    ("mknodat", 259),
    ("fchownat", 260),
    ("renameat", 264),
    ("linkat", 265),
    ("symlinkat", 266),
    ("readlinkat", 267),
    ("fchmodat", 268),
    ("utimensat", 280),
    ("renameat2", 316),
    ("execveat", 322),
    ("openat2", 437),
    ("fchmodat2", 452),
];

/// The x86-64 number of the syscall its tracepoint calls `name`.
pub fn x86_64_number(name: &str) -> Option<u32> {
    X86_64.iter().find(|(n, _)| *n == name).map(|&(_, nr)| nr)
}
