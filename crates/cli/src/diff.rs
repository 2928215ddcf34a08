//! `slowlab diff`'s arguments. Definitions and help only: the binary runs them.

use std::path::PathBuf;

use clap::Args;

use crate::shared::{SelectionArgs, SymbolArgs};

/// Why did B get slower: two runs' critical paths (or traces' CPU) compared
///
/// On `slowlab diagnose` directories (they hold critical_path.json): the
/// root's wall-time change split by cause: on a CPU (by function), waiting
/// for a CPU, or blocked on a lock, the disk, a sleep, another thread or
/// process, a page fault (by where it blocked), in which process and thread
/// (matched by name, not pid). The causes' changes add up to the wall-time
/// change. With several runs per side (A1 A2 A3 -- B1 B2 B3) each change
/// gets an interval, [min B - max A, max B - min A] over the runs, and a
/// change that does not clear the runs' own spread is "no significant
/// change"; one run per side works, with a warning that the noise is
/// unknown. Then, on the terminal, the CPU comparison below of the first
/// run of each side (DIR/trace.data; of the root's process unless --filter
/// says otherwise).
///
/// On traces (perf.data, .etl): which function's sampled CPU grew.
/// Rows (functions by default) are matched by name (and module) across the
/// traces and ranked by the change of their cost: the most grown first, the
/// most shrunk last. Costs are normalised
/// before comparing: as a share of each trace's samples (--normalize total,
/// the default: what grew relative to the rest), or as samples per second
/// of each trace (--normalize duration: what grew in absolute terms).
/// Rows found in one trace only are marked (new) or (vanished). The same
/// filters and time range apply to both traces.
///
/// Examples:
///
///   slowlab diff before/ after/                      why it got slower
///   slowlab diff a1/ a2/ a3/ -- b1/ b2/ b3/          ... beyond the runs' noise
///   slowlab diff small.data big.data                 which function grew
///   slowlab diff a.data b.data --by module --top 10
///   slowlab diff a.data b.data --filter process=prog --inclusive
///   slowlab diff a.data b.data --flamegraph diff.svg  red grew, blue shrank
///   slowlab diff a.data b.data --html diff.html       explore it in a browser
///   slowlab diff a.data b.data --json | jq '.functions[0]'
///
/// JSON of directories: {"a":{"wall_s","runs_s","root"},"b":{…},"delta_s",
///        "interval","significant","summary","causes":[{"state","kind",
///        "process","thread","function","resource","a_s","b_s","delta_s",
///        "interval","significant"}],"groups":[{"state","kind","process",
///        "thread","mostly","a_s","b_s","delta_s","interval","significant"}],
///        "warnings"}, largest change first.
/// JSON of traces: {"key","normalize","metric","a":{"samples","duration_s"},
///        "b":{…},"omitted_rows","functions":[{"name","module","a","b",
///        "delta","ratio","a_samples","b_samples","status"}]}, sorted by
///        delta, largest first.
#[derive(Args, Debug, Clone)]
#[command(verbatim_doc_comment)]
pub struct DiffArgs {
    /// A then B: two traces (perf.data, .etl or .etl.zip) or two `slowlab
    /// diagnose` directories; or A's runs (directories), then B's after --
    #[arg(required = true, value_name = "A B | A1 A2…")]
    pub inputs: Vec<PathBuf>,
    /// B's runs (directories), after --
    #[arg(last = true, value_name = "B1 B2…")]
    pub b_runs: Vec<PathBuf>,
    /// Compare by function, module, process or thread (by name)
    #[arg(long, default_value = "function", value_name = "KEY")]
    pub by: String,
    /// How costs are made comparable: total (share of samples) or duration
    /// (samples per second)
    #[arg(long, default_value = "total", value_name = "HOW")]
    pub normalize: String,
    /// Compare inclusive costs (the function anywhere on the stack) instead
    /// of self costs (the innermost frame)
    #[arg(long)]
    pub inclusive: bool,
    /// Keep the N rows that grew most (default 25 on the terminal, all in
    /// JSON)
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
    #[command(flatten)]
    pub selection: SelectionArgs,
    /// Write a differential flame graph: B's stacks, coloured by the change
    /// of their share from A (red grew, blue shrank)
    #[arg(long, value_name = "FILE.svg")]
    pub flamegraph: Option<PathBuf>,
    /// Write one self-contained interactive page: the rows, sortable and
    /// filterable, and a differential flame graph to zoom and search
    #[arg(long, value_name = "FILE.html")]
    pub html: Option<PathBuf>,
    /// Print the comparison as JSON on stdout
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub symbols: SymbolArgs,
}
