//! slowlab's fleet tables: a trace's samples, stacks, findings, processes
//! and waits written as Hive-partitioned Parquet files that DuckDB, Spark,
//! Trino, BigQuery external tables and DataFusion read, and (with the
//! `duckdb` feature) DuckDB queries over them in-process. Does not read
//! trace files (the binary loads them) and does not analyze beyond the
//! aggregation of the tables (findings come from `slowlab_analyze`).
//!
//! # Layout
//!
//! `DIR/<table>/host=HOST/run=RUN/part-0.parquet`, one file per table per
//! run (an export of one or more traces from one host). `host` and `run`
//! are partition columns (text), in the directory names only. A run is
//! written atomically: see [`writer`].
//!
//! # Tables
//!
//! Types: `INT32`, `INT64`, `DOUBLE`, `BOOLEAN`, `STRING` (UTF-8) and
//! `TIMESTAMP` (microseconds, UTC); no unsigned 64-bit columns. `?` marks
//! a nullable column. `trace` is the trace file as given to the export.
//!
//! - `runs`: one row per exported trace. `trace`, `trace_host?` (the host
//!   name recorded in the trace), `start_time?` (TIMESTAMP, when the trace
//!   has perf's clock data), `duration_s`, `kernel?`, `arch?`, `command`
//!   (the recorded command line), `sample_event?`, `sample_freq?` (INT64),
//!   `nr_cpus?` (INT32), `cpu_samples` (INT64), `lost_events` (INT64),
//!   `findings` (INT32), `exported_at` (TIMESTAMP), `slowlab_version`.
//! - `samples`: aggregated, one row per (`trace`, `pid`, `tid`, `comm`,
//!   `stack_id?`, `kind`): `weight` (INT64: samples for `cpu`, nanoseconds
//!   blocked for `offcpu`, faults for `fault` and `major_fault`) and
//!   `events` (INT64: samples, waits or faults). `cpu` counts every CPU
//!   sample as `slowlab analyze` does; `offcpu` is blocked time ended by a
//!   wake-up, at the stack where the thread blocked; `stack_id` is null for
//!   a sample without a stack.
//! - `stacks`: `stack_id` (INT64), `parent_id?` (the caller's stack; null
//!   for an outermost frame), `frame_id` (INT64), `depth` (INT32, 0 for an
//!   outermost frame). A stack is its innermost node; walk `parent_id` out.
//! - `frames`: `frame_id` (INT64), `module`, `build_id?`, `function`,
//!   `file?`, `line?` (INT32; null until slowlab reads line tables),
//!   `kernel` (BOOLEAN). One frame per function of a module build.
//! - `findings`: the finding schema of `findings.json` flattened: `trace`,
//!   `id`, `title`, `severity` (`low`/`medium`/`high`), `severity_rank`
//!   (INT32 1–3), `cost_s`, `cost_share`, `culprit_pid?` (INT32),
//!   `culprit_comm?`, `culprit_cgroup?`, `evidence` (JSON text),
//!   `stack` (JSON text: an array, innermost frame first), `fix`.
//! - `processes`: one row per process lifetime: `trace`, `pid`, `ppid?`,
//!   `comm`, `start_time?`, `exec_time?`, `end_time?` (TIMESTAMP, when the
//!   event was in the trace and the trace has clock data), `start_s?`,
//!   `end_s?` (seconds from the trace's start), `threads` (INT32),
//!   `cpu_samples` (INT64).
//! - `waits`: one row per (waiter thread, waker thread, kind): `trace`,
//!   `pid`, `tid`, `comm`, `waker_pid?`, `waker_tid?`, `waker_comm?` (null
//!   when an interrupt or the idle task woke it), `kind` (`lock`, `io`,
//!   `sleep`, `ipc`, `fault`, `other`: the critical path's classes),
//!   `waits`, `total_ns`, `max_ns` (INT64).
//!
//! # Ids
//!
//! `frame_id` and `stack_id` are content hashes, XXH3-64 (seed 0) read as
//! a signed 64-bit integer, of the frame's module name, build id, function
//! name and kernel flag, and of the caller's stack id and the frame id:
//! the same on every host running the same build, so stacks join across
//! the fleet ([`ids`]). Tables of different runs repeat the ids they
//! share: select `DISTINCT` rows of `stacks` and `frames` before joining.

pub mod code_tables;
pub mod columns;
pub mod ids;
pub mod named;
#[cfg(feature = "duckdb")]
pub mod query;
pub mod run_tables;
pub mod schema;
pub mod trace_tables;
pub mod writer;

use std::path::{Path, PathBuf};

pub use schema::Table;
pub use writer::{host_partition_name, Partition, RunExport, WrittenRun};

/// Why an export or a query failed; each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("cannot build the Parquet tables: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),
    #[error("cannot write Parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
    #[error("cannot encode a finding as JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the {what} `{value}` cannot name a partition: use ASCII letters, digits, '.', '_' and '-' (not first)")]
    BadName { what: &'static str, value: String },
    #[error("run {run} of host {host} is already in {}: export with another --run", dir.display())]
    AlreadyExported {
        host: String,
        run: String,
        dir: PathBuf,
    },
    #[error("{} is not a directory: give the --parquet DIR of an export", .0.display())]
    NoDir(PathBuf),
    #[error("{} holds no slowlab export (no {}/runs/…/*.parquet): write one with `slowlab export TRACE --parquet {}`", .0.display(), .0.display(), .0.display())]
    EmptyFleet(PathBuf),
    #[error("query failed: {0}")]
    Query(String),
}

impl FleetError {
    pub fn io(path: &Path, source: std::io::Error) -> FleetError {
        FleetError::Io {
            path: path.to_owned(),
            source,
        }
    }
}

/// Microseconds since the Unix epoch now.
pub fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// The default run id of an export at `us` (µs since the epoch), in UTC:
/// `20261123T202541.123Z` (not a number, so no engine guesses a numeric
/// partition type, and sorting by it sorts by time).
pub fn default_run_id(us: i64) -> String {
    chrono::DateTime::from_timestamp_micros(us)
        .unwrap_or_default()
        .format("%Y%m%dT%H%M%S%.3fZ")
        .to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn run_ids_are_utc_dates() {
        assert_eq!(super::default_run_id(0), "19700101T000000.000Z");
        // 2026-11-23 20:25:41.123 UTC
        assert_eq!(
            super::default_run_id(1_795_465_541_123_000),
            "20261123T202541.123Z"
        );
        assert_eq!(
            super::default_run_id(951_782_400_000_000),
            "20000229T000000.000Z"
        );
    }
}
