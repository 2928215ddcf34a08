//! Function names for the frames of an ETL trace, from PDB files in local
//! directories: a symbol path (`DIR;DIR`, and `_NT_SYMBOL_PATH`'s
//! `srv*DIR*URL` / `cache*DIR` elements, of which only the local
//! directories are used: nothing is fetched from the network), each image's
//! PDB looked up by the name and `<GUID><AGE>` its `DbgID_RSDS` event gives
//! ([`crate::pdb_ids`]) as a flat `DIR/name.pdb` or in a symbol store's
//! `DIR/name.pdb/<GUID><AGE>/name.pdb`, checked against that identity, and
//! read with the `pdb` crate (procedures of every compiland, then public
//! symbols for what they do not cover). A frame's RVA (its offset in the
//! image) then names its function; the module stays the image's.
//!
//! A PDB whose GUID or age differs from the trace's is not used (a
//! warning says which); a PDB that cannot be read is a one-line warning and
//! its frames stay `module+0x…`. The table kept per PDB is bounded
//! ([`MAX_FUNCTIONS`], [`MAX_NAME_BYTES`]); the `pdb` crate reads only the
//! streams asked for, from the file.
//!
//! Not done: C++ public-symbol demangling (procedure names are already
//! plain), inline frames and line numbers, `DbgID_ILRSDS` (.NET) images.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use pdb::FallibleIterator;
use slowlab_model::trace::{FuncIdx, Function, ModuleIdx, StrIdx, Trace};

use crate::guid::Guid;
use crate::pdb_ids::PdbId;

/// Most functions kept from one PDB (a kernel PDB has about 100,000).
pub const MAX_FUNCTIONS: usize = 4_000_000;
/// Longest function name kept, in bytes (longer ones are cut).
pub const MAX_NAME_BYTES: usize = 1024;

/// Where to look for PDBs: local directories only.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SymbolPath {
    pub dirs: Vec<PathBuf>,
    /// Elements that are not local directories (symbol server URLs,
    /// `symsrv.dll`), left out.
    pub ignored: Vec<String>,
}

impl SymbolPath {
    /// Parses `DIR[;DIR…]` with `_NT_SYMBOL_PATH`'s `srv*…`, `symsrv*…` and
    /// `cache*…` elements; URLs and DLL names in them are ignored.
    pub fn parse(spec: &str) -> SymbolPath {
        let mut path = SymbolPath::default();
        for element in spec.split(';').map(str::trim).filter(|e| !e.is_empty()) {
            let lower = element.to_ascii_lowercase();
            let parts: Vec<&str> = if ["srv*", "symsrv*", "cache*"]
                .iter()
                .any(|p| lower.starts_with(p))
            {
                element.split('*').skip(1).collect()
            } else {
                vec![element]
            };
            for part in parts.into_iter().filter(|p| !p.is_empty()) {
                let l = part.to_ascii_lowercase();
                if l.contains("://") || l.ends_with(".dll") {
                    path.ignored.push(part.to_string());
                } else {
                    path.dirs.push(PathBuf::from(part));
                }
            }
        }
        path
    }
}

/// A PDB's functions by relative virtual address.
#[derive(Debug, Default)]
pub struct FunctionTable {
    /// `(start, end, name)` of procedures, sorted by start.
    procedures: Vec<(u32, u32, String)>,
    /// `(start, name)` of public code symbols, sorted.
    publics: Vec<(u32, String)>,
}

impl FunctionTable {
    /// The function that holds `rva`: the procedure whose range has it,
    /// else the nearest public symbol at or before it.
    pub fn lookup(&self, rva: u64) -> Option<&str> {
        let rva = u32::try_from(rva).ok()?;
        let at = self.procedures.partition_point(|p| p.0 <= rva);
        if let Some((_, end, name)) = at.checked_sub(1).map(|i| &self.procedures[i]) {
            if rva < *end {
                return Some(name);
            }
        }
        let at = self.publics.partition_point(|p| p.0 <= rva);
        at.checked_sub(1).map(|i| self.publics[i].1.as_str())
    }

