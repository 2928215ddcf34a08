//! The one table of the syscalls slowlab knows: for each its name, its stable id in path
//! capture files (for the syscalls whose path strings the eBPF capture records), which of
//! its arguments are paths, and what slowlab does with it (an existence check, a call that
//! takes a path, a syscall `slowlab record` asks perf to record, a bulk data mover).
//!
//! `record` derives perf's list of syscall tracepoints from it ([`RECORDED_BY_PERF`]), the
//! `bpf` crate its probes and capture ids ([`Syscall`]), `analyze` its predicates
//! ([`is_existence_check`], [`takes_path`], [`moves_data`]).
//!
//! The eBPF crate's build script compiles this file too (with `#[path]`), so it uses
//! nothing but `core`: no allocation, no other module of this crate. It does not know which
//! tracepoints the running kernel has (the capture and `record` check that at start).

/// The syscall is an existence check: it only looks a path up (`stat` and friends,
/// `access`), as `[ -e name ]` does.
const EXISTENCE_CHECK: u8 = 1 << 0;
/// The `--syscalls` view expects a captured path for it (and counts it as missing
/// otherwise). Narrower than "has path arguments": rmdir, link, chmod and a few other
/// captured syscalls are not counted, as before the table was shared.
const TAKES_PATH: u8 = 1 << 1;
/// `slowlab record` asks perf for its `sys_enter_*` and `sys_exit_*` tracepoints.
const RECORDED: u8 = 1 << 2;
/// The syscall moves bulk data (read, write, copy, splice, send, receive): a process
/// spending its kernel time in it is doing its job.
const MOVES_DATA: u8 = 1 << 3;
/// `slowlab record` records it without a call stack: it names the resource of a wait
/// (a futex word, a child), whose stack is already the blocking context switch's.
const NO_STACK: u8 = 1 << 4;
/// No flag.
const NONE: u8 = 0;

/// Some(the variant) for a row with a capture id, None for the others.
macro_rules! capture_of {
    () => {
        None
    };
    ($variant:expr) => {
        Some($variant)
    };
}

macro_rules! syscall_table {
    ($(
        $name:literal,
        $($variant:ident = $id:literal)? $(-)?,
        $path_args:expr,
        $flags:expr;
    )+) => {
        /// A syscall whose path argument(s) the eBPF capture records.
        ///
        /// The name of a variant's tracepoint is `syscalls:sys_enter_<name>` with `<name>`
        /// from [`Syscall::name`]; that is also the name `perf script` shows. The numeric
        /// id is what capture files store: ids are never reused or renumbered (new
        /// syscalls get new ids after the highest), and all are below 64 so a set of them
        /// fits a `u64` mask.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u16)]
        pub enum Syscall {
            $($(
                #[doc = concat!("`", $name, "` (tracepoint `syscalls:sys_enter_", $name, "`).")]
                $variant = $id,
            )?)+
        }

        /// The captured syscalls in the table's order.
        const CAPTURED_IN_TABLE_ORDER: &[Syscall] = &[$($(Syscall::$variant,)?)+];

        impl Syscall {
            /// The stable id stored in capture files.
            pub const fn id(self) -> u16 {
                self as u16
            }

            /// The syscall with this id, if the table has one.
            pub const fn from_id(id: u16) -> Option<Syscall> {
                match id {
                    $($($id => Some(Syscall::$variant),)?)+
                    _ => None,
                }
            }

            /// Its row of the table.
            pub const fn info(self) -> &'static SyscallInfo {
                match self {
                    $($(Syscall::$variant => &SyscallInfo {
                        name: $name,
                        capture: Some(Syscall::$variant),
                        path_args: &$path_args,
                        flags: $flags,
                    },)?)+
                }
            }
        }

        /// Every syscall slowlab knows, one row each. The order matters only for the
        /// syscalls `slowlab record` records: perf is given their tracepoints in this order.
        pub const SYSCALLS: &[SyscallInfo] = &[$(
            SyscallInfo {
                name: $name,
                capture: capture_of!($(Syscall::$variant)?),
                path_args: &$path_args,
                flags: $flags,
            },
        )+];

        /// The table's row of the syscall called `name` (as its tracepoint and kernel entry
        /// `sys_<name>` spell it: `newfstatat`, `pread64`), if it has one.
        pub fn lookup(name: &str) -> Option<&'static SyscallInfo> {
            // A match compiles to a comparison by length, then bytes: the detectors ask
            // once per recorded call.
            match name {
                $($name => Some(&SyscallInfo {
                    name: $name,
                    capture: capture_of!($(Syscall::$variant)?),
                    path_args: &$path_args,
                    flags: $flags,
                }),)+
                _ => None,
            }
        }
    };
}

