//! notify-buffer: does a file-change watcher with a large notification
//! buffer slow down every file operation on the system?
//!
//! On Windows a ReadDirectoryChangesW watcher with a 2 MiB buffer made every
//! file create/delete ~10× slower (the kernel zeroes the buffer per event).
//! On Linux the buffer is only the size of the watcher's `read`, so the
//! scenario measures what the question really is here: creating and deleting
//! n files with no watcher, with an inotify watcher reading through a 16 KiB
//! and a 2 MiB buffer, and with a fanotify *permission* watcher (how on-access
//! scanners work: every open waits for the watcher's answer) — the real Linux
//! hazard of this family. Two verdicts: the buffer size (affected only if the
//! 2 MiB buffer costs ≥ 2× the 16 KiB one) and the permission watcher.
//!
//! The child (`__child notify`) runs in a private mount namespace on a tmpfs
//! of its own, so neither the files nor the watcher's marks ever touch the
//! rest of the machine, and everything vanishes with the child even when it
//! is killed. It times only its create/delete loop.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Instant;

use serde_json::json;
use slowlab_model::results::{Headline, Role, ScenarioResult, ScenarioStatus, Variant};

use crate::measure::{emit_report, run_child, value_variant};
use crate::runner::Scenario;
use crate::{LabContext, LabError};

pub struct NotifyBuffer;

/// The watcher running while files are created and deleted.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Watcher {
    None,
    Inotify,
    FanotifyPerm,
}

impl Watcher {
    fn arg(self) -> &'static str {
        match self {
            Watcher::None => "none",
            Watcher::Inotify => "inotify",
            Watcher::FanotifyPerm => "fanotify-perm",
        }
    }
}

/// One configuration measured. The file creator is pinned to one CPU and
/// the watcher to another (`same_cpu` false) or to the same one: a
/// permission watcher's cost is a round trip of wake-ups, and a wake-up
/// across CPUs (an inter-processor interrupt) can cost ten times one on the
/// same CPU, so the two placements are measured apart instead of leaving
/// the result to where the scheduler happens to put the watcher.
struct Config {
    name: &'static str,
    watcher: Watcher,
    buffer: usize,
    same_cpu: bool,
}

const CONFIGS: [Config; 5] = [
    Config {
        name: "no watcher",
        watcher: Watcher::None,
        buffer: 0,
        same_cpu: false,
    },
    Config {
        name: "inotify, 16 KiB buffer",
        watcher: Watcher::Inotify,
        buffer: 16 << 10,
        same_cpu: false,
    },
    Config {
        name: "inotify, 2 MiB buffer",
        watcher: Watcher::Inotify,
        buffer: 2 << 20,
        same_cpu: false,
    },
    Config {
        name: "fanotify permission, other CPU",
        watcher: Watcher::FanotifyPerm,
        buffer: 4096,
        same_cpu: false,
    },
    Config {
        name: "fanotify permission, same CPU",
        watcher: Watcher::FanotifyPerm,
        buffer: 4096,
        same_cpu: true,
    },
];
/// Indexes into `CONFIGS`.
const NONE: usize = 0;
const INOTIFY_SMALL: usize = 1;
const INOTIFY_LARGE: usize = 2;
const PERMISSION_OTHER_CPU: usize = 3;
const PERMISSION_SAME_CPU: usize = 4;

/// The 2 MiB buffer must cost this many times the 16 KiB one to count.
const BUFFER_AFFECTED_RATIO: f64 = 2.0;
/// A watcher this many times slower than none is a hazard worth naming.
const WATCHER_HAZARD_RATIO: f64 = 2.0;

