//! `slowlab man DIR`: writes the manual pages (clap_mangen) from the same
//! definitions that parse the command line: `slowlab.1` for the program
//! and `slowlab-COMMAND.1` for each command (`slowlab-analyze.1`, …),
//! as git and cargo name theirs.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::CommandFactory;
use slowlab_cli::man::ManArgs;

pub fn run(args: ManArgs) -> anyhow::Result<i32> {
    for path in write_pages(&args.dir)? {
        println!("{}", path.display());
    }
    Ok(0)
}

/// Writes every page into `dir`; their paths, the program's first.
fn write_pages(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut cmd = crate::Cli::command();
    cmd.build();
    let mut written = vec![write_page(dir, "slowlab", cmd.clone())?];
    for sub in cmd.get_subcommands() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        // clap takes names as `&'static str` (without its `string`
        // feature): a few short strings, leaked once per run.
        let name: &'static str = format!("slowlab-{}", sub.get_name()).leak();
        let typed: &'static str = format!("slowlab {}", sub.get_name()).leak();
        // The page's title names the page; its synopsis, the command as
        // it is typed.
        let page = sub.clone().name(name).display_name(typed).bin_name(typed);
        written.push(write_page(dir, name, page)?);
    }
    Ok(written)
}

fn write_page(dir: &Path, name: &str, cmd: clap::Command) -> anyhow::Result<PathBuf> {
    let path = dir.join(format!("{name}.1"));
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd)
        .title(name.to_ascii_uppercase())
        .source(format!("slowlab {}", env!("CARGO_PKG_VERSION")))
        .manual("slowlab manual")
        .render(&mut out)
        .with_context(|| format!("rendering {name}.1"))?;
    // Whole or not at all: a full disk leaves no empty page behind, and says so.
    slowlab_report::write_atomically(&path, &out)?;
    Ok(path)
}
