//! The x86-64 system calls a blocked thread is usually in, by number: their
//! names, and which of them wait on a descriptor, a path, a futex, children
//! or a timer. Numbers from the kernel's `arch/x86/entry/syscalls/syscall_64.tbl`.
//!
//! Other architectures are not described: there every call is
//! `syscall_NR` and the walk follows futexes only by their number below.

pub const READ: u64 = 0;
pub const WRITE: u64 = 1;
pub const OPEN: u64 = 2;
pub const POLL: u64 = 7;
pub const PREAD64: u64 = 17;
pub const PWRITE64: u64 = 18;
pub const READV: u64 = 19;
pub const WRITEV: u64 = 20;
pub const SELECT: u64 = 23;
pub const PAUSE: u64 = 34;
pub const NANOSLEEP: u64 = 35;
pub const CONNECT: u64 = 42;
pub const ACCEPT: u64 = 43;
pub const SENDTO: u64 = 44;
pub const RECVFROM: u64 = 45;
pub const SENDMSG: u64 = 46;
pub const RECVMSG: u64 = 47;
pub const WAIT4: u64 = 61;
pub const FCNTL: u64 = 72;
pub const FLOCK: u64 = 73;
pub const RT_SIGTIMEDWAIT: u64 = 128;
pub const RT_SIGSUSPEND: u64 = 130;
pub const FUTEX: u64 = 202;
pub const EPOLL_WAIT: u64 = 232;
pub const CLOCK_NANOSLEEP: u64 = 230;
pub const WAITID: u64 = 247;
pub const OPENAT: u64 = 257;
pub const PSELECT6: u64 = 270;
pub const PPOLL: u64 = 271;
pub const SPLICE: u64 = 275;
pub const EPOLL_PWAIT: u64 = 281;
pub const ACCEPT4: u64 = 288;
pub const RECVMMSG: u64 = 299;
pub const SENDMMSG: u64 = 307;
pub const OPENAT2: u64 = 437;
pub const EPOLL_PWAIT2: u64 = 441;

/// The call's name (`syscall_NR` when not in this table).
pub fn name(nr: u64) -> String {
    let known = match nr {
        READ => "read",
        WRITE => "write",
        OPEN => "open",
        3 => "close",
        POLL => "poll",
        PREAD64 => "pread64",
        PWRITE64 => "pwrite64",
        READV => "readv",
        WRITEV => "writev",
        SELECT => "select",
        PAUSE => "pause",
        NANOSLEEP => "nanosleep",
        CONNECT => "connect",
        ACCEPT => "accept",
        SENDTO => "sendto",
        RECVFROM => "recvfrom",
        SENDMSG => "sendmsg",
        RECVMSG => "recvmsg",
        WAIT4 => "wait4",
        FCNTL => "fcntl",
        FLOCK => "flock",
        74 => "fsync",
        75 => "fdatasync",
        RT_SIGTIMEDWAIT => "rt_sigtimedwait",
        RT_SIGSUSPEND => "rt_sigsuspend",
        FUTEX => "futex",
        62 => "kill",
        200 => "tkill",
        234 => "tgkill",
        208 => "io_getevents",
        CLOCK_NANOSLEEP => "clock_nanosleep",
        EPOLL_WAIT => "epoll_wait",
        WAITID => "waitid",
        OPENAT => "openat",
        PSELECT6 => "pselect6",
        PPOLL => "ppoll",
        SPLICE => "splice",
        EPOLL_PWAIT => "epoll_pwait",
        ACCEPT4 => "accept4",
        RECVMMSG => "recvmmsg",
        SENDMMSG => "sendmmsg",
        426 => "io_uring_enter",
        OPENAT2 => "openat2",
        EPOLL_PWAIT2 => "epoll_pwait2",
        _ => return format!("syscall_{nr}"),
    };
    known.to_string()
}

/// Calls that wait for data from their first argument, a descriptor.
pub fn reads_fd(nr: u64) -> bool {
    matches!(
        nr,
        READ | PREAD64 | READV | RECVFROM | RECVMSG | RECVMMSG | SPLICE
    )
}

/// Calls that wait for room in their first argument, a descriptor.
pub fn writes_fd(nr: u64) -> bool {
    matches!(nr, WRITE | PWRITE64 | WRITEV | SENDTO | SENDMSG | SENDMMSG)
}

/// Calls that wait for any of several descriptors.
pub fn polls(nr: u64) -> bool {
    matches!(
        nr,
        POLL | PPOLL | SELECT | PSELECT6 | EPOLL_WAIT | EPOLL_PWAIT | EPOLL_PWAIT2
    )
}

/// `FUTEX_*` commands (linux/futex.h), after masking off
/// `FUTEX_PRIVATE_FLAG` (128) and `FUTEX_CLOCK_REALTIME` (256).
pub mod futex {
    pub const CMD_MASK: u64 = 0x7f;
    pub const WAIT: u64 = 0;
    pub const LOCK_PI: u64 = 6;
    pub const TRYLOCK_PI: u64 = 8;
    pub const WAIT_BITSET: u64 = 9;
    pub const WAIT_REQUEUE_PI: u64 = 11;
    pub const LOCK_PI2: u64 = 13;
    /// The bits of a futex word that hold a tid (`FUTEX_TID_MASK`).
    pub const TID_MASK: u32 = 0x3fff_ffff;
    /// `FUTEX_WAITERS`: someone waits on the word.
    pub const WAITERS: u32 = 0x8000_0000;
    /// `FUTEX_OWNER_DIED`.
    pub const OWNER_DIED: u32 = 0x4000_0000;
}
