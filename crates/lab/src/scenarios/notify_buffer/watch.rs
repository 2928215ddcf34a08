//! The watchers: an inotify thread reading events through a buffer of a
//! given size (the original's watcher was a thread too), and a fanotify
//! permission watcher answering every open with FAN_ALLOW in a process of
//! its own, as on-access scanners do. Each stops when told and returns how
//! many events it saw.
//!
//! What it does not do: watch anything outside the child's private tmpfs.

use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::thread::JoinHandle;

use crate::LabError;

/// A watcher running beside the file operations.
pub enum Running {
    /// A thread of this process, stopped through an eventfd.
    Thread {
        stop_fd: i32,
        thread: JoinHandle<Result<u64, LabError>>,
    },
    /// A process of its own, stopped by closing its stdin; it prints
    /// its event count when it ends.
    Process(std::process::Child),
}

impl Running {
    /// Stops the watcher; returns how many events it saw.
    pub fn stop(self) -> Result<u64, LabError> {
        match self {
            Running::Thread { stop_fd, thread } => {
                let one: u64 = 1;
                // SAFETY: writes 8 bytes from a local to our eventfd.
                unsafe { libc::write(stop_fd, (&one as *const u64).cast(), 8) };
                let result = thread
                    .join()
                    .map_err(|_| LabError::Failed("the watcher thread panicked".into()))?;
                // SAFETY: our own descriptor, no longer used by the thread.
                unsafe { libc::close(stop_fd) };
                result
            }
            Running::Process(mut child) => {
                drop(child.stdin.take());
                let mut out = String::new();
                if let Some(mut stdout) = child.stdout.take() {
                    let _ = stdout.read_to_string(&mut out);
                }
                let status = child
                    .wait()
                    .map_err(|e| LabError::io("waiting for the watcher", e))?;
                if !status.success() {
                    return Err(LabError::Failed(format!(
                        "the watcher process failed: {status}"
                    )));
                }
                out.trim()
                    .rsplit('\n')
                    .next()
                    .and_then(|l| l.trim().parse().ok())
                    .ok_or_else(|| {
                        LabError::Failed(format!("the watcher printed no event count: {out:?}"))
                    })
            }
        }
    }
}

/// Starts `slowlab __child notify-watcher` as a process of its own (as
/// on-access scanners are), in this process's mount namespace, and waits
/// until its mark is in place.
pub fn spawn_permission_watcher(
    mount_point: &Path,
    buffer: usize,
    cpu: Option<usize>,
) -> Result<Running, LabError> {
    let exe = std::env::current_exe().map_err(|e| LabError::io("cannot find slowlab itself", e))?;
    let mut child = std::process::Command::new(exe)
        .arg("__child")
        .args(super::watcher_args(buffer, mount_point, cpu))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| LabError::io("cannot start the watcher process", e))?;
    let mut ready = [0u8; 6];
    let read_ok = child
        .stdout
        .as_mut()
        .is_some_and(|out| out.read_exact(&mut ready).is_ok());
    if !read_ok || &ready != b"ready\n" {
        let _ = child.kill();
        let _ = child.wait();
        return Err(LabError::Failed(
            "the permission watcher did not start (see its error above)".into(),
        ));
    }
    Ok(Running::Process(child))
}

/// The watcher process's main: marks the mount, says "ready", answers
/// permission events until stdin closes, prints the event count.
pub fn permission_watcher_main(mount_point: &Path, buffer: usize) -> Result<(), LabError> {
    use std::io::Write;
    let fd = fanotify_permission_fd(mount_point)?;
    println!("ready");
    std::io::stdout()
        .flush()
        .map_err(|e| LabError::Failed(e.to_string()))?;
    let events = answer_permission_events(fd, 0, buffer)?;
    println!("{events}");
    Ok(())
}

fn c_path(path: &Path) -> Result<std::ffi::CString, LabError> {
    Ok(std::ffi::CString::new(path.as_os_str().as_bytes())?)
}

/// Waits until `fd` is readable (true) or the stop eventfd fires (false).
fn wait_readable(fd: i32, stop_fd: i32) -> Result<bool, LabError> {
    let mut fds = [
        libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: stop_fd,
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    loop {
        // SAFETY: two valid pollfd structs.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if rc < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(LabError::last_os("poll"));
        }
        if fds[0].revents & libc::POLLIN != 0 {
            return Ok(true);
        }
        if fds[1].revents != 0 {
            return Ok(false);
        }
    }
}

fn stop_eventfd() -> Result<i32, LabError> {
    // SAFETY: plain syscall.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(LabError::last_os("eventfd"));
    }
    Ok(fd)
}

