//! Writing one run of an export: every table's rows into one Parquet file
//! per table under `DIR/<table>/host=HOST/run=RUN/part-0.parquet` (Hive
//! partitions), atomically. The files are written under
//! `DIR/_staging/…` (a name no table glob matches, and which Spark and
//! Hive skip for its leading `_`), synced, then each table's partition
//! directory is renamed into place with `runs` last: a run whose `runs`
//! partition is visible is whole, and the query layer shows only such
//! runs. A failure removes what it wrote; leftovers of a killed export
//! (partitions without a `runs` partition) are removed by the next export
//! of the same run. Does not build rows (`RunExport` gathers them from the
//! table modules) and does not query.

use std::fs;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use slowlab_analyze::states::ThreadStates;
use slowlab_model::findings::Finding;
use slowlab_model::trace::Trace;

use crate::code_tables::CodeTables;
use crate::run_tables::RunTables;
use crate::schema::Table;
use crate::trace_tables::TraceTables;
use crate::FleetError;

/// Rows per row group: large enough for scans to read long runs of each
/// column (DuckDB and Spark parallelize by row group), small enough to
/// keep a writer's buffer to tens of megabytes.
pub const ROW_GROUP_ROWS: usize = 1 << 20;

/// The staging directory under an export root.
pub const STAGING_DIR: &str = "_staging";

/// Where a run goes: its `host=` and `run=` partition values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    host: String,
    run: String,
}

impl Partition {
    /// Checks that both values can name a directory and a partition (ASCII
    /// letters, digits, `.`, `_`, `-`; not starting with `.` or `_`).
    pub fn new(host: &str, run: &str) -> Result<Partition, FleetError> {
        for (what, value) in [("host", host), ("run", run)] {
            let ok = !value.is_empty()
                && value.len() <= 128
                && !value.starts_with(['.', '_'])
                && value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
            if !ok {
                return Err(FleetError::BadName {
                    what,
                    value: value.to_owned(),
                });
            }
        }
        Ok(Partition {
            host: host.to_owned(),
            run: run.to_owned(),
        })
    }

    pub fn host(&self) -> &str {
        &self.host
    }

    pub fn run(&self) -> &str {
        &self.run
    }

    /// `<table>/host=HOST/run=RUN` under `root`.
    pub fn dir(&self, root: &Path, table: Table) -> PathBuf {
        root.join(table.name())
            .join(format!("host={}", self.host))
            .join(format!("run={}", self.run))
    }
}

/// A host name usable as a partition value: `name` with every other
/// character replaced by `-` (`localhost` when nothing is left).
pub fn host_partition_name(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let cleaned = cleaned.trim_start_matches(['.', '_']);
    if cleaned.is_empty() {
        "localhost".to_owned()
    } else {
        cleaned.chars().take(128).collect()
    }
}

/// What one run wrote.
#[derive(Debug, Clone)]
pub struct WrittenRun {
    /// (table, rows, bytes of its file), in the order of `Table::ALL`.
    pub tables: Vec<(Table, usize, u64)>,
}

impl WrittenRun {
    pub fn bytes(&self) -> u64 {
        self.tables.iter().map(|t| t.2).sum()
    }

    pub fn rows(&self, table: Table) -> usize {
        self.tables.iter().find(|t| t.0 == table).map_or(0, |t| t.1)
    }
}

/// The rows of one run (one or more traces of one host), gathered trace
/// by trace so each trace can be dropped once added.
pub struct RunExport {
    code: CodeTables,
    traces: TraceTables,
    runs: RunTables,
    exported_at_us: i64,
}

impl RunExport {
    /// `exported_at_us`: microseconds since the Unix epoch (`runs.exported_at`).
    pub fn new(exported_at_us: i64) -> RunExport {
        RunExport {
            code: CodeTables::default(),
            traces: TraceTables::default(),
            runs: RunTables::default(),
            exported_at_us,
        }
    }

    /// Adds a trace (named `name` in the tables' `trace` column), the
    /// replay of its scheduler events (the waits) and the findings of its
    /// analysis.
    pub fn add_trace(
        &mut self,
        name: &str,
        trace: &Trace,
        states: &ThreadStates,
        findings: &[Finding],
    ) -> Result<(), FleetError> {
        let stack_ids = self.code.add_trace(trace);
        self.traces.add_trace(name, trace, states, &stack_ids);
        self.runs
            .add_trace(name, trace, findings, self.exported_at_us)
    }

