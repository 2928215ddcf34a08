//! The flags every command that reads traces shares: how functions are
//! named, and which samples count. Definitions and help only: the binary
//! turns them into `slowlab_open::OpenOptions` and a selection.

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

/// Which samples and events count: threads and a time range (in `diff`,
/// of both traces, each from its own start).
#[derive(Debug, Clone, clap::Args)]
pub struct SelectionArgs {
    /// Only samples of process=NAME, pid=N or tid=N (repeat to widen).
    #[arg(long, value_name = "process=NAME|pid=N|tid=N")]
    pub filter: Vec<String>,
    /// Only samples from this many seconds after the trace's start (2.5, 500ms, 1m).
    #[arg(long, value_name = "SECONDS", value_parser = seconds_into_trace)]
    pub from: Option<f64>,
    /// Only samples before this many seconds after the trace's start.
    #[arg(long, value_name = "SECONDS", value_parser = seconds_into_trace)]
    pub to: Option<f64>,
}

/// `--from`/`--to`: a time from the trace's start, 0 or more (no NaN, no negative).
fn seconds_into_trace(text: &str) -> Result<f64, String> {
    slowlab_model::units::parse_seconds(text, 0.0, f64::INFINITY)
}
