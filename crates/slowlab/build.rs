//! Puts the commit this binary is built from and its enabled features in
//! `slowlab --version` (`SLOWLAB_LONG_VERSION`). Without git or outside a
//! checkout (a crates.io tarball, an exported source tree) the commit is
//! `SLOWLAB_COMMIT` when set, else "unknown".

use std::path::PathBuf;
use std::process::Command;

/// Runs `git ARGS` in this crate's directory; its trimmed output if it
/// succeeded.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=SLOWLAB_COMMIT");
    let commit = match std::env::var("SLOWLAB_COMMIT") {
        Ok(c) if !c.is_empty() => c,
        _ => match git(&["rev-parse", "--short=12", "HEAD"]) {
            Some(c) => {
                // Built again when HEAD moves: a commit, a checkout, a
                // rebase (HEAD's reflog and the branch it points to; works
                // in worktrees, where these live in different places).
                for path in ["HEAD", "logs/HEAD", "packed-refs"] {
                    if let Some(p) = git(&["rev-parse", "--git-path", path]) {
                        rerun_if_changed(p);
                    }
                }
                if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
                    if let Some(p) = git(&["rev-parse", "--git-path", &branch]) {
                        rerun_if_changed(p);
                    }
                }
                c
            }
            None => "unknown".to_string(),
        },
    };
    let mut features: Vec<String> = std::env::vars()
        .filter_map(|(k, _)| k.strip_prefix("CARGO_FEATURE_").map(str::to_owned))
        .map(|f| f.to_ascii_lowercase().replace('_', "-"))
        .collect();
    features.sort();
    let features = if features.is_empty() {
        "none".to_string()
    } else {
        features.join(",")
    };
    println!(
        "cargo:rustc-env=SLOWLAB_LONG_VERSION={} (commit {commit}, features: {features})",
        env!("CARGO_PKG_VERSION")
    );
}

/// `git rev-parse --git-path` answers relative to the crate's directory.
/// Only files that exist: cargo runs the script on every build for a
/// watched file that does not.
fn rerun_if_changed(path: String) {
    let mut p = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    p.push(path);
    if p.exists() {
        println!("cargo:rerun-if-changed={}", p.display());
    }
}
