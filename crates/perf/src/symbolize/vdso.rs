//! The running kernel's vDSO, to name a trace's `[vdso]` frames (`clock_gettime`,
//! `gettimeofday`, …). The kernel maps one image into every process, so this process's
//! copy is the traced processes' when the trace was recorded in this boot: its `[vdso]`
//! build id is the running one's, or, where the trace has none (the eBPF recorder's),
//! its wall clock puts its start in this boot. The image is copied once from this
//! process's memory into anonymous memory, which the symbolizer reads as it reads a
//! binary's file. A trace of another boot or machine keeps its `[vdso]` frames unnamed.
//!
//! It writes no file and reads no other process.

use std::io::{Read, Seek, SeekFrom};
use std::sync::{Arc, OnceLock};

use slowlab_model::trace::{Module, Trace};

use super::binaries::Opened;
use crate::symbols::Elf;

/// A vDSO's module path, as the kernel names its mapping.
pub(super) const VDSO: &str = "[vdso]";

/// The running vDSO's image, opened, and its build id (hex); `None` without one.
static RUNNING: OnceLock<Option<(Arc<Opened>, Option<String>)>> = OnceLock::new();

/// How far two computations of the boot's wall-clock time may differ in one boot (the
/// clock slewed by NTP, the two clock reads apart).
const SAME_BOOT_NS: u64 = 2_000_000_000;

/// The running vDSO, opened, when `module` (a `[vdso]` of `trace`) is it.
pub(super) fn running_for(trace: &Trace, module: &Module) -> Option<Arc<Opened>> {
    if trace.str(module.path) != VDSO {
        return None;
    }
    let (opened, build_id) = RUNNING.get_or_init(read_running).as_ref()?;
    let same = match (&module.build_id, build_id) {
        (Some(then), Some(now)) => then.eq_ignore_ascii_case(now),
        _ => trace.meta.wall_clock.is_some_and(|w| {
            let boot_then = w.unix_ns.saturating_sub(w.clock_ns);
            boot_wall_ns().is_some_and(|now| boot_then.abs_diff(now) < SAME_BOOT_NS)
        }),
    };
    same.then(|| Arc::clone(opened))
}

/// This process's `[vdso]` mapping, copied, and its build id.
fn read_running() -> Option<(Arc<Opened>, Option<String>)> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let (start, end) = maps.lines().find_map(|line| {
        if !line.ends_with(VDSO) {
            return None;
        }
        let (range, _) = line.split_once(' ')?;
        let (start, end) = range.split_once('-')?;
        Some((
            u64::from_str_radix(start, 16).ok()?,
            u64::from_str_radix(end, 16).ok()?,
        ))
    })?;
    // Read through /proc/self/mem, as a debugger reads a process: no unsafe pointer.
    let mut image = vec![0u8; usize::try_from(end.checked_sub(start)?).ok()?];
    let mut mem = std::fs::File::open("/proc/self/mem").ok()?;
    mem.seek(SeekFrom::Start(start)).ok()?;
    mem.read_exact(&mut image).ok()?;
    let build_id = Elf::parse(&image)
        .ok()?
        .build_id
        .as_deref()
        .map(super::binaries::hex);
    let mut map = memmap2::MmapMut::map_anon(image.len()).ok()?;
    map.copy_from_slice(&image);
    Some((
        Arc::new(Opened::image(map.make_read_only().ok()?)),
        build_id,
    ))
}

/// When this boot began, in wall-clock nanoseconds: now, less the monotonic clock.
fn boot_wall_ns() -> Option<u64> {
    let read = |clock| {
        // SAFETY: clock_gettime writes the timespec it is given.
        let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
        (unsafe { libc::clock_gettime(clock, &mut ts) } == 0)
            .then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
    };
    read(libc::CLOCK_REALTIME)?.checked_sub(read(libc::CLOCK_MONOTONIC)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use slowlab_model::trace::{ModuleKind, WallClock};

    fn trace_with_vdso(build_id: Option<&str>, wall_clock: Option<WallClock>) -> Trace {
        let mut t = Trace::default();
        t.strings.push(VDSO.to_owned());
        let path = slowlab_model::trace::StrIdx(0);
        t.modules.push(Module {
            path,
            name: path,
            kind: ModuleKind::Other,
            build_id: build_id.map(str::to_owned),
            symbol_error: None,
        });
        t.meta.wall_clock = wall_clock;
        t
    }

    /// A wall clock read in this boot: now, in both clocks.
    fn this_boot() -> WallClock {
        let boot = boot_wall_ns().unwrap();
        WallClock {
            clock_ns: 5_000_000_000,
            unix_ns: boot + 5_000_000_000,
        }
    }

    #[test]
    fn the_running_vdso_names_a_trace_of_this_boot_only() {
        let Some((_, running_id)) = RUNNING.get_or_init(read_running).as_ref() else {
            panic!("this process has no [vdso] mapping to read");
        };
        // No build id in the trace (the eBPF recorder's): the boot decides.
        let t = trace_with_vdso(None, Some(this_boot()));
        assert!(running_for(&t, &t.modules[0]).is_some());
        let other_boot = WallClock {
            unix_ns: this_boot().unix_ns - 3_600_000_000_000,
            ..this_boot()
        };
        let t = trace_with_vdso(None, Some(other_boot));
        assert!(running_for(&t, &t.modules[0]).is_none());
        assert!(running_for(&trace_with_vdso(None, None), &t.modules[0]).is_none());
        // A build id decides when both have one, whatever the clock says.
        if let Some(id) = running_id {
            let t = trace_with_vdso(Some(&id.to_uppercase()), None);
            assert!(running_for(&t, &t.modules[0]).is_some());
        }
        let t = trace_with_vdso(Some("00112233"), Some(this_boot()));
        assert_eq!(
            running_for(&t, &t.modules[0]).is_some(),
            running_id.is_none(),
            "another kernel's vDSO"
        );
    }
}