    pub fn len(&self) -> usize {
        self.procedures.len() + self.publics.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Why a PDB could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PdbError {
    #[error("cannot open {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a readable PDB ({reason}); its frames stay module+offset")]
    Corrupt { path: PathBuf, reason: String },
}

/// The identity a PDB file says it has: `(GUID, age)`.
pub type PdbIdentity = (Guid, u32);

fn corrupt(path: &Path, reason: impl ToString) -> PdbError {
    PdbError::Corrupt {
        path: path.to_owned(),
        reason: reason.to_string(),
    }
}

fn shorten(mut name: String) -> String {
    if name.len() > MAX_NAME_BYTES {
        let mut cut = MAX_NAME_BYTES;
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        name.truncate(cut);
    }
    name
}

/// Reads a PDB's identity and, when `wanted` accepts it, its functions.
/// Returns the identity and `None` for a PDB `wanted` refuses.
pub fn read_pdb(
    path: &Path,
    wanted: impl FnOnce(PdbIdentity) -> bool,
) -> Result<(PdbIdentity, Option<FunctionTable>), PdbError> {
    let file = std::fs::File::open(path).map_err(|source| PdbError::Open {
        path: path.to_owned(),
        source,
    })?;
    // The `pdb` crate returns errors for the malformed files we tried, but
    // it is a parser of untrusted input: a panic is caught and reported as
    // a corrupt file (quietly: one warning, not a backtrace).
    let result = slowlab_guard::guard(|| read_pdb_unguarded(file, wanted))
        .unwrap_or_else(|| Err("the PDB parser gave up on it".to_string()));
    result.map_err(|reason| corrupt(path, reason))
}

fn read_pdb_unguarded(
    file: std::fs::File,
    wanted: impl FnOnce(PdbIdentity) -> bool,
) -> Result<(PdbIdentity, Option<FunctionTable>), String> {
    let e = |e: pdb::Error| e.to_string();
    let mut pdb = pdb::PDB::open(file).map_err(e)?;
    let info = pdb.pdb_information().map_err(e)?;
    let dbi = pdb.debug_information().map_err(e)?;
    // The DBI stream's age is the one images record (the info stream's can
    // run ahead of it after incremental links).
    let age = dbi.age().unwrap_or(info.age);
    let identity = (Guid(u128::from_be_bytes(*info.guid.as_bytes())), age);
    if !wanted(identity) {
        return Ok((identity, None));
    }
    let map = pdb.address_map().map_err(e)?;
    let mut table = FunctionTable::default();
    let mut modules = dbi.modules().map_err(e)?;
    while let Some(module) = modules.next().map_err(e)? {
        let Some(info) = pdb.module_info(&module).map_err(e)? else {
            continue;
        };
        let mut symbols = info.symbols().map_err(e)?;
        while let Some(symbol) = symbols.next().map_err(e)? {
            if let Ok(pdb::SymbolData::Procedure(p)) = symbol.parse() {
                if let Some(rva) = p.offset.to_rva(&map) {
                    let end = rva.0.saturating_add(p.len.max(1));
                    table
                        .procedures
                        .push((rva.0, end, shorten(p.name.to_string().into_owned())));
                }
            }
            if table.len() >= MAX_FUNCTIONS {
                break;
            }
        }
    }
    let globals = pdb.global_symbols().map_err(e)?;
    let mut symbols = globals.iter();
    while let Some(symbol) = symbols.next().map_err(e)? {
        if table.len() >= MAX_FUNCTIONS {
            break;
        }
        if let Ok(pdb::SymbolData::Public(p)) = symbol.parse() {
            if p.function || p.code {
                if let Some(rva) = p.offset.to_rva(&map) {
                    table
                        .publics
                        .push((rva.0, shorten(p.name.to_string().into_owned())));
                }
            }
        }
    }
    table.procedures.sort_unstable_by_key(|p| p.0);
    table.publics.sort_unstable_by_key(|p| p.0);
    Ok((identity, Some(table)))
}

/// Where a PDB named `name` with symbol-store key `key` may be in `dir`:
/// the symbol store's place first, then the flat one.
pub fn candidates(dir: &Path, name: &str, key: &str) -> Vec<PathBuf> {
    let mut names = vec![name.to_string()];
    let lower = name.to_ascii_lowercase();
    if lower != name {
        names.push(lower);
    }
    let mut out = Vec::new();
    for n in &names {
        out.push(dir.join(n).join(key).join(n));
    }
    for n in &names {
        out.push(dir.join(n));
    }
    out
}

/// Names the frames of the modules in `pdbs` from the PDBs found on
/// `path`; returns the warnings (mismatched, unreadable and missing PDBs,
/// ignored symbol-path elements).
pub fn symbolize(t: &mut Trace, pdbs: &[(ModuleIdx, PdbId)], path: &SymbolPath) -> Vec<String> {
    let mut warnings = Vec::new();
    if !path.ignored.is_empty() {
        warnings.push(format!(
            "symbol path: only local directories are read, nothing is downloaded; ignored: {}",
            path.ignored.join(", ")
        ));
    }
    for dir in path.dirs.iter().filter(|d| !d.is_dir()) {
        warnings.push(format!("symbol path: {} is not a directory", dir.display()));
    }
    let dirs: Vec<&PathBuf> = path.dirs.iter().filter(|d| d.is_dir()).collect();
    let mut tables: HashMap<ModuleIdx, FunctionTable> = HashMap::new();
    let mut missing: Vec<&str> = Vec::new();
    for (module, id) in pdbs {
        let key = id.key();
        let mut found = false;
        'search: for dir in &dirs {
            for file in candidates(dir, id.file_name(), &key) {
                if !file.is_file() {
                    continue;
                }
                found = true;
                match read_pdb(&file, |(guid, age)| guid == id.guid && age == id.age) {
                    Ok((_, Some(table))) => {
                        t.modules[module.ix()].symbol_error = None;
                        tables.insert(*module, table);
                        break 'search;
                    }
                    Ok(((guid, age), None)) => warnings.push(format!(
                        "{}: not used: its GUID+age {}{age:X} differs from the trace's {key} for {}; pass the PDB of the build that was traced",
                        file.display(),
                        guid.to_symbol_store_hex(),
                        t.str(t.modules[module.ix()].name),
                    )),
                    Err(e) => warnings.push(e.to_string()),
                }
            }
        }
        if !found {
            missing.push(id.file_name());
        }
    }
    if !missing.is_empty() && !dirs.is_empty() {
        const SHOWN: usize = 5;
        let more = if missing.len() > SHOWN { ", …" } else { "" };
        let shown: Vec<&str> = missing.iter().take(SHOWN).copied().collect();
        warnings.push(format!(
            "no PDB on the symbol path for {} of the {} images that name one ({}{more}); their frames stay module+offset",
            missing.len(),
            pdbs.len(),
            shown.join(", ")
        ));
    }
    if !tables.is_empty() {
        rename_frames(t, &tables);
    }
    warnings
}

/// Points each frame of a module in `tables` at the function its RVA falls
/// in (one function per module and name), then drops the functions no frame
/// uses any more.
fn rename_frames(t: &mut Trace, tables: &HashMap<ModuleIdx, FunctionTable>) {
    let mut strings: HashMap<String, StrIdx> = t
        .strings
        .iter()
        .enumerate()
        .map(|(i, s)| (s.clone(), StrIdx(i as u32)))
        .collect();
    let mut functions: HashMap<(ModuleIdx, StrIdx), FuncIdx> = HashMap::new();
    for f in 0..t.frames.len() {
        let frame = &t.frames[f];
        let Some(name) = tables
            .get(&frame.module)
            .and_then(|table| table.lookup(frame.address))
        else {
            continue;
        };
        let (module, kernel) = (frame.module, frame.kernel);
        let name = *strings.entry(name.to_string()).or_insert_with(|| {
            t.strings.push(name.to_string());
            StrIdx(t.strings.len() as u32 - 1)
        });
        let function = *functions.entry((module, name)).or_insert_with(|| {
            t.functions.push(Function {
                name,
                module,
                kernel,
            });
            FuncIdx(t.functions.len() as u32 - 1)
        });
        t.frames[f].function = function;
    }
    let mut used = vec![false; t.functions.len()];
    for frame in &t.frames {
        used[frame.function.ix()] = true;
    }
    let mut new_index = vec![FuncIdx(0); t.functions.len()];
    let mut kept = 0u32;
    for (i, &u) in used.iter().enumerate() {
        if u {
            new_index[i] = FuncIdx(kept);
            kept += 1;
        }
    }
    let mut i = 0;
    t.functions.retain(|_| {
        i += 1;
        used[i - 1]
    });
    for frame in &mut t.frames {
        frame.function = new_index[frame.function.ix()];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbol_paths_keep_local_directories_only() {
        let p = SymbolPath::parse(
            "/sym/a; srv*/sym/cache*https://msdl.microsoft.com/download/symbols;;cache*/sym/c;symsrv*symsrv.dll*/sym/d*http://x",
        );
        let dirs: Vec<&str> = p.dirs.iter().map(|d| d.to_str().unwrap()).collect();
        assert_eq!(dirs, ["/sym/a", "/sym/cache", "/sym/c", "/sym/d"]);
        assert_eq!(p.ignored.len(), 3, "{:?}", p.ignored);
    }

    #[test]
    fn lookup_prefers_procedures_and_falls_back_to_publics() {
        let table = FunctionTable {
            procedures: vec![(0x1000, 0x1010, "f".into()), (0x1020, 0x1030, "g".into())],
            publics: vec![(0x1000, "F".into()), (0x1018, "between".into())],
        };
        assert_eq!(table.lookup(0x1000), Some("f"));
        assert_eq!(table.lookup(0x100f), Some("f"));
        assert_eq!(table.lookup(0x1010), Some("F"));
        assert_eq!(table.lookup(0x1019), Some("between"));
        assert_eq!(table.lookup(0x102f), Some("g"));
        assert_eq!(table.lookup(0xfff), None);
        assert_eq!(table.lookup(1 << 40), None);
    }

    #[test]
    fn garbage_is_a_corrupt_pdb_not_a_panic() {
        let dir = std::env::temp_dir().join(format!("slowlab-etl-pdb-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("bad.pdb");
        let mut bytes = b"Microsoft C/C++ MSF 7.00\r\n\x1aDS\0\0\0".to_vec();
        bytes.extend((0..8192u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8));
        std::fs::write(&file, &bytes).unwrap();
        let err = read_pdb(&file, |_| true).unwrap_err();
        assert!(matches!(err, PdbError::Corrupt { .. }), "{err}");
        assert!(!err.to_string().contains('\n'));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
