//! Running `perf record` so that it cannot outlive slowlab: perf gets a
//! process group of its own (with the command it launches), a guard in that
//! group that kills it the moment slowlab dies (`group_guard`: without it
//! perf would record on for a second or two while the kernel closes the path
//! capture's probes), a parent-death signal (SIGKILL when the thread that
//! started it dies), and [`PerfProcess`]'s drop kills the group (a panic, an
//! early return). [`kill_running`] kills every group still running, for an
//! exit that does not unwind.
//!
//! perf killed leaves its copy of the vDSO in `/tmp` ([`VdsoCopies`]); slowlab removes it
//! when it reaps a perf a signal ended.
//!
//! It also passes perf's and the command's stderr through, minus perf's own
//! status lines and its repeated failed-write lines, keeps the last lines to explain a failure, reports the
//! files perf dumps (`[ perf record: Dump FILE ]`), and turns perf's exit
//! into an error that says what to do ([`check_perf_exit`]); perf's exit can be slept
//! on ([`PerfProcess::exit_fd`]). It decides nothing about signals; `session` does.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::group_guard::{GroupGuard, Lifeline};
use crate::{wake, Config, RecordError};

/// The process groups of the perf processes running now, with the vDSO copies there were
/// before each started.
static RUNNING: Mutex<Vec<(i32, VdsoCopies)>> = Mutex::new(Vec::new());

/// Kills (SIGKILL) every perf this process started and has not reaped,
/// with the commands they launched: for an exit that does not unwind
/// (`std::process::exit` after a second Ctrl-C), and removes their copies of
/// the vDSO. Their unfinished files stay under their temporary names.
pub fn kill_running() {
    let groups = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
    for (pgid, vdso_copies) in groups.iter() {
        // SAFETY: signalling a process group we created.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        vdso_copies.remove_perfs();
    }
}

/// How perf ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PerfExit {
    Code(i32),
    Signal(i32),
}

impl From<ExitStatus> for PerfExit {
    fn from(status: ExitStatus) -> PerfExit {
        match (status.code(), status.signal()) {
            (Some(code), _) => PerfExit::Code(code),
            (None, Some(sig)) => PerfExit::Signal(sig),
            (None, None) => PerfExit::Code(128),
        }
    }
}

/// A running `perf record` with its stderr reader.
pub(crate) struct PerfProcess {
    child: Child,
    /// The guard of perf's group.
    guard: Option<GroupGuard>,
    reaped: bool,
    reader: Option<JoinHandle<()>>,
    tail: Arc<Mutex<Vec<String>>>,
    dumps: mpsc::Receiver<PathBuf>,
    /// Readable when perf exits (`None` without `pidfd_open`).
    exit: Option<OwnedFd>,
    /// The vDSO copies there were before perf started, to remove perf's if it is killed.
    vdso_copies: VdsoCopies,
}