syscall_table! {
    // name               capture id          path args  flags
    // Recorded by `slowlab record`, in the order perf is given them.
    "openat",             Openat = 2,         [1],       RECORDED | TAKES_PATH;
    "open",               Open = 1,           [0],       RECORDED | TAKES_PATH;
    "newstat",            Newstat = 5,        [0],       RECORDED | TAKES_PATH | EXISTENCE_CHECK;
    "newlstat",           Newlstat = 6,       [0],       RECORDED | TAKES_PATH | EXISTENCE_CHECK;
    "newfstatat",         Newfstatat = 7,     [1],       RECORDED | TAKES_PATH | EXISTENCE_CHECK;
    "statx",              Statx = 8,          [1],       RECORDED | TAKES_PATH | EXISTENCE_CHECK;
    "access",             Access = 11,        [0],       RECORDED | TAKES_PATH | EXISTENCE_CHECK;
    "faccessat",          Faccessat = 12,     [1],       RECORDED | TAKES_PATH | EXISTENCE_CHECK;
    "faccessat2",         Faccessat2 = 13,    [1],       RECORDED | TAKES_PATH | EXISTENCE_CHECK;
    "mmap",               -,                  [],        RECORDED;
    "munmap",             -,                  [],        RECORDED;
    "unlink",             Unlink = 14,        [0],       RECORDED | TAKES_PATH;
    "unlinkat",           Unlinkat = 15,      [1],       RECORDED | TAKES_PATH;
    "unshare",            -,                  [],        RECORDED;
    "clone",              -,                  [],        RECORDED;
    "clone3",             -,                  [],        RECORDED;
    // Signals sent to a process or thread: who killed a command.
    "kill",               -,                  [],        RECORDED;
    "tgkill",             -,                  [],        RECORDED;
    "tkill",              -,                  [],        RECORDED;
    // What a wait waits for (issue "Who holds it?"): the futex word and its operation,
    // the child waited for, the file locked. Their stacks are the switches'.
    "futex",              -,                  [],        RECORDED | NO_STACK;
    "wait4",              -,                  [],        RECORDED | NO_STACK;
    "waitid",             -,                  [],        RECORDED | NO_STACK;
    "flock",              -,                  [],        RECORDED | NO_STACK;
    // The other syscalls whose paths the eBPF capture records, by id.
    "openat2",            Openat2 = 3,        [1],       TAKES_PATH;
    "creat",              Creat = 4,          [0],       TAKES_PATH;
    "stat",               Stat = 9,           [0],       TAKES_PATH | EXISTENCE_CHECK;
    "lstat",              Lstat = 10,         [0],       TAKES_PATH | EXISTENCE_CHECK;
    "rmdir",              Rmdir = 16,         [0],       NONE;
    "mkdir",              Mkdir = 17,         [0],       TAKES_PATH;
    "mkdirat",            Mkdirat = 18,       [1],       TAKES_PATH;
    "rename",             Rename = 19,        [0, 1],    TAKES_PATH;
    "renameat",           Renameat = 20,      [1, 3],    TAKES_PATH;
    "renameat2",          Renameat2 = 21,     [1, 3],    TAKES_PATH;
    "link",               Link = 22,          [0, 1],    NONE;
    "linkat",             Linkat = 23,        [1, 3],    NONE;
    "symlink",            Symlink = 24,       [0, 1],    NONE;
    "symlinkat",          Symlinkat = 25,     [0, 2],    NONE;
    "readlink",           Readlink = 26,      [0],       TAKES_PATH;
    "readlinkat",         Readlinkat = 27,    [1],       TAKES_PATH;
    "execve",             Execve = 28,        [0],       TAKES_PATH;
    "execveat",           Execveat = 29,      [1],       TAKES_PATH;
    "truncate",           Truncate = 30,      [0],       TAKES_PATH;
    "chdir",              Chdir = 31,         [0],       TAKES_PATH;
    "chroot",             Chroot = 32,        [0],       NONE;
    "chmod",              Chmod = 33,         [0],       NONE;
    "fchmodat",           Fchmodat = 34,      [1],       NONE;
    "fchmodat2",          Fchmodat2 = 35,     [1],       NONE;
    "chown",              Chown = 36,         [0],       NONE;
    "lchown",             Lchown = 37,        [0],       NONE;
    "fchownat",           Fchownat = 38,      [1],       NONE;
    "utimensat",          Utimensat = 39,     [1],       NONE;
    "mknod",              Mknod = 40,         [0],       NONE;
    "mknodat",            Mknodat = 41,       [1],       NONE;
    "statfs",             Statfs = 42,        [0],       NONE;
    "inotify_add_watch",  InotifyAddWatch = 43, [1],     NONE;
    // Path syscalls the capture does not record (32-bit names).
    "fstatat64",          -,                  [1],       TAKES_PATH | EXISTENCE_CHECK;
    // Bulk data movers.
    "read",               -,                  [],        MOVES_DATA;
    "readv",              -,                  [],        MOVES_DATA;
    "pread64",            -,                  [],        MOVES_DATA;
    "preadv",             -,                  [],        MOVES_DATA;
    "preadv2",            -,                  [],        MOVES_DATA;
    "write",              -,                  [],        MOVES_DATA;
    "writev",             -,                  [],        MOVES_DATA;
    "pwrite64",           -,                  [],        MOVES_DATA;
    "pwritev",            -,                  [],        MOVES_DATA;
    "pwritev2",           -,                  [],        MOVES_DATA;
    "copy_file_range",    -,                  [],        MOVES_DATA;
    "splice",             -,                  [],        MOVES_DATA;
    "vmsplice",           -,                  [],        MOVES_DATA;
    "tee",                -,                  [],        MOVES_DATA;
    "sendfile",           -,                  [],        MOVES_DATA;
    "sendfile64",         -,                  [],        MOVES_DATA;
    "sendmsg",            -,                  [],        MOVES_DATA;
    "sendmmsg",           -,                  [],        MOVES_DATA;
    "recvmsg",            -,                  [],        MOVES_DATA;
    "recvmmsg",           -,                  [],        MOVES_DATA;
    "sendto",             -,                  [],        MOVES_DATA;
    "recvfrom",           -,                  [],        MOVES_DATA;
    "io_uring_enter",     -,                  [],        MOVES_DATA;
}

