//! PDB identities and function names.
//!
//! The real 64-bit PerfView fixture: its `DbgID_RSDS` events are counted
//! and decoded as TraceEvent's baseline shows them, and the kernel module
//! keeps its PDB's `<GUID><AGE>`.
//!
//! A real PDB (`fixtures/pdb/`, built by clang + lld-link from `prog.c`):
//! the test reads `prog.exe`'s own CodeView record and the linker's map
//! (not the PDB) to write a trace whose samples fall in its functions, then
//! checks that the symbol path names them (flat directory and symbol-store
//! layout), that a wrong age or a corrupt PDB is a warning that leaves the
//! frames `prog.exe+0x…`, and that nothing is named without a symbol path.

use std::path::{Path, PathBuf};

use slowlab_etl::pdb_ids::{dbg_ids, PdbId};
use slowlab_etl::synth::image_trace;
use slowlab_etl::{read_bytes, to_trace_with_symbols, SymbolPath};
use slowlab_model::trace::Trace;

const BASE: u32 = 0x0040_0000;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn pdb_dir() -> PathBuf {
    fixtures().join("pdb")
}

fn exe_pdb_id() -> PdbId {
    let exe = std::fs::read(pdb_dir().join("prog.exe")).unwrap();
    slowlab_etl::pe::codeview_pdb(&exe).expect("prog.exe has a CodeView record")
}

/// A function's RVA from the linker's map (`Rva+Base` minus the load address).
fn map_rva(name: &str) -> u32 {
    let map = std::fs::read_to_string(pdb_dir().join("prog.map")).unwrap();
    let base = map
        .lines()
        .find_map(|l| l.trim().strip_prefix("Preferred load address is "))
        .map(|h| u64::from_str_radix(h.trim(), 16).unwrap())
        .expect("load address in the map");
    let va = map
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|w| w.len() >= 3 && w[1] == name)
        .map(|w| u64::from_str_radix(w[2], 16).unwrap())
        .unwrap_or_else(|| panic!("{name} in the map"));
    (va - base) as u32
}

/// Stacks (innermost first) through busy_leaf ← busy_middle ← mainCRTStartup.
fn stacks() -> Vec<Vec<u32>> {
    let (leaf, middle, main) = (
        map_rva("busy_leaf"),
        map_rva("busy_middle"),
        map_rva("mainCRTStartup"),
    );
    (0..3)
        .map(|i| vec![BASE + leaf + 1 + i, BASE + middle + 4, BASE + main + 4])
        .collect()
}

fn trace_with(pdb: &PdbId, symbols: Option<&SymbolPath>) -> Trace {
    let bytes = image_trace(100, BASE, 0x4000, r"C:\app\prog.exe", pdb, &stacks());
    to_trace_with_symbols(&read_bytes(&bytes).unwrap(), symbols).0
}

/// The function names along the first sample's stack, innermost first.
fn first_stack_names(t: &Trace) -> Vec<String> {
    let mut names = Vec::new();
    let mut at = t.samples.stack[0];
    while let Some(s) = at {
        let node = &t.stacks[s.ix()];
        names.push(t.function_name(t.frame_function(node.frame)).to_string());
        at = node.parent();
    }
    names
}

fn prog_module(t: &Trace) -> &slowlab_model::trace::Module {
    t.modules
        .iter()
        .find(|m| t.str(m.name) == "prog.exe")
        .expect("prog.exe module")
}

#[test]
fn the_fixtures_dbgid_events_match_traceevents_baseline() {
    let etl = slowlab_etl::read_file(&fixtures().join("perfview-net.4.5.2.x64.etl.zip")).unwrap();
    let ids = dbg_ids(&etl);
    // COUNT KernelTraceControl/ImageID/DbgID_RSDS:3534
    assert_eq!(ids.len(), 3534);
    // EVENT 28.609: …DbgID_RSDS PID=4; …; ImageBase=0x77710000;
    // GuidSig=ec83d8df-5559-46e0-b...; Age=2; PDBFileName=wntdll.pdb;
    let (pid, first) = &ids[0];
    assert_eq!(*pid, Some(4));
    assert_eq!(first.base, 0x7771_0000);
    assert!(first
        .pdb
        .guid
        .to_string()
        .starts_with("ec83d8df-5559-46e0-b"));
    assert_eq!(
        (first.pdb.age, first.pdb.pdb_name.as_str()),
        (2, "wntdll.pdb")
    );
    // …ImageBase=0xfffff80021489000; GuidSig=72482100-1c1c-4a03-a...; Age=2;
    // PDBFileName=ntkrnlmp.pdb; — the kernel's image.
    let t = slowlab_etl::to_trace(&etl);
    let kernel = t
        .modules
        .iter()
        .find(|m| t.str(m.name).eq_ignore_ascii_case("ntoskrnl.exe"))
        .expect("kernel module");
    let id = kernel.build_id.as_deref().expect("kernel PDB identity");
    assert!(
        id.starts_with("724821001C1C4A03A") && id.ends_with('2'),
        "{id}"
    );
    assert_eq!(id.len(), 33);
    assert!(kernel
        .symbol_error
        .as_deref()
        .unwrap()
        .contains("ntkrnlmp.pdb"));
}