pub fn start_inotify(dir: &Path, buffer: usize, cpu: Option<usize>) -> Result<Running, LabError> {
    // SAFETY: plain syscall.
    let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) };
    if fd < 0 {
        return Err(LabError::last_os("inotify_init1"));
    }
    let path = c_path(dir)?;
    // SAFETY: valid descriptor and NUL-terminated path.
    if unsafe { libc::inotify_add_watch(fd, path.as_ptr(), libc::IN_ALL_EVENTS) } < 0 {
        return Err(LabError::last_os("inotify_add_watch"));
    }
    let stop_fd = stop_eventfd()?;
    let thread = std::thread::spawn(move || {
        if let Some(cpu) = cpu {
            crate::system::pin_to_cpu(cpu)?;
        }
        let mut buf = vec![0u8; buffer.max(4096)];
        let mut events = 0u64;
        let header = std::mem::size_of::<libc::inotify_event>();
        while wait_readable(fd, stop_fd)? {
            // SAFETY: reads into our buffer, bounded by its length.
            let len = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            if len <= 0 {
                continue;
            }
            let mut offset = 0usize;
            while offset + header <= len as usize {
                // SAFETY: the kernel wrote whole events; read_unaligned
                // copes with any alignment of the buffer.
                let event: libc::inotify_event =
                    unsafe { std::ptr::read_unaligned(buf.as_ptr().add(offset).cast()) };
                offset += header + event.len as usize;
                events += 1;
            }
        }
        // SAFETY: our descriptor.
        unsafe { libc::close(fd) };
        Ok(events)
    });
    Ok(Running::Thread { stop_fd, thread })
}

/// A fanotify group with a permission mark on the mount at `mount_point`.
fn fanotify_permission_fd(mount_point: &Path) -> Result<i32, LabError> {
    // SAFETY: plain syscall.
    let fd = unsafe {
        libc::fanotify_init(
            libc::FAN_CLASS_CONTENT | libc::FAN_CLOEXEC | libc::FAN_NONBLOCK,
            (libc::O_RDONLY | libc::O_LARGEFILE) as u32,
        )
    };
    if fd < 0 {
        return Err(LabError::last_os(
            "fanotify_init (permission events need root and CONFIG_FANOTIFY_ACCESS_PERMISSIONS)",
        ));
    }
    let path = c_path(mount_point)?;
    // SAFETY: valid descriptor and NUL-terminated path.
    let rc = unsafe {
        libc::fanotify_mark(
            fd,
            libc::FAN_MARK_ADD | libc::FAN_MARK_MOUNT,
            libc::FAN_OPEN_PERM,
            libc::AT_FDCWD,
            path.as_ptr(),
        )
    };
    if rc < 0 {
        return Err(LabError::last_os("fanotify_mark"));
    }
    Ok(fd)
}

/// Answers every permission event with FAN_ALLOW until `stop_fd` is
/// readable or hung up; returns the number of events.
fn answer_permission_events(fd: i32, stop_fd: i32, buffer: usize) -> Result<u64, LabError> {
    // u64 elements keep the buffer aligned for the event metadata.
    let mut buf = vec![0u64; buffer.max(4096) / 8];
    let bytes = buf.len() * 8;
    let mut events = 0u64;
    let meta_len = std::mem::size_of::<libc::fanotify_event_metadata>();
    while wait_readable(fd, stop_fd)? {
        // SAFETY: reads into our buffer, bounded by its length.
        let len = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), bytes) };
        if len <= 0 {
            continue;
        }
        let base = buf.as_ptr() as *const u8;
        let mut offset = 0usize;
        while offset + meta_len <= len as usize {
            // SAFETY: the kernel wrote whole metadata records.
            let meta: libc::fanotify_event_metadata =
                unsafe { std::ptr::read_unaligned(base.add(offset).cast()) };
            if meta.event_len == 0 {
                break;
            }
            if meta.fd >= 0 {
                if meta.mask & libc::FAN_OPEN_PERM != 0 {
                    let answer = libc::fanotify_response {
                        fd: meta.fd,
                        response: libc::FAN_ALLOW,
                    };
                    // SAFETY: writes the response struct to our descriptor.
                    unsafe {
                        libc::write(
                            fd,
                            (&answer as *const libc::fanotify_response).cast(),
                            std::mem::size_of::<libc::fanotify_response>(),
                        )
                    };
                }
                // SAFETY: the event's descriptor is ours to close.
                unsafe { libc::close(meta.fd) };
            }
            events += 1;
            offset += meta.event_len as usize;
        }
    }
    // SAFETY: our descriptor.
    unsafe { libc::close(fd) };
    Ok(events)
}
