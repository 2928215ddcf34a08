//! Reading back what one `slowlab diagnose` run wrote into its directory:
//! the critical path (`DIR/critical_path.json`) as a
//! [`slowlab_analyze::path_diff::Run`], for `slowlab diff` on directories.
//! Errors are one line that says what the directory should be.

use std::path::{Path, PathBuf};

use slowlab_analyze::path_diff::Run;

/// `DIR/critical_path.json` of a `slowlab diagnose` directory.
pub fn read_run(dir: &Path) -> Result<Run, String> {
    let file = dir.join("critical_path.json");
    let text = std::fs::read(&file).map_err(|e| {
        format!(
            "{}: {e}: is {} a `slowlab diagnose` directory of a command it could follow?",
            file.display(),
            dir.display()
        )
    })?;
    let value: serde_json::Value =
        serde_json::from_slice(&text).map_err(|e| format!("{}: not JSON: {e}", file.display()))?;
    Run::from_json(&value).map_err(|e| format!("{}: not a critical path: {e}", file.display()))
}

/// [`read_run`] of each directory, in order; the first error.
pub fn read_runs(dirs: &[PathBuf]) -> Result<Vec<Run>, String> {
    dirs.iter().map(|d| read_run(d)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_without_a_path_says_what_it_should_be() {
        let dir = tempfile::tempdir().unwrap();
        let e = read_run(dir.path()).unwrap_err();
        assert!(e.contains("critical_path.json"), "{e}");
        assert!(e.contains("a `slowlab diagnose` directory"), "{e}");
        std::fs::write(dir.path().join("critical_path.json"), "{").unwrap();
        let e = read_run(dir.path()).unwrap_err();
        assert!(e.contains("not JSON"), "{e}");
        std::fs::write(dir.path().join("critical_path.json"), "[1, 2]").unwrap();
        let e = read_run(dir.path()).unwrap_err();
        assert!(e.contains("not a critical path"), "{e}");
    }
}
