//! log-probe's child programs: the launcher (`__child log-launcher`), which
//! launches n writers one after the other in a fresh directory, times the
//! launches, prints the original's progress lines and removes the directory
//! before it exits; and the writer (`__child log-writer`), which finds its
//! log name (by probing or uniquely), creates the file and reports the time
//! that took.
//!
//! What they do not do: write anywhere but the directory they are given.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::json;

use super::{batch_line, writer_args, Naming, BATCH};
use crate::measure::{emit_report, parse_child_output, process_cpu_seconds};
use crate::LabError;

/// CPU seconds of this process plus its waited-for children.
fn cpu_with_children() -> f64 {
    let usage = |who| {
        // SAFETY: rusage is plain data that getrusage fills in.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointer.
        unsafe { libc::getrusage(who, &mut u) };
        let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
        secs(u.ru_utime) + secs(u.ru_stime)
    };
    usage(libc::RUSAGE_SELF) + usage(libc::RUSAGE_CHILDREN)
}

/// The launcher child: `n` sequential writer launches in a fresh directory
/// under `dir`, timed; the directory is removed before it returns.
pub fn launcher_main(naming: Naming, n: u64, dir: &Path) -> Result<(), LabError> {
    let exe =
        std::env::current_exe().map_err(|e| LabError::io("cannot find the slowlab binary", e))?;
    let run_dir = dir.join(format!("run.{}", std::process::id()));
    std::fs::create_dir(&run_dir)
        .map_err(|e| LabError::io(format!("cannot create {}", run_dir.display()), e))?;
    let outcome = launch_all(&exe, naming, n, &run_dir);
    let removed = std::fs::remove_dir_all(&run_dir);
    let t = outcome?;
    removed.map_err(|e| LabError::io(format!("cannot remove {}", run_dir.display()), e))?;
    emit_report(&json!({
        // What the sweep measures: the writers' time finding a name.
        "cpu_s": t.naming_cpu_s,
        "wall_s": t.naming_wall_s,
        "launch_cpu_s": t.cpu_s,
        "launch_wall_s": t.wall_s,
        "n": n,
        "checks": t.checks,
    }));
    Ok(())
}

/// What a launcher measured over its launches.
#[derive(Debug, Default)]
struct Launched {
    /// CPU of the launcher and every writer, and the elapsed time.
    cpu_s: f64,
    wall_s: f64,
    /// The writers' own time finding their log name, summed.
    naming_cpu_s: f64,
    naming_wall_s: f64,
    /// Existence checks the writers made.
    checks: u64,
}

fn launch_all(exe: &Path, naming: Naming, n: u64, run_dir: &Path) -> Result<Launched, LabError> {
    let args = writer_args(naming, run_dir);
    let mut t = Launched::default();
    let cpu_start = cpu_with_children();
    let start = Instant::now();
    let mut batch_start = start;
    for launched in 1..=n {
        let out = Command::new(exe)
            .arg("__child")
            .args(&args)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| LabError::io(format!("cannot launch {}", exe.display()), e))?;
        if !out.status.success() {
            return Err(LabError::Failed(format!(
                "launch {launched} failed: {}",
                out.status
            )));
        }
        let report = parse_child_output(&out.stdout)
            .and_then(|o| Ok((o.number("cpu_s")?, o.number("wall_s")?, o.number("checks")?)))
            .map_err(|e| LabError::Failed(format!("launch {launched}: {e}")))?;
        t.naming_cpu_s += report.0;
        t.naming_wall_s += report.1;
        t.checks += report.2 as u64;
        if launched % BATCH == 0 {
            let now = Instant::now();
            println!(
                "{}",
                batch_line((now - batch_start).as_secs_f64(), launched)
            );
            batch_start = now;
        }
    }
    t.cpu_s = cpu_with_children() - cpu_start;
    t.wall_s = start.elapsed().as_secs_f64();
    Ok(t)
}

/// The writer child: finds its log name and creates the file; reports the
/// CPU and elapsed time that took and how many names it checked.
pub fn writer_main(naming: Naming, dir: &Path) -> Result<(), LabError> {
    let cpu_start = process_cpu_seconds();
    let start = Instant::now();
    let checks = find_and_create_log(naming, dir)?;
    let wall_s = start.elapsed().as_secs_f64();
    emit_report(&json!({
        "cpu_s": process_cpu_seconds() - cpu_start,
        "wall_s": wall_s,
        "checks": checks,
    }));
    Ok(())
}

/// Creates this writer's log file; returns the existence checks it made.
pub(super) fn find_and_create_log(naming: Naming, dir: &Path) -> Result<u64, LabError> {
    let pid = std::process::id();
    match naming {
        Naming::Unique => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            create_log(&dir.join(format!("name.{pid}.{nanos}.dat")))
                .map(|_| 0)
                .map_err(|e| LabError::io(format!("cannot create the log in {}", dir.display()), e))
        }
        Naming::Probe => {
            for index in 0u64.. {
                let path = dir.join(format!("name.{index}.dat"));
                match std::fs::metadata(&path) {
                    Ok(_) => continue,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => {
                        return Err(LabError::io(format!("cannot check {}", path.display()), e))
                    }
                }
                match create_log(&path) {
                    Ok(()) => return Ok(index + 1),
                    // Another writer took it between the check and the create.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                    Err(e) => {
                        return Err(LabError::io(format!("cannot create {}", path.display()), e))
                    }
                }
            }
            Err(LabError::Failed("no free log name".into()))
        }
    }
}

fn create_log(path: &Path) -> std::io::Result<()> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    writeln!(file, "log of process {}", std::process::id())
}
