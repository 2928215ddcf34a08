//! `slowlab hang PID`: walks the process's wait chains
//! (`slowlab_hang::walk`) and prints them (`slowlab_hang::render`). Wiring
//! and the exit code only.

use std::path::Path;

use slowlab_cli::hang::HangArgs;
use slowlab_hang::{render, walk, Options};

pub fn run(args: HangArgs) -> anyhow::Result<i32> {
    let options = Options {
        all_threads: args.all_threads,
    };
    let report = walk(Path::new("/"), args.pid, &options)?;
    if args.json {
        println!("{}", render::json(&report)?);
    } else {
        print!("{}", render::text(&report));
    }
    Ok(report.exit_code())
}
