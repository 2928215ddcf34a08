//! The PDB identity a Windows executable (PE/COFF) records: the CodeView
//! `RSDS` entry of its debug directory (GUID, age, PDB path), the same
//! record ETW's `DbgID_RSDS` events copy. Used to build test traces from a
//! real executable and its PDB; the reader of traces does not open
//! executables.
//!
//! Reads PE32 and PE32+ headers, the section table (to turn the debug
//! directory's RVA into a file offset) and the debug entries; nothing else.
//! Every read is checked: a malformed file gives `None`.

use crate::guid::Guid;
use crate::pdb_ids::PdbId;
use slowlab_model::le::{get_u16, get_u32};

const IMAGE_DEBUG_TYPE_CODEVIEW: u32 = 2;
const DEBUG_DIRECTORY_INDEX: usize = 6;

/// The file offset of `rva` through the section table at `sections`.
fn file_offset(pe: &[u8], sections: usize, count: usize, rva: u32) -> Option<usize> {
    (0..count).find_map(|i| {
        let s = sections + i * 40;
        let (size, va, raw) = (
            get_u32(pe, s + 8)?,
            get_u32(pe, s + 12)?,
            get_u32(pe, s + 20)?,
        );
        (rva >= va && rva < va.checked_add(size)?).then(|| (raw + (rva - va)) as usize)
    })
}

/// The PDB identity of the PE image `pe`, from its CodeView debug entry.
pub fn codeview_pdb(pe: &[u8]) -> Option<PdbId> {
    if pe.get(0..2)? != b"MZ" {
        return None;
    }
    let nt = get_u32(pe, 0x3c)? as usize;
    if pe.get(nt..nt.checked_add(4)?)? != b"PE\0\0" {
        return None;
    }
    let coff = nt + 4;
    let sections_count = get_u16(pe, coff + 2)? as usize;
    let optional = coff + 20;
    let optional_size = get_u16(pe, coff + 16)? as usize;
    let directories = match get_u16(pe, optional)? {
        0x10b => optional + 96,
        0x20b => optional + 112,
        _ => return None,
    };
    let debug = directories + DEBUG_DIRECTORY_INDEX * 8;
    let (debug_rva, debug_size) = (get_u32(pe, debug)?, get_u32(pe, debug + 4)?);
    let sections = optional + optional_size;
    let start = file_offset(pe, sections, sections_count, debug_rva)?;
    (0..debug_size as usize / 28).find_map(|i| {
        let entry = start + i * 28;
        if get_u32(pe, entry + 12)? != IMAGE_DEBUG_TYPE_CODEVIEW {
            return None;
        }
        let at = get_u32(pe, entry + 24)? as usize;
        let len = get_u32(pe, entry + 16)? as usize;
        let record = pe.get(at..at.checked_add(len)?)?;
        if record.get(0..4)? != b"RSDS" {
            return None;
        }
        let name = record.get(24..)?;
        let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        Some(PdbId {
            guid: Guid::from_le(record.get(4..20)?),
            age: get_u32(record, 20)?,
            pdb_name: String::from_utf8_lossy(&name[..end]).into_owned(),
        })
    })
}