impl Scenario for NotifyBuffer {
    fn id(&self) -> &'static str {
        "notify-buffer"
    }

    fn summary(&self) -> &'static str {
        "file-change watchers: does a 2 MiB buffer, or a permission watcher, slow every file operation?"
    }

    fn needs_root(&self) -> bool {
        true
    }

    fn detector(&self) -> &'static str {
        "notify-permission"
    }

    fn run_for_trace(&self, ctx: &mut LabContext, role: Role) -> Result<(), LabError> {
        let mount_point = ctx.temp_dir("notify")?;
        let files = ctx.profile.pick(1000, 2000, 5000);
        let cpus = crate::system::allowed_cpus();
        let placement = cpus
            .first()
            .map(|&first| (first, cpus.get(1).copied().unwrap_or(first)));
        let watcher = match role {
            Role::Pathological => Watcher::FanotifyPerm,
            Role::Control => Watcher::None,
        };
        let args = child_args(watcher, 4096, files, mount_point.path(), placement);
        run_child(ctx, &args).map(|_| ())
    }

    fn run(&self, ctx: &mut LabContext) -> Result<ScenarioResult, LabError> {
        let mount_point = ctx.temp_dir("notify")?;
        let files = ctx.profile.pick(500, 5000, 20000);
        let cpus = crate::system::allowed_cpus();
        let (creator_cpu, other_cpu) = match cpus.as_slice() {
            [a, b, ..] => (Some(*a), Some(*b)),
            [a] => (Some(*a), None),
            [] => (None, None),
        };
        let rounds = ctx.profile.pick(2, 3, 5);
        // Per configuration: seconds per file of every repetition.
        let mut per_file: Vec<Vec<f64>> = vec![Vec::new(); CONFIGS.len()];
        let mut failures: Vec<Option<String>> = vec![None; CONFIGS.len()];
        let mut events = vec![0u64; CONFIGS.len()];
        for round in 0..rounds {
            // Interleave the configurations so drift hits them all alike.
            for (i, config) in CONFIGS.iter().enumerate() {
                ctx.check_cancel()?;
                if failures[i].is_some() {
                    continue;
                }
                let watcher_cpu = if config.same_cpu {
                    creator_cpu
                } else {
                    other_cpu
                };
                if config.watcher != Watcher::None && !config.same_cpu && other_cpu.is_none() {
                    failures[i] = Some("needs a second CPU".into());
                    continue;
                }
                ctx.status(&format!(
                    "notify-buffer: {} (round {}/{rounds})",
                    config.name,
                    round + 1
                ));
                let placement = creator_cpu.zip(watcher_cpu);
                let args = child_args(
                    config.watcher,
                    config.buffer,
                    files,
                    mount_point.path(),
                    placement,
                );
                match run_child(ctx, &args) {
                    Ok(out) => {
                        let reps = out.report["reps_wall_s"]
                            .as_array()
                            .cloned()
                            .unwrap_or_default();
                        per_file[i].extend(
                            reps.iter()
                                .filter_map(|v| v.as_f64())
                                .map(|s| s / files as f64),
                        );
                        events[i] += out.report["events"].as_u64().unwrap_or(0);
                    }
                    Err(LabError::Interrupted) => return Err(LabError::Interrupted),
                    Err(e) => failures[i] = Some(e.to_string()),
                }
            }
        }
        if let Some(reason) = &failures[NONE] {
            return Err(LabError::Failed(format!(
                "the run without a watcher failed: {reason}"
            )));
        }
        let costs: Vec<Option<f64>> = per_file
            .iter()
            .zip(&failures)
            .map(|(v, f)| (f.is_none() && !v.is_empty()).then(|| median(v)))
            .collect();
        let base = costs[NONE].unwrap_or(f64::NAN);
        for (i, config) in CONFIGS.iter().enumerate() {
            let line = match (costs[i], &failures[i]) {
                (Some(c), _) if i == NONE => {
                    format!(
                        "{:<31} {:7.2} µs per file created and deleted.",
                        config.name,
                        c * 1e6
                    )
                }
                (Some(c), _) => format!(
                    "{:<31} {:7.2} µs per file. Tracked files take {:.1} times as long.",
                    config.name,
                    c * 1e6,
                    c / base
                ),
                (None, Some(reason)) => format!("{:<31} could not run: {reason}", config.name),
                (None, None) => format!("{:<31} no measurement", config.name),
            };
            ctx.line(line);
        }
        Ok(judge(&costs, &failures, &events, files))
    }
}

/// Arguments of the child; `placement` is (creator CPU, watcher CPU).
pub fn child_args(
    watcher: Watcher,
    buffer: usize,
    files: u64,
    mount_point: &Path,
    placement: Option<(usize, usize)>,
) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "notify".into(),
        "--watcher".into(),
        watcher.arg().into(),
        "--buffer".into(),
        buffer.to_string(),
        "--files".into(),
        files.to_string(),
        "--mount-point".into(),
        mount_point.to_string_lossy().into_owned(),
    ];
    if let Some((creator, watcher)) = placement {
        args.extend([
            "--creator-cpu".into(),
            creator.to_string(),
            "--watcher-cpu".into(),
            watcher.to_string(),
        ]);
    }
    args
}

