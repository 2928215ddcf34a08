//! `.etl.zip` input (what WPR's `-compress` and PerfView's `/zip` write):
//! the first entry that is an ETL trace, read with the `zip` crate. The
//! entry's claimed size is not trusted: reading stops at a limit.

use std::io::{Cursor, Read};

use crate::{looks_like_etl, EtlError};

/// Largest ETL read from an archive (4 GiB), and at most this many times the
/// archive's size, so a zip bomb cannot exhaust memory.
const MAX_ETL_LEN: u64 = 4 << 30;
const MAX_RATIO: u64 = 200;

/// The bytes of the archive's first `.etl` entry (by name, then by content).
pub fn first_etl(archive: &[u8]) -> Result<Vec<u8>, EtlError> {
    let mut zip =
        zip::ZipArchive::new(Cursor::new(archive)).map_err(|e| EtlError::Zip(e.to_string()))?;
    let limit = MAX_ETL_LEN.min((archive.len() as u64).saturating_mul(MAX_RATIO));
    let mut names: Vec<(usize, bool)> = (0..zip.len())
        .filter_map(|i| {
            let entry = zip.by_index_raw(i).ok()?;
            let etl_name = entry.name().ok()?.to_ascii_lowercase().ends_with(".etl");
            (!entry.is_dir()).then_some((i, etl_name))
        })
        .collect();
    // Entries named .etl first, in archive order.
    names.sort_by_key(|&(i, etl_name)| (!etl_name, i));
    for (i, _) in names {
        let entry = zip.by_index(i).map_err(|e| EtlError::Zip(e.to_string()))?;
        let mut bytes = Vec::new();
        entry
            .take(limit)
            .read_to_end(&mut bytes)
            .map_err(|e| EtlError::Zip(e.to_string()))?;
        if looks_like_etl(&bytes) {
            return Ok(bytes);
        }
    }
    Err(EtlError::NoEtlInZip)
}
