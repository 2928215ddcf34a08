//! Writing output files so that a failure half-way (a full disk, Ctrl-C)
//! never leaves a partial file that looks complete: the bytes go to a
//! temporary file in the same directory, which is renamed over the target
//! only once everything was written and flushed.

use std::io::Write;
use std::path::{Path, PathBuf};

use slowlab_model::bundle::directory_of;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("cannot write {path}: the disk is full; free some space or write elsewhere")]
    DiskFull { path: PathBuf },
    #[error("cannot write {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot serialize {what}: {message}")]
    Serialize { what: String, message: String },
    #[error("cannot draw the flame graph: {0}")]
    FlameGraph(String),
}

impl ReportError {
    fn io(path: &Path, source: std::io::Error) -> Self {
        if source.raw_os_error() == Some(libc_enospc()) {
            ReportError::DiskFull {
                path: path.to_path_buf(),
            }
        } else {
            ReportError::Io {
                path: path.to_path_buf(),
                source,
            }
        }
    }
}

/// ENOSPC without depending on libc for one constant (it is 28 on every
/// Linux architecture).
const fn libc_enospc() -> i32 {
    28
}

/// Writes `bytes` to `path` atomically (temporary file, fsync, rename).
/// `-` means standard output.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    if path == Path::new("-") {
        let mut out = std::io::stdout().lock();
        return out
            .write_all(bytes)
            .and_then(|_| out.flush())
            .map_err(|e| ReportError::io(path, e));
    }
    let dir = directory_of(path);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "output".into());
    let tmp = dir.join(format!(".{name}.partial-{}", std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(ReportError::io(path, e));
    }
    Ok(())
}

/// Whether [`write_atomically`] could write `path` now: its directory exists and takes a
/// new file (made and removed at once). Commands call it before minutes of work, so that
/// a missing directory or a read-only disk is said first, not after. `-` is always
/// writable.
pub fn check_writable(path: &Path) -> Result<(), ReportError> {
    if path == Path::new("-") {
        return Ok(());
    }
    let dir = directory_of(path);
    if !dir.is_dir() {
        return Err(ReportError::io(
            path,
            std::io::Error::other(format!(
                "there is no directory {}; create it, or write elsewhere",
                dir.display()
            )),
        ));
    }
    if path.is_dir() {
        return Err(ReportError::io(
            path,
            std::io::Error::other("it is a directory; give a file name"),
        ));
    }
    let probe = dir.join(format!(".slowlab-check-{}", std::process::id()));
    std::fs::File::create(&probe)
        .and_then(|_| std::fs::remove_file(&probe))
        .map_err(|e| ReportError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_checked_before_the_work_and_the_check_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        check_writable(&dir.path().join("out.json")).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        check_writable(Path::new("-")).unwrap();
        let missing = check_writable(Path::new("/nonexistent-dir-slowlab/x.json")).unwrap_err();
        assert!(
            missing.to_string().contains(
                "/nonexistent-dir-slowlab/x.json: there is no directory /nonexistent-dir-slowlab"
            ),
            "{missing}"
        );
        let a_dir = check_writable(dir.path()).unwrap_err();
        assert!(a_dir.to_string().contains("give a file name"), "{a_dir}");
    }

    #[test]
    fn writes_the_whole_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.json");
        write_atomically(&path, b"{}").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"{}");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn a_missing_directory_is_an_error_naming_the_path() {
        let err = write_atomically(Path::new("/nonexistent-dir-slowlab/x.json"), b"x").unwrap_err();
        assert!(
            err.to_string().contains("/nonexistent-dir-slowlab/x.json"),
            "{err}"
        );
    }

    #[test]
    fn a_full_disk_says_so() {
        // /dev/full answers every write with ENOSPC; rename onto it is not
        // possible, so test the classification directly.
        let err = ReportError::io(Path::new("x"), std::io::Error::from_raw_os_error(28));
        assert!(err.to_string().contains("disk is full"), "{err}");
    }
}