/// Arguments of the permission-watcher process.
pub fn watcher_args(buffer: usize, mount_point: &Path, cpu: Option<usize>) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "notify-watcher".into(),
        "--buffer".into(),
        buffer.to_string(),
        "--mount-point".into(),
        mount_point.to_string_lossy().into_owned(),
    ];
    if let Some(cpu) = cpu {
        args.extend(["--cpu".into(), cpu.to_string()]);
    }
    args
}

/// The permission-watcher process (`__child notify-watcher`).
pub fn watcher_main(buffer: usize, mount_point: &Path, cpu: Option<usize>) -> Result<(), String> {
    if let Some(cpu) = cpu {
        crate::system::pin_to_cpu(cpu)?;
    }
    watch::permission_watcher_main(mount_point, buffer)
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Two questions: the buffer size (the scenario's verdict) and the
/// permission watcher (the Linux hazard, in the explanation and variants).
fn judge(
    costs: &[Option<f64>],
    failures: &[Option<String>],
    events: &[u64],
    files: u64,
) -> ScenarioResult {
    let base = costs[NONE];
    let ratio = |i: usize| match (costs[i], base) {
        (Some(c), Some(b)) if b > 0.0 => Some(c / b),
        _ => None,
    };
    let (small, large) = (costs[INOTIFY_SMALL], costs[INOTIFY_LARGE]);
    let buffer_ratio = match (large, small) {
        (Some(l), Some(s)) if s > 0.0 => Some(l / s),
        _ => None,
    };
    let headline = match (large, small, buffer_ratio) {
        (Some(l), Some(s), Some(r)) => Some(Headline {
            metric: "seconds per file created and deleted, 2 MiB vs 16 KiB inotify buffer".into(),
            unit: "s".into(),
            pathological: l,
            control: s,
            ratio: r,
        }),
        _ => None,
    };
    let mut explanation = match buffer_ratio {
        Some(r) if r >= BUFFER_AFFECTED_RATIO => {
            format!("a 2 MiB watcher buffer makes file operations {r:.1}× as slow as a 16 KiB one")
        }
        Some(r) => format!("the watcher's buffer size makes no difference here ({r:.2}×)"),
        None => "the buffer-size comparison could not run".to_string(),
    };
    if let Some(r) = ratio(INOTIFY_SMALL) {
        explanation.push_str(&format!("; an inotify watcher costs {r:.1}×"));
    }
    let same = ratio(PERMISSION_SAME_CPU).map_or(String::new(), |r| {
        format!(" ({r:.1}× with the watcher on the same CPU)")
    });
    match (ratio(PERMISSION_OTHER_CPU), ratio(PERMISSION_SAME_CPU)) {
        (Some(r), _) if r >= WATCHER_HAZARD_RATIO => explanation.push_str(&format!(
            "; a fanotify permission watcher on another CPU makes every file open {r:.1}× as slow{same} — the Linux hazard of this family"
        )),
        (Some(r), _) => explanation.push_str(&format!(
            "; a fanotify permission watcher on another CPU costs {r:.1}×{same}"
        )),
        (None, Some(r)) => explanation.push_str(&format!(
            "; a fanotify permission watcher on the same CPU costs {r:.1}×"
        )),
        (None, None) => {
            if let Some(reason) = &failures[PERMISSION_OTHER_CPU] {
                explanation.push_str(&format!("; the permission watcher could not run ({reason})"));
            }
        }
    }
    let variants: Vec<Variant> = CONFIGS
        .iter()
        .enumerate()
        .map(|(i, config)| {
            let role = if matches!(i, INOTIFY_LARGE | PERMISSION_OTHER_CPU | PERMISSION_SAME_CPU) {
                Role::Pathological
            } else {
                Role::Control
            };
            let mut v = value_variant(config.name, role, costs[i].unwrap_or(f64::NAN), "s");
            if costs[i].is_none() {
                v.value = None;
            }
            v.note = match (&failures[i], ratio(i)) {
                (Some(reason), _) => Some(format!("could not run: {reason}")),
                (None, Some(r)) if i != NONE => Some(format!(
                    "{r:.2}× the cost without a watcher; {} events for {files} files per repetition",
                    events[i]
                )),
                _ => None,
            };
            v
        })
        .collect();
    ScenarioResult {
        id: "notify-buffer".into(),
        status: ScenarioStatus::Ran,
        reason: None,
        affected: buffer_ratio.map(|r| r >= BUFFER_AFFECTED_RATIO),
        headline,
        variants,
        explanation,
        lines: Vec::new(),
        platform: "linux".into(),
    }
}

/// The child: a private tmpfs, the watcher, and `files` creates and deletes
/// repeated three times, each repetition timed.
pub fn child_main(
    watcher: Watcher,
    buffer: usize,
    files: u64,
    mount_point: &Path,
    placement: Option<(usize, usize)>,
) -> Result<(), String> {
    const REPS: usize = 3;
    private_tmpfs(mount_point)?;
    let dir = mount_point.join("files");
    std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
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
        .map_err(|e| format!("bad path: {e}"))?;
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
                return Err(format!(
                    "cannot create a file: {}",
                    std::io::Error::last_os_error()
                ));
            }
            // SAFETY: fd was just opened by us.
            unsafe { libc::close(fd) };
        }
        for path in &paths {
            // SAFETY: path is NUL-terminated.
            if unsafe { libc::unlink(path.as_ptr()) } != 0 {
                return Err(format!(
                    "cannot delete a file: {}",
                    std::io::Error::last_os_error()
                ));
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
fn private_tmpfs(mount_point: &Path) -> Result<(), String> {
    // SAFETY: unshare with a constant flag.
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
        return Err(format!(
            "cannot make a private mount namespace: {} (needs root)",
            std::io::Error::last_os_error()
        ));
    }
    let root = CString::new("/").map_err(|e| e.to_string())?;
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
        return Err(format!(
            "cannot make mounts private: {}",
            std::io::Error::last_os_error()
        ));
    }
    let target = CString::new(mount_point.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
    let (source, fstype, options) = (
        CString::new("slowlab").map_err(|e| e.to_string())?,
        CString::new("tmpfs").map_err(|e| e.to_string())?,
        CString::new("size=256m,mode=0700").map_err(|e| e.to_string())?,
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
        return Err(format!(
            "cannot mount a tmpfs on {}: {}",
            mount_point.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// The watchers: an inotify thread reading events through a buffer of a
/// given size (the original's watcher was a thread too), and a fanotify
/// permission watcher answering every open with FAN_ALLOW in a process of
/// its own, as on-access scanners do. Each stops when told and returns how
/// many events it saw.
mod watch {
    use std::io::Read;
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;
    use std::thread::JoinHandle;

    /// A watcher running beside the file operations.
    pub enum Running {
        /// A thread of this process, stopped through an eventfd.
        Thread {
            stop_fd: i32,
            thread: JoinHandle<Result<u64, String>>,
        },
        /// A process of its own, stopped by closing its stdin; it prints
        /// its event count when it ends.
        Process(std::process::Child),
    }

    impl Running {
        /// Stops the watcher; returns how many events it saw.
        pub fn stop(self) -> Result<u64, String> {
            match self {
                Running::Thread { stop_fd, thread } => {
                    let one: u64 = 1;
                    // SAFETY: writes 8 bytes from a local to our eventfd.
                    unsafe { libc::write(stop_fd, (&one as *const u64).cast(), 8) };
                    let result = thread
                        .join()
                        .map_err(|_| "the watcher thread panicked".to_string())?;
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
                        .map_err(|e| format!("waiting for the watcher: {e}"))?;
                    if !status.success() {
                        return Err(format!("the watcher process failed: {status}"));
                    }
                    out.trim()
                        .rsplit('\n')
                        .next()
                        .and_then(|l| l.trim().parse().ok())
                        .ok_or_else(|| format!("the watcher printed no event count: {out:?}"))
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
    ) -> Result<Running, String> {
        let exe =
            std::env::current_exe().map_err(|e| format!("cannot find slowlab itself: {e}"))?;
        let mut child = std::process::Command::new(exe)
            .arg("__child")
            .args(super::watcher_args(buffer, mount_point, cpu))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start the watcher process: {e}"))?;
        let mut ready = [0u8; 6];
        let read_ok = child
            .stdout
            .as_mut()
            .is_some_and(|out| out.read_exact(&mut ready).is_ok());
        if !read_ok || &ready != b"ready\n" {
            let _ = child.kill();
            let _ = child.wait();
            return Err("the permission watcher did not start (see its error above)".into());
        }
        Ok(Running::Process(child))
    }

    /// The watcher process's main: marks the mount, says "ready", answers
    /// permission events until stdin closes, prints the event count.
    pub fn permission_watcher_main(mount_point: &Path, buffer: usize) -> Result<(), String> {
        use std::io::Write;
        let fd = fanotify_permission_fd(mount_point)?;
        println!("ready");
        std::io::stdout().flush().map_err(|e| e.to_string())?;
        let events = answer_permission_events(fd, 0, buffer)?;
        println!("{events}");
        Ok(())
    }

    fn last_error(what: &str) -> String {
        format!("{what}: {}", std::io::Error::last_os_error())
    }

    fn c_path(path: &Path) -> Result<std::ffi::CString, String> {
        std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|e| e.to_string())
    }

    /// Waits until `fd` is readable (true) or the stop eventfd fires (false).
    fn wait_readable(fd: i32, stop_fd: i32) -> Result<bool, String> {
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
                return Err(last_error("poll"));
            }
            if fds[0].revents & libc::POLLIN != 0 {
                return Ok(true);
            }
            if fds[1].revents != 0 {
                return Ok(false);
            }
        }
    }

    fn stop_eventfd() -> Result<i32, String> {
        // SAFETY: plain syscall.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(last_error("eventfd"));
        }
        Ok(fd)
    }

    pub fn start_inotify(dir: &Path, buffer: usize, cpu: Option<usize>) -> Result<Running, String> {
        // SAFETY: plain syscall.
        let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) };
        if fd < 0 {
            return Err(last_error("inotify_init1"));
        }
        let path = c_path(dir)?;
        // SAFETY: valid descriptor and NUL-terminated path.
        if unsafe { libc::inotify_add_watch(fd, path.as_ptr(), libc::IN_ALL_EVENTS) } < 0 {
            return Err(last_error("inotify_add_watch"));
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
    fn fanotify_permission_fd(mount_point: &Path) -> Result<i32, String> {
        // SAFETY: plain syscall.
        let fd = unsafe {
            libc::fanotify_init(
                libc::FAN_CLASS_CONTENT | libc::FAN_CLOEXEC | libc::FAN_NONBLOCK,
                (libc::O_RDONLY | libc::O_LARGEFILE) as u32,
            )
        };
        if fd < 0 {
            return Err(last_error(
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
            return Err(last_error("fanotify_mark"));
        }
        Ok(fd)
    }

    /// Answers every permission event with FAN_ALLOW until `stop_fd` is
    /// readable or hung up; returns the number of events.
    fn answer_permission_events(fd: i32, stop_fd: i32, buffer: usize) -> Result<u64, String> {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn costs(values: [f64; 5]) -> Vec<Option<f64>> {
        values.iter().map(|&v| Some(v)).collect()
    }

    #[test]
    fn equal_buffers_are_not_affected_and_the_permission_watcher_is_named() {
        let r = judge(
            &costs([2e-6, 2.8e-6, 2.9e-6, 7.5e-6, 4e-6]),
            &[None, None, None, None, None],
            &[0, 1, 1, 1, 1],
            1000,
        );
        assert_eq!(r.affected, Some(false));
        let h = r.headline.unwrap();
        assert!((h.ratio - 2.9 / 2.8).abs() < 1e-9);
        assert!(
            r.explanation.contains("makes no difference"),
            "{}",
            r.explanation
        );
        assert!(
            r.explanation.contains("on another CPU makes every file open 3.8× as slow (2.0× with the watcher on the same CPU)"),
            "{}",
            r.explanation
        );
        assert_eq!(r.variants.len(), 5);
    }

    #[test]
    fn a_large_buffer_twice_as_slow_is_affected() {
        let r = judge(
            &costs([2e-6, 3e-6, 6.1e-6, 7e-6, 5e-6]),
            &[None, None, None, None, None],
            &[0; 5],
            1000,
        );
        assert_eq!(r.affected, Some(true));
    }

    #[test]
    fn a_failed_permission_watcher_is_reported_not_fatal() {
        let mut c = costs([2e-6, 2.1e-6, 2.1e-6, 0.0, 0.0]);
        c[PERMISSION_OTHER_CPU] = None;
        c[PERMISSION_SAME_CPU] = None;
        let reason = Some("fanotify_init: Invalid argument".to_string());
        let failures = [None, None, None, reason.clone(), reason];
        let r = judge(&c, &failures, &[0; 5], 1000);
        assert_eq!(r.affected, Some(false));
        assert!(r.explanation.contains("could not run"), "{}", r.explanation);
        assert_eq!(r.variants[PERMISSION_OTHER_CPU].value, None);
    }
}
