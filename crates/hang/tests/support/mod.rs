//! The scripted hangs of `tests/programs/hangs.c`, built with gcc and run in
//! a process group of their own that is killed (SIGKILL, which also ends
//! stopped processes) when the [`Hang`] is dropped: after a pass, a failed
//! assertion or a panic alike. Shared by `slowlab-hang`'s live tests and
//! `slowlab`'s integration tests (`#[path]`).

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::Duration;

/// Builds `hangs.c` once per test binary; the reason when it cannot.
pub fn hangs_binary() -> Result<PathBuf, String> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let src = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../hang/tests/programs/hangs.c")
                .canonicalize()
                .map_err(|e| format!("hangs.c not found: {e}"))?;
            // In the target directory (not /tmp, where it would be left):
            // built under a name of this process's own, then renamed, as
            // test binaries build it at the same time.
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("slowlab-hangs");
            std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            let out = dir.join("hangs");
            let building = dir.join(format!("hangs.{}", std::process::id()));
            let status = Command::new("gcc")
                .args(["-O1", "-g", "-pthread", "-fno-omit-frame-pointer", "-o"])
                .arg(&building)
                .arg(&src)
                .status()
                .map_err(|e| format!("gcc not available: {e}"))?;
            if !status.success() {
                return Err(format!("gcc failed on {}", src.display()));
            }
            std::fs::rename(&building, &out).map_err(|e| e.to_string())?;
            Ok(out)
        })
        .clone()
}

/// Whether this test can run: root (kernel stacks, other processes'
/// memory) and gcc. The reason when not.
pub fn can_run() -> Result<PathBuf, String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("needs root (kernel stacks and /proc/PID/mem)".into());
    }
    hangs_binary()
}

/// A running scripted hang.
pub struct Hang {
    child: Child,
    /// The process that printed "ready" (the one to walk).
    pub pid: i32,
    pub dir: tempfile::TempDir,
}

impl Hang {
    /// Starts `hangs MODE ARGS…` and waits for its "ready" line. `{dir}`
    /// in an argument is replaced by a fresh temporary directory.
    pub fn start(binary: &Path, mode: &str, args: &[&str]) -> Hang {
        Hang::start_wrapped(&[], binary, mode, args)
    }

    /// The same under a wrapper command (`unshare --pid --fork`): the hang
    /// is then the wrapper's child, whose own pid is found from the
    /// wrapper's `children`.
    pub fn start_wrapped(wrapper: &[&str], binary: &Path, mode: &str, args: &[&str]) -> Hang {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let args: Vec<String> = args
            .iter()
            .map(|a| a.replace("{dir}", &dir.path().display().to_string()))
            .collect();
        let mut command = match wrapper.split_first() {
            Some((program, rest)) => {
                let mut c = Command::new(program);
                c.args(rest).arg(binary);
                c
            }
            None => Command::new(binary),
        };
        let mut child = command
            .arg(mode)
            .args(&args)
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("start hangs");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let mut hang = Hang {
            pid: child.id() as i32,
            child,
            dir,
        };
        let line = rx.recv_timeout(Duration::from_secs(10)).unwrap_or_default();
        hang.pid = line
            .strip_prefix("ready ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("hangs {mode} did not get ready: {line:?}"));
        if !wrapper.is_empty() {
            let children =
                std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", hang.child.id()))
                    .unwrap_or_default();
            hang.pid = children
                .split_whitespace()
                .next()
                .and_then(|p| p.parse().ok())
                .unwrap_or_else(|| panic!("no child of the wrapper {wrapper:?}"));
        }
        hang
    }
}

impl Drop for Hang {
    fn drop(&mut self) {
        let pgid = self.child.id() as i32;
        // SAFETY: signals the process group this test started, only.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

/// Calls `f` every 50 ms until it returns `Some`, for at most 5 s: the
/// threads of a hang block a moment after "ready".
pub fn eventually<T>(mut f: impl FnMut() -> Option<T>) -> Option<T> {
    for _ in 0..100 {
        if let Some(v) = f() {
            return Some(v);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}
