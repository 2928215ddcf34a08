//! working-set-cap: a process whose memory is capped below the size of the
//! data it scans faults on every page, and scanning becomes hundreds of
//! times slower: a cliff at the limit, not a slope.
//!
//! The Windows original: background mode caps a process's working set at
//! 32 MiB; scanning 64 MiB then faults on every page. On Linux the cap is a
//! memory cgroup limited to 32 MiB (cgroup v1 `memory.limit_in_bytes`, or v2
//! `memory.max` where the v2 memory controller is enabled). A 64 MiB file on
//! a real disk filesystem is written, fsynced and dropped from the page
//! cache (`posix_fadvise(DONTNEED)` on that file only), then a scanner child
//! (`__child working-set-scan`) maps it and reads one byte per 4 KiB page
//! for about a second, counting scans: normally (control), inside the
//! cgroup (it joins between fork and exec, before it touches the file), and
//! calling `MADV_PAGEOUT` before every scan (trimming the working set by
//! hand, no cgroup). Anonymous memory in the same cgroup with no swap cannot
//! be paged out at all: the scanner is OOM-killed, which is detected
//! (SIGKILL and the cgroup's OOM counter) and reported as that variant's
//! result.
//!
//! What it does not do: drop the machine's caches, change any existing
//! cgroup, or enable a controller. The cgroups it makes (named
//! `slowlab-working-set-*`, at the root of the memory hierarchy) and the
//! file are removed by `Cleanup` guards on every exit path; the scanner dies
//! with the thread that started it (PR_SET_PDEATHSIG).

use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use slowlab_model::results::{Headline, Role, ScenarioResult, ScenarioStatus, Variant};

use crate::cleanup::Cleanup;
use crate::context::TempDir;
use crate::measure::{
    emit_report, parse_child_output, process_cpu_seconds, value_variant, ChildOutput,
};
use crate::runner::Scenario;
use crate::system::{self, CgroupVersion};
use crate::{LabContext, LabError};

pub struct WorkingSetCap;

/// The data scanned, as in the original test program.
pub const DATA_MIB: u64 = 64;
/// The cap, as in the original's background mode.
pub const LIMIT_MIB: u64 = 32;
const PAGE: usize = 4096;
/// Affected when capped scanning is this many times slower.
const AFFECTED_RATIO: f64 = 10.0;
/// The explanation of the anonymous variant's usual result.
pub const OOM_NOTE: &str = "OOM-killed: anonymous memory cannot be paged out without swap";

/// What the scanner maps.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Memory {
    /// The file given with --file, shared, read-only: pages can be dropped
    /// and read again.
    File,
    /// Private anonymous memory, written: without swap it cannot be paged out.
    Anon,
}

/// The child programs of this scenario (`slowlab __child …`).
#[derive(clap::Subcommand, Debug, Clone, PartialEq)]
pub enum Child {
    /// working-set-cap: map memory and touch one byte per 4 KiB page, over
    /// and over, for a while; report the scans per second.
    WorkingSetScan {
        #[arg(long, value_enum)]
        memory: Memory,
        /// The file to map (with --memory file).
        #[arg(long)]
        file: Option<PathBuf>,
        /// Size of the mapping in MiB.
        #[arg(long)]
        mib: u64,
        /// How long to scan after the first (untimed) scan.
        #[arg(long)]
        seconds: f64,
        /// Call MADV_PAGEOUT on the whole mapping before every scan.
        #[arg(long)]
        pageout: bool,
    },
}

/// The scanner's arguments.
pub fn scan_args(memory: Memory, file: Option<&Path>, seconds: f64, pageout: bool) -> Vec<String> {
    let mut args = vec![
        "working-set-scan".to_string(),
        "--memory".into(),
        match memory {
            Memory::File => "file".into(),
            Memory::Anon => "anon".into(),
        },
        "--mib".into(),
        DATA_MIB.to_string(),
        "--seconds".into(),
        seconds.to_string(),
    ];
    if let Some(file) = file {
        args.push("--file".into());
        args.push(file.to_string_lossy().into_owned());
    }
    if pageout {
        args.push("--pageout".into());
    }
    args
}

