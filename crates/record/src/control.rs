//! How `slowlab record --save` from another shell reaches a running ring
//! recorder: the recorder listens on a Unix socket and describes itself in
//! a small state file beside it, `record.PID.sock` and `record.PID.json`
//! (`{"pid":…,"output":"/abs/OUTPUT","socket":…,"ring_seconds":…}`) in
//! `/run/slowlab/` (or `$XDG_RUNTIME_DIR/slowlab/`, or
//! `/tmp/slowlab-UID/`, the first it can create). Both are removed when the
//! recorder ends; a recorder killed without its cleanup leaves them behind,
//! and [`recorders`] removes such stale ones (no such process, or nobody
//! listening on the socket).
//!
//! The protocol is one line each way: the client sends `save`, the
//! recorder answers `saved PATH` once the snapshot is written, or `error
//! WHY` (a full disk, the recording stopping). A socket rather than a
//! signal: the answer names the snapshot made for this request, and says
//! why when none could be.
//!
//! It does not make snapshots (`session` does) and runs no perf.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::RecordError;

/// A recorder as its state file describes it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct RecorderInfo {
    pub pid: u32,
    /// The absolute path of its OUTPUT.
    pub output: PathBuf,
    pub socket: PathBuf,
    pub ring_seconds: u32,
}

/// The directories a recorder may describe itself in, in order of
/// preference.
fn run_dirs() -> Vec<PathBuf> {
    let mut dirs = vec![PathBuf::from("/run/slowlab")];
    if let Some(x) = std::env::var_os("XDG_RUNTIME_DIR").filter(|x| !x.is_empty()) {
        dirs.push(PathBuf::from(x).join("slowlab"));
    }
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    dirs.push(std::env::temp_dir().join(format!("slowlab-{uid}")));
    dirs
}

/// `output` made absolute (its directory resolved), as recorders name it.
pub fn absolute_output(output: &Path) -> PathBuf {
    let dir = slowlab_model::bundle::directory_of(output);
    let name = output.file_name().map(PathBuf::from).unwrap_or_default();
    match std::fs::canonicalize(dir) {
        Ok(d) => d.join(name),
        Err(_) => std::env::current_dir()
            .map(|c| c.join(output))
            .unwrap_or_else(|_| output.to_owned()),
    }
}

/// The listening end of a recorder; removes its files when dropped.
pub(crate) struct ControlSocket {
    listener: UnixListener,
    socket: PathBuf,
    state: PathBuf,
}

impl ControlSocket {
    /// [`ControlSocket::open`]; the error is the warning to print: `--save` cannot reach
    /// this recording, SIGUSR2 still can.
    pub(crate) fn open_for_save(output: &Path, ring_seconds: u32) -> Result<ControlSocket, String> {
        ControlSocket::open(output, ring_seconds).map_err(|why| {
            format!(
                "`slowlab record --save` cannot reach this recording ({why}); SIGUSR2 still saves a snapshot"
            )
        })
    }

    /// Listens and writes the state file, in the first run directory that
    /// can be created; the error says why none could.
    pub(crate) fn open(output: &Path, ring_seconds: u32) -> Result<ControlSocket, String> {
        let pid = std::process::id();
        let mut why = Vec::new();
        for dir in run_dirs() {
            match ControlSocket::open_in(&dir, pid, output, ring_seconds) {
                Ok(c) => return Ok(c),
                Err(e) => why.push(format!("{}: {e}", dir.display())),
            }
        }
        Err(why.join("; "))
    }

