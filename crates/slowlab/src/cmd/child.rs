//! `slowlab __child …`: the small programs that slowlab launches as child
//! processes of its own experiments and tests (`slowlab_lab::children`: the
//! lab's children and the sweep's known workloads). Hidden from `--help`;
//! not a user interface.

use clap::Args;

#[derive(Args, Debug)]
pub struct ChildArgs {
    #[command(subcommand)]
    program: slowlab_lab::children::LabChild,
}

pub fn run(args: ChildArgs) -> anyhow::Result<i32> {
    match slowlab_lab::children::run(args.program) {
        Ok(()) => Ok(0),
        Err(message) => {
            eprintln!("slowlab __child: {message}");
            Ok(1)
        }
    }
}
