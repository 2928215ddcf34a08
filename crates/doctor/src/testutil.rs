//! A fake `/proc` and `/sys` tree in a temporary directory, for the checks'
//! unit tests. Removed when dropped.

use std::path::Path;

pub struct FakeRoot(tempfile::TempDir);

impl FakeRoot {
    pub fn new() -> Self {
        FakeRoot(tempfile::tempdir().expect("temporary directory"))
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }

    /// Writes `text` to `rel` (its directories made).
    pub fn file(&self, rel: &str, text: &str) {
        let path = self.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// `proc/PID` with its name and empty `fd`, `fdinfo` and `ns`.
    pub fn process(&self, pid: i32, comm: &str) {
        self.file(&format!("proc/{pid}/comm"), &format!("{comm}\n"));
        for sub in ["fd", "fdinfo", "ns"] {
            std::fs::create_dir_all(self.path().join(format!("proc/{pid}/{sub}"))).unwrap();
        }
    }

    /// Descriptor `fd` of `pid`, a link to `target`, with its fdinfo.
    pub fn fd(&self, pid: i32, fd: u32, target: &str, fdinfo: &str) {
        std::os::unix::fs::symlink(target, self.path().join(format!("proc/{pid}/fd/{fd}")))
            .unwrap();
        self.file(&format!("proc/{pid}/fdinfo/{fd}"), fdinfo);
    }

    /// A namespace link of `pid` (`net` → `net:[INODE]`).
    pub fn namespace(&self, pid: i32, kind: &str, inode: u64) {
        std::os::unix::fs::symlink(
            format!("{kind}:[{inode}]"),
            self.path().join(format!("proc/{pid}/ns/{kind}")),
        )
        .unwrap();
    }
}
