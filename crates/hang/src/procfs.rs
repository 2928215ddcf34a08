//! The `/proc` files the walk reads, parsed by pure functions (tested on
//! strings), and [`Proc`], which reads them under a root directory (`/` on
//! a live machine, a fake tree in tests).
//!
//! Parsing never fails loudly: a line that does not parse is skipped or the
//! value is `None`. Reading tells "gone" (the task exited) from "not
//! permitted" from other errors, because the walk answers each differently.
//! Nothing here interprets what a thread waits on.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// The fields of `/proc/PID/task/TID/stat` the walk uses.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskStat {
    pub comm: String,
    pub state: char,
    pub ppid: i32,
    /// `task->flags` (`PF_KTHREAD` = 0x0020_0000).
    pub flags: u64,
}

/// `PF_KTHREAD` in the stat file's flags: a kernel thread.
pub const PF_KTHREAD: u64 = 0x0020_0000;

/// Parses a stat line: `pid (comm) S ppid …`; comm may hold spaces and
/// parentheses, so it ends at the last `)`.
pub fn parse_stat(text: &str) -> Option<TaskStat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let mut rest = text.get(close + 1..)?.split_whitespace();
    let state = rest.next()?.chars().next()?;
    let ppid = rest.next()?.parse().ok()?;
    // pgrp session tty_nr tpgid, then flags
    let flags = rest.nth(4)?.parse().ok()?;
    Some(TaskStat {
        comm,
        state,
        ppid,
        flags,
    })
}

/// The state letter as a word.
pub fn state_word(state: char) -> &'static str {
    match state {
        'R' => "running",
        'S' => "sleeping",
        'D' => "disk-sleep",
        'T' => "stopped",
        't' => "traced",
        'Z' => "zombie",
        'X' => "dead",
        'I' => "idle",
        'P' => "parked",
        'W' => "waking",
        _ => "unknown",
    }
}

/// `/proc/PID/task/TID/syscall`.
#[derive(Clone, Debug, PartialEq)]
pub enum SyscallState {
    /// On a CPU: the kernel cannot say.
    Running,
    /// Blocked or preempted outside any system call (a page fault, user code).
    NotInSyscall { sp: u64, pc: u64 },
    In {
        nr: u64,
        args: [u64; 6],
        sp: u64,
        pc: u64,
    },
}

/// Parses `running`, `-1 SP PC` or `NR A1 … A6 SP PC` (numbers in hex
/// with `0x`, the syscall number in decimal).
pub fn parse_syscall(text: &str) -> Option<SyscallState> {
    let text = text.trim();
    if text == "running" {
        return Some(SyscallState::Running);
    }
    let fields: Vec<&str> = text.split_whitespace().collect();
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    match fields.as_slice() {
        ["-1", sp, pc] => Some(SyscallState::NotInSyscall {
            sp: hex(sp)?,
            pc: hex(pc)?,
        }),
        [nr, a @ .., sp, pc] if a.len() == 6 => {
            let mut args = [0u64; 6];
            for (slot, s) in args.iter_mut().zip(a) {
                *slot = hex(s)?;
            }
            Some(SyscallState::In {
                nr: nr.parse().ok()?,
                args,
                sp: hex(sp)?,
                pc: hex(pc)?,
            })
        }
        _ => None,
    }
}

/// The fields of `/proc/PID/status` the walk uses.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Status {
    pub tgid: i32,
    pub ppid: i32,
    /// `NSpid`: the pid in each nested namespace, outermost first.
    pub nspid: Vec<i32>,
}

pub fn parse_status(text: &str) -> Status {
    let mut status = Status::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key {
            "Tgid" => status.tgid = value.parse().unwrap_or(0),
            "PPid" => status.ppid = value.parse().unwrap_or(0),
            "NSpid" => {
                status.nspid = value
                    .split_whitespace()
                    .filter_map(|v| v.parse().ok())
                    .collect()
            }
            _ => {}
        }
    }
    status
}

/// `/proc/PID/task/TID/stack`: `[<0>] function+0x1a/0x40` lines, as
/// `function+0x1a/0x40`, innermost first.
pub fn parse_kernel_stack(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| {
            let frame = match line.split_once("] ") {
                Some((_, f)) => f,
                None => line,
            };
            let frame = frame.trim();
            (!frame.is_empty()).then(|| frame.to_string())
        })
        .collect()
}