    fn open_in(
        dir: &Path,
        pid: u32,
        output: &Path,
        ring_seconds: u32,
    ) -> std::io::Result<ControlSocket> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)?;
        let socket = dir.join(format!("record.{pid}.sock"));
        let state = dir.join(format!("record.{pid}.json"));
        // A file left by an earlier process with this pid.
        let _ = std::fs::remove_file(&socket);
        let listener = UnixListener::bind(&socket)?;
        listener.set_nonblocking(true)?;
        let info = RecorderInfo {
            pid,
            output: absolute_output(output),
            socket: socket.clone(),
            ring_seconds,
        };
        let partial = dir.join(format!("record.{pid}.json.partial"));
        let written = serde_json::to_vec(&info)
            .map_err(std::io::Error::other)
            .and_then(|bytes| std::fs::write(&partial, bytes))
            .and_then(|()| std::fs::rename(&partial, &state));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&partial);
            let _ = std::fs::remove_file(&socket);
            return Err(e);
        }
        Ok(ControlSocket {
            listener,
            socket,
            state,
        })
    }

    /// Readable while a client waits to be accepted: for the loop to sleep on.
    pub(crate) fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.listener.as_fd()
    }

    /// The clients that asked for a snapshot since the last call (they
    /// wait for [`answer`]); other requests are answered with an error at
    /// once.
    pub(crate) fn requests(&self) -> Vec<UnixStream> {
        let mut asked = Vec::new();
        // At most a few per poll: a flood cannot stall the recording loop.
        for _ in 0..16 {
            let Ok((stream, _)) = self.listener.accept() else {
                break;
            };
            if stream.set_nonblocking(false).is_err()
                || stream
                    .set_read_timeout(Some(Duration::from_millis(500)))
                    .is_err()
                || stream
                    .set_write_timeout(Some(Duration::from_secs(1)))
                    .is_err()
            {
                continue;
            }
            let mut line = String::new();
            let mut reader = BufReader::new(&stream);
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            if line.trim() == "save" {
                asked.push(stream);
            } else if !line.is_empty() {
                answer(
                    stream,
                    Err(format!("unknown request `{}`: only `save`", line.trim())),
                );
            }
        }
        asked
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.state);
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// Answers a client: the snapshot written (as an absolute path: the
/// client may be elsewhere), or why none was.
pub(crate) fn answer(mut stream: UnixStream, result: Result<&Path, String>) {
    let line = match result {
        Ok(path) => format!("saved {}\n", absolute_output(path).display()),
        Err(why) => format!("error {}\n", why.replace('\n', " ")),
    };
    let _ = stream.write_all(line.as_bytes());
}

/// Whether process `pid` exists.
fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// The ring recorders running on this machine (that this user can see);
/// removes the state files of those that are gone.
pub fn recorders() -> Vec<RecorderInfo> {
    let mut found = Vec::new();
    for dir in run_dirs() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !(name.starts_with("record.") && name.ends_with(".json")) {
                continue;
            }
            let Ok(bytes) = std::fs::read(entry.path()) else {
                continue;
            };
            let Ok(info) = serde_json::from_slice::<RecorderInfo>(&bytes) else {
                continue;
            };
            // Gone, or its pid now another process's: nobody listens.
            // (Connecting and closing costs the recorder nothing: it reads
            // the end of the stream at once.)
            let stale = !alive(info.pid)
                || match UnixStream::connect(&info.socket) {
                    Ok(_) => false,
                    Err(e) => matches!(
                        e.kind(),
                        std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::NotFound
                    ),
                };
            if stale {
                let _ = std::fs::remove_file(entry.path());
                let _ = std::fs::remove_file(&info.socket);
            } else {
                found.push(info);
            }
        }
    }
    found.sort_by_key(|r| r.pid);
    found
}

