//! The detectors of Windows traces (ETL, read by `slowlab-etl`): how each
//! of the five pathologies shows in a Windows trace (the signatures the
//! articles found with WPA), read from the Windows kernel's functions and
//! events. Each module states its signature and thresholds. (The fourth
//! signature, numbered names probed at each process start, is
//! `linear_probe_names`, which reads Windows file creates too.)
//!
//! Frames of an ETL trace are named by their PDB symbol when the user gave
//! symbols (`MmAccessFault`, or `ntoskrnl.exe!MmAccessFault` as WPA writes
//! them: [`bare`] drops the module), else `module+0xoffset`, which no
//! signature matches: the stack-based signatures need kernel symbols.

pub mod notify_buffer;
pub mod teardown_lock;
pub mod topdown_alloc;
pub mod working_set;

use slowlab_model::trace::{EventKind, WindowsFaultKind};

/// A function name without WPA's `module!` prefix.
pub fn bare(name: &str) -> &str {
    name.rsplit_once('!').map_or(name, |(_, f)| f)
}

/// The Windows kind of a soft fault read from an ETL trace; `None` for
/// other events and for a Linux trace's faults, which have no kind.
pub fn fault_kind(kind: &EventKind) -> Option<WindowsFaultKind> {
    match kind {
        EventKind::PageFault { windows_kind, .. } => *windows_kind,
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_drops_the_module_only() {
        assert_eq!(bare("ntoskrnl.exe!MmAccessFault"), "MmAccessFault");
        assert_eq!(bare("MmAccessFault"), "MmAccessFault");
        assert_eq!(bare("ntoskrnl.exe+0x1234"), "ntoskrnl.exe+0x1234");
    }
}
