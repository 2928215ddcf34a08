//! A ring recording in the background for the tests of ring mode: [`Recorder`] (started,
//! asked for snapshots from another process, stopped with SIGINT), the level its memory
//! settles at, `analyze` of a snapshot, the perf child of a recorder, a copy of `sleep`
//! with a name of its own, and a small [`Tmpfs`] to fill, with a recorder on it and a
//! save the full disk refuses.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::slowlab;

/// A `slowlab record --ring …` running in the background, its stderr in a
/// file.
pub struct Recorder {
    child: Child,
    stderr: PathBuf,
    output: PathBuf,
}

impl Recorder {
    /// Starts `slowlab record -o OUTPUT ARGS` (its stderr into `stderr`,
    /// on another disk than a full one) and waits until it accepts `--save`
    /// (its control socket is listed).
    pub fn start(output: &Path, stderr: &Path, args: &[&str], env: &[(&str, &str)]) -> Recorder {
        let stderr = stderr.to_owned();
        let err = std::fs::File::create(&stderr).expect("stderr file");
        let mut cmd = slowlab();
        cmd.arg("record")
            .arg("-o")
            .arg(output)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("slowlab starts");
        let r = Recorder {
            child,
            stderr,
            output: output.to_owned(),
        };
        let want = slowlab_record::absolute_output(output);
        let deadline = Instant::now() + Duration::from_secs(60);
        while !slowlab_record::recorders()
            .iter()
            .any(|i| i.output == want && i.pid == r.child.id())
        {
            assert!(
                Instant::now() < deadline,
                "the recorder did not start: {}",
                r.err()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        r
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn err(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Waits until its stderr holds `needle` `count` times.
    pub fn wait_for(&self, needle: &str, count: usize, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.err().matches(needle).count() < count {
            assert!(
                Instant::now() < deadline,
                "no {count} × `{needle}` after {limit:?}: {}",
                self.err()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `slowlab record --save -o OUTPUT` from another process.
    pub fn save(&self) -> Output {
        save_for(&self.output)
    }

    /// Stops it with SIGINT; its exit status and stderr.
    pub fn stop(mut self) -> (i32, String) {
        // SAFETY: signalling the recorder this test started.
        unsafe { libc::kill(self.pid(), libc::SIGINT) };
        let deadline = Instant::now() + Duration::from_secs(120);
        let status = loop {
            if let Some(st) = self.child.try_wait().expect("wait") {
                break st;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("the recorder did not stop: {}", self.err());
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let err = self.err();
        eprintln!("{err}");
        (status.code().unwrap_or(-1), err)
    }
}

impl Drop for Recorder {
    /// A test that failed half-way stops its recorder as a user would (SIGINT: its socket
    /// and state file go), and kills it only if it has not ended 20 s later.
    fn drop(&mut self) {
        super::interrupt_then_kill(self.pid(), &mut self.child);
    }
}

pub fn save_for(output: &Path) -> Output {
    slowlab()
        .args(["record", "--save", "-o"])
        .arg(output)
        .output()
        .expect("slowlab --save runs")
}

/// `slowlab analyze --json --no-symbols TRACE ARGS`.
pub fn analyze(trace: &Path, args: &[&str]) -> serde_json::Value {
    let out = slowlab()
        .args(["analyze", "--json", "--no-symbols"])
        .args(args)
        .arg(trace)
        .output()
        .expect("analyze runs");
    super::json(&out)
}

/// The perf child of `pid` (its `perf record`), if running.
pub fn perf_of(pid: i32) -> Option<i32> {
    let dir = std::fs::read_dir("/proc").ok()?;
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .find(|&p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<i32>().ok());
            ppid == Some(pid)
                && std::fs::read(format!("/proc/{p}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains("--overwrite"))
        })
}

/// A copy of `sleep` named `name` (its `comm`), in `dir`.
pub fn named_sleep(dir: &Path, name: &str) -> PathBuf {
    let sleep = slowlab_record::find_program("sleep").expect("sleep is installed");
    let exe = dir.join(name);
    std::fs::copy(sleep, &exe).expect("copy sleep");
    exe
}

/// A tmpfs of `mib` MiB mounted on a new directory, unmounted when dropped.
pub struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    pub fn mount(mib: u64) -> Result<Tmpfs, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
        }
        Ok(Tmpfs { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn free(&self) -> u64 {
        let c = std::ffi::CString::new(self.path().to_str().expect("utf-8")).expect("no NUL");
        // SAFETY: a valid path and a statvfs the call writes.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut st) }, 0);
        st.f_bavail as u64 * st.f_frsize as u64
    }

    /// Fills it until `leave` bytes are free.
    pub fn fill(&self, leave: u64) -> PathBuf {
        let file = self.path().join("fill");
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&file)
            .expect("fill file");
        let chunk = vec![1u8; 64 << 10];
        while self.free() > leave {
            let n = ((self.free() - leave) as usize).min(chunk.len());
            if f.write_all(&chunk[..n]).is_err() {
                break;
            }
        }
        f.sync_all().expect("sync");
        file
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

/// A ring recorder (`args`) writing into a small tmpfs of `mib` MiB, told that a snapshot
/// needs `need` bytes: the tmpfs, the recorder, its trace; `None` (with the printed
/// reason) where no tmpfs can be mounted.
pub fn on_a_small_disk(
    mib: u64,
    need: u64,
    args: &[&str],
    errs: &Path,
) -> Option<(Tmpfs, Recorder, PathBuf)> {
    let fs = match Tmpfs::mount(mib) {
        Ok(fs) => fs,
        Err(why) => {
            slowlab_testkit::skip(format_args!("cannot mount a tmpfs: {why}"));
            return None;
        }
    };
    let trace = fs.path().join("f.data");
    let rec = Recorder::start(
        &trace,
        &errs.join("f.err"),
        args,
        &[("SLOWLAB_SNAPSHOT_NEED_BYTES", &need.to_string())],
    );
    Some((fs, rec, trace))
}

/// Fills `fs` until less than `need` is free and asks `rec` for a snapshot: refused in one
/// line that says the disk is full and the ring is kept, and said on the recorder's
/// stderr. Returns the file that fills the disk.
pub fn a_save_is_refused_on_a_full_disk(fs: &Tmpfs, rec: &Recorder, need: u64) -> PathBuf {
    let fill = fs.fill(need / 2);
    let out = rec.save();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("the disk is full"), "{err}");
    assert!(err.contains("the ring is kept"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(rec
        .err()
        .contains("no snapshot for slowlab record --save: the disk is full"));
    fill
}

/// The level memory settles at over `kib` (samples a second apart): the median. A
/// leak raises it; a single sample taken while the allocator has just given memory
/// back (a floor) or while a snapshot is being written (a peak) does not move it.
pub fn settled_level(kib: impl Iterator<Item = u64>) -> u64 {
    let mut sorted: Vec<u64> = kib.collect();
    sorted.sort_unstable();
    sorted.get(sorted.len() / 2).copied().unwrap_or(0)
}
