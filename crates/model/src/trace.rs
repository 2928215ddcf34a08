//! The recorded-trace model: processes, threads, samples and scheduler events
//! as read from a perf.data file. Filled in by the `perf` crate; read by
//! `analyze`. No parsing and no analysis lives here.
