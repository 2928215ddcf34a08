//! The kernel's own report of the executable file mappings processes make while a scheduler
//! recording runs, as perf's backend has it: one dummy software perf event per CPU with
//! `mmap` and `mmap2` tracking, whose ring holds a PERF_RECORD_MMAP2 for each (the loader's
//! libraries, and at an exec the new image and its loader, which the kernel maps itself).
//! The drain reads them beside the BPF ring, so that a process gone before the drain could
//! read its `/proc/PID/maps` still has its code named.
//!
//! It reads nothing of /proc and writes nothing: [`MmapRings::read`] hands each mapping to
//! its caller as a `/proc/PID/maps` line. The records are parsed here, not with
//! `linux-perf-event-reader`: that crate parses records given a whole `perf.data`
//! attribute set, and this ring holds one fixed layout (two record kinds) of an attribute
//! made here.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{fence, Ordering};

/// Pages of each CPU's ring (after its header page): room for ~1,600 mappings between two
/// of the drain's reads. The kernel wakes the drain once half of it is full
/// ([`MmapRings::fds`]); the drain reads it then, or sooner, unless it is moving stacks
/// out of the kernel's map. (16 pages read every 50 ms lost thousands of reports in 45 s
/// of `ring_bpf.rs`'s process churn.)
const RING_PAGES: usize = 64;

const PERF_RECORD_LOST: u32 = 2;
const PERF_RECORD_MMAP2: u32 = 10;
/// `prot` of an executable mapping.
const PROT_EXEC: u32 = 4;

/// An executable file mapping a process made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExecMapping {
    pub(crate) pid: u32,
    pub(crate) start: u64,
    pub(crate) end: u64,
    /// As a `/proc/PID/maps` line (without its newline).
    pub(crate) line: String,
}

/// One CPU's event and its ring.
struct Ring {
    event: OwnedFd,
    base: *mut u8,
    mapped: usize,
    data_size: u64,
    page: u64,
}

/// The per-CPU rings of mapping records, and the records the kernel could not put in them.
pub(crate) struct MmapRings {
    rings: Vec<Ring>,
    /// Records lost because a ring was full.
    pub(crate) lost: u64,
}

// SAFETY: the rings' memory is owned by this value alone (mapped in `open`, unmapped on
// drop) and only read or written through `&mut self`.
unsafe impl Send for MmapRings {}

