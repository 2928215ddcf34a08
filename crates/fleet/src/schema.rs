//! The Arrow schemas of the fleet tables (documented column by column in
//! the crate doc and in docs/fleet.md). Only types every engine reads:
//! `INT32`, `INT64`, `DOUBLE`, `BOOLEAN`, UTF-8 strings and timestamps in
//! microseconds (UTC); no unsigned 64-bit columns. The partition columns
//! `host` and `run` are in the directory names, not in the files. Does not
//! build rows or write files.

use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};

/// One table of an export: its directory under the export root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    Runs,
    Samples,
    Stacks,
    Frames,
    Findings,
    Processes,
    Waits,
}

impl Table {
    /// Every table, `runs` last: it is moved into place last, so a run
    /// whose `runs` row is visible has all its other tables in place.
    pub const ALL: [Table; 7] = [
        Table::Samples,
        Table::Stacks,
        Table::Frames,
        Table::Findings,
        Table::Processes,
        Table::Waits,
        Table::Runs,
    ];

    /// The table's name: its directory and the view's name in queries.
    pub fn name(self) -> &'static str {
        match self {
            Table::Runs => "runs",
            Table::Samples => "samples",
            Table::Stacks => "stacks",
            Table::Frames => "frames",
            Table::Findings => "findings",
            Table::Processes => "processes",
            Table::Waits => "waits",
        }
    }

    /// The columns of the table's files.
    pub fn schema(self) -> SchemaRef {
        let fields = match self {
            Table::Runs => vec![
                text("trace"),
                opt_text("trace_host"),
                timestamp("start_time"),
                float("duration_s"),
                opt_text("kernel"),
                opt_text("arch"),
                text("command"),
                opt_text("sample_event"),
                opt_int64("sample_freq"),
                opt_int32("nr_cpus"),
                int64("cpu_samples"),
                int64("lost_events"),
                int32("findings"),
                Field::new("exported_at", timestamp_type(), false),
                text("slowlab_version"),
            ],
            Table::Samples => vec![
                text("trace"),
                int32("pid"),
                int32("tid"),
                text("comm"),
                opt_int64("stack_id"),
                text("kind"),
                int64("weight"),
                int64("events"),
            ],
            Table::Stacks => vec![
                int64("stack_id"),
                opt_int64("parent_id"),
                int64("frame_id"),
                int32("depth"),
            ],
            Table::Frames => vec![
                int64("frame_id"),
                text("module"),
                opt_text("build_id"),
                text("function"),
                opt_text("file"),
                opt_int32("line"),
                Field::new("kernel", DataType::Boolean, false),
            ],
            Table::Findings => vec![
                text("trace"),
                text("id"),
                text("title"),
                text("severity"),
                int32("severity_rank"),
                float("cost_s"),
                float("cost_share"),
                opt_int32("culprit_pid"),
                opt_text("culprit_comm"),
                opt_text("culprit_cgroup"),
                text("evidence"),
                text("stack"),
                text("fix"),
            ],
            Table::Processes => vec![
                text("trace"),
                int32("pid"),
                opt_int32("ppid"),
                text("comm"),
                timestamp("start_time"),
                timestamp("exec_time"),
                timestamp("end_time"),
                opt_float("start_s"),
                opt_float("end_s"),
                int32("threads"),
                int64("cpu_samples"),
            ],
            Table::Waits => vec![
                text("trace"),
                int32("pid"),
                int32("tid"),
                text("comm"),
                opt_int32("waker_pid"),
                opt_int32("waker_tid"),
                opt_text("waker_comm"),
                text("kind"),
                int64("waits"),
                int64("total_ns"),
                int64("max_ns"),
            ],
        };
        Arc::new(Schema::new(fields))
    }
}

/// Microseconds since the Unix epoch, UTC.
pub fn timestamp_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

fn text(name: &str) -> Field {
    Field::new(name, DataType::Utf8, false)
}
fn opt_text(name: &str) -> Field {
    Field::new(name, DataType::Utf8, true)
}
fn int32(name: &str) -> Field {
    Field::new(name, DataType::Int32, false)
}
fn opt_int32(name: &str) -> Field {
    Field::new(name, DataType::Int32, true)
}
fn int64(name: &str) -> Field {
    Field::new(name, DataType::Int64, false)
}
fn opt_int64(name: &str) -> Field {
    Field::new(name, DataType::Int64, true)
}
fn float(name: &str) -> Field {
    Field::new(name, DataType::Float64, false)
}
fn opt_float(name: &str) -> Field {
    Field::new(name, DataType::Float64, true)
}
fn timestamp(name: &str) -> Field {
    Field::new(name, timestamp_type(), true)
}