/// One row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyscallInfo {
    /// The name as its tracepoint (`syscalls:sys_enter_<name>`) and its kernel entry
    /// (`__x64_sys_<name>`) spell it.
    pub name: &'static str,
    /// The syscall's id in path capture files, when the eBPF capture records its paths.
    pub capture: Option<Syscall>,
    /// Indices (0–5) of the arguments that are user-space path strings; with two paths
    /// (rename, link, symlink) the first is the source.
    pub path_args: &'static [u8],
    flags: u8,
}

impl SyscallInfo {
    /// Only looks a path up (the stat family, access): an existence check.
    pub const fn is_existence_check(&self) -> bool {
        self.flags & EXISTENCE_CHECK != 0
    }

    /// The `--syscalls` view expects a captured path for it.
    pub const fn takes_path(&self) -> bool {
        self.flags & TAKES_PATH != 0
    }

    /// `slowlab record` records its entry and exit.
    pub const fn recorded_by_perf(&self) -> bool {
        self.flags & RECORDED != 0
    }

    /// `slowlab record` records it without a call stack.
    pub const fn recorded_without_stack(&self) -> bool {
        self.flags & NO_STACK != 0
    }

    /// Moves bulk data (read, write, copy, splice, send, receive).
    pub const fn moves_data(&self) -> bool {
        self.flags & MOVES_DATA != 0
    }

    /// The id capture files store for it, if the capture records it.
    pub const fn capture_id(&self) -> Option<u16> {
        match self.capture {
            Some(s) => Some(s.id()),
            None => None,
        }
    }
}

/// Whether syscall `name` only checks that a path exists (the stat family, access).
pub fn is_existence_check(name: &str) -> bool {
    lookup(name).is_some_and(|s| s.is_existence_check())
}

/// Whether syscall `name` takes a path the `--syscalls` view expects to see captured.
pub fn takes_path(name: &str) -> bool {
    lookup(name).is_some_and(|s| s.takes_path())
}

/// Whether syscall `name` moves bulk data (read, write, copy, splice, send, receive).
pub fn moves_data(name: &str) -> bool {
    lookup(name).is_some_and(|s| s.moves_data())
}

/// The index of the open flags among the arguments of `open` and `openat` (`O_CREAT`,
/// `O_EXCL`, …); `None` for other syscalls (`openat2` passes them in a struct).
pub fn open_flags_arg(name: &str) -> Option<usize> {
    match name {
        "open" => Some(1),
        "openat" => Some(2),
        _ => None,
    }
}