impl MmapRings {
    /// Opens one event per CPU in `cpus` (all processes), times in CLOCK_MONOTONIC; an
    /// offline CPU, which has none, is skipped.
    pub(crate) fn open(cpus: impl IntoIterator<Item = i32>) -> io::Result<MmapRings> {
        let page = crate::sys::page_size();
        // Built as it goes, so that a failure half-way unmaps what was mapped (Drop).
        let mut opened = MmapRings {
            rings: Vec::new(),
            lost: 0,
        };
        let mut failed = None;
        let data_size = RING_PAGES as u64 * page;
        for cpu in cpus {
            let event = match open_mmap_event(cpu, data_size / 2) {
                Ok(event) => event,
                Err(e) => {
                    failed = Some(e);
                    continue;
                }
            };
            let mapped = (1 + RING_PAGES) * page as usize;
            // SAFETY: a shared read-write mapping of the event's ring, the size perf
            // requires (one header page and a power of two of data pages).
            let base = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    mapped,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    event.as_raw_fd(),
                    0,
                )
            };
            if base == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            opened.rings.push(Ring {
                event,
                base: base.cast(),
                mapped,
                data_size,
                page,
            });
        }
        match failed {
            Some(e) if opened.rings.is_empty() => Err(e),
            _ => Ok(opened),
        }
    }

    /// One descriptor per CPU's ring, readable once half of it is full: for the drain to
    /// sleep on.
    pub(crate) fn fds(&self) -> impl Iterator<Item = BorrowedFd<'_>> {
        self.rings.iter().map(|r| r.event.as_fd())
    }

    /// Hands each executable file mapping recorded since the last read, up to `until_ns`
    /// (CLOCK_MONOTONIC; later ones stay for the next read), to `each`, but those of
    /// process `skip_pid` (the recorder's).
    pub(crate) fn read(&mut self, skip_pid: u32, until_ns: u64, mut each: impl FnMut(ExecMapping)) {
        let mut record = Vec::new();
        for ring in &self.rings {
            // struct perf_event_mmap_page: data_head at 1024, data_tail at 1032.
            // SAFETY: both lie in the header page mapped in `open`; the kernel writes the
            // head, this reader the tail.
            let head_ptr = unsafe { ring.base.add(1024) } as *const u64;
            let tail_ptr = unsafe { ring.base.add(1032) } as *mut u64;
            let head = unsafe { head_ptr.read_volatile() };
            fence(Ordering::Acquire);
            let mut tail = unsafe { tail_ptr.read_volatile() };
            while tail + 8 <= head {
                let at = |offset: u64| (ring.page + (offset % ring.data_size)) as usize;
                // SAFETY: `at` stays within the data pages; a record is copied out byte by
                // byte, since it may wrap around the ring's end.
                let byte = |offset: u64| unsafe { *ring.base.add(at(offset)) };
                let header: [u8; 8] = std::array::from_fn(|i| byte(tail + i as u64));
                let kind = u32::from_ne_bytes([header[0], header[1], header[2], header[3]]);
                let size = u64::from(u16::from_ne_bytes([header[6], header[7]]));
                if size < 8 || tail + size > head {
                    break;
                }
                record.clear();
                record.extend((8..size).map(|i| byte(tail + i)));
                if sample_time(&record).is_some_and(|t| t > until_ns) {
                    break;
                }
                match kind {
                    PERF_RECORD_LOST if record.len() >= 16 => self.lost += u64_at(&record, 8),
                    PERF_RECORD_MMAP2 => {
                        if let Some(m) = parse_mmap2(&record).filter(|m| m.pid != skip_pid) {
                            each(m);
                        }
                    }
                    _ => {}
                }
                tail += size;
            }
            fence(Ordering::Release);
            // SAFETY: as above.
            unsafe { tail_ptr.write_volatile(tail) };
        }
    }
}

impl Drop for MmapRings {
    fn drop(&mut self) {
        for ring in &self.rings {
            // SAFETY: unmaps what `open` mapped, once.
            unsafe { libc::munmap(ring.base.cast(), ring.mapped) };
        }
    }
}

/// The time in a record's sample id (its last 8 bytes: every record but a sample carries
/// it, with `sample_id_all`).
fn sample_time(body: &[u8]) -> Option<u64> {
    let at = body.len().checked_sub(8)?;
    Some(u64_at(body, at))
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().unwrap_or_default())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().unwrap_or_default())
}

/// A PERF_RECORD_MMAP2's body (after the header): pid, tid, addr, len, pgoff, maj, min,
/// ino, ino_generation, prot, flags, the file name (NUL-ended, padded), then the sample
/// id (pid, tid, time). An executable mapping of a file, or None.
fn parse_mmap2(b: &[u8]) -> Option<ExecMapping> {
    if b.len() < 72 + 16 {
        return None;
    }
    let (pid, addr, len, pgoff) = (u32_at(b, 0), u64_at(b, 8), u64_at(b, 16), u64_at(b, 24));
    let (maj, min, ino) = (u32_at(b, 32), u32_at(b, 36), u64_at(b, 40));
    let prot = u32_at(b, 56);
    let name = &b[64..];
    let name = &name[..name.iter().position(|&c| c == 0)?];
    let path = std::str::from_utf8(name).ok()?;
    if prot & PROT_EXEC == 0 || !path.starts_with('/') || path.starts_with("//") {
        return None;
    }
    let end = addr.checked_add(len)?;
    Some(ExecMapping {
        pid,
        start: addr,
        end,
        line: format!("{addr:x}-{end:x} r-xp {pgoff:08x} {maj:02x}:{min:02x} {ino} {path}"),
    })
}

