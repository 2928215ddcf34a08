//! Which PDB each image of a trace was built with: the KernelTraceControl
//! `ImageID` events that xperf, WPR and PerfView add when they merge a trace
//! (`KernelTraceControl/ImageID`, the image's original file name and link
//! time stamp, and `KernelTraceControl/ImageID/DbgID_RSDS`, the CodeView
//! record of its debug directory: the PDB's GUID, age and file name), as
//! TraceEvent's `KernelTraceControl` parser lays them out. [`attach`] keeps
//! the identity on the trace model's modules, as a symbol store keys a PDB
//! (`<GUID><AGE>`, upper-case hex) in `Module::build_id`.
//!
//! Not decoded: `DbgID_ILRSDS` (the PDBs of .NET ready-to-run images),
//! `FileVersion` and the `MetaData` events. No PDB is read here
//! ([`crate::symbols`] does that).

use slowlab_model::trace::{ModuleIdx, Trace};

use crate::guid::{guid, Guid};
use crate::header::Source;
use crate::kernel::Payload;
use crate::stacks::{file_name, StackBuilder};
use crate::Etl;

/// The provider (task) GUID of KernelTraceControl's `ImageID` events.
pub const IMAGE_ID_TASK: Guid = guid("b3e675d7-2554-4f18-830b-2762732560de");
/// Opcode of `KernelTraceControl/ImageID` (the image's own identity).
pub const OPCODE_IMAGE_ID: u8 = 0;
/// Opcode of `KernelTraceControl/ImageID/DbgID_RSDS` (its PDB's identity).
pub const OPCODE_DBG_ID_RSDS: u8 = 36;

/// `KernelTraceControl/ImageID`: the image at `base`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageId {
    pub base: u64,
    pub size: u64,
    pub time_date_stamp: u32,
    pub original_file_name: String,
}

/// The identity of a PDB, as an image's CodeView (`RSDS`) record names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PdbId {
    pub guid: Guid,
    pub age: u32,
    /// As the linker wrote it: often a full path on the build machine.
    pub pdb_name: String,
}

impl PdbId {
    /// `<GUID><AGE>` in upper-case hex, the symbol store's directory name.
    pub fn key(&self) -> String {
        format!("{}{:X}", self.guid.to_symbol_store_hex(), self.age)
    }

    /// The PDB's file name (the last component of [`PdbId::pdb_name`]).
    pub fn file_name(&self) -> &str {
        file_name(&self.pdb_name)
    }
}

/// `KernelTraceControl/ImageID/DbgID_RSDS`: the PDB of the image at `base`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DbgIdRsds {
    pub base: u64,
    /// The payload's process id (usually 0: the event header's is the one).
    pub pid: u32,
    pub pdb: PdbId,
}

/// Decodes an `ImageID` payload: `ImageBase` (pointer), `ImageSize`
/// (pointer), `ProcessID`, `TimeDateStamp`, `OriginalFileName` (UTF-16).
pub fn image_id(p: Payload) -> Option<ImageId> {
    let ptr = p.ptr;
    Some(ImageId {
        base: p.ptr(0)?,
        size: p.ptr(ptr)?,
        time_date_stamp: p.u32(2 * ptr + 4)?,
        original_file_name: p.utf16(2 * ptr + 8)?.0,
    })
}

/// Decodes a `DbgID_RSDS` payload: `ImageBase` (pointer), `ProcessID`,
/// `GuidSig` (a `GUID`), `Age`, `PdbFileName` (8-bit, NUL-terminated).
pub fn dbg_id_rsds(p: Payload) -> Option<DbgIdRsds> {
    let ptr = p.ptr;
    let guid = Guid::from_le(p.bytes.get(ptr + 4..ptr + 20)?);
    let (pdb_name, _) = p.ansi(ptr + 24)?;
    if pdb_name.is_empty() {
        return None;
    }
    Some(DbgIdRsds {
        base: p.ptr(0)?,
        pid: p.u32(ptr)?,
        pdb: PdbId {
            guid,
            age: p.u32(ptr + 20)?,
            pdb_name,
        },
    })
}

/// Every `DbgID_RSDS` event of the trace with the process id of its event
/// header.
pub fn dbg_ids(etl: &Etl) -> Vec<(Option<u32>, DbgIdRsds)> {
    etl.events()
        .iter()
        .filter(|e| {
            e.header.source
                == Source::Classic {
                    guid: IMAGE_ID_TASK,
                }
                && e.header.opcode == OPCODE_DBG_ID_RSDS
        })
        .filter_map(|e| Some((e.header.pid, dbg_id_rsds(etl.payload(e))?)))
        .collect()
}

/// Gives each module whose image a `DbgID_RSDS` event identifies its PDB
/// identity (`build_id`, and a `symbol_error` naming the PDB to pass with
/// `--symbols`), and returns them. An image matches by its process (the
/// event header's, else the payload's) and base address; the first identity
/// of a module wins.
pub fn attach(etl: &Etl, sb: &StackBuilder, t: &mut Trace) -> Vec<(ModuleIdx, PdbId)> {
    let mut found: Vec<(ModuleIdx, PdbId)> = Vec::new();
    for (header_pid, id) in dbg_ids(etl) {
        let module = [header_pid, Some(id.pid)]
            .into_iter()
            .flatten()
            .find_map(|pid| sb.module_loaded_at(pid, id.base));
        let Some(module) = module else {
            continue;
        };
        if found.iter().any(|(m, _)| *m == module) {
            continue;
        }
        let row = &mut t.modules[module.ix()];
        row.build_id = Some(id.pdb.key());
        row.symbol_error = Some(format!(
            "no symbols read: pass --symbols DIR with {} ({})",
            id.pdb.file_name(),
            id.pdb.key()
        ));
        found.push((module, id.pdb));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rsds_payload(ptr: usize, base: u64, guid: Guid, age: u32, name: &str) -> Vec<u8> {
        let mut p = base.to_le_bytes()[..ptr].to_vec();
        p.extend_from_slice(&0u32.to_le_bytes());
        p.extend_from_slice(&guid.to_le());
        p.extend_from_slice(&age.to_le_bytes());
        p.extend_from_slice(name.as_bytes());
        p.push(0);
        p
    }

    #[test]
    fn dbg_id_rsds_reads_at_both_pointer_sizes() {
        let guid = Guid::parse("ec83d8df-5559-46e0-b2a1-0123456789ab").unwrap();
        for ptr in [4u8, 8] {
            let bytes = rsds_payload(ptr as usize, 0x7771_0000, guid, 0x1f, "wntdll.pdb");
            let id = dbg_id_rsds(Payload::new(&bytes, ptr)).unwrap();
            assert_eq!(id.base, 0x7771_0000);
            assert_eq!(id.pdb.guid, guid);
            assert_eq!(id.pdb.age, 0x1f);
            assert_eq!(id.pdb.key(), "EC83D8DF555946E0B2A10123456789AB1F");
            // Cut before the end of the fixed fields or of the name's first byte.
            for cut in 0..=ptr as usize + 24 {
                assert!(dbg_id_rsds(Payload::new(&bytes[..cut], ptr)).is_none());
            }
        }
    }

    #[test]
    fn a_pdb_path_keeps_its_file_name() {
        let id = PdbId {
            guid: Guid(1),
            age: 2,
            pdb_name: r"E:\build\out\app.pdb".to_string(),
        };
        assert_eq!(id.file_name(), "app.pdb");
        assert_eq!(id.key(), "000000000000000000000000000000012");
    }
}
