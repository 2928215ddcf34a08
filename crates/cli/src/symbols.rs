//! The symbol flags every command that reads traces shares. Definitions
//! and help only: the binary turns them into `slowlab_open::OpenOptions`.

/// How a command that reads traces names their functions: `--no-symbols`,
/// and `--symbols` for the PDBs of Windows traces.
#[derive(Debug, Clone, clap::Args)]
pub struct SymbolArgs {
    /// Do not name functions (faster; every frame is [unknown]).
    #[arg(long)]
    pub no_symbols: bool,
    /// Windows traces: name functions from the PDBs in these local
    /// directories, `DIR[;DIR…]`, flat (`DIR/name.pdb`) or in a symbol
    /// store's layout (`DIR/name.pdb/<GUID><AGE>/name.pdb`); also
    /// `_NT_SYMBOL_PATH`'s `srv*DIR*URL` form, of which only the
    /// directories are read: nothing is downloaded. A PDB whose GUID or age
    /// differs from the traced image's is not used (a warning says which).
    #[arg(long, value_name = "DIR[;DIR…]", conflicts_with = "no_symbols")]
    pub symbols: Option<String>,
}