impl Scenario for WorkingSetCap {
    fn id(&self) -> &'static str {
        "working-set-cap"
    }

    fn summary(&self) -> &'static str {
        "scanning 64 MiB inside a 32 MiB memory cgroup faults on every page"
    }

    fn needs_root(&self) -> bool {
        true
    }

    fn detector(&self) -> &'static str {
        "memcg-thrash"
    }

    fn run_for_trace(&self, ctx: &mut LabContext, role: Role) -> Result<(), LabError> {
        let setup = ScanSetup::prepare(ctx)?;
        drop_cache(&setup.file)?;
        let args = scan_args(Memory::File, Some(&setup.file), 1.0, false);
        let cgroup = match role {
            Role::Pathological => Some(MemoryCgroup::create(
                &setup.cgroup_root,
                setup.version,
                "capped",
                LIMIT_MIB << 20,
            )?),
            Role::Control => None,
        };
        run_scanner(ctx, &args, cgroup.as_ref()).map(|_| ())
    }

    fn preflight(&self, ctx: &LabContext) -> Result<(), String> {
        system::memory_cgroup_root()?;
        scan_dir(&ctx.work_root)?;
        let needed = (DATA_MIB * 4) << 20;
        match system::available_memory() {
            Some(available) if available < needed => Err(format!(
                "{} MiB of memory available, {} MiB needed; free some memory",
                available >> 20,
                needed >> 20
            )),
            _ => Ok(()),
        }
    }

    fn run(&self, ctx: &mut LabContext) -> Result<ScenarioResult, LabError> {
        let setup = ScanSetup::prepare(ctx)?;
        let (cgroup_root, version, file) = (&setup.cgroup_root, setup.version, &setup.file);
        let seconds = ctx.profile.pick(0.3, 1.0, 3.0);
        let limit = LIMIT_MIB << 20;

        let run = |ctx: &mut LabContext,
                   what: &str,
                   memory: Memory,
                   pageout: bool,
                   cgroup: Option<&MemoryCgroup>| {
            ctx.check_cancel()?;
            ctx.status(&format!("working-set-cap: scanning {what}"));
            let resident = drop_cache(file)?;
            let args = scan_args(
                memory,
                (memory == Memory::File).then_some(file.as_path()),
                seconds,
                pageout,
            );
            let outcome = run_scanner(ctx, &args, cgroup)?;
            Ok::<_, LabError>((outcome, resident))
        };

        let (normal, resident) = run(ctx, "normally", Memory::File, false, None)?;
        let normal = Scan::from_outcome("normal", normal)?;
        let capped = {
            let cgroup = MemoryCgroup::create(cgroup_root, version, "capped", limit)?;
            let (outcome, _) = run(
                ctx,
                "inside a 32 MiB memory cgroup",
                Memory::File,
                false,
                Some(&cgroup),
            )?;
            let mut scan = Scan::from_outcome("capped", outcome)?;
            scan.limit_hits = cgroup.limit_hits();
            scan
        };
        let (pageout, _) = run(ctx, "with MADV_PAGEOUT", Memory::File, true, None)?;
        let pageout = Scan::from_outcome("pageout", pageout)?;
        let anon = {
            let cgroup = MemoryCgroup::create(cgroup_root, version, "anon", limit)?;
            let (outcome, _) = run(
                ctx,
                "anonymous memory in the cgroup",
                Memory::Anon,
                false,
                Some(&cgroup),
            )?;
            AnonResult::judge(outcome, cgroup.oom_kills(), system::has_swap())?
        };

        let measured = Measured {
            normal,
            capped,
            pageout,
            anon,
            resident_after_drop: resident,
            version,
        };
        for line in lines(&measured) {
            ctx.line(line);
        }
        Ok(judge(&measured))
    }
}

/// The 64 MiB file to scan, on a disk filesystem, and where memory
/// cgroups go; the file is removed with the guard.
struct ScanSetup {
    _temp: TempDir,
    file: PathBuf,
    cgroup_root: PathBuf,
    version: CgroupVersion,
}

