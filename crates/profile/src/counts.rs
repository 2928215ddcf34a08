//! One profiled run → its samples per function: read the trace with
//! `slowlab-perf` (symbolized: ELF symbol tables, kallsyms for the kernel)
//! and count self and inclusive samples of every function with
//! `slowlab_analyze::cpu::function_counts` over the whole trace (it holds
//! only the command's process tree: perf started it).
//!
//! What it does not do: record or fit.

use std::path::Path;

use slowlab_analyze::cpu::function_counts;
use slowlab_analyze::select::Selection;
use slowlab_model::trace::Trace;

/// A function as named across runs: the same name in the same module.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FunctionKey {
    pub name: String,
    pub module: String,
    pub kernel: bool,
}

/// One function's samples in one run.
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionCount {
    pub key: FunctionKey,
    /// Samples with the function innermost.
    pub self_samples: u64,
    /// Samples with the function anywhere on the stack.
    pub samples: u64,
}

/// Everything counted in one run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunProfile {
    /// All samples of the run.
    pub total: u64,
    pub functions: Vec<FunctionCount>,
    /// What the reader warned about (unreadable records, missing symbols).
    pub warnings: Vec<String>,
}

/// Counts a trace already read.
pub fn count_trace(trace: &Trace) -> RunProfile {
    let agg = Selection::default().aggregate(trace);
    let mut functions: Vec<FunctionCount> = Vec::new();
    for (f, self_samples, samples) in function_counts(trace, &agg) {
        let func = &trace.functions[f.ix()];
        let key = FunctionKey {
            name: trace.function_name(f).to_string(),
            module: trace.function_module(f).to_string(),
            kernel: func.kernel,
        };
        // Two symbols of one name in one module (rare) count as one.
        match functions.iter_mut().find(|c| c.key == key) {
            Some(c) => {
                c.self_samples += self_samples;
                c.samples = c.samples.max(samples);
            }
            None => functions.push(FunctionCount {
                key,
                self_samples,
                samples,
            }),
        }
    }
    RunProfile {
        total: agg.total,
        functions,
        warnings: trace.stats.warnings.clone(),
    }
}

/// Reads and counts the perf.data file at `path`.
pub fn count_file(path: &Path) -> Result<RunProfile, slowlab_perf::PerfError> {
    let trace =
        slowlab_perf::read_file(path, &slowlab_perf::ReadOptions::default(), &|_, _, _| {})?;
    Ok(count_trace(&trace))
}
