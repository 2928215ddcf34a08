//! `slowlab completions SHELL`: the shell's completion script on stdout
//! (clap_complete), generated from the same definitions that parse the
//! command line, so it never falls behind.

use std::io::Write;

use clap::CommandFactory;
use slowlab_cli::completions::CompletionsArgs;

pub fn run(args: CompletionsArgs) -> anyhow::Result<i32> {
    // The commands a user types: clap_complete would offer the hidden
    // `__child` too, so the program is rebuilt without hidden commands.
    let full = crate::Cli::command();
    let mut cmd = clap::Command::new("slowlab")
        .version(env!("SLOWLAB_LONG_VERSION"))
        .propagate_version(true)
        .args(full.get_arguments().cloned())
        .subcommands(full.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "slowlab", &mut script);
    // Into a pipe that closes early (`| head`): done, not an error.
    match std::io::stdout().write_all(&script) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(0),
    }
}
