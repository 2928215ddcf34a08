//! The sampled-CPU views' results: the tree grouped by any order of
//! process, thread, module and function (`analyze --by`), and the summary
//! `analyze --json` writes. Computed by `slowlab_analyze::cpu`, rendered by
//! `slowlab_report::cpu_views`; the JSON field names are the output format.

use serde::Serialize;

/// A grouping key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Key {
    Process,
    Thread,
    Module,
    Function,
}

impl Key {
    /// The key a name on the command line means (`process`, `thread`,
    /// `module`, `function` or a short form); `None` for anything else.
    pub fn from_name(s: &str) -> Option<Key> {
        match s.trim() {
            "process" | "proc" | "p" => Some(Key::Process),
            "thread" | "t" => Some(Key::Thread),
            "module" | "dso" | "m" => Some(Key::Module),
            "function" | "func" | "sym" | "f" => Some(Key::Function),
            _ => None,
        }
    }
}

/// One row of the CPU tree.
#[derive(Clone, Debug, Serialize)]
pub struct Node {
    pub key: Key,
    /// Display label: `comm (pid)`, `comm (tid)`, a module or function name.
    pub label: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tid: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// Samples in this group (self samples for module and function rows).
    pub samples: u64,
    pub percent: f64,
    /// For module and function rows: samples of the parent group with this
    /// module or function anywhere on the stack.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inclusive: Option<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<Node>,
}

/// The CPU tree.
#[derive(Clone, Debug, Serialize)]
pub struct CpuTree {
    pub keys: Vec<Key>,
    pub samples: u64,
    /// Children cut by `top` at every level, summed.
    pub omitted_rows: u64,
    pub rows: Vec<Node>,
}

/// Percentage with two decimals.
pub fn pct(n: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        (n as f64 * 10000.0 / total as f64).round() / 100.0
    }
}

/// A function in the summary.
#[derive(Clone, Debug, Serialize)]
pub struct FunctionRow {
    pub name: String,
    pub module: String,
    #[serde(rename = "self")]
    pub self_samples: u64,
    pub inclusive: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ThreadRow {
    pub tid: i32,
    pub comm: String,
    pub samples: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ProcessRow {
    pub pid: i32,
    pub comm: String,
    pub samples: u64,
    pub threads: Vec<ThreadRow>,
}

/// The default view and `analyze --json`:
/// `{"samples","lost","duration_s","sample_event","sample_freq","processes":[…],"functions":[…]}`.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub samples: u64,
    pub lost: u64,
    pub duration_s: f64,
    pub sample_event: Option<String>,
    /// Samples a second per busy CPU, when the trace says.
    pub sample_freq: Option<u64>,
    pub processes: Vec<ProcessRow>,
    pub functions: Vec<FunctionRow>,
    pub warnings: Vec<String>,
}