impl ScanSetup {
    fn prepare(ctx: &mut LabContext) -> Result<Self, LabError> {
        let (cgroup_root, version) = system::memory_cgroup_root().map_err(LabError::Failed)?;
        let dir = scan_dir(&ctx.work_root).map_err(LabError::Failed)?;
        let temp = TempDir::new_in(&dir, "working-set")?;
        let file = temp.path().join("scan-64MiB.dat");
        ctx.status(&format!(
            "working-set-cap: writing {DATA_MIB} MiB to {}",
            file.display()
        ));
        write_file(&file, DATA_MIB << 20, ctx)?;
        Ok(ScanSetup {
            _temp: temp,
            file,
            cgroup_root,
            version,
        })
    }
}

/// Where the file goes: the lab's work directory if it is on a disk
/// filesystem, else /var/tmp; with room for the file and some slack.
pub fn scan_dir(work_root: &Path) -> Result<PathBuf, String> {
    let needed = (DATA_MIB * 2) << 20;
    let mut refused = Vec::new();
    for candidate in [work_root, Path::new("/var/tmp")] {
        if !candidate.is_dir() {
            refused.push(format!("{} is not a directory", candidate.display()));
        } else if system::is_memory_filesystem(candidate) {
            refused.push(format!("{} is in memory (tmpfs)", candidate.display()));
        } else if system::free_disk(candidate).is_some_and(|free| free < needed) {
            refused.push(format!(
                "{} has less than {} MiB free",
                candidate.display(),
                needed >> 20
            ));
        } else {
            return Ok(candidate.to_path_buf());
        }
    }
    Err(format!(
        "the {DATA_MIB} MiB file must be on a disk filesystem, but {}; use --work-dir DIR on a disk",
        refused.join(" and ")
    ))
}

/// Writes `bytes` of non-zero data and fsyncs it.
fn write_file(path: &Path, bytes: u64, ctx: &LabContext) -> Result<(), LabError> {
    let what = || format!("cannot write {}", path.display());
    let mut file = std::fs::File::create(path).map_err(|e| LabError::io(what(), e))?;
    let chunk: Vec<u8> = (0..1usize << 20).map(|i| (i % 251) as u8 + 1).collect();
    let mut written = 0;
    while written < bytes {
        ctx.check_cancel()?;
        file.write_all(&chunk)
            .map_err(|e| LabError::io(what(), e))?;
        written += chunk.len() as u64;
    }
    file.sync_all().map_err(|e| LabError::io(what(), e))
}

/// Drops this file's pages from the page cache; returns the fraction still
/// resident afterwards (from mincore).
fn drop_cache(path: &Path) -> Result<f64, LabError> {
    let file = std::fs::File::open(path)
        .map_err(|e| LabError::io(format!("cannot open {}", path.display()), e))?;
    // SAFETY: a plain system call on an open descriptor.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(LabError::io(
            format!("cannot drop {} from the page cache", path.display()),
            std::io::Error::from_raw_os_error(rc),
        ));
    }
    let len = file
        .metadata()
        .map_err(|e| LabError::io(format!("cannot stat {}", path.display()), e))?
        .len() as usize;
    let mapping = Mapping::file(&file, len)
        .map_err(|e| LabError::io(format!("cannot map {}", path.display()), e))?;
    let pages = len.div_ceil(PAGE);
    let mut vec = vec![0u8; pages];
    // SAFETY: the mapping is `len` bytes; vec has one byte per page.
    let rc = unsafe { libc::mincore(mapping.ptr.cast(), len, vec.as_mut_ptr()) };
    if rc != 0 {
        return Err(LabError::io(
            "mincore failed",
            std::io::Error::last_os_error(),
        ));
    }
    let resident = vec.iter().filter(|&&b| b & 1 == 1).count();
    Ok(resident as f64 / pages.max(1) as f64)
}