/// `AT_EMPTY_PATH`: a `*at` call with it acts on its directory fd itself, and its path is
/// empty (glibc's `fstat(fd)` is `newfstatat(fd, "", buf, AT_EMPTY_PATH)`).
pub const AT_EMPTY_PATH: u64 = 0x1000;

/// The index of the flags among the arguments of the recorded syscalls whose flags may
/// hold [`AT_EMPTY_PATH`]; `None` for the others.
pub fn at_flags_arg(name: &str) -> Option<usize> {
    match name {
        "newfstatat" | "faccessat2" => Some(3),
        "statx" => Some(2),
        _ => None,
    }
}

/// Whether a call of syscall `name` with `args` names no path: [`AT_EMPTY_PATH`] is in its
/// flags (an `fstat` of an open file), so there is no path to capture.
pub fn names_no_path(name: &str, args: &[u64; 6]) -> bool {
    at_flags_arg(name).is_some_and(|i| args[i] & AT_EMPTY_PATH != 0)
}

const CAPTURED_COUNT: usize = CAPTURED_IN_TABLE_ORDER.len();

/// The captured syscalls by id. Fails the build if an id is 64 or more (it would not fit
/// the capture files' `u64` mask).
const CAPTURED_IN_ID_ORDER: [Syscall; CAPTURED_COUNT] = {
    let mut out = [CAPTURED_IN_TABLE_ORDER[0]; CAPTURED_COUNT];
    let (mut id, mut n) = (0u16, 0);
    while id < 64 {
        if let Some(s) = Syscall::from_id(id) {
            out[n] = s;
            n += 1;
        }
        id += 1;
    }
    assert!(n == CAPTURED_COUNT, "every capture id must be below 64");
    out
};

const RECORDED_COUNT: usize = {
    let (mut i, mut n) = (0, 0);
    while i < SYSCALLS.len() {
        if SYSCALLS[i].recorded_by_perf() {
            n += 1;
        }
        i += 1;
    }
    n
};

const RECORDED_NAMES: [&str; RECORDED_COUNT] = {
    let mut out = [""; RECORDED_COUNT];
    let (mut i, mut n) = (0, 0);
    while i < SYSCALLS.len() {
        if SYSCALLS[i].recorded_by_perf() {
            out[n] = SYSCALLS[i].name;
            n += 1;
        }
        i += 1;
    }
    out
};

/// The syscalls whose entry and exit `slowlab record` asks perf to record, in the order
/// it gives them.
pub const RECORDED_BY_PERF: &[&str] = &RECORDED_NAMES;

impl Syscall {
    /// Every syscall the capture records, in id order.
    pub const ALL: &'static [Syscall] = &CAPTURED_IN_ID_ORDER;

    /// The tracepoint's syscall name, e.g. `openat` or `newfstatat`.
    pub const fn name(self) -> &'static str {
        self.info().name
    }

    /// Indices (0–5) of the arguments that are user-space path strings. Syscalls
    /// with two paths (rename, link, symlink) have two; the first is the source.
    pub const fn path_args(self) -> &'static [u8] {
        self.info().path_args
    }

    /// Parses a syscall name as perf or a person writes it: `openat`, `sys_enter_openat`,
    /// `sys_exit_openat` or `syscalls:sys_enter_openat`. Returns `None` for a syscall
    /// whose paths the capture does not record.
    pub fn from_name(name: &str) -> Option<Syscall> {
        let name = name.strip_prefix("syscalls:").unwrap_or(name);
        let name = name
            .strip_prefix("sys_enter_")
            .or_else(|| name.strip_prefix("sys_exit_"))
            .unwrap_or(name);
        lookup(name)?.capture
    }

    /// The tracepoint's name inside the `syscalls` category, e.g. `sys_enter_openat`.
    pub fn tracepoint(self) -> TracepointName {
        TracepointName(self)
    }

    /// True when a path that cannot be read at `sys_enter` (its page is not in memory yet)
    /// may be read again at the syscall's `sys_exit`, after the kernel has faulted it in.
    /// Not for `execve`: by its exit the caller's memory has been replaced.
    pub fn retries_at_exit(self) -> bool {
        !matches!(self, Syscall::Execve | Syscall::Execveat)
    }

    /// True for the syscalls that only look a path up and report on it (`stat` and
    /// friends), the family of an existence check such as `[ -e name ]`; unlike
    /// [`SyscallInfo::is_existence_check`], not `access`.
    pub fn is_stat_family(self) -> bool {
        matches!(
            self,
            Syscall::Newstat
                | Syscall::Newlstat
                | Syscall::Newfstatat
                | Syscall::Statx
                | Syscall::Stat
                | Syscall::Lstat
        )
    }
}

