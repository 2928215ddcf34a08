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

/// Why a binary's code has no names (`missing`), with what to do: install
/// `package`'s debug package when it is known.
pub(super) fn no_debug_file(missing: Missing, package: Option<&str>) -> String {
    let install = match package {
        Some(p) => format!("install {p}-dbgsym"),
        None => "install its -dbgsym package".to_string(),
    };
    let what = match missing {
        Missing::All => "stripped",
        Missing::AllButExported => "only its exported functions have symbols (.dynsym)",
    };
    format!("{what}, and no debug file found ({install}, or set DEBUGINFOD_URLS)")
}

/// The Debian package that installed each of `paths` (without its
/// architecture: `liblzma5`), from dpkg's file lists.
pub(super) fn packages(paths: &[&str]) -> Vec<Option<String>> {
    packages_in(Path::new(DPKG_INFO), paths)
}

/// [`packages`] from the lists in `dpkg_info`. A library's package is
/// usually named after its soname (`liblzma.so.5` → `liblzma5`): that list
/// is read first; the files it does not find are looked for in one pass
/// over all the lists. On a merged `/usr` a file may be listed under `/lib`
/// or `/usr/lib`: both count.
fn packages_in(dpkg_info: &Path, paths: &[&str]) -> Vec<Option<String>> {
    let mut out: Vec<Option<String>> = vec![None; paths.len()];
    if paths.is_empty() {
        return out;
    }
    let Ok(dir) = std::fs::read_dir(dpkg_info) else {
        return out;
    };
    let mut lists: Vec<PathBuf> = dir
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "list"))
        .collect();
    lists.sort();
    // Each path in both forms of a merged `/usr`.
    let forms: Vec<[String; 2]> = paths
        .iter()
        .map(|&p| {
            let other = match p.strip_prefix("/usr") {
                Some(rest) if rest.starts_with('/') => rest.to_string(),
                _ => format!("/usr{p}"),
            };
            [p.to_string(), other]
        })
        .collect();
    for (i, p) in paths.iter().enumerate() {
        let guess = Path::new(p)
            .file_name()
            .and_then(|f| f.to_str())
            .and_then(soname_package);
        if let Some(guess) = guess {
            for list in lists
                .iter()
                .filter(|l| package(l).as_deref() == Some(&guess))
            {
                look_in(list, &forms, &[i], &mut out);
            }
        }
    }
    for list in &lists {
        let left: Vec<usize> = (0..paths.len()).filter(|&i| out[i].is_none()).collect();
        if left.is_empty() {
            break;
        }
        look_in(list, &forms, &left, &mut out);
    }
    out
}

/// Reads the file list `list` and gives its package to each of the paths
/// `wanted` (by index into `forms`, each in both forms) that it holds.
fn look_in(list: &Path, forms: &[[String; 2]], wanted: &[usize], out: &mut [Option<String>]) {
    let Ok(text) = std::fs::read(list) else {
        return;
    };
    for line in text.split(|&b| b == b'\n') {
        for &i in wanted {
            if out[i].is_none() && forms[i].iter().any(|f| f.as_bytes() == line) {
                out[i] = package(list);
            }
        }
    }
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
        let paths = [
            "/usr/lib/x86_64-linux-gnu/liblzma.so.5.4.1",
            "/usr/bin/xz",
            "/usr/bin/mystery",
        ];
        assert_eq!(
            packages_in(info, &paths),
            [
                Some("liblzma5".to_string()),
                Some("xz-utils".to_string()),
                None
            ]
        );
        // No dpkg at all.
        assert_eq!(packages_in(&info.join("none"), &paths), [None, None, None]);
        assert_eq!(
            no_debug_file(Missing::AllButExported, Some("liblzma5")),
            "only its exported functions have symbols (.dynsym), and no debug file found \
             (install liblzma5-dbgsym, or set DEBUGINFOD_URLS)"
        );
        assert_eq!(
            no_debug_file(Missing::All, None),
            "stripped, and no debug file found (install its -dbgsym package, or set \
             DEBUGINFOD_URLS)"
        );
    }
}