/// `slowlab record --save`: asks the recorder of `output` (any one, when
/// only one runs and `output` is `None`) for a snapshot and waits up to
/// `timeout` for it to be written; returns its path.
pub fn save(output: Option<&Path>, timeout: Duration) -> Result<PathBuf, RecordError> {
    let running = recorders();
    let recorder = match output {
        Some(out) => {
            let want = absolute_output(out);
            running.iter().find(|r| r.output == want).ok_or_else(|| {
                RecordError::NoRecorder(if running.is_empty() {
                    format!(
                        "no ring recorder is running (for {}); start one with `slowlab record --ring SECONDS -o {}` (one just started takes saves once its ring is sized, a few seconds)",
                        want.display(),
                        out.display()
                    )
                } else {
                    format!(
                        "no ring recorder writes {}; running: {}",
                        want.display(),
                        list(&running)
                    )
                })
            })?
        }
        None => match running.as_slice() {
            [one] => one,
            [] => {
                return Err(RecordError::NoRecorder(
                    "no ring recorder is running; start one with `slowlab record --ring SECONDS` (or `systemctl start slowlab-record`); one just started takes saves once its ring is sized, a few seconds".into(),
                ))
            }
            _ => {
                return Err(RecordError::NoRecorder(format!(
                    "{} ring recorders are running; say which with -o: {}",
                    running.len(),
                    list(&running)
                )))
            }
        },
    };
    let failed = |e: std::io::Error| {
        let hint = if e.kind() == std::io::ErrorKind::PermissionDenied {
            " (it runs as another user: ask as that user, e.g. with sudo)"
        } else {
            ""
        };
        RecordError::SaveFailed(format!("asking pid {}: {e}{hint}", recorder.pid))
    };
    let mut stream = UnixStream::connect(&recorder.socket).map_err(failed)?;
    stream.set_read_timeout(Some(timeout)).map_err(failed)?;
    stream.write_all(b"save\n").map_err(failed)?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line).map_err(|e| {
        if matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ) {
            RecordError::SaveFailed(format!(
                "the recorder (pid {}) wrote no snapshot within {} s",
                recorder.pid,
                timeout.as_secs()
            ))
        } else {
            failed(e)
        }
    })?;
    let line = line.trim_end();
    if let Some(path) = line.strip_prefix("saved ") {
        Ok(PathBuf::from(path))
    } else if let Some(why) = line.strip_prefix("error ") {
        Err(RecordError::SaveFailed(why.to_owned()))
    } else {
        Err(RecordError::SaveFailed(format!(
            "the recorder (pid {}) ended before it answered",
            recorder.pid
        )))
    }
}

fn list(running: &[RecorderInfo]) -> String {
    running
        .iter()
        .map(|r| format!("{} (pid {})", r.output.display(), r.pid))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first client's request, polled for up to 2 s.
    fn first_request(control: &ControlSocket) -> UnixStream {
        for _ in 0..100 {
            if let Some(stream) = control.requests().pop() {
                return stream;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("no request within 2 s");
    }

    #[test]
    fn a_save_request_is_answered_with_the_snapshot_and_the_files_go_at_the_end() {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = dir.path().join("t.data");
        let control = ControlSocket::open_in(dir.path(), 4_000_001, &out, 5).expect("opens");
        let state = dir.path().join("record.4000001.json");
        let info: RecorderInfo =
            serde_json::from_slice(&std::fs::read(&state).expect("state")).expect("json");
        assert_eq!(info.output, absolute_output(&out));
        let socket = info.socket.clone();
        let client = std::thread::spawn(move || {
            let mut s = UnixStream::connect(&socket).expect("connects");
            s.write_all(b"save\n").expect("writes");
            let mut line = String::new();
            BufReader::new(&s).read_line(&mut line).expect("reads");
            line
        });
        let stream = first_request(&control);
        answer(stream, Ok(Path::new("/tmp/t.data.2026")));
        assert_eq!(client.join().expect("client"), "saved /tmp/t.data.2026\n");
        drop(control);
        assert!(!state.exists() && !info.socket.exists());
    }

    #[test]
    fn a_disk_error_reaches_the_client_on_one_line() {
        let dir = tempfile::tempdir().expect("temp dir");
        let control =
            ControlSocket::open_in(dir.path(), 4_000_002, Path::new("o"), 5).expect("opens");
        let mut s = UnixStream::connect(&control.socket).expect("connects");
        s.write_all(b"save\n").expect("writes");
        answer(first_request(&control), Err("disk\nfull".into()));
        let mut line = String::new();
        BufReader::new(&s).read_line(&mut line).expect("reads");
        assert_eq!(line, "error disk full\n");
    }

    #[test]
    fn outputs_are_compared_as_absolute_paths() {
        let here = std::env::current_dir().expect("cwd");
        assert_eq!(absolute_output(Path::new("x.data")), here.join("x.data"));
        let abs = absolute_output(Path::new("/tmp/../tmp/y.data"));
        assert_eq!(abs.file_name().and_then(|n| n.to_str()), Some("y.data"));
        assert!(abs.is_absolute());
    }
}