#[test]
fn without_a_symbol_path_frames_are_module_offsets_and_keep_the_pdb_identity() {
    let id = exe_pdb_id();
    assert_eq!(id.file_name(), "prog.pdb");
    let t = trace_with(&id, None);
    let m = prog_module(&t);
    assert_eq!(m.build_id.as_deref(), Some(id.key().as_str()));
    let names = first_stack_names(&t);
    assert_eq!(names.len(), 3);
    assert!(
        names.iter().all(|n| n.starts_with("prog.exe+0x")),
        "{names:?}"
    );
}

#[test]
fn a_flat_symbol_directory_names_the_functions() {
    let id = exe_pdb_id();
    let path = SymbolPath::parse(pdb_dir().to_str().unwrap());
    let t = trace_with(&id, Some(&path));
    assert_eq!(
        first_stack_names(&t),
        ["busy_leaf", "busy_middle", "mainCRTStartup"]
    );
    assert!(prog_module(&t).symbol_error.is_none());
    assert!(t.stats.warnings.is_empty(), "{:?}", t.stats.warnings);
    // The three samples' leaf frames differ but share one function.
    let leaves: Vec<_> = t
        .functions
        .iter()
        .filter(|f| t.str(f.name) == "busy_leaf")
        .collect();
    assert_eq!(leaves.len(), 1);
    assert_eq!(t.str(t.modules[leaves[0].module.ix()].name), "prog.exe");
    // No function is left over from before the renaming.
    assert!(t
        .functions
        .iter()
        .all(|f| !t.str(f.name).starts_with("prog.exe+")));
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("slowlab-etl-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn copy_to(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(from, to).unwrap();
}

#[test]
fn a_symbol_store_layout_in_a_srv_path_names_the_functions() {
    let id = exe_pdb_id();
    let store = temp_dir("store");
    copy_to(
        &pdb_dir().join("prog.pdb"),
        &store.join("prog.pdb").join(id.key()).join("prog.pdb"),
    );
    let spec = format!(
        "srv*{}*https://msdl.microsoft.com/download/symbols",
        store.display()
    );
    let t = trace_with(&id, Some(&SymbolPath::parse(&spec)));
    assert_eq!(first_stack_names(&t)[0], "busy_leaf");
    // The URL is ignored, and says so.
    assert_eq!(t.stats.warnings.len(), 1, "{:?}", t.stats.warnings);
    assert!(t.stats.warnings[0].contains("nothing is downloaded"));
    std::fs::remove_dir_all(&store).unwrap();
}

#[test]
fn a_pdb_of_another_age_is_not_used_and_says_so() {
    let mut id = exe_pdb_id();
    id.age += 1;
    let path = SymbolPath::parse(pdb_dir().to_str().unwrap());
    let t = trace_with(&id, Some(&path));
    assert!(first_stack_names(&t)
        .iter()
        .all(|n| n.starts_with("prog.exe+0x")));
    let warning = t
        .stats
        .warnings
        .iter()
        .find(|w| w.contains("prog.pdb") && w.contains("not used"))
        .unwrap_or_else(|| panic!("{:?}", t.stats.warnings));
    assert!(warning.contains(&id.key()), "{warning}");
    assert!(!warning.contains('\n'));
}

#[test]
fn a_corrupt_pdb_is_one_warning_and_frames_stay_unnamed() {
    let id = exe_pdb_id();
    let dir = temp_dir("corrupt");
    let good = std::fs::read(pdb_dir().join("prog.pdb")).unwrap();
    // The real PDB's header with its page data overwritten.
    for (i, cut) in [64usize, 4096, good.len() / 2].into_iter().enumerate() {
        let mut bad = good.clone();
        for (j, b) in bad[cut..].iter_mut().enumerate() {
            *b = (j as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3] ^ i as u8;
        }
        std::fs::write(dir.join("prog.pdb"), &bad).unwrap();
        let t = trace_with(&id, Some(&SymbolPath::parse(dir.to_str().unwrap())));
        let names = first_stack_names(&t);
        assert!(
            names.iter().all(|n| n.starts_with("prog.exe+0x")),
            "{names:?}"
        );
        assert_eq!(t.stats.warnings.len(), 1, "{:?}", t.stats.warnings);
        assert!(!t.stats.warnings[0].contains('\n'));
    }
    // A missing PDB is one summary warning.
    std::fs::remove_file(dir.join("prog.pdb")).unwrap();
    let t = trace_with(&id, Some(&SymbolPath::parse(dir.to_str().unwrap())));
    assert_eq!(t.stats.warnings.len(), 1, "{:?}", t.stats.warnings);
    assert!(t.stats.warnings[0].contains("no PDB on the symbol path for 1 of the 1"));
    std::fs::remove_dir_all(&dir).unwrap();
}