/// The function name of a kernel frame (`mutex_lock+0x1a/0x40` → `mutex_lock`).
pub fn frame_function(frame: &str) -> &str {
    frame.split(['+', ' ']).next().unwrap_or(frame)
}

/// A line of `/proc/locks`.
#[derive(Clone, Debug, PartialEq)]
pub struct FileLock {
    /// `FLOCK`, `POSIX`, `OFDLCK`, `LEASE`, …
    pub class: String,
    /// `READ` or `WRITE` (or `UNLCK`).
    pub mode: String,
    /// The holder (or the waiter); -1 for OFD locks.
    pub pid: i32,
    pub major: u32,
    pub minor: u32,
    pub inode: u64,
    /// A waiter (`->` lines) rather than a holder.
    pub blocked: bool,
}

/// Parses `/proc/locks`:
/// `1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF`, waiters as
/// `1: -> FLOCK …`. The device is `MAJOR:MINOR` in hex, the inode decimal.
pub fn parse_locks(text: &str) -> Vec<FileLock> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace().skip(1).peekable();
            let blocked = fields.peek() == Some(&"->");
            if blocked {
                fields.next();
            }
            let class = fields.next()?.to_string();
            let _advisory = fields.next()?;
            let mode = fields.next()?.to_string();
            let pid = fields.next()?.parse().ok()?;
            let mut dev = fields.next()?.split(':');
            let major = u32::from_str_radix(dev.next()?, 16).ok()?;
            let minor = u32::from_str_radix(dev.next()?, 16).ok()?;
            let inode = dev.next()?.parse().ok()?;
            Some(FileLock {
                class,
                mode,
                pid,
                major,
                minor,
                inode,
                blocked,
            })
        })
        .collect()
}

/// The `flags:` of an fdinfo file (octal), e.g. `O_WRONLY` = 1.
pub fn parse_fdinfo_flags(text: &str) -> Option<u32> {
    text.lines().find_map(|line| {
        let value = line.strip_prefix("flags:")?;
        u32::from_str_radix(value.trim(), 8).ok()
    })
}

/// A line of `/proc/PID/maps`.
#[derive(Clone, Debug, PartialEq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub executable: bool,
    pub offset: u64,
    /// The file, `[stack]`, `[vdso]`, …, or empty.
    pub path: String,
}

pub fn parse_maps(text: &str) -> Vec<Mapping> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.splitn(6, ' ');
            let (start, end) = fields.next()?.split_once('-')?;
            let perms = fields.next()?;
            let offset = u64::from_str_radix(fields.next()?, 16).ok()?;
            let _dev = fields.next()?;
            let _inode = fields.next()?;
            let path = fields.next().unwrap_or("").trim().to_string();
            Some(Mapping {
                start: u64::from_str_radix(start, 16).ok()?,
                end: u64::from_str_radix(end, 16).ok()?,
                executable: perms.as_bytes().get(2) == Some(&b'x'),
                offset,
                path,
            })
        })
        .collect()
}

/// `se.exec_start` of `/proc/PID/task/TID/sched`, in milliseconds of the
/// scheduler's clock: when the thread last ran.
pub fn parse_exec_start(text: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == "se.exec_start")
            .then(|| value.trim().parse().ok())
            .flatten()
    })
}

/// Why a read failed, as the walk needs to tell it.
#[derive(Debug)]
pub enum ReadError {
    /// The task or process no longer exists.
    Gone,
    /// The kernel refused (another user's process without root, or Yama).
    Denied,
    Other(io::Error),
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> ReadError {
        match e.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::ESRCH) => ReadError::Gone,
            Some(libc::EACCES) | Some(libc::EPERM) => ReadError::Denied,
            _ => ReadError::Other(e),
        }
    }
}

