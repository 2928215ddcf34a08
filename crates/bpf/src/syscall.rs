//! The table of path-taking syscalls whose `syscalls:sys_enter_*` tracepoints the capture
//! attaches to: each syscall's stable id (written in capture files), its tracepoint name and
//! which of its six arguments are path strings.
//!
//! This file is also compiled into the build script (`build.rs`), which generates the BPF
//! program's list of probes from [`Syscall::ALL`], so the C program and the Rust side cannot
//! disagree on ids or argument positions. It therefore uses nothing but `core`. It does not
//! know which tracepoints the running kernel has (the capture checks that at start).

macro_rules! syscalls {
    ($( $variant:ident = $id:literal, $name:literal, [$($arg:literal),+]; )+) => {
        /// A syscall whose path argument(s) the capture records.
        ///
        /// The name of a variant's tracepoint is `syscalls:sys_enter_<name>` with `<name>` from
        /// [`Syscall::name`]; that is also the name `perf script` shows. The numeric id is
        /// what capture files store: ids are never reused or renumbered (new syscalls get new
        /// ids at the end), and all are below 64 so a set of them fits a `u64` mask.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u16)]
        pub enum Syscall {
            $(
                #[doc = concat!("`", $name, "` (tracepoint `syscalls:sys_enter_", $name, "`).")]
                $variant = $id,
            )+
        }

        impl Syscall {
            /// Every syscall in the table, in id order.
            pub const ALL: &'static [Syscall] = &[$(Syscall::$variant),+];

            /// The stable id stored in capture files.
            pub fn id(self) -> u16 {
                self as u16
            }

            /// The syscall with this id, if the table has one.
            pub fn from_id(id: u16) -> Option<Syscall> {
                match id {
                    $($id => Some(Syscall::$variant),)+
                    _ => None,
                }
            }

            /// The tracepoint's syscall name, e.g. `openat` or `newfstatat`.
            pub fn name(self) -> &'static str {
                match self {
                    $(Syscall::$variant => $name,)+
                }
            }

            /// Indices (0–5) of the arguments that are user-space path strings. Syscalls
            /// with two paths (rename, link, symlink) have two; the first is the source.
            pub fn path_args(self) -> &'static [u8] {
                match self {
                    $(Syscall::$variant => &[$($arg),+],)+
                }
            }
        }
    };
}

syscalls! {
    Open = 1, "open", [0];
    Openat = 2, "openat", [1];
    Openat2 = 3, "openat2", [1];
    Creat = 4, "creat", [0];
    Newstat = 5, "newstat", [0];
    Newlstat = 6, "newlstat", [0];
    Newfstatat = 7, "newfstatat", [1];
    Statx = 8, "statx", [1];
    Stat = 9, "stat", [0];
    Lstat = 10, "lstat", [0];
    Access = 11, "access", [0];
    Faccessat = 12, "faccessat", [1];
    Faccessat2 = 13, "faccessat2", [1];
    Unlink = 14, "unlink", [0];
    Unlinkat = 15, "unlinkat", [1];
    Rmdir = 16, "rmdir", [0];
    Mkdir = 17, "mkdir", [0];
    Mkdirat = 18, "mkdirat", [1];
    Rename = 19, "rename", [0, 1];
    Renameat = 20, "renameat", [1, 3];
    Renameat2 = 21, "renameat2", [1, 3];
    Link = 22, "link", [0, 1];
    Linkat = 23, "linkat", [1, 3];
    Symlink = 24, "symlink", [0, 1];
    Symlinkat = 25, "symlinkat", [0, 2];
    Readlink = 26, "readlink", [0];
    Readlinkat = 27, "readlinkat", [1];
    Execve = 28, "execve", [0];
    Execveat = 29, "execveat", [1];
    Truncate = 30, "truncate", [0];
    Chdir = 31, "chdir", [0];
    Chroot = 32, "chroot", [0];
    Chmod = 33, "chmod", [0];
    Fchmodat = 34, "fchmodat", [1];
    Fchmodat2 = 35, "fchmodat2", [1];
    Chown = 36, "chown", [0];
    Lchown = 37, "lchown", [0];
    Fchownat = 38, "fchownat", [1];
    Utimensat = 39, "utimensat", [1];
    Mknod = 40, "mknod", [0];
    Mknodat = 41, "mknodat", [1];
    Statfs = 42, "statfs", [0];
    InotifyAddWatch = 43, "inotify_add_watch", [1];
}

impl Syscall {
    /// Parses a syscall name as perf or a person writes it: `openat`, `sys_enter_openat`,
    /// `sys_exit_openat` or `syscalls:sys_enter_openat`. Returns `None` for a syscall that
    /// is not in the table.
    pub fn from_name(name: &str) -> Option<Syscall> {
        let name = name.strip_prefix("syscalls:").unwrap_or(name);
        let name = name
            .strip_prefix("sys_enter_")
            .or_else(|| name.strip_prefix("sys_exit_"))
            .unwrap_or(name);
        let mut i = 0;
        while i < Syscall::ALL.len() {
            let s = Syscall::ALL[i];
            if s.name() == name {
                return Some(s);
            }
            i += 1;
        }
        None
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
    /// friends), the family of an existence check such as `[ -e name ]`.
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