impl PerfProcess {
    /// Starts `perf ARGS` in a process group of its own, with its guard;
    /// its stderr is passed through when `echo`. `stdout` is perf's
    /// standard output.
    pub(crate) fn spawn(
        args: &[String],
        echo: bool,
        stdout: Stdio,
    ) -> Result<PerfProcess, RecordError> {
        let lifeline = Lifeline::new().map_err(RecordError::Spawn)?;
        let vdso_copies = VdsoCopies::before_perf(Path::new(VDSO_COPIES_DIR));
        let parent = std::process::id() as libc::pid_t;
        let mut command = Command::new("perf");
        command
            .args(args)
            // perf reads none; the command it launches inherits it.
            .stdin(crate::command_stdin())
            .stdout(stdout)
            .stderr(Stdio::piped())
            // Its own group: a terminal's Ctrl-C reaches slowlab only, which
            // stops perf in order; and the group (perf and the command it
            // launched) can be killed as one.
            .process_group(0);
        // SAFETY: the closure runs in the child between fork and exec and
        // only makes async-signal-safe calls (prctl, getppid, raise).
        unsafe {
            command.pre_exec(move || {
                // Killed when the thread that started it dies: slowlab
                // cannot leave perf recording the whole system behind.
                libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                );
                if libc::getppid() != parent {
                    // slowlab died before the prctl took effect.
                    libc::raise(libc::SIGKILL);
                }
                Ok(())
            });
        }
        let mut child = command.spawn().map_err(RecordError::Spawn)?;
        let pgid = child.id() as i32;
        RUNNING
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((pgid, vdso_copies.clone()));
        // Without `sh` the parent-death signal alone still stops perf.
        let guard = GroupGuard::start(pgid, lifeline);
        let tail: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
        let (dump_tx, dumps) = mpsc::channel();
        let reader = child.stderr.take().map(|err| {
            let tail = Arc::clone(&tail);
            std::thread::spawn(move || {
                let mut stderr = std::io::stderr();
                for line in BufReader::new(err).lines() {
                    let Ok(line) = line else { break };
                    if let Some(file) = dumped_file(&line) {
                        let _ = dump_tx.send(file);
                    }
                    // perf repeats a failed write for every buffer; slowlab
                    // says it once (a full disk, `session`).
                    let perf_status = line.starts_with("[ perf record:")
                        || line == "Events disabled"
                        || line == "Events enabled"
                        || line.starts_with("failed to write perf data");
                    if echo && !perf_status {
                        let _ = writeln!(stderr, "{line}");
                    }
                    if let Ok(mut t) = tail.lock() {
                        t.push(line);
                        if t.len() > 50 {
                            t.remove(0);
                        }
                    }
                }
            })
        });
        Ok(PerfProcess {
            exit: wake::exit_fd(child.id()),
            child,
            guard,
            reaped: false,
            reader,
            tail,
            dumps,
            vdso_copies,
        })
    }

    /// Readable when perf exits, to sleep on; `None` where the kernel has no pidfd (the
    /// caller then looks every few milliseconds).
    pub(crate) fn exit_fd(&self) -> Option<BorrowedFd<'_>> {
        self.exit.as_ref().map(AsFd::as_fd)
    }

    pub(crate) fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Takes perf's standard output (when it was piped).
    pub(crate) fn take_stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.child.stdout.take()
    }

    /// Sends `sig` to perf alone.
    pub(crate) fn signal(&self, sig: libc::c_int) {
        if !self.reaped {
            // SAFETY: signalling our own child, not yet reaped.
            unsafe { libc::kill(self.pid(), sig) };
        }
    }

    /// Whether perf has a handler for `sig` yet (`SigCgt` in its status):
    /// before, the default action of SIGUSR2 would kill it.
    pub(crate) fn catches(&self, sig: libc::c_int) -> bool {
        catches_signal(self.pid(), sig)
    }

    /// Sends `sig` to perf's process group: perf and the command it runs.
    pub(crate) fn signal_group(&self, sig: libc::c_int) {
        // SAFETY: signalling the process group we created; after perf is
        // reaped its id stays reserved while the group has members.
        unsafe { libc::kill(-self.pid(), sig) };
    }

    /// Waits, at most `limit`, until perf is idle: in a window of [`IDLE_WINDOW`] it ran
    /// or waited to run for less than a fifth of it. After reporting a file it dumped,
    /// perf reads every process's threads and mappings from /proc to open the next file
    /// (~55 ms of a CPU here): a run begun before that shares a CPU with it, and its trace
    /// holds perf's work.
    pub(crate) fn wait_idle(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        let mut last = busy_ns(self.pid());
        while Instant::now() < deadline {
            std::thread::sleep(IDLE_WINDOW);
            let now = busy_ns(self.pid());
            match (last, now) {
                (Some(before), Some(after))
                    if after.saturating_sub(before) < IDLE_WINDOW.as_nanos() as u64 / 5 =>
                {
                    return
                }
                (_, None) => return,
                _ => last = now,
            }
        }
    }

    /// Files perf reported dumping since the last call.
    pub(crate) fn dumps(&self) -> Vec<PathBuf> {
        self.dumps.try_iter().collect()
    }

    /// Waits for perf to report the next file it dumped; perf's exit if it exits first, or
    /// (with SIGKILL) if `limit` passes.
    pub(crate) fn wait_dump(&mut self, limit: Duration) -> Result<PathBuf, PerfExit> {
        let deadline = std::time::Instant::now() + limit;
        loop {
            if let Ok(file) = self.dumps.recv_timeout(Duration::from_millis(20)) {
                return Ok(file);
            }
            match self.try_wait() {
                Ok(Some(exit)) => return Err(exit),
                Ok(None) if std::time::Instant::now() < deadline => {}
                _ => return Err(self.kill()),
            }
        }
    }

    /// perf's exit, if it has exited.
    pub(crate) fn try_wait(&mut self) -> Result<Option<PerfExit>, RecordError> {
        match self.child.try_wait().map_err(RecordError::Spawn)? {
            Some(status) => {
                let exit = status.into();
                self.reaped(exit);
                Ok(Some(exit))
            }
            None => Ok(None),
        }
    }

    /// Waits for perf to exit; after `grace` without perf using any CPU (or
    /// `limit` in all), kills its group and says so with `Err(PerfExit)`.
    pub(crate) fn wait_bounded(
        &mut self,
        grace: Duration,
        limit: Duration,
    ) -> Result<PerfExit, PerfExit> {
        let mut watch = StopWatch::new(self.pid(), grace, limit);
        loop {
            match self.try_wait() {
                Ok(Some(exit)) => return Ok(exit),
                Ok(None) => {}
                Err(_) => break,
            }
            if watch.expired() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(self.kill())
    }

    /// Kills perf's group and reaps perf.
    pub(crate) fn kill(&mut self) -> PerfExit {
        self.signal_group(libc::SIGKILL);
        let exit = match self.child.wait() {
            Ok(status) => status.into(),
            Err(_) => PerfExit::Signal(libc::SIGKILL),
        };
        self.reaped(exit);
        exit
    }

    /// perf is gone: it is no longer running, and if a signal ended it, what it would have
    /// removed at its exit (its copy of the vDSO) is removed.
    fn reaped(&mut self, exit: PerfExit) {
        if matches!(exit, PerfExit::Signal(_)) {
            self.vdso_copies.remove_perfs();
        }
        if !self.reaped {
            self.reaped = true;
            let pid = self.pid();
            RUNNING
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|(g, _)| *g != pid);
            // perf is gone: the guard leaves what the command left running
            // alone. (Killed with the group, it reads nothing.)
            if let Some(guard) = self.guard.take() {
                guard.dismiss();
            }
        }
    }

    /// The last lines perf (and the command) wrote on stderr, once the
    /// reader has seen them all (perf has exited).
    pub(crate) fn lines(&mut self) -> Vec<String> {
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        self.tail.lock().map(|t| t.clone()).unwrap_or_default()
    }
}