/// Reads an open file to its end with a few large reads into a buffer
/// reused across calls (a walk reads thousands of small files).
fn read_all(mut file: File) -> Result<String, ReadError> {
    thread_local! {
        static BUF: RefCell<Vec<u8>> = RefCell::new(vec![0u8; 8192]);
    }
    BUF.with(|buf| {
        let mut buf = buf.borrow_mut();
        let mut len = 0;
        loop {
            if len == buf.len() {
                let grown = buf.len() * 2;
                buf.resize(grown, 0);
            }
            match file.read(&mut buf[len..]) {
                Ok(0) => break,
                Ok(n) => len += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(String::from_utf8_lossy(&buf[..len]).into_owned())
    })
}

/// An open directory of `/proc` ([`Proc::open_dir`]).
pub struct Dir(File);

impl Dir {
    /// A file in this directory, read whole.
    pub fn read(&self, name: &std::ffi::CStr) -> Result<String, ReadError> {
        use std::os::fd::{AsRawFd, FromRawFd};
        // SAFETY: openat with a valid directory descriptor and a
        // NUL-terminated name; the new descriptor is owned by the File.
        let fd = unsafe {
            libc::openat(
                self.0.as_raw_fd(),
                name.as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error().into());
        }
        // SAFETY: fd was just opened and nothing else owns it.
        read_all(unsafe { File::from_raw_fd(fd) })
    }
}

/// `/proc` under a root directory.
#[derive(Clone, Debug)]
pub struct Proc {
    root: PathBuf,
    /// `/proc/PID/mem` kept open per process (shared by clones): a walk
    /// reads each waiting thread's stack and words.
    mem: Rc<RefCell<HashMap<i32, Rc<File>>>>,
}

impl Proc {
    pub fn new(root: &Path) -> Proc {
        Proc {
            root: root.join("proc"),
            mem: Rc::default(),
        }
    }

    /// The root directory given to [`Proc::new`] (to make another `Proc`
    /// on another thread: its caches are not shared).
    pub fn root(&self) -> PathBuf {
        self.root
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    pub fn pid_dir(&self, pid: i32) -> PathBuf {
        self.root.join(pid.to_string())
    }

    pub fn task_dir(&self, pid: i32, tid: i32) -> PathBuf {
        self.pid_dir(pid).join("task").join(tid.to_string())
    }

    /// A whole `/proc` file as text. Read with a few large reads into one
    /// buffer: `read_to_string` would first stat and seek the file for a
    /// size that `/proc` does not know, then read it in small pieces,
    /// which for a process with 1,000 threads was most of the walk's
    /// system calls.
    pub fn read(&self, path: &Path) -> Result<String, ReadError> {
        read_all(File::open(path)?)
    }

    /// A directory kept open to read several files in it without looking
    /// its path up again each time.
    pub fn open_dir(&self, path: &Path) -> Result<Dir, ReadError> {
        use std::os::unix::fs::OpenOptionsExt;
        let dir = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
            .open(path)?;
        Ok(Dir(dir))
    }

    /// The thread ids of a process, ascending.
    pub fn tids(&self, pid: i32) -> Result<Vec<i32>, ReadError> {
        let mut tids: Vec<i32> = std::fs::read_dir(self.pid_dir(pid).join("task"))?
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect();
        tids.sort_unstable();
        Ok(tids)
    }

    /// Every process id, ascending.
    pub fn pids(&self) -> Vec<i32> {
        let mut pids: Vec<i32> = std::fs::read_dir(&self.root)
            .map(|dir| {
                dir.flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        pids.sort_unstable();
        pids
    }

    /// The process a thread id belongs to (any thread's id works as a
    /// `/proc` entry even though only processes are listed).
    pub fn tgid_of(&self, tid: i32) -> Option<i32> {
        let status = self.read(&self.pid_dir(tid).join("status")).ok()?;
        let tgid = parse_status(&status).tgid;
        (tgid > 0).then_some(tgid)
    }

    /// Reads `buf.len()` bytes of a process's memory at `addr`
    /// (`/proc/PID/mem`, which needs the right to ptrace it; it does not
    /// stop the process).
    pub fn read_mem(&self, pid: i32, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        let cached = self.mem.borrow().get(&pid).cloned();
        let file = match cached {
            Some(f) => f,
            None => {
                let f = Rc::new(File::open(self.pid_dir(pid).join("mem"))?);
                self.mem.borrow_mut().insert(pid, f.clone());
                f
            }
        };
        file.read_exact_at(buf, addr)?;
        Ok(())
    }

    /// The i32 at `addr` in a process (little-endian, as on x86-64).
    pub fn read_i32(&self, pid: i32, addr: u64) -> Option<i32> {
        let mut b = [0u8; 4];
        self.read_mem(pid, addr, &mut b).ok()?;
        Some(i32::from_le_bytes(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_with_parentheses_in_the_name_parses() {
        let line = "125 (a (b) c) S 1 125 125 0 -1 4194560 120 0 0 0 0 0 0 0 20 0 3 0";
        let stat = parse_stat(line).unwrap();
        assert_eq!(stat.comm, "a (b) c");
        assert_eq!(stat.state, 'S');
        assert_eq!(stat.ppid, 1);
        assert_eq!(stat.flags, 4194560);
    }

    #[test]
    fn syscall_files_parse_in_their_three_shapes() {
        assert_eq!(parse_syscall("running\n"), Some(SyscallState::Running));
        assert_eq!(
            parse_syscall("-1 0x7ffc 0x401000\n"),
            Some(SyscallState::NotInSyscall {
                sp: 0x7ffc,
                pc: 0x401000
            })
        );
        assert_eq!(
            parse_syscall("202 0x55d0c0 0x80 0x2 0x0 0x0 0x0 0x7ffd10 0x7f12aa\n"),
            Some(SyscallState::In {
                nr: 202,
                args: [0x55d0c0, 0x80, 2, 0, 0, 0],
                sp: 0x7ffd10,
                pc: 0x7f12aa
            })
        );
        assert_eq!(parse_syscall("garbage"), None);
    }

    #[test]
    fn status_gives_nspid_in_a_container() {
        let s = parse_status("Name:\tsh\nTgid:\t4567\nPPid:\t4500\nNSpid:\t4567\t1\n");
        assert_eq!(s.tgid, 4567);
        assert_eq!(s.ppid, 4500);
        assert_eq!(s.nspid, vec![4567, 1]);
    }

    #[test]
    fn kernel_stacks_keep_function_and_offset() {
        let stack = parse_kernel_stack(
            "[<0>] futex_wait_queue+0x60/0x90\n[<0>] __futex_wait+0x13d/0x1b0\n",
        );
        assert_eq!(
            stack,
            ["futex_wait_queue+0x60/0x90", "__futex_wait+0x13d/0x1b0"]
        );
        assert_eq!(frame_function(&stack[1]), "__futex_wait");
    }

    #[test]
    fn proc_locks_holders_and_waiters() {
        let locks = parse_locks(
            "1: FLOCK  ADVISORY  WRITE 1234 00:2f:12345 0 EOF\n\
             1: -> FLOCK  ADVISORY  WRITE 1240 00:2f:12345 0 EOF\n\
             2: OFDLCK ADVISORY  READ  -1 fd:01:99 0 EOF\n",
        );
        assert_eq!(locks.len(), 3);
        assert_eq!(locks[0].pid, 1234);
        assert!(!locks[0].blocked);
        assert!(locks[1].blocked);
        assert_eq!(
            (locks[1].major, locks[1].minor, locks[1].inode),
            (0, 0x2f, 12345)
        );
        assert_eq!((locks[2].major, locks[2].pid), (0xfd, -1));
    }

    #[test]
    fn fdinfo_flags_are_octal() {
        assert_eq!(
            parse_fdinfo_flags("pos:\t0\nflags:\t02000001\nmnt_id:\t15\n"),
            Some(0o2000001)
        );
    }

    #[test]
    fn maps_lines_with_and_without_paths() {
        let maps = parse_maps(
            "55d0c0000000-55d0c0001000 r-xp 00001000 08:01 123 /usr/bin/prog\n\
             7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]\n\
             7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n",
        );
        assert_eq!(maps.len(), 3);
        assert!(maps[0].executable);
        assert_eq!(maps[0].offset, 0x1000);
        assert_eq!(maps[0].path, "/usr/bin/prog");
        assert_eq!(maps[1].path, "[stack]");
        assert_eq!(maps[2].path, "");
    }

    #[test]
    fn exec_start_from_sched() {
        let text = "prog (125, #threads: 3)\n----\nse.exec_start                                :       1234567.890123\nse.vruntime : 1.0\n";
        assert_eq!(parse_exec_start(text), Some(1234567.890123));
    }
}
