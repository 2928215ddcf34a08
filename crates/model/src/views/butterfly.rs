//! The butterfly view's result: the callers and callees of one function as
//! merged trees with inclusive sample counts. Computed by
//! `slowlab_analyze::butterfly`, rendered by `slowlab_report::cpu_views`.

use serde::Serialize;

/// A node of a caller or callee tree.
#[derive(Clone, Debug, Serialize)]
pub struct BNode {
    pub name: String,
    pub module: String,
    pub samples: u64,
    pub percent: f64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<BNode>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Butterfly {
    pub function: String,
    /// Modules the function was found in.
    pub modules: Vec<String>,
    /// Selected samples.
    pub total: u64,
    #[serde(rename = "self")]
    pub self_samples: u64,
    pub inclusive: u64,
    pub callers: Vec<BNode>,
    pub callees: Vec<BNode>,
}