/// Opens a dummy software event on `cpu` for all processes that records their executable
/// mappings (`mmap`, `mmap2`) with the sample id (tid, time in CLOCK_MONOTONIC).
/// The dummy event of `cpu` whose ring gets the mapping records, readable (woken) once
/// `wake_at_bytes` of them wait.
fn open_mmap_event(cpu: i32, wake_at_bytes: u64) -> io::Result<OwnedFd> {
    // struct perf_event_attr (PERF_ATTR_SIZE_VER5, 112 bytes), as u64 words: type and
    // size, config, sample_period, sample_type, read_format, the flag bits,
    // wakeup_watermark, …, and sample_stack_user with clockid in word 11.
    let mut attr = [0u64; 14];
    attr[0] = 1 | (112u64 << 32); // PERF_TYPE_SOFTWARE, size
    attr[1] = 9; // PERF_COUNT_SW_DUMMY

    // The sample id on every record (PERF_SAMPLE_TID | PERF_SAMPLE_TIME); the flags mmap
    // (bit 8), watermark (14: wake by bytes, not by records), sample_id_all (18), mmap2
    // (23) and use_clockid (25).
    attr[3] = (1 << 1) | (1 << 2);
    attr[5] = (1 << 8) | (1 << 14) | (1 << 18) | (1 << 23) | (1 << 25);
    attr[6] = wake_at_bytes.min(u64::from(u32::MAX));
    attr[11] = (libc::CLOCK_MONOTONIC as u64) << 32;
    crate::sys::perf_event_open_cpu(&attr, cpu)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mmap2_body(pid: u32, prot: u32, name: &str) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(pid.to_ne_bytes());
        b.extend((pid + 1).to_ne_bytes());
        b.extend(0x7f00_0000_1000u64.to_ne_bytes()); // addr
        b.extend(0x2000u64.to_ne_bytes()); // len
        b.extend(0x3000u64.to_ne_bytes()); // pgoff
        b.extend(8u32.to_ne_bytes()); // maj
        b.extend(1u32.to_ne_bytes()); // min
        b.extend(1234u64.to_ne_bytes()); // ino
        b.extend(0u64.to_ne_bytes()); // ino_generation
        b.extend(prot.to_ne_bytes());
        b.extend(2u32.to_ne_bytes()); // MAP_PRIVATE
        b.extend(name.as_bytes());
        b.push(0);
        while b.len() % 8 != 0 {
            b.push(0);
        }
        b.extend(pid.to_ne_bytes()); // sample id: pid, tid, time
        b.extend((pid + 1).to_ne_bytes());
        b.extend(5_000_000_007u64.to_ne_bytes());
        b
    }

    #[test]
    fn an_executable_mapping_becomes_a_proc_maps_line() {
        let body = mmap2_body(42, 5, "/usr/lib/libc.so.6");
        assert_eq!(sample_time(&body), Some(5_000_000_007));
        let m = parse_mmap2(&body).unwrap();
        assert_eq!(
            (m.pid, m.start, m.end),
            (42, 0x7f00_0000_1000, 0x7f00_0000_3000)
        );
        assert_eq!(
            m.line,
            "7f0000001000-7f0000003000 r-xp 00003000 08:01 1234 /usr/lib/libc.so.6"
        );
    }

    #[test]
    fn data_and_anonymous_mappings_and_short_records_are_left_out() {
        assert_eq!(parse_mmap2(&mmap2_body(42, 3, "/usr/lib/libc.so.6")), None);
        assert_eq!(parse_mmap2(&mmap2_body(42, 5, "//anon")), None);
        assert_eq!(parse_mmap2(&mmap2_body(42, 5, "/x")[..40]), None);
    }
}