/// A memory mapping, unmapped on drop.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    fn file(file: &std::fs::File, len: usize) -> std::io::Result<Self> {
        Self::map(len, libc::PROT_READ, libc::MAP_SHARED, file.as_raw_fd())
    }

    fn anonymous(len: usize) -> std::io::Result<Self> {
        Self::map(
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
        )
    }

    fn map(len: usize, prot: i32, flags: i32, fd: i32) -> std::io::Result<Self> {
        // SAFETY: a fresh mapping at an address the kernel chooses; checked.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, 0) };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Mapping { ptr: p.cast(), len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len is a mapping this struct made.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// A memory cgroup made by this scenario: limited, then removed by its
/// guard (its processes killed first) on every exit path.
struct MemoryCgroup {
    dir: PathBuf,
    version: CgroupVersion,
    /// `cgroup.procs`, open for the child to write "0" into between fork
    /// and exec.
    procs: std::fs::File,
    _guard: Cleanup,
}

impl MemoryCgroup {
    fn create(
        root: &Path,
        version: CgroupVersion,
        label: &str,
        limit_bytes: u64,
    ) -> Result<Self, LabError> {
        let dir = root.join(format!(
            "slowlab-working-set-{}-{label}",
            std::process::id()
        ));
        std::fs::create_dir(&dir)
            .map_err(|e| LabError::io(format!("cannot create the cgroup {}", dir.display()), e))?;
        let removed = dir.clone();
        let guard = Cleanup::register(format!("remove the cgroup {}", dir.display()), move || {
            remove_cgroup(&removed)
        });
        let limit_file = match version {
            CgroupVersion::V1 => "memory.limit_in_bytes",
            CgroupVersion::V2 => "memory.max",
        };
        std::fs::write(dir.join(limit_file), limit_bytes.to_string())
            .map_err(|e| LabError::io(format!("cannot set {}/{limit_file}", dir.display()), e))?;
        let procs = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
            .map_err(|e| LabError::io(format!("cannot open {}/cgroup.procs", dir.display()), e))?;
        Ok(MemoryCgroup {
            dir,
            version,
            procs,
            _guard: guard,
        })
    }

    /// A `key value` counter from one of the cgroup's files.
    fn keyed(&self, file: &str, key: &str) -> Option<u64> {
        let text = std::fs::read_to_string(self.dir.join(file)).ok()?;
        parse_counter(&text, key)
    }

    /// How many processes the cgroup's OOM killer killed.
    fn oom_kills(&self) -> Option<u64> {
        match self.version {
            CgroupVersion::V1 => self.keyed("memory.oom_control", "oom_kill"),
            CgroupVersion::V2 => self.keyed("memory.events", "oom_kill"),
        }
    }

    /// How many times usage hit the limit.
    fn limit_hits(&self) -> Option<u64> {
        match self.version {
            CgroupVersion::V1 => system::read_number(self.dir.join("memory.failcnt")),
            CgroupVersion::V2 => self.keyed("memory.events", "max"),
        }
    }
}

/// A `key value` counter from memory.oom_control (v1) or memory.events (v2).
pub fn parse_counter(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut parts = line.split_whitespace();
        (parts.next()? == key).then(|| parts.next()?.parse().ok())?
    })
}

