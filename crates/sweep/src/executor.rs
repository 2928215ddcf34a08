//! Running a command once at a size and measuring it: the `Executor` trait,
//! the real `CommandExecutor` (spawn, `wait4`, process-group cleanup) and the
//! substitution of `{n}` into a command line.
//!
//! The real executor measures CPU time as user+sys of the child and every
//! descendant it waited for, from `wait4`'s rusage, plus any orphaned
//! descendants it reaps itself (it makes this process a child subreaper so
//! that orphans are reparented here rather than to init). The child runs in
//! a process group of its own so that Ctrl-C can kill the whole tree, and
//! whatever is left of that group when the child exits is killed and reaped.
//!
//! The fake executor used by tests lives in `fake`.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::cancel::{kill_group, Cancel};

/// The placeholder replaced by the size in a command line.
pub const PLACEHOLDER: &str = "{n}";
/// The same, as `--help` writes it: clap turns every `{n}` of a help text
/// into a line break, so the help's examples use this spelling.
pub const PLACEHOLDER_UPPER: &str = "{N}";

/// One run's cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    /// User + system CPU seconds of the command and its descendants.
    pub cpu_s: f64,
    /// Elapsed seconds from start to exit.
    pub wall_s: f64,
    /// The command's standard output, when the executor was asked to keep it.
    pub stdout: Option<Vec<u8>>,
}

/// Why a run produced no measurement.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("interrupted")]
    Interrupted,
    #[error("command not found: `{program}` (is it installed and on PATH?)")]
    NotFound { program: String },
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the command failed at n={n} ({status}){}", stderr_suffix(.stderr_tail))]
    Failed {
        n: u64,
        status: String,
        stderr_tail: String,
    },
    #[error("waiting for the command failed: {0}")]
    Wait(#[source] std::io::Error),
}

fn stderr_suffix(tail: &str) -> String {
    if tail.trim().is_empty() {
        String::new()
    } else {
        format!(
            "; its stderr ended with: {}",
            tail.trim().replace('\n', " | ")
        )
    }
}

/// Runs a command at a size and measures it.
pub trait Executor {
    fn run(&mut self, n: u64) -> Result<Measurement, RunError>;

    /// Anything odd the executor noticed across runs (left-over processes…),
    /// as warnings for the result. Drains them.
    fn take_warnings(&mut self) -> Vec<String> {
        Vec::new()
    }
}

/// Replaces every `{n}` (or `{N}`) in every argument by `n`.
pub fn substitute(template: &[String], n: u64) -> Vec<String> {
    let size = n.to_string();
    template
        .iter()
        .map(|arg| {
            arg.replace(PLACEHOLDER, &size)
                .replace(PLACEHOLDER_UPPER, &size)
        })
        .collect()
}

/// Whether any argument contains `{n}` (or `{N}`).
pub fn has_placeholder(template: &[String]) -> bool {
    template
        .iter()
        .any(|arg| arg.contains(PLACEHOLDER) || arg.contains(PLACEHOLDER_UPPER))
}

/// Keeps this many trailing bytes of the command's stderr for error messages.
const STDERR_TAIL_BYTES: usize = 4096;
/// How many trailing stderr lines an error message quotes.
const STDERR_TAIL_LINES: usize = 5;

/// Runs a real command line, `{n}` substituted, and measures it.
pub struct CommandExecutor {
    template: Vec<String>,
    cancel: Cancel,
    keep_stdout: bool,
    leftovers_killed: usize,
}

impl CommandExecutor {
    /// `template` is the command and its arguments, `{n}` where the size goes.
    pub fn new(template: Vec<String>, cancel: Cancel) -> Self {
        become_subreaper();
        CommandExecutor {
            template,
            cancel,
            keep_stdout: false,
            leftovers_killed: 0,
        }
    }

    /// Keep the command's stdout in `Measurement::stdout` instead of
    /// discarding it.
    pub fn keep_stdout(mut self, keep: bool) -> Self {
        self.keep_stdout = keep;
        self
    }
}

