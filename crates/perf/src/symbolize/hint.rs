//! What to say about a binary whose code has no symbols, in one place: why
//! (stripped, or only its exported functions in `.dynsym`, and no debug
//! file found) and what to do (install its debug package, named when dpkg
//! says which package installed the file: `liblzma5-dbgsym`; or set
//! `DEBUGINFOD_URLS`). The module's `symbol_error` carries these words to
//! the trace's warnings, the answer, the findings and the report.
//!
//! It reads dpkg's file lists (`/var/lib/dpkg/info/*.list`) and nothing
//! else; on a system without dpkg the hint names no package.

use std::path::{Path, PathBuf};

/// How much of a binary's code has no symbols.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Missing {
    /// No function symbol at all (fully stripped).
    All,
    /// Only its exported functions have symbols (`.dynsym`): the rest of
    /// its code has none.
    AllButExported,
}

/// Where dpkg keeps the list of files of each installed package.
const DPKG_INFO: &str = "/var/lib/dpkg/info";

/// The reason the code of the binary at `path` has no names, with what to
/// do about it.
pub(super) fn no_debug_file(path: &str, missing: Missing) -> String {
    no_debug_file_in(Path::new(DPKG_INFO), path, missing)
}

fn no_debug_file_in(dpkg_info: &Path, path: &str, missing: Missing) -> String {
    let install = match package_of(dpkg_info, path) {
        Some(p) => format!("install {p}-dbgsym"),
        None => "install its -dbgsym package".to_string(),
    };
    let what = match missing {
        Missing::All => "stripped",
        Missing::AllButExported => "only its exported functions have symbols (.dynsym)",
    };
    format!("{what}, and no debug file found ({install}, or set DEBUGINFOD_URLS)")
}

/// The Debian package that installed `path` (without its architecture:
/// `liblzma5`), from dpkg's file lists. A library's package is usually
/// named after its soname (`liblzma.so.5` → `liblzma5`): that list is read
/// first, and all of them only when it does not hold the file. On a merged
/// `/usr` the file may be listed under `/lib` or `/usr/lib`: both count.
fn package_of(dpkg_info: &Path, path: &str) -> Option<String> {
    let file = Path::new(path).file_name()?.to_str()?;
    let other = match path.strip_prefix("/usr") {
        Some(rest) if rest.starts_with('/') => rest.to_string(),
        _ => format!("/usr{path}"),
    };
    let holds = |list: &&PathBuf| {
        std::fs::read(list).is_ok_and(|text| {
            text.split(|&b| b == b'\n')
                .any(|l| l == path.as_bytes() || l == other.as_bytes())
        })
    };
    let mut all: Vec<PathBuf> = std::fs::read_dir(dpkg_info)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "list"))
        .collect();
    all.sort();
    if let Some(guess) = soname_package(file) {
        let named = |p: &&PathBuf| package(p).as_deref() == Some(guess.as_str());
        if let Some(list) = all.iter().filter(named).find(holds) {
            return package(list);
        }
    }
    all.iter().find(holds).and_then(|p| package(p))
}

/// The package whose file list is `list` (`liblzma5:amd64.list` →
/// `liblzma5`).
fn package(list: &Path) -> Option<String> {
    let name = list.file_name()?.to_str()?.strip_suffix(".list")?;
    Some(name.split(':').next()?.to_string())
}

/// The package name Debian's policy gives a library of soname `file`
/// (`liblzma.so.5.4.1` → `liblzma5`, `libfoo-2.0.so.1` → `libfoo-2.0-1`):
/// only a first guess, checked against the package's file list.
fn soname_package(file: &str) -> Option<String> {
    let (stem, version) = file.split_once(".so.")?;
    let major = version.split('.').next()?;
    let stem = stem.to_ascii_lowercase();
    Some(if stem.ends_with(|c: char| c.is_ascii_digit()) {
        format!("{stem}-{major}")
    } else {
        format!("{stem}{major}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sonames_give_the_usual_package_names() {
        assert_eq!(
            soname_package("liblzma.so.5.4.1").as_deref(),
            Some("liblzma5")
        );
        assert_eq!(soname_package("libc.so.6").as_deref(), Some("libc6"));
        assert_eq!(
            soname_package("libfoo-2.0.so.1").as_deref(),
            Some("libfoo-2.0-1")
        );
        assert_eq!(soname_package("xz"), None);
    }

    /// A dpkg directory made here: the package that lists the file is
    /// named, under either form of a merged `/usr`; a file no package
    /// lists gets the general words.
    #[test]
    fn the_package_that_installed_the_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let info = dir.path();
        std::fs::write(
            info.join("liblzma5:amd64.list"),
            "/.\n/lib\n/lib/x86_64-linux-gnu/liblzma.so.5.4.1\n",
        )
        .unwrap();
        std::fs::write(info.join("xz-utils.list"), "/usr/bin/xz\n").unwrap();
        std::fs::write(info.join("other.md5sums"), "/usr/bin/mystery\n").unwrap();
        let hint = |path: &str, missing| no_debug_file_in(info, path, missing);
        assert_eq!(
            hint(
                "/usr/lib/x86_64-linux-gnu/liblzma.so.5.4.1",
                Missing::AllButExported
            ),
            "only its exported functions have symbols (.dynsym), and no debug file found \
             (install liblzma5-dbgsym, or set DEBUGINFOD_URLS)"
        );
        assert_eq!(
            hint("/usr/bin/xz", Missing::All),
            "stripped, and no debug file found (install xz-utils-dbgsym, or set DEBUGINFOD_URLS)"
        );
        assert_eq!(
            hint("/usr/bin/mystery", Missing::All),
            "stripped, and no debug file found (install its -dbgsym package, or set \
             DEBUGINFOD_URLS)"
        );
        // No dpkg at all.
        assert_eq!(
            no_debug_file_in(&info.join("none"), "/usr/bin/xz", Missing::All),
            hint("/usr/bin/mystery", Missing::All)
        );
    }
}