/// Kills whatever is in the cgroup, then removes it, retrying briefly while
/// the kernel lets go of it.
fn remove_cgroup(dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        let pids: Vec<libc::pid_t> = procs
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        for &pid in &pids {
            // SAFETY: kill(2) has no memory-safety preconditions.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        if pids.is_empty() {
            match std::fs::remove_dir(dir) {
                Ok(()) => return,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
                Err(_) => {}
            }
        }
        if Instant::now() >= deadline {
            eprintln!(
                "slowlab: could not remove the cgroup {}; remove it with `rmdir {}`",
                dir.display(),
                dir.display()
            );
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// How a scanner child ended.
#[derive(Debug)]
pub enum Outcome {
    Report(ChildOutput),
    Signalled { signal: i32, stderr: String },
    Failed { status: String, stderr: String },
}

/// Runs the scanner, inside `cgroup` if given (it joins between fork and
/// exec), in its own process group that Ctrl-C kills.
fn run_scanner(
    ctx: &LabContext,
    args: &[String],
    cgroup: Option<&MemoryCgroup>,
) -> Result<Outcome, LabError> {
    let parent = std::process::id() as libc::pid_t;
    let procs_fd = cgroup.map(|c| c.procs.as_raw_fd());
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
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
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

/// One file scan's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Scan {
    pub scans_per_s: f64,
    pub scans: f64,
    pub seconds: f64,
    pub warmup_s: f64,
    pub faults_per_scan: f64,
    /// MiB fetched from storage per scan (/proc/self/io read_bytes).
    pub disk_mib_per_scan: f64,
    /// How often the cgroup's usage hit its limit (capped only).
    pub limit_hits: Option<u64>,
}

impl Scan {
    fn from_outcome(what: &str, outcome: Outcome) -> Result<Self, LabError> {
        match outcome {
            Outcome::Report(out) => Ok(Scan {
                scans_per_s: out.number("scans_per_s")?,
                scans: out.number("scans")?,
                seconds: out.number("seconds")?,
                warmup_s: out.number("warmup_s")?,
                faults_per_scan: out.number("faults")? / out.number("scans")?.max(1e-9),
                disk_mib_per_scan: out.number("read_bytes")?
                    / f64::from(1u32 << 20)
                    / out.number("scans")?.max(1e-9),
                limit_hits: None,
            }),
            Outcome::Signalled { signal, stderr } => Err(LabError::Failed(format!(
                "the {what} scanner was killed by signal {signal}{}",
                tail(&stderr)
            ))),
            Outcome::Failed { status, stderr } => Err(LabError::Failed(format!(
                "the {what} scanner failed ({status}){}",
                tail(&stderr)
            ))),
        }
    }
}

fn tail(stderr: &str) -> String {
    match stderr.lines().last() {
        Some(line) => format!(": {line}"),
        None => String::new(),
    }
}

/// What happened to anonymous memory in the cgroup.
#[derive(Debug, Clone, PartialEq)]
pub enum AnonResult {
    /// SIGKILL and the cgroup's OOM counter went up.
    OomKilled { oom_kills: u64 },
    /// It finished (with swap it can be paged out).
    Scanned { scans_per_s: f64, swap: bool },
    /// Killed by SIGKILL without an OOM kill being counted, or by another
    /// signal.
    Killed { signal: i32, oom_kills: Option<u64> },
}

impl AnonResult {
    pub fn judge(outcome: Outcome, oom_kills: Option<u64>, swap: bool) -> Result<Self, LabError> {
        Ok(match outcome {
            Outcome::Signalled { signal, .. }
                if signal == libc::SIGKILL && oom_kills.is_some_and(|k| k > 0) =>
            {
                AnonResult::OomKilled {
                    oom_kills: oom_kills.unwrap_or(0),
                }
            }
            Outcome::Signalled { signal, .. } => AnonResult::Killed { signal, oom_kills },
            Outcome::Report(out) => AnonResult::Scanned {
                scans_per_s: out.number("scans_per_s")?,
                swap,
            },
            Outcome::Failed { status, stderr } => {
                return Err(LabError::Failed(format!(
                    "the anonymous-memory scanner failed ({status}){}",
                    tail(&stderr)
                )))
            }
        })
    }

    /// What to say about it.
    pub fn text(&self) -> String {
        match self {
            AnonResult::OomKilled { .. } => OOM_NOTE.to_string(),
            AnonResult::Scanned {
                scans_per_s,
                swap: true,
            } => format!(
                "not OOM-killed: this machine has swap, so anonymous pages were swapped out and in ({} scans/s)",
                rate(*scans_per_s)
            ),
            AnonResult::Scanned { scans_per_s, .. } => format!(
                "not OOM-killed although there is no swap ({} scans/s): the cgroup limit did not hold",
                rate(*scans_per_s)
            ),
            AnonResult::Killed { signal, oom_kills } => format!(
                "killed by signal {signal}, but the cgroup counted {} OOM kills",
                oom_kills.map_or("no".to_string(), |k| k.to_string())
            ),
        }
    }
}

/// Everything the scenario measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub normal: Scan,
    pub capped: Scan,
    pub pageout: Scan,
    pub anon: AnonResult,
    /// Fraction of the file still in the page cache after dropping it.
    pub resident_after_drop: f64,
    pub version: CgroupVersion,
}

/// Scans per second: no decimals from 10 up.
pub fn rate(x: f64) -> String {
    if x >= 10.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

fn times(normal: f64, slow: f64) -> f64 {
    normal / slow.max(1e-9)
}

/// The lines of the original program, and the other variants'.
pub fn lines(m: &Measured) -> Vec<String> {
    let mut lines = vec![
        format!(
            "{} scans/s normal, {} scans/s capped: {:.0} times as long.",
            rate(m.normal.scans_per_s),
            rate(m.capped.scans_per_s),
            times(m.normal.scans_per_s, m.capped.scans_per_s)
        ),
        format!(
            "{} scans/s with MADV_PAGEOUT before every scan: {:.0} times as long.",
            rate(m.pageout.scans_per_s),
            times(m.normal.scans_per_s, m.pageout.scans_per_s)
        ),
        format!(
            "Per scan of {} pages: {:.0} page faults and {:.1} MiB read from disk normal, {:.0} and {:.1} MiB capped, {:.0} and {:.1} MiB with MADV_PAGEOUT.",
            (DATA_MIB << 20) / PAGE as u64,
            m.normal.faults_per_scan,
            m.normal.disk_mib_per_scan,
            m.capped.faults_per_scan,
            m.capped.disk_mib_per_scan,
            m.pageout.faults_per_scan,
            m.pageout.disk_mib_per_scan,
        ),
        format!(
            "Anonymous memory in the {LIMIT_MIB} MiB cgroup: {}.",
            m.anon.text()
        ),
    ];
    if m.resident_after_drop > 0.05 {
        lines.push(format!(
            "(the page cache kept {:.0}% of the file after it was dropped: the first scans were not all from disk)",
            m.resident_after_drop * 100.0
        ));
    }
    lines
}

/// Verdict: affected when scanning in the capped cgroup is at least
/// `AFFECTED_RATIO` times slower than normal.
pub fn judge(m: &Measured) -> ScenarioResult {
    let ratio = times(m.normal.scans_per_s, m.capped.scans_per_s);
    let affected = ratio >= AFFECTED_RATIO;
    let cgroup = match m.version {
        CgroupVersion::V1 => "cgroup v1 memory.limit_in_bytes",
        CgroupVersion::V2 => "cgroup v2 memory.max",
    };
    let explanation = if affected {
        format!(
            "a {LIMIT_MIB} MiB memory cap ({cgroup}) makes every page of a {DATA_MIB} MiB file scan fault: {} scans/s instead of {} ({ratio:.0}×); anonymous memory: {}",
            rate(m.capped.scans_per_s),
            rate(m.normal.scans_per_s),
            short_anon(&m.anon),
        )
    } else {
        format!(
            "a {LIMIT_MIB} MiB memory cap ({cgroup}) slowed a {DATA_MIB} MiB file scan only {ratio:.1}×",
        )
    };
    let scan_note = |s: &Scan| {
        format!(
            "{:.1} scans in {:.2} s after a first scan of {:.3} s; per scan {:.0} page faults and {:.1} MiB read from disk{}",
            s.scans,
            s.seconds,
            s.warmup_s,
            s.faults_per_scan,
            s.disk_mib_per_scan,
            s.limit_hits
                .map(|h| format!("; the cgroup hit its limit {h} times"))
                .unwrap_or_default()
        )
    };
    let with_note = |mut v: Variant, s: &Scan| {
        v.note = Some(scan_note(s));
        v
    };
    let mut anon = value_variant(
        &format!("anonymous-capped-{LIMIT_MIB}MiB"),
        Role::Pathological,
        0.0,
        "scans/s",
    );
    anon.value = match m.anon {
        AnonResult::Scanned { scans_per_s, .. } => Some(scans_per_s),
        _ => None,
    };
    anon.note = Some(m.anon.text());
    ScenarioResult {
        id: "working-set-cap".into(),
        status: ScenarioStatus::Ran,
        reason: None,
        affected: Some(affected),
        headline: Some(Headline {
            metric: format!(
                "scans per second of a {DATA_MIB} MiB file mapping, in a {LIMIT_MIB} MiB memory cgroup vs normal"
            ),
            unit: "scans/s".into(),
            pathological: m.capped.scans_per_s,
            control: m.normal.scans_per_s,
            ratio,
        }),
        variants: vec![
            with_note(
                value_variant(
                    &format!("capped-{LIMIT_MIB}MiB"),
                    Role::Pathological,
                    m.capped.scans_per_s,
                    "scans/s",
                ),
                &m.capped,
            ),
            with_note(
                value_variant("normal", Role::Control, m.normal.scans_per_s, "scans/s"),
                &m.normal,
            ),
            with_note(
                value_variant(
                    "madv-pageout",
                    Role::Pathological,
                    m.pageout.scans_per_s,
                    "scans/s",
                ),
                &m.pageout,
            ),
            anon,
        ],
        explanation,
        lines: Vec::new(),
        platform: "linux".into(),
    }
}

fn short_anon(anon: &AnonResult) -> String {
    match anon {
        AnonResult::OomKilled { .. } => "OOM-killed (no swap)".into(),
        other => other.text(),
    }
}

/// The scanner: maps the memory, scans it once untimed, then scans for
/// `seconds` and reports the rate.
pub fn child_main(child: Child) -> Result<(), String> {
    let Child::WorkingSetScan {
        memory,
        file,
        mib,
        seconds,
        pageout,
    } = child;
    let len = (mib as usize) << 20;
    let (mapping, _file) = match memory {
        Memory::File => {
            let path = file.ok_or("--memory file needs --file")?;
            let f = std::fs::File::open(&path)
                .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
            let m = Mapping::file(&f, len)
                .map_err(|e| format!("cannot map {}: {e}", path.display()))?;
            (m, Some(f))
        }
        Memory::Anon => (
            Mapping::anonymous(len).map_err(|e| format!("cannot map {mib} MiB: {e}"))?,
            None,
        ),
    };
    let write = memory == Memory::Anon;
    let pages = len / PAGE;

    let warmup = Instant::now();
    touch(&mapping, 0, pages, write);
    let warmup_s = warmup.elapsed().as_secs_f64();

    let (faults_before, read_before) = (faults(), read_bytes());
    let start_cpu = process_cpu_seconds();
    let start = Instant::now();
    let limit = Duration::from_secs_f64(seconds.max(0.0));
    const CHUNK: usize = 1024;
    let mut touched: u64 = 0;
    let mut position = 0;
    loop {
        if position == 0 && pageout {
            // SAFETY: the whole mapping this process made.
            let rc = unsafe { libc::madvise(mapping.ptr.cast(), len, libc::MADV_PAGEOUT) };
            if rc != 0 {
                return Err(format!(
                    "madvise(MADV_PAGEOUT) failed: {} (Linux 5.4 or later is needed)",
                    std::io::Error::last_os_error()
                ));
            }
        }
        let end = (position + CHUNK).min(pages);
        touch(&mapping, position, end, write);
        touched += (end - position) as u64;
        position = if end == pages { 0 } else { end };
        if start.elapsed() >= limit {
            break;
        }
    }
    let wall_s = start.elapsed().as_secs_f64();
    let cpu_s = process_cpu_seconds() - start_cpu;
    let (faults_after, read_after) = (faults(), read_bytes());
    let scans = touched as f64 / pages as f64;
    emit_report(&json!({
        "cpu_s": cpu_s,
        "wall_s": wall_s,
        "seconds": wall_s,
        "scans": scans,
        "scans_per_s": scans / wall_s.max(1e-9),
        "warmup_s": warmup_s,
        "faults": faults_after.saturating_sub(faults_before),
        "read_bytes": read_after.saturating_sub(read_before),
    }));
    Ok(())
}

/// Reads (or writes) one byte of each page in `[from, to)`.
fn touch(mapping: &Mapping, from: usize, to: usize, write: bool) {
    let mut sum: u8 = 0;
    for page in from..to {
        // SAFETY: page < len / PAGE, so the byte is inside the mapping.
        unsafe {
            let p = mapping.ptr.add(page * PAGE);
            if write {
                std::ptr::write_volatile(p, page as u8);
            } else {
                sum = sum.wrapping_add(std::ptr::read_volatile(p));
            }
        }
    }
    std::hint::black_box(sum);
}

/// Page faults (major and minor) of this process so far.
fn faults() -> u64 {
    // SAFETY: rusage is plain data that getrusage fills in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    (usage.ru_majflt + usage.ru_minflt) as u64
}

/// Bytes this process caused to be read from storage (0 when the kernel
/// does not count them).
fn read_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("read_bytes:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(scans_per_s: f64) -> Scan {
        Scan {
            scans_per_s,
            scans: scans_per_s,
            seconds: 1.0,
            warmup_s: 0.2,
            faults_per_scan: 0.0,
            disk_mib_per_scan: 0.0,
            limit_hits: None,
        }
    }

    fn measured(normal: f64, capped: f64) -> Measured {
        Measured {
            normal: scan(normal),
            capped: scan(capped),
            pageout: scan(30.0),
            anon: AnonResult::OomKilled { oom_kills: 1 },
            resident_after_drop: 0.0,
            version: CgroupVersion::V1,
        }
    }

    #[test]
    fn the_line_matches_the_original_program() {
        let m = measured(10200.0, 13.0);
        let lines = lines(&m);
        assert_eq!(
            lines[0],
            "10200 scans/s normal, 13 scans/s capped: 785 times as long."
        );
        assert_eq!(
            lines[1],
            "30 scans/s with MADV_PAGEOUT before every scan: 340 times as long."
        );
        assert_eq!(
            lines[3],
            "Anonymous memory in the 32 MiB cgroup: OOM-killed: anonymous memory cannot be paged out without swap."
        );
        assert_eq!(rate(6.25), "6.2");
    }

    #[test]
    fn affected_when_capped_is_many_times_slower() {
        let r = judge(&measured(10200.0, 13.0));
        assert_eq!(r.affected, Some(true));
        let h = r.headline.unwrap();
        assert!((h.ratio - 10200.0 / 13.0).abs() < 1e-9);
        assert_eq!(h.pathological, 13.0);
        assert_eq!(h.control, 10200.0);
        assert_eq!(r.variants.len(), 4);
        let anon = &r.variants[3];
        assert_eq!(anon.value, None);
        assert_eq!(anon.note.as_deref(), Some(OOM_NOTE));
        let r = judge(&measured(10200.0, 5000.0));
        assert_eq!(r.affected, Some(false));
    }

    #[test]
    fn parses_the_oom_counters_of_both_cgroup_versions() {
        let v1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n";
        assert_eq!(parse_counter(v1, "oom_kill"), Some(2));
        assert_eq!(parse_counter(v1, "under_oom"), Some(0));
        let v2 = "low 0\nhigh 0\nmax 1735\noom 1\noom_kill 1\noom_group_kill 0\n";
        assert_eq!(parse_counter(v2, "oom_kill"), Some(1));
        assert_eq!(parse_counter(v2, "max"), Some(1735));
        assert_eq!(parse_counter(v2, "missing"), None);
        assert_eq!(parse_counter("oom_kill x\n", "oom_kill"), None);
    }

    fn report(scans_per_s: f64) -> Outcome {
        Outcome::Report(
            parse_child_output(
                format!("slowlab-report {{\"scans_per_s\":{scans_per_s}}}\n").as_bytes(),
            )
            .unwrap(),
        )
    }

    #[test]
    fn an_oom_kill_needs_sigkill_and_the_counter() {
        let killed = || Outcome::Signalled {
            signal: libc::SIGKILL,
            stderr: String::new(),
        };
        assert_eq!(
            AnonResult::judge(killed(), Some(1), false).unwrap(),
            AnonResult::OomKilled { oom_kills: 1 }
        );
        assert_eq!(
            AnonResult::judge(killed(), Some(0), false).unwrap(),
            AnonResult::Killed {
                signal: libc::SIGKILL,
                oom_kills: Some(0)
            }
        );
        let swapped = AnonResult::judge(report(4.0), Some(0), true).unwrap();
        assert!(swapped.text().contains("has swap"), "{}", swapped.text());
        assert!(AnonResult::judge(
            Outcome::Failed {
                status: "exit status: 1".into(),
                stderr: "boom".into()
            },
            None,
            false
        )
        .is_err());
    }

    #[test]
    fn the_file_goes_to_a_disk_filesystem() {
        if let Ok(dir) = scan_dir(Path::new("/dev/shm")) {
            assert!(!system::is_memory_filesystem(&dir));
        }
        let err = scan_dir(Path::new("/nonexistent-slowlab")).err();
        if let Some(err) = err {
            assert!(err.contains("not a directory"), "{err}");
        }
    }

    #[test]
    fn scanner_arguments() {
        let args = scan_args(Memory::File, Some(Path::new("/x/f")), 1.0, true);
        assert_eq!(
            args,
            vec![
                "working-set-scan",
                "--memory",
                "file",
                "--mib",
                "64",
                "--seconds",
                "1",
                "--file",
                "/x/f",
                "--pageout"
            ]
        );
    }
}
