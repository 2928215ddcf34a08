//! What the README's install instructions give: shell completions that
//! the shells can read, a man page per command, and a `--version` that
//! names the commit and the features.

use std::process::Command;

fn slowlab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_slowlab"))
}

fn stdout_of(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run slowlab");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// The commands a user types (the hidden `__child` is not one).
const COMMANDS: &[&str] = &[
    "lab",
    "sweep",
    "record",
    "analyze",
    "diagnose",
    "diff",
    "doctor",
    "import",
    "export",
    "fleet",
    "hang",
    "completions",
    "man",
];

#[test]
fn completions_are_valid_scripts_that_know_the_commands() {
    let dir = tempfile::tempdir().unwrap();
    for shell in ["bash", "zsh", "fish"] {
        let script = stdout_of(slowlab().args(["completions", shell]));
        for c in ["analyze", "diagnose", "lab"] {
            assert!(script.contains(c), "{shell}: no {c}");
        }
        assert!(
            !script.contains("__child"),
            "{shell}: names the hidden command"
        );
        let file = dir.path().join(format!("slowlab.{shell}"));
        std::fs::write(&file, &script).unwrap();
        // Each shell's own syntax check, where the shell is installed
        // (bash always is).
        let have = Command::new(shell).arg("-c").arg("true").status().is_ok();
        if shell == "bash" || have {
            let ok = Command::new(shell)
                .arg("-n")
                .arg(&file)
                .status()
                .unwrap()
                .success();
            assert!(ok, "{shell} -n rejects the completion script");
        }
    }
    // bash: sourcing it registers the completion function.
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {} && complete -p slowlab",
            dir.path().join("slowlab.bash").display()
        ))
        .output()
        .unwrap();
    slowlab_testkit::assert_succeeded(&out);
}

#[test]
fn man_writes_a_page_per_command() {
    let dir = tempfile::tempdir().unwrap();
    let man1 = dir.path().join("man1");
    let listed = stdout_of(slowlab().arg("man").arg(&man1));
    let mut pages = vec!["slowlab".to_string()];
    pages.extend(COMMANDS.iter().map(|c| format!("slowlab-{c}")));
    for page in &pages {
        let file = man1.join(format!("{page}.1"));
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{page}.1: {e}"));
        assert!(
            listed.contains(&*file.to_string_lossy()),
            "not listed: {page}"
        );
        let th = text
            .lines()
            .find(|l| l.starts_with(".TH "))
            .unwrap_or_else(|| panic!("{page}.1 has no .TH header"));
        assert!(th.contains(&page.to_uppercase()), "{page}.1: {th}");
    }
    assert!(!man1.join("slowlab-__child.1").exists());
    let analyze = std::fs::read_to_string(man1.join("slowlab-analyze.1")).unwrap();
    assert!(
        analyze.contains("critical"),
        "analyze's page lacks its options"
    );
    // Rendered by man(1), where it is installed.
    if Command::new("man").arg("--version").output().is_ok() {
        let out = Command::new("man")
            .arg("-l")
            .arg(man1.join("slowlab-diagnose.1"))
            .env("MANWIDTH", "80")
            .env("MANPAGER", "cat")
            .output()
            .unwrap();
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("slowlab diagnose") || text.contains("slowlab-diagnose"));
    }
}

#[test]
fn version_names_the_commit_and_the_features() {
    let version = stdout_of(slowlab().arg("--version"));
    assert!(
        version.starts_with(concat!("slowlab ", env!("CARGO_PKG_VERSION"))),
        "{version}"
    );
    assert!(version.contains("features: "), "{version}");
    // Built from a checkout: HEAD's commit (the test runs from the crate's
    // directory inside it).
    let head = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output();
    match head {
        Ok(o) if o.status.success() => {
            let head = String::from_utf8_lossy(&o.stdout).trim().to_string();
            assert!(
                version.contains(&format!("commit {}", &head[..12])),
                "{version} does not name HEAD {head}"
            );
        }
        _ => assert!(version.contains("commit "), "{version}"),
    }
    // The subcommands say the same.
    let sub = stdout_of(slowlab().args(["analyze", "--version"]));
    assert!(sub.contains("commit "), "{sub}");
}