impl Drop for PerfProcess {
    fn drop(&mut self) {
        if !self.reaped {
            self.kill();
        }
    }
}

/// Where perf copies the vDSO: `/tmp/perf-vdso.so-XXXXXX`, a name fixed in perf's source
/// (`VDSO__TEMP_FILE_NAME`), not under `$TMPDIR`.
const VDSO_COPIES_DIR: &str = "/tmp";
const VDSO_COPY_PREFIX: &str = "perf-vdso.so-";

/// perf copies the vDSO into a temporary file (to read its build id and symbols) and
/// removes it at exit; killed, it leaves it behind. perf does not say the name (random),
/// so the copies in the directory that were not there when perf started are taken for
/// its own. Another perf started meanwhile and still running would lose its
/// copy, and with it only the vDSO in its build-id cache.
#[derive(Clone)]
struct VdsoCopies {
    dir: PathBuf,
    before: std::collections::HashSet<std::ffi::OsString>,
}

impl VdsoCopies {
    fn before_perf(dir: &Path) -> VdsoCopies {
        VdsoCopies {
            dir: dir.to_path_buf(),
            before: Self::names(dir).collect(),
        }
    }

    fn names(dir: &Path) -> impl Iterator<Item = std::ffi::OsString> {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name())
            .filter(|n| n.to_string_lossy().starts_with(VDSO_COPY_PREFIX))
    }

    /// Removes the copies made since perf started.
    fn remove_perfs(&self) {
        for name in Self::names(&self.dir).filter(|n| !self.before.contains(n)) {
            let _ = std::fs::remove_file(self.dir.join(name));
        }
    }
}

