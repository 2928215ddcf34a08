//! The analysis views of a slowlab trace, as pure functions over
//! [`slowlab_model::trace::Trace`]: the sampled CPU tree and summary
//! ([`cpu`]), callers and callees of one function ([`butterfly`]), the
//! data of the exports to folded stacks and pprof ([`export`]), the waits,
//! faults, processes, syscalls and timeline views, the one replay of thread
//! states ([`states`]), why a thread waited ([`classify`]), the critical
//! path ([`critical_path`]), two runs' critical paths compared
//! ([`path_diff`]) and the detectors ([`detect`]); code without symbols
//! named by its binary everywhere ([`unnamed`]); and the
//! [`analysis::Analysis`] that computes each derived product of a trace once
//! for every consumer of one command.
//!
//! Nothing here prints or reads files; every view returns a value that is
//! `serde`-serializable (the JSON the CLI writes) and that the binary renders.
//! Views share one notion of which samples count: [`select::Selection`].

pub mod analysis;
pub mod buckets;
pub mod butterfly;
pub mod classify;
pub mod cpu;
pub mod critical_path;
pub mod detect;
pub mod diff;
pub mod diff_tree;
pub mod export;
pub mod faults;
pub mod function_stacks;
pub mod locks;
pub mod path_diff;
pub mod procs;
pub mod report_data;
pub mod resources;
pub mod select;
pub mod states;
pub mod syscalls;
pub mod timeline;
pub mod unnamed;
pub mod wait_calls;
pub mod waits;

/// Why a view could not be computed.
#[derive(Debug, thiserror::Error)]
pub enum AnalyzeError {
    #[error("no function matches {0:?}; `slowlab analyze FILE --by function` lists the names")]
    NoSuchFunction(String),
    #[error("{pattern:?} matches {count} functions ({examples}); give the full name")]
    AmbiguousFunction {
        pattern: String,
        count: usize,
        examples: String,
    },
    #[error("bad filter {0:?}: use process=NAME, pid=N or tid=N")]
    BadFilter(String),
    #[error("bad grouping key {0:?}: use process, thread, module or function")]
    BadKey(String),
    #[error("--from {from} is not before --to {to}: give a range that starts before it ends")]
    EmptyRange { from: f64, to: f64 },
}

#[cfg(test)]
pub(crate) mod testutil;