/// Displays as `sys_enter_<name>`; see [`Syscall::tracepoint`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TracepointName(Syscall);

impl core::fmt::Display for TracepointName {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "sys_enter_{}", self.0.name())
    }
}

impl core::fmt::Display for Syscall {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_lookup_finds_every_row() {
        for (i, row) in SYSCALLS.iter().enumerate() {
            assert_eq!(lookup(row.name), Some(row), "{}", row.name);
            assert!(
                SYSCALLS[..i].iter().all(|r| r.name != row.name),
                "{} twice",
                row.name
            );
        }
        assert_eq!(lookup("no_such_syscall"), None);
    }

    #[test]
    fn every_captured_syscall_has_one_row_that_agrees_with_it() {
        for &s in Syscall::ALL {
            let rows: Vec<_> = SYSCALLS.iter().filter(|r| r.capture == Some(s)).collect();
            assert_eq!(rows.len(), 1, "{s}");
            assert_eq!(rows[0], s.info());
            assert_eq!(rows[0].capture_id(), Some(s.id()));
            assert_eq!(Syscall::from_id(s.id()), Some(s));
            assert_eq!(Syscall::from_name(s.name()), Some(s));
            // The BPF program has probes for one or two path arguments, each one of six.
            assert!(matches!(s.path_args().len(), 1 | 2), "{s}");
            assert!(s.path_args().iter().all(|&a| a < 6), "{s}");
        }
        let captured = SYSCALLS.iter().filter(|r| r.capture.is_some()).count();
        assert_eq!(Syscall::ALL.len(), captured);
    }

    #[test]
    fn all_is_in_id_order_and_ids_fit_the_mask() {
        assert!(Syscall::ALL.windows(2).all(|w| w[0].id() < w[1].id()));
        assert!(Syscall::ALL.iter().all(|s| s.id() < 64));
        assert_eq!(Syscall::from_id(0), None);
        assert_eq!(Syscall::from_id(0xFFFF), None);
    }

    #[test]
    fn capture_ids_are_the_ones_capture_files_store() {
        // Capture files written by earlier versions store these ids.
        for (name, id) in [
            ("open", 1),
            ("openat", 2),
            ("newfstatat", 7),
            ("access", 11),
            ("unlinkat", 15),
            ("renameat2", 21),
            ("execve", 28),
            ("inotify_add_watch", 43),
        ] {
            assert_eq!(
                lookup(name).and_then(|r| r.capture_id()),
                Some(id),
                "{name}"
            );
        }
    }

    #[test]
    fn flags_are_consistent() {
        for row in SYSCALLS {
            if row.is_existence_check() {
                assert!(row.takes_path(), "{}", row.name);
            }
            if row.takes_path() {
                assert!(!row.path_args.is_empty(), "{}", row.name);
            }
            if row.moves_data() {
                assert!(
                    row.path_args.is_empty() && !row.takes_path(),
                    "{}",
                    row.name
                );
            }
        }
    }

    #[test]
    fn predicates_read_the_table() {
        assert!(is_existence_check("newfstatat") && is_existence_check("fstatat64"));
        assert!(!is_existence_check("openat") && takes_path("openat"));
        assert!(!takes_path("rmdir") && lookup("rmdir").is_some());
        assert!(moves_data("read") && moves_data("io_uring_enter"));
        assert!(!moves_data("openat") && !moves_data("no_such_syscall"));
        assert_eq!(open_flags_arg("openat"), Some(2));
        assert_eq!(open_flags_arg("openat2"), None);
    }

    #[test]
    fn recorded_syscalls_keep_the_table_order() {
        let from_rows: Vec<&str> = SYSCALLS
            .iter()
            .filter(|r| r.recorded_by_perf())
            .map(|r| r.name)
            .collect();
        assert_eq!(RECORDED_BY_PERF, from_rows.as_slice());
        assert_eq!(RECORDED_BY_PERF.first(), Some(&"openat"));
    }

    #[test]
    fn names_parse_as_perf_writes_them() {
        for name in [
            "openat",
            "sys_enter_openat",
            "sys_exit_openat",
            "syscalls:sys_enter_openat",
        ] {
            assert_eq!(Syscall::from_name(name), Some(Syscall::Openat), "{name}");
        }
        assert_eq!(Syscall::from_name("mmap"), None, "recorded, not captured");
        assert_eq!(Syscall::Openat.tracepoint().to_string(), "sys_enter_openat");
        assert!(!Syscall::Execve.retries_at_exit() && Syscall::Openat.retries_at_exit());
    }
}