/// Whether process `pid` has a handler for `sig` (`SigCgt` of its status).
fn catches_signal(pid: i32, sig: libc::c_int) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"));
    status.ok().is_some_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("SigCgt:"))
            .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
            .is_some_and(|mask| mask & (1u64 << (sig - 1)) != 0)
    })
}

/// The file of a `[ perf record: Dump FILE ]` line.
pub(crate) fn dumped_file(line: &str) -> Option<PathBuf> {
    let rest = line.strip_prefix("[ perf record: Dump ")?;
    Some(PathBuf::from(rest.strip_suffix(" ]").unwrap_or(rest)))
}

/// The bound on perf finishing after it was told to stop: `grace` after it
/// last used CPU (writing the file, collecting build ids), and `limit` in
/// all.
pub(crate) struct StopWatch {
    pid: i32,
    grace: Duration,
    started: Instant,
    limit: Duration,
    last_busy: Instant,
    last_ticks: Option<u64>,
    last_look: Instant,
}

impl StopWatch {
    pub(crate) fn new(pid: i32, grace: Duration, limit: Duration) -> StopWatch {
        let now = Instant::now();
        StopWatch {
            pid,
            grace,
            started: now,
            limit,
            last_busy: now,
            last_ticks: cpu_ticks(pid),
            last_look: now,
        }
    }

    /// Whether perf has had its time.
    pub(crate) fn expired(&mut self) -> bool {
        let now = Instant::now();
        if now.duration_since(self.last_look) >= Duration::from_secs(1) {
            self.last_look = now;
            let ticks = cpu_ticks(self.pid);
            if ticks.is_some() && ticks != self.last_ticks {
                self.last_busy = now;
            }
            self.last_ticks = ticks;
        }
        now.duration_since(self.last_busy) > self.grace
            || now.duration_since(self.started) > self.limit
    }
}

/// How long [`PerfProcess::wait_idle`] watches perf at a time.
const IDLE_WINDOW: Duration = Duration::from_millis(5);

/// The time process `pid`'s main thread has run or waited to run so far, in ns (the first
/// two fields of /proc/PID/schedstat): a thread that waits for a CPU is not idle.
fn busy_ns(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).ok()?;
    let mut fields = stat.split_whitespace().map(|f| f.parse::<u64>().ok());
    Some(fields.next()?? + fields.next()??)
}

