//! `slowlab completions`'s arguments. Definitions and help only: the binary runs them.

use clap::Args;
use clap_complete::Shell;

/// Print a completion script for a shell.
///
/// Install (see the README):
///
///   bash  slowlab completions bash > ~/.local/share/bash-completion/completions/slowlab
///   zsh   slowlab completions zsh > ~/.zfunc/_slowlab   (with ~/.zfunc in $fpath)
///   fish  slowlab completions fish > ~/.config/fish/completions/slowlab.fish
#[derive(Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub shell: Shell,
}
