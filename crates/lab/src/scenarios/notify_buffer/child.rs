//! notify-buffer's child program (`__child notify`): moves into a private
//! mount namespace with a tmpfs of its own, starts the watcher, creates
//! and deletes the files three times, timing each repetition, and reports.
//!
//! What it does not do: touch any file or mount outside its own namespace;
//! everything it made vanishes with it, even when it is killed.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Instant;

use serde_json::json;

use super::{watch, Watcher};
use crate::measure::emit_report;
use crate::LabError;

/// The child: a private tmpfs, the watcher, and `files` creates and deletes
/// repeated three times, each repetition timed.
pub fn child_main(
    watcher: Watcher,
    buffer: usize,
    files: u64,
    mount_point: &Path,
    placement: Option<(usize, usize)>,
) -> Result<(), LabError> {
    const REPS: usize = 3;
    private_tmpfs(mount_point)?;
    let dir = mount_point.join("files");
    std::fs::create_dir(&dir)
        .map_err(|e| LabError::io(format!("cannot create {}", dir.display()), e))?;
    // Pin this (the creating) thread before any watcher starts.
    if let Some((creator, _)) = placement {
        crate::system::pin_to_cpu(creator)?;
    }
    let watcher_cpu = placement.map(|(_, w)| w);
    let running = match watcher {
        Watcher::None => None,
        Watcher::Inotify => Some(watch::start_inotify(&dir, buffer, watcher_cpu)?),
        Watcher::FanotifyPerm => Some(watch::spawn_permission_watcher(
            mount_point,
            buffer,
            watcher_cpu,
        )?),
    };
    let paths: Vec<CString> = (0..files)
        .map(|i| CString::new(dir.join(format!("f{i}")).as_os_str().as_bytes()))
        .collect::<Result<_, _>>()
        .map_err(|e| LabError::Failed(format!("bad path: {e}")))?;
    let mut reps_wall_s = Vec::with_capacity(REPS);
    for _ in 0..REPS {
        let start = Instant::now();
        for path in &paths {
            // SAFETY: path is NUL-terminated; the descriptor is closed at once.
            let fd = unsafe {
                libc::open(
                    path.as_ptr(),
                    libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                    0o600,
                )
            };
            if fd < 0 {
                return Err(LabError::last_os("cannot create a file"));
            }
            // SAFETY: fd was just opened by us.
            unsafe { libc::close(fd) };
        }
        for path in &paths {
            // SAFETY: path is NUL-terminated.
            if unsafe { libc::unlink(path.as_ptr()) } != 0 {
                return Err(LabError::last_os("cannot delete a file"));
            }
        }
        reps_wall_s.push(start.elapsed().as_secs_f64());
    }
    let events = match running {
        Some(w) => w.stop()?,
        None => 0,
    };
    let wall_s: f64 = reps_wall_s.iter().sum();
    emit_report(&json!({
        "cpu_s": crate::measure::process_cpu_seconds(),
        "wall_s": wall_s,
        "reps_wall_s": reps_wall_s,
        "events": events / REPS as u64,
    }));
    Ok(())
}

/// Moves this process into a private mount namespace and mounts a fresh
/// tmpfs on `mount_point` there; nothing of it is visible outside, and it
/// disappears when the process ends.
fn private_tmpfs(mount_point: &Path) -> Result<(), LabError> {
    // SAFETY: unshare with a constant flag.
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
        return Err(LabError::Failed(format!(
            "cannot make a private mount namespace: {} (needs root)",
            std::io::Error::last_os_error()
        )));
    }
    let root = CString::new("/")?;
    // SAFETY: valid NUL-terminated strings or null pointers, as mount(2) allows.
    let rc = unsafe {
        libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(LabError::last_os("cannot make mounts private"));
    }
    let target = CString::new(mount_point.as_os_str().as_bytes())?;
    let (source, fstype, options) = (
        CString::new("slowlab")?,
        CString::new("tmpfs")?,
        CString::new("size=256m,mode=0700")?,
    );
    // SAFETY: valid NUL-terminated strings.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            options.as_ptr() as *const libc::c_void,
        )
    };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        return Err(LabError::io(
            format!("cannot mount a tmpfs on {}", mount_point.display()),
            err,
        ));
    }
    Ok(())
}