/// User plus system CPU ticks of process `pid` so far.
fn cpu_ticks(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields follow the last ')'.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // utime and stime are fields 14 and 15; the rest starts at field 3.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// Turns perf's exit and last stderr lines into an error that says what
/// to do, or `Ok` when perf wrote its file: it says so (`[ perf record:
/// Captured and wrote …`) once the file is finished, whoever stopped it;
/// any other end left no trace. `stopped` says slowlab told perf to stop.
pub(crate) fn check_perf_exit(
    cfg: &Config,
    exit: PerfExit,
    lines: &[String],
    stopped: bool,
) -> Result<(), RecordError> {
    if lines.iter().any(|l| l.contains("No space left")) {
        let mut e = RecordError::disk_filled(&cfg.output);
        // perf ends the command it runs when it fails (SIGTERM); the eBPF recorder's runs on.
        if let (RecordError::DiskFilled { stopped, .. }, Some(program)) =
            (&mut e, cfg.command.first())
        {
            *stopped = format!(
                "; perf stopped `{program}` with it (the eBPF recorder lets a command run on)"
            );
        }
        return Err(e);
    }
    if lines
        .iter()
        .any(|l| l.starts_with("[ perf record: Captured and wrote"))
    {
        return Ok(());
    }
    if lines
        .iter()
        .any(|l| l.contains("perf_event_paranoid") || l.contains("Permission denied"))
    {
        return Err(RecordError::Permission { paranoid: 2 });
    }
    let last = lines
        .iter()
        .rev()
        .find(|l| !l.trim().is_empty() && !l.starts_with("[ perf record:"))
        .cloned();
    let last = match last {
        Some(line) => line,
        None if stopped => "perf was stopped before it started recording".into(),
        None => "perf ended without writing its file, and said nothing".into(),
    };
    let code = match exit {
        PerfExit::Code(c) => c,
        PerfExit::Signal(s) => 128 + s,
    };
    Err(RecordError::PerfFailed {
        code,
        last_line: last,
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::CallGraph;

    fn cfg(command: &[&str]) -> Config {
        Config {
            output: PathBuf::from("out.data"),
            freq: 1000,
            ring_seconds: None,
            call_graph: CallGraph::Fp,
            command: command.iter().map(|s| s.to_string()).collect(),
            cpus: 2,
            capture_paths: true,
        }
    }

    #[test]
    fn a_killed_perfs_vdso_copy_goes_and_the_others_stay() {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str| {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        };
        file("perf-vdso.so-OLD123");
        let copies = VdsoCopies::before_perf(dir.path());
        file("perf-vdso.so-NEW456");
        file("other-file");
        copies.remove_perfs();
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["other-file", "perf-vdso.so-OLD123"]);
    }

    fn lines(l: &[&str]) -> Vec<String> {
        l.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn dump_lines_name_their_file() {
        assert_eq!(
            dumped_file("[ perf record: Dump t.data.partial.2026112314111768 ]"),
            Some(PathBuf::from("t.data.partial.2026112314111768"))
        );
        assert_eq!(dumped_file("[ perf record: Woken up 1 times ]"), None);
    }

    #[test]
    fn perf_stopped_by_its_signal_is_a_finished_recording() {
        let wrote = lines(&["[ perf record: Captured and wrote 0.4 MB out.data.partial ]"]);
        let c = cfg(&[]);
        for exit in [
            PerfExit::Signal(libc::SIGINT),
            PerfExit::Signal(libc::SIGTERM),
            PerfExit::Code(0),
        ] {
            assert!(check_perf_exit(&c, exit, &wrote, true).is_ok(), "{exit:?}");
        }
        // Whoever stopped it, a written file is a finished recording.
        assert!(check_perf_exit(&c, PerfExit::Code(0), &wrote, false).is_ok());
        // Killed, or stopped before its handlers were set: no file.
        let e = check_perf_exit(&c, PerfExit::Signal(libc::SIGKILL), &[], true).unwrap_err();
        assert!(e.to_string().contains("exit 137"), "{e}");
        let e = check_perf_exit(&c, PerfExit::Signal(libc::SIGINT), &[], true).unwrap_err();
        assert!(e.to_string().contains("before it started recording"), "{e}");
    }

    #[test]
    fn the_commands_own_error_lines_do_not_fail_a_written_trace() {
        let c = cfg(&["sh"]);
        let l = lines(&[
            "Error: the command's own message",
            "[ perf record: Captured and wrote 0.1 MB out.data.partial ]",
        ]);
        assert!(check_perf_exit(&c, PerfExit::Code(3), &l, false).is_ok());
        let l = lines(&["Error: The sys_perf_event_open() syscall returned with 22"]);
        let e = check_perf_exit(&c, PerfExit::Code(255), &l, false).unwrap_err();
        assert!(e.to_string().contains("sys_perf_event_open"), "{e}");
        let l = lines(&["failed to write: No space left on device"]);
        let e = check_perf_exit(&c, PerfExit::Code(1), &l, false).unwrap_err();
        assert!(matches!(e, RecordError::DiskFilled { .. }), "{e}");
        assert!(e.to_string().contains("perf stopped `sh` with it"), "{e}");
    }

    #[test]
    fn a_handler_is_seen_in_the_process_status() {
        let mut sh = Command::new("sh")
            .args(["-c", "trap 'exit 0' USR2; while :; do sleep 0.05; done"])
            .spawn()
            .expect("sh");
        let pid = sh.id() as i32;
        let deadline = Instant::now() + Duration::from_secs(5);
        while !catches_signal(pid, libc::SIGUSR2) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let caught = catches_signal(pid, libc::SIGUSR2);
        let quit = catches_signal(pid, libc::SIGQUIT);
        let _ = sh.kill();
        let _ = sh.wait();
        assert!(caught && !quit);
        assert!(!catches_signal(-5, libc::SIGUSR2));
    }

    #[test]
    fn cpu_ticks_of_this_process_are_read() {
        assert!(cpu_ticks(std::process::id() as i32).is_some());
        assert!(cpu_ticks(-5).is_none());
    }
}