    /// Writes the run under `root` (created if missing), atomically.
    pub fn write(self, root: &Path, part: &Partition) -> Result<WrittenRun, FleetError> {
        let (frames, stacks) = self.code.into_batches()?;
        let [samples, processes, waits] = self.traces.into_batches()?;
        let [runs, findings] = self.runs.into_batches()?;
        let batches: Vec<(Table, &RecordBatch)> = Table::ALL
            .into_iter()
            .map(|t| {
                let b = match t {
                    Table::Runs => &runs,
                    Table::Samples => &samples,
                    Table::Stacks => &stacks,
                    Table::Frames => &frames,
                    Table::Findings => &findings,
                    Table::Processes => &processes,
                    Table::Waits => &waits,
                };
                (t, b)
            })
            .collect();
        fs::create_dir_all(root).map_err(|e| FleetError::io(root, e))?;
        if part.dir(root, Table::Runs).exists() {
            return Err(FleetError::AlreadyExported {
                host: part.host.clone(),
                run: part.run.clone(),
                dir: root.to_owned(),
            });
        }
        // Leftovers of an export of this run that was killed before its
        // `runs` partition was in place: never visible, now replaced.
        for t in Table::ALL {
            let d = part.dir(root, t);
            if d.exists() {
                fs::remove_dir_all(&d).map_err(|e| FleetError::io(&d, e))?;
            }
        }
        let staging = root.join(STAGING_DIR).join(format!(
            "{}-{}-{}",
            part.host,
            part.run,
            std::process::id()
        ));
        let result = write_staged(&staging, part, &batches).and_then(|tables| {
            move_into_place(&staging, root, part)?;
            Ok(tables)
        });
        let _ = fs::remove_dir_all(&staging);
        // Only removed when no other export is staging there.
        let _ = fs::remove_dir(root.join(STAGING_DIR));
        result.map(|tables| WrittenRun { tables })
    }
}

/// Writes every table's file under `staging`.
fn write_staged(
    staging: &Path,
    part: &Partition,
    batches: &[(Table, &RecordBatch)],
) -> Result<Vec<(Table, usize, u64)>, FleetError> {
    let mut tables = Vec::new();
    for &(t, b) in batches {
        let dir = part.dir(staging, t);
        fs::create_dir_all(&dir).map_err(|e| FleetError::io(&dir, e))?;
        let file = dir.join("part-0.parquet");
        let bytes = write_parquet(&file, b)?;
        tables.push((t, b.num_rows(), bytes));
    }
    Ok(tables)
}

/// Renames each staged partition into place, `runs` last; on failure
/// removes the partitions already moved.
fn move_into_place(staging: &Path, root: &Path, part: &Partition) -> Result<(), FleetError> {
    let mut moved = Vec::new();
    for t in Table::ALL {
        let from = part.dir(staging, t);
        let to = part.dir(root, t);
        let step = (|| {
            if let Some(parent) = to.parent() {
                fs::create_dir_all(parent)?;
            }
            fs::rename(&from, &to)
        })();
        if let Err(e) = step {
            for d in &moved {
                let _ = fs::remove_dir_all(d);
            }
            return Err(FleetError::io(&to, e));
        }
        moved.push(to);
    }
    Ok(())
}

/// Writes one batch as a Parquet file (snappy, dictionary-encoded
/// strings, [`ROW_GROUP_ROWS`] rows per group), synced; returns its size.
pub fn write_parquet(path: &Path, batch: &RecordBatch) -> Result<u64, FleetError> {
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_created_by(format!("slowlab {}", env!("CARGO_PKG_VERSION")))
        .build();
    let file = fs::File::create(path).map_err(|e| FleetError::io(path, e))?;
    let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(props))?;
    writer.write(batch)?;
    let file = writer.into_inner()?;
    file.sync_all().map_err(|e| FleetError::io(path, e))?;
    let len = file.metadata().map_err(|e| FleetError::io(path, e))?.len();
    Ok(len)
}