impl Executor for CommandExecutor {
    fn run(&mut self, n: u64) -> Result<Measurement, RunError> {
        if self.cancel.is_cancelled() {
            return Err(RunError::Interrupted);
        }
        let args = substitute(&self.template, n);
        let program = args.first().cloned().unwrap_or_default();
        let mut command = Command::new(&program);
        command
            .args(&args[1..])
            .stdin(Stdio::null())
            .stdout(if self.keep_stdout {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stderr(Stdio::piped());
        std::os::unix::process::CommandExt::process_group(&mut command, 0);

        let start = Instant::now();
        let mut child = command.spawn().map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                RunError::NotFound {
                    program: program.clone(),
                }
            } else {
                RunError::Spawn {
                    program: program.clone(),
                    source,
                }
            }
        })?;
        let pid = child.id() as libc::pid_t;
        self.cancel.set_running_group(pid);

        let stderr_tail = Arc::new(Mutex::new(Vec::new()));
        let stderr_reader = child.stderr.take().map(|mut pipe| {
            let tail = Arc::clone(&stderr_tail);
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                while let Ok(len) = pipe.read(&mut buf) {
                    if len == 0 {
                        break;
                    }
                    let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner());
                    tail.extend_from_slice(&buf[..len]);
                    let excess = tail.len().saturating_sub(STDERR_TAIL_BYTES);
                    tail.drain(..excess);
                }
            })
        });
        let stdout_reader = child.stdout.take().map(|mut pipe| {
            std::thread::spawn(move || {
                let mut out = Vec::new();
                let _ = pipe.read_to_end(&mut out);
                out
            })
        });

        let waited = wait_for(pid);
        let wall_s = start.elapsed().as_secs_f64();
        // Whatever the command left running in its group dies with it.
        kill_group(pid);
        let (leftovers, leftover_cpu_s) = reap_group(pid);
        self.leftovers_killed += leftovers;
        self.cancel.clear_running_group();

        let stdout = stdout_reader.and_then(|h| h.join().ok());
        if let Some(handle) = stderr_reader {
            join_with_timeout(handle, Duration::from_secs(1));
        }
        let (status, cpu_s) = waited.map_err(RunError::Wait)?;
        if self.cancel.is_cancelled() {
            return Err(RunError::Interrupted);
        }
        if !exited_zero(status) {
            let tail = stderr_tail.lock().unwrap_or_else(|e| e.into_inner());
            return Err(RunError::Failed {
                n,
                status: describe_status(status),
                stderr_tail: last_lines(&String::from_utf8_lossy(&tail), STDERR_TAIL_LINES),
            });
        }
        Ok(Measurement {
            cpu_s: cpu_s + leftover_cpu_s,
            wall_s,
            stdout,
        })
    }

    fn take_warnings(&mut self) -> Vec<String> {
        let mut warnings = Vec::new();
        if self.leftovers_killed > 0 {
            warnings.push(format!(
                "the command left {} process(es) running after it exited; slowlab killed them \
                 (their CPU time is counted)",
                self.leftovers_killed
            ));
            self.leftovers_killed = 0;
        }
        warnings
    }
}

