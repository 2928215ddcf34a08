//! A stripped shared library keeps only its exported functions' symbols
//! (`.dynsym`): the code of its static functions must not be named after
//! the exported function before it (issue 41, "missing symbols never
//! mislead"). The library (`fixtures/stripped_lib.c`) is built with gcc
//! and stripped with `strip --strip-unneeded`; the addresses of its static
//! functions are read from the unstripped copy. Checked on the symbol
//! table directly, and through a perf recording of a program that spends
//! its time in those static functions.
//!
//! Needs gcc, strip and readelf (and perf, allowed to record its own
//! child, for the recording); skips otherwise.

use std::path::{Path, PathBuf};
use std::process::Command;

use slowlab_perf::symbols::Elf;
use slowlab_perf::{read_file, ReadOptions};

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The library built in `dir`: (the stripped one, the unstripped copy).
fn build_library(dir: &Path) -> (PathBuf, PathBuf) {
    let full = dir.join("full.so");
    let stripped = dir.join("libstripped.so");
    run(Command::new("gcc")
        .args([
            "-O1",
            "-fno-toplevel-reorder",
            "-fno-omit-frame-pointer",
            "-fPIC",
            "-shared",
            "-Wl,--build-id",
            "-o",
        ])
        .arg(&full)
        .arg(fixture("stripped_lib.c")));
    std::fs::copy(&full, &stripped).unwrap();
    run(Command::new("strip").arg("--strip-unneeded").arg(&stripped));
    (stripped, full)
}

/// `(address, size)` of the function `name` in `file`'s `.symtab`, by
/// `readelf -s`.
fn symbol(file: &Path, name: &str) -> (u64, u64) {
    let out = Command::new("readelf")
        .args(["-s", "-W"])
        .arg(file)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| {
            // Num: Value Size Type Bind Vis Ndx Name
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 8 && f[3] == "FUNC" && f[7] == name).then(|| {
                let addr = u64::from_str_radix(f[1], 16).unwrap();
                (addr, f[2].parse().unwrap())
            })
        })
        .unwrap_or_else(|| panic!("{name} in {}", file.display()))
}

/// The names the scan and the sorted index give the ascending `queries`,
/// checked to agree.
fn names(elf: &Elf<'_>, queries: &[u64]) -> Vec<Option<String>> {
    let text = |r: Vec<Option<u32>>| -> Vec<Option<String>> {
        r.into_iter()
            .map(|o| o.map(|o| String::from_utf8_lossy(elf.name(o)).into_owned()))
            .collect()
    };
    let scanned = text(elf.resolve(queries, &mut |_| {}));
    let sorted = text(elf.sorted().resolve(elf, queries, &mut |_| {}));
    assert_eq!(scanned, sorted, "the scan and the sorted index differ");
    scanned
}

#[test]
fn a_static_function_of_a_stripped_library_is_not_named_after_an_exported_one() {
    for tool in ["gcc", "strip", "readelf"] {
        if !slowlab_testkit::has_tool(tool) {
            slowlab_testkit::skip(format!("{tool} not found"));
            return;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let (stripped, full) = build_library(dir.path());
    let (exported, exported_size) = symbol(&full, "exported");
    let (hidden, hidden_size) = symbol(&full, "spin_hidden");
    let (bare, bare_size) = symbol(&full, "bare");
    let (after, after_size) = symbol(&full, "after_bare");
    // The layout the test is about: each static function right after an
    // exported one, `bare` without a size.
    assert!(exported < hidden && hidden < bare && bare < after);
    assert_eq!(bare_size, 0);
    let queries = [
        exported,
        exported + exported_size / 2,
        hidden,
        hidden + hidden_size / 2,
        bare,
        after,
        after + after_size / 2,
    ];

    let bytes = std::fs::read(&stripped).unwrap();
    let elf = Elf::parse(&bytes).unwrap();
    assert!(elf.dynsym_only, "strip --strip-unneeded left a .symtab");
    let got = names(&elf, &queries);
    let some = |n: &str| Some(n.to_string());
    assert_eq!(
        got,
        [
            some("exported"),
            some("exported"),
            None,
            None,
            some("bare"),
            None,
            None
        ],
        "addresses {queries:x?}"
    );

    // The unstripped copy names every one of them.
    let bytes = std::fs::read(&full).unwrap();
    let elf = Elf::parse(&bytes).unwrap();
    assert_eq!(
        names(&elf, &queries),
        [
            some("exported"),
            some("exported"),
            some("spin_hidden"),
            some("spin_hidden"),
            some("bare"),
            some("after_bare"),
            some("after_bare")
        ]
    );
}

/// Through a recording: the samples in the static functions (nearly all
/// of them) are `[unknown]` in the stripped library, never `exported` or
/// `bare`, and the library's `symbol_error` says why.
#[test]
fn samples_in_a_stripped_librarys_static_functions_are_unknown() {
    for tool in ["gcc", "strip", "readelf", "perf"] {
        if !slowlab_testkit::has_tool(tool) {
            slowlab_testkit::skip(format!("{tool} not found"));
            return;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (stripped, full) = build_library(d);
    let prog = d.join("prog");
    run(Command::new("gcc")
        .args(["-O1", "-fno-omit-frame-pointer", "-o"])
        .arg(&prog)
        .arg(fixture("stripped_main.c"))
        .arg(format!("-L{}", d.display()))
        .arg(format!("-Wl,-rpath,{}", d.display()))
        .arg("-lstripped"));
    let trace = d.join("t.data");
    if !slowlab_testkit::perf_record(&trace, &prog) {
        return;
    }
    let opts = ReadOptions {
        symbol_cache: None,
        ..ReadOptions::default()
    };
    let t = read_file(&trace, &opts, &|_, _, _| {}).expect("read the trace");

    let bytes = std::fs::read(&stripped).unwrap();
    let elf = Elf::parse(&bytes).unwrap();
    let within = |(start, size): (u64, u64), addr: u64| start <= addr && addr < start + size;
    let hidden = [symbol(&full, "spin_hidden"), symbol(&full, "after_bare")];
    // Leaf frames in the library: (address in the file's terms, name).
    let mut in_static = 0;
    let mut named = Vec::new();
    for &stack in &t.samples.stack {
        let Some(leaf) = t.stack_frames(stack).next() else {
            continue;
        };
        let frame = &t.frames[leaf.ix()];
        let func = frame.function;
        if frame.kernel || t.function_module(func) != "libstripped.so" {
            continue;
        }
        let Some(addr) = elf.offset_to_address(frame.address) else {
            continue;
        };
        if hidden.iter().any(|&f| within(f, addr)) {
            in_static += 1;
            if t.function_name(func) != "[unknown]" {
                named.push((addr, t.function_name(func).to_string()));
            }
        }
    }
    assert!(
        in_static >= 100,
        "only {in_static} samples in the static functions"
    );
    // Why they have no name, and what to do.
    let error = t
        .modules
        .iter()
        .find(|m| t.str(m.name) == "libstripped.so")
        .and_then(|m| m.symbol_error.clone())
        .unwrap_or_default();
    assert!(
        error.contains("only its exported functions have symbols (.dynsym), and no debug file")
            && error.contains("DEBUGINFOD_URLS"),
        "{error:?}"
    );
    assert!(
        t.stats
            .warnings
            .iter()
            .any(|w| w.contains("named only in part")),
        "{:?}",
        t.stats.warnings
    );
    let n = named.len();
    named.truncate(5);
    assert!(
        n == 0,
        "{n} of {in_static} named after another function, first {named:x?}"
    );
}
