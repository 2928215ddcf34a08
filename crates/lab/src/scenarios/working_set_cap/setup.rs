//! working-set-cap's setup: where the 64 MiB file goes (a disk
//! filesystem with room), writing and fsyncing it under a `TempDir` guard,
//! and dropping it from the page cache before each scan.
//!
//! What it does not do: drop any other file's pages, or make the cgroups
//! (`crate::cgroup` does, from the scenario).

use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use super::scanner::Mapping;
use super::{DATA_MIB, PAGE};
use crate::cgroup::{self, CgroupVersion};
use crate::context::TempDir;
use crate::system;
use crate::{LabContext, LabError};

/// The 64 MiB file to scan, on a disk filesystem, and where memory
/// cgroups go; the file is removed with the guard.
pub(super) struct ScanSetup {
    _temp: TempDir,
    pub(super) file: PathBuf,
    pub(super) cgroup_root: PathBuf,
    pub(super) version: CgroupVersion,
}

impl ScanSetup {
    pub(super) fn prepare(ctx: &mut LabContext) -> Result<Self, LabError> {
        let (cgroup_root, version) = cgroup::memory_root()?;
        let dir = scan_dir(&ctx.work_root)?;
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
pub fn scan_dir(work_root: &Path) -> Result<PathBuf, LabError> {
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
    Err(LabError::Unsuitable(format!(
        "the {DATA_MIB} MiB file must be on a disk filesystem, but {}; use --work-dir DIR on a disk",
        refused.join(" and ")
    )))
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
pub(super) fn drop_cache(path: &Path) -> Result<f64, LabError> {
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