/// Makes orphaned descendants of our children our own children, so their
/// CPU time can be collected and they can be cleaned up.
fn become_subreaper() {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes plain integers.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// Blocks until `pid` exits; returns its wait status and CPU seconds
/// (user+sys, including the descendants it waited for).
fn wait_for(pid: libc::pid_t) -> std::io::Result<(i32, f64)> {
    loop {
        let mut status = 0;
        // SAFETY: rusage is plain data that wait4 fills in.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointers to locals; pid is our own child.
        let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if rc == pid {
            return Ok((status, cpu_seconds(&usage)));
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Reaps every process of group `group` that is our child (orphans are, as
/// we are a subreaper); returns how many and their CPU seconds.
fn reap_group(group: libc::pid_t) -> (usize, f64) {
    let (mut count, mut cpu) = (0, 0.0);
    loop {
        let mut status = 0;
        // SAFETY: as in wait_for.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: waits only for children in our own child's process group.
        let rc = unsafe { libc::wait4(-group, &mut status, 0, &mut usage) };
        if rc > 0 {
            count += 1;
            cpu += cpu_seconds(&usage);
            continue;
        }
        if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        return (count, cpu);
    }
}

fn cpu_seconds(usage: &libc::rusage) -> f64 {
    let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

fn exited_zero(status: i32) -> bool {
    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
}

fn describe_status(status: i32) -> String {
    if libc::WIFEXITED(status) {
        format!("exit code {}", libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        format!("killed by signal {}", libc::WTERMSIG(status))
    } else {
        format!("wait status {status}")
    }
}

fn last_lines(text: &str, count: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(count)..].join("\n")
}

/// Waits for a reader thread, but not forever: a descendant that escaped the
/// process group may still hold the pipe open.
fn join_with_timeout(handle: std::thread::JoinHandle<()>, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while !handle.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    if handle.is_finished() {
        let _ = handle.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn substitutes_every_placeholder() {
        let t = strings(&["prog", "--count={n}", "{n}{n}", "plain"]);
        assert_eq!(
            substitute(&t, 42),
            strings(&["prog", "--count=42", "4242", "plain"])
        );
        assert!(has_placeholder(&t));
        assert!(!has_placeholder(&strings(&["true"])));
        // `--help` spells it `{N}` (clap makes `{n}` a line break there).
        let upper = strings(&["prog", "{N}", "{n}-{N}"]);
        assert_eq!(substitute(&upper, 7), strings(&["prog", "7", "7-7"]));
        assert!(has_placeholder(&strings(&["seq {N}"])));
    }

    #[test]
    fn measures_cpu_of_a_busy_command_and_its_children() {
        // A shell that runs a CPU-bound child: the child's CPU must count.
        let t = strings(&["sh", "-c", "i=0; while [ $i -lt {n} ]; do i=$((i+1)); done"]);
        let mut exec = CommandExecutor::new(t, Cancel::new());
        let m = exec.run(200_000).unwrap();
        assert!(m.cpu_s > 0.05, "cpu {}", m.cpu_s);
        assert!(m.wall_s >= m.cpu_s * 0.5);
    }

    #[test]
    fn a_sleeping_command_uses_wall_not_cpu() {
        let mut exec = CommandExecutor::new(strings(&["sleep", "0.2"]), Cancel::new());
        let m = exec.run(1).unwrap();
        assert!(m.wall_s >= 0.19, "wall {}", m.wall_s);
        assert!(m.cpu_s < 0.05, "cpu {}", m.cpu_s);
    }

    #[test]
    fn failure_names_the_size_and_the_tail_of_stderr() {
        let t = strings(&[
            "sh",
            "-c",
            "echo first >&2; echo 'bad size {n}' >&2; exit 3",
        ]);
        let err = CommandExecutor::new(t, Cancel::new()).run(7).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("n=7"), "{text}");
        assert!(text.contains("exit code 3"), "{text}");
        assert!(text.contains("bad size 7"), "{text}");
    }

    #[test]
    fn missing_program_is_reported_as_not_found() {
        let err = CommandExecutor::new(strings(&["no-such-program-slowlab"]), Cancel::new())
            .run(1)
            .unwrap_err();
        assert!(matches!(err, RunError::NotFound { .. }), "{err}");
    }

    #[test]
    fn left_over_background_processes_are_killed_and_reported() {
        let t = strings(&["sh", "-c", "sleep 30 & exit 0"]);
        let mut exec = CommandExecutor::new(t, Cancel::new());
        let start = Instant::now();
        exec.run(1).unwrap();
        assert!(start.elapsed() < Duration::from_secs(10));
        let warnings = exec.take_warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("left 1 process"), "{warnings:?}");
    }

    #[test]
    fn cancel_kills_the_running_command() {
        let cancel = Cancel::new();
        let mut exec = CommandExecutor::new(strings(&["sleep", "30"]), cancel.clone());
        let canceller = {
            let cancel = cancel.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(200));
                cancel.cancel();
            })
        };
        let start = Instant::now();
        let err = exec.run(1).unwrap_err();
        canceller.join().unwrap();
        assert!(matches!(err, RunError::Interrupted), "{err}");
        assert!(start.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn stdout_is_kept_when_asked() {
        let t = strings(&["sh", "-c", "echo size={n}"]);
        let m = CommandExecutor::new(t, Cancel::new())
            .keep_stdout(true)
            .run(5)
            .unwrap();
        assert_eq!(m.stdout.as_deref(), Some(&b"size=5\n"[..]));
    }
}
