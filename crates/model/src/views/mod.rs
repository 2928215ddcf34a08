//! What each of `slowlab analyze`'s views computes, as plain values: the
//! contract between `slowlab_analyze`, which computes them from a trace,
//! and `slowlab_report`, which renders them as text, JSON, SVG or the
//! interactive pages. The JSON of these types is the `--json` output of
//! each view (README.md), so their field names are part of the format.
//!
//! Types and small accessors only: no view is computed here.

pub mod blocked;
pub mod butterfly;
pub mod cpu;
pub mod diff;
pub mod faults;
pub mod procs;
pub mod report_data;
pub mod syscalls;
pub mod timeline;
pub mod waits;
