//! Starting working-set-cap's scanner child from the scenario: inside a
//! memory cgroup if given (it joins between fork and exec, before it
//! touches anything), in its own process group that Ctrl-C and the
//! `Cleanup` guard kill, dying with the thread that started it
//! (PR_SET_PDEATHSIG); and how it ended.
//!
//! What it does not do: judge the outcome (`verdict` does) or make the
//! cgroup (`crate::cgroup`).

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use crate::cgroup::MemoryCgroup;
use crate::cleanup::Cleanup;
use crate::measure::{parse_child_output, ChildOutput};
use crate::{LabContext, LabError};

/// How a scanner child ended.
#[derive(Debug)]
pub enum Outcome {
    Report(ChildOutput),
    Signalled { signal: i32, stderr: String },
    Failed { status: String, stderr: String },
}

/// Runs the scanner, inside `cgroup` if given (it joins between fork and
/// exec), in its own process group that Ctrl-C kills.
pub(super) fn run_scanner(
    ctx: &LabContext,
    args: &[String],
    cgroup: Option<&MemoryCgroup>,
) -> Result<Outcome, LabError> {
    let parent = std::process::id() as libc::pid_t;
    let procs_fd = cgroup.map(|c| c.procs_fd());
    let mut command = Command::new(&ctx.self_exe);
    command
        .arg("__child")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // SAFETY: the closure runs between fork and exec and only makes
    // async-signal-safe system calls; it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            crate::system::die_with_parent(parent)?;
            if let Some(fd) = procs_fd {
                if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let child = command
        .spawn()
        .map_err(|e| LabError::io("cannot start the scanner", e))?;
    let pid = child.id() as libc::pid_t;
    let armed = Arc::new(AtomicI32::new(pid));
    let guard_armed = Arc::clone(&armed);
    let guard = Cleanup::register("kill the working-set scanner", move || {
        let group = guard_armed.swap(0, Ordering::SeqCst);
        if group > 0 {
            slowlab_sweep::cancel::kill_group(group);
        }
    });
    ctx.cancel.set_running_group(pid);
    let output = child.wait_with_output();
    ctx.cancel.clear_running_group();
    armed.store(0, Ordering::SeqCst);
    drop(guard);
    let output = output.map_err(|e| LabError::io("cannot wait for the scanner", e))?;
    ctx.check_cancel()?;
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
    use std::os::unix::process::ExitStatusExt;
    Ok(if let Some(signal) = output.status.signal() {
        Outcome::Signalled { signal, stderr }
    } else if output.status.success() {
        Outcome::Report(parse_child_output(&output.stdout)?)
    } else {
        Outcome::Failed {
            status: output.status.to_string(),
            stderr,
        }
    })
}
