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
//!
//! The files: `setup` (the file to scan, dropped from the page cache),
//! `launch` (starting the scanner, in a cgroup or not, and how it ended),
//! `scanner` (the child program), `verdict` (figures, lines and verdict),
//! `tests`. The memory cgroups themselves are `crate::cgroup`'s.

mod launch;
mod scanner;
mod setup;
#[cfg(test)]
mod tests;
mod verdict;

use std::path::{Path, PathBuf};

use slowlab_model::results::{Role, ScenarioResult};

use crate::cgroup::{self, MemoryCgroup};
use crate::runner::Scenario;
use crate::system;
use crate::{LabContext, LabError};

pub use launch::Outcome;
pub use scanner::child_main;
pub use setup::scan_dir;
pub use verdict::{judge, lines, rate, AnonResult, Measured, Scan};

use launch::run_scanner;
use setup::{drop_cache, ScanSetup};

pub struct WorkingSetCap;

/// The data scanned, as in the original test program.
pub const DATA_MIB: u64 = 64;
/// The cap, as in the original's background mode.
pub const LIMIT_MIB: u64 = 32;
/// Its cgroups are `slowlab-working-set-PID-LABEL`.
const CGROUP_OWNER: &str = "working-set";
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
                CGROUP_OWNER,
                "capped",
                LIMIT_MIB << 20,
            )?),
            Role::Control => None,
        };
        run_scanner(ctx, &args, cgroup.as_ref()).map(|_| ())
    }

    fn preflight(&self, ctx: &LabContext) -> Result<(), LabError> {
        cgroup::memory_root()?;
        scan_dir(&ctx.work_root)?;
        let needed = (DATA_MIB * 4) << 20;
        match system::available_memory() {
            Some(available) if available < needed => Err(LabError::Unsuitable(format!(
                "{} MiB of memory available, {} MiB needed; free some memory",
                available >> 20,
                needed >> 20
            ))),
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
            let cgroup = MemoryCgroup::create(cgroup_root, version, CGROUP_OWNER, "capped", limit)?;
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
            let cgroup = MemoryCgroup::create(cgroup_root, version, CGROUP_OWNER, "anon", limit)?;
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
