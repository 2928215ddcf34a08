//! The diff view's results: two traces' selections compared row by row
//! (`slowlab diff`), and their merged call tree, which the interactive diff
//! page draws as a differential flame graph. Computed by
//! `slowlab_analyze::diff` and `diff_tree`, rendered by
//! `slowlab_report::diff` and `diff_page`.

use std::str::FromStr;

use serde::Serialize;

use super::cpu::Key;

/// How costs are made comparable between two traces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Normalize {
    /// Percent of the trace's selected samples.
    Total,
    /// Samples per second of the trace's selected time.
    Duration,
}

impl FromStr for Normalize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "total" | "share" => Ok(Normalize::Total),
            "duration" | "time" => Ok(Normalize::Duration),
            other => Err(format!(
                "`{other}` is not a normalisation: use total (shares) or duration (per second)"
            )),
        }
    }
}

/// Which count of a function is compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Samples whose innermost frame is in the function.
    SelfSamples,
    /// Samples with the function anywhere on the stack.
    Inclusive,
}

/// One row compared: `a` and `b` are normalised costs, `a_samples` and `b_samples`
/// the raw counts.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DiffRow {
    pub name: String,
    /// The module of a function (empty for other keys).
    pub module: String,
    pub a: f64,
    pub b: f64,
    /// `b - a`.
    pub delta: f64,
    /// `b / a`; `None` when `a` is zero.
    pub ratio: Option<f64>,
    pub a_samples: u64,
    pub b_samples: u64,
    /// `new` (only in B), `vanished` (only in A), or `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<&'static str>,
}

/// What one trace contributed.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Side {
    pub samples: u64,
    pub duration_s: f64,
}

/// The `diff` view and its `--json`:
/// `{"key","normalize","metric","a":{…},"b":{…},"functions":[{"name","module","a","b","delta","ratio"}]}`
/// (`functions` holds the rows whatever the key, sorted by `delta`, largest first).
#[derive(Clone, Debug, Serialize)]
pub struct DiffView {
    pub key: Key,
    pub normalize: Normalize,
    pub metric: Metric,
    pub a: Side,
    pub b: Side,
    /// Rows left out by `top`.
    pub omitted_rows: usize,
    pub functions: Vec<DiffRow>,
}

impl DiffView {
    /// The first `top` rows (the most grown), counting the others in
    /// `omitted_rows`; all of them when `None`.
    pub fn keep_top(mut self, top: Option<usize>) -> Self {
        let keep = top.unwrap_or(usize::MAX).min(self.functions.len());
        self.omitted_rows += self.functions.len() - keep;
        self.functions.truncate(keep);
        self
    }
}

/// Node `i` is the path `name[i]` called from `parent[i]` (-1 for a root: a
/// process); `a[i]` and `b[i]` are the samples with exactly that path.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DiffTree {
    /// Distinct frame names, referred to by `name`.
    pub names: Vec<String>,
    pub name: Vec<u32>,
    /// Always smaller than the node's own index, or -1.
    pub parent: Vec<i32>,
    /// A's self samples, scaled to B's total.
    pub a: Vec<u64>,
    pub b: Vec<u64>,
}
