//! working-set-cap's child program, the scanner (`__child
//! working-set-scan`): maps the file (or anonymous memory), scans it once
//! untimed, then reads (or writes) one byte per 4 KiB page for a while,
//! optionally calling `MADV_PAGEOUT` before every scan, and reports scans
//! per second, page faults and bytes read from storage. Also `Mapping`, the
//! memory mapping it and the setup's page-cache check share.
//!
//! What it does not do: join the cgroup (the launcher made it join before
//! exec) or judge its figures.

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use serde_json::json;

use super::{Child, Memory, PAGE};
use crate::measure::{emit_report, process_cpu_seconds};
use crate::LabError;

/// A memory mapping, unmapped on drop.
pub(super) struct Mapping {
    pub(super) ptr: *mut u8,
    len: usize,
}

impl Mapping {
    pub(super) fn file(file: &std::fs::File, len: usize) -> std::io::Result<Self> {
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

/// The scanner: maps the memory, scans it once untimed, then scans for
/// `seconds` and reports the rate.
pub fn child_main(child: Child) -> Result<(), LabError> {
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
            let path = file.ok_or_else(|| LabError::Failed("--memory file needs --file".into()))?;
            let f = std::fs::File::open(&path)
                .map_err(|e| LabError::io(format!("cannot open {}", path.display()), e))?;
            let m = Mapping::file(&f, len)
                .map_err(|e| LabError::io(format!("cannot map {}", path.display()), e))?;
            (m, Some(f))
        }
        Memory::Anon => (
            Mapping::anonymous(len)
                .map_err(|e| LabError::io(format!("cannot map {mib} MiB"), e))?,
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
                return Err(LabError::Failed(format!(
                    "madvise(MADV_PAGEOUT) failed: {} (Linux 5.4 or later is needed)",
                    std::io::Error::last_os_error()
                )));
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
