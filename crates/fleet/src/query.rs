//! The in-process query layer (`slowlab fleet query`): DuckDB, linked as
//! the shared libduckdb that scripts/setup.sh installs, with one view per
//! table over `read_parquet('DIR/<table>/**/*.parquet',
//! hive_partitioning = true)`, `host` and `run` as text columns from the
//! directory names. Only whole runs are shown: a table's rows count when
//! their `host`/`run` has a `runs` partition (moved into place last by
//! the writer). Results come back as Arrow batches, printed as a table or
//! turned into JSON rows. Does not write exports.

use std::path::Path;

use duckdb::arrow::array::{Array, ArrayRef, AsArray};
use duckdb::arrow::compute::cast;
use duckdb::arrow::datatypes::{DataType, Float64Type, Int64Type};
use duckdb::arrow::record_batch::RecordBatch;
use duckdb::arrow::util::display::{ArrayFormatter, FormatOptions};
use duckdb::Connection;
use serde_json::{Map, Value};

use crate::named::quote;
use crate::schema::Table;
use crate::FleetError;

/// An export directory opened for queries.
pub struct Fleet {
    conn: Connection,
}

/// A query's answer: its column names and rows.
#[derive(Debug)]
pub struct Answer {
    pub columns: Vec<String>,
    pub batches: Vec<RecordBatch>,
}

impl Fleet {
    /// Opens `dir`: an error when it is missing or holds no run.
    pub fn open(dir: &Path) -> Result<Fleet, FleetError> {
        if !dir.is_dir() {
            return Err(FleetError::NoDir(dir.to_owned()));
        }
        if !has_parquet(&dir.join(Table::Runs.name()), 3) {
            return Err(FleetError::EmptyFleet(dir.to_owned()));
        }
        let conn = Connection::open_in_memory().map_err(query_error)?;
        // `runs` first: the other views read it.
        let runs_first = std::iter::once(Table::Runs)
            .chain(Table::ALL.into_iter().filter(|&t| t != Table::Runs));
        for t in runs_first {
            let glob = dir.join(t.name()).join("**").join("*.parquet");
            let scan = format!(
                "read_parquet({}, hive_partitioning = true, hive_types_autocast = false, union_by_name = true)",
                quote(&glob.to_string_lossy())
            );
            let sql = if t == Table::Runs {
                format!("CREATE VIEW runs AS SELECT * FROM {scan}")
            } else {
                format!(
                    "CREATE VIEW {name} AS SELECT * FROM {scan} \
                     WHERE host || '/' || run IN (SELECT host || '/' || run FROM runs)",
                    name = t.name()
                )
            };
            conn.execute_batch(&sql).map_err(query_error)?;
        }
        Ok(Fleet { conn })
    }

    /// Runs one SQL statement.
    pub fn query(&self, sql: &str) -> Result<Answer, FleetError> {
        let mut stmt = self.conn.prepare(sql).map_err(query_error)?;
        let batches: Vec<RecordBatch> = stmt.query_arrow([]).map_err(query_error)?.collect();
        let columns = stmt
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        Ok(Answer { columns, batches })
    }
}

impl Answer {
    /// The rows as a text table (DuckDB's Arrow pretty printer).
    pub fn table_text(&self) -> Result<String, FleetError> {
        if self.batches.iter().all(|b| b.num_rows() == 0) {
            return Ok(format!("{}\n(no rows)\n", self.columns.join(" | ")));
        }
        let text = duckdb::arrow::util::pretty::pretty_format_batches(&self.batches)
            .map_err(|e| FleetError::Query(e.to_string()))?;
        Ok(format!("{text}\n"))
    }

    /// The rows as JSON objects, numbers as numbers (integers when exact),
    /// NULL as null, everything else as its text.
    pub fn json_rows(&self) -> Result<Vec<Map<String, Value>>, FleetError> {
        let mut rows = Vec::new();
        for batch in &self.batches {
            let cols: Vec<Vec<Value>> = batch
                .columns()
                .iter()
                .map(json_values)
                .collect::<Result<_, _>>()?;
            let mut batch_rows: Vec<Map<String, Value>> =
                (0..batch.num_rows()).map(|_| Map::new()).collect();
            for (name, values) in self.columns.iter().zip(cols) {
                for (row, value) in batch_rows.iter_mut().zip(values) {
                    row.insert(name.clone(), value);
                }
            }
            rows.extend(batch_rows);
        }
        Ok(rows)
    }
}

/// One column as JSON values.
fn json_values(col: &ArrayRef) -> Result<Vec<Value>, FleetError> {
    let err = |e: duckdb::arrow::error::ArrowError| FleetError::Query(e.to_string());
    let integer = matches!(
        col.data_type(),
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
    ) || matches!(col.data_type(), DataType::Decimal128(_, 0));
    let float = matches!(
        col.data_type(),
        DataType::Float16 | DataType::Float32 | DataType::Float64 | DataType::Decimal128(..)
    );
    let nulls = |i: usize| col.is_null(i);
    if integer {
        let ints = cast(col, &DataType::Int64).map_err(err)?;
        let ints = ints.as_primitive::<Int64Type>();
        return Ok((0..col.len())
            .map(|i| {
                if nulls(i) {
                    Value::Null
                } else {
                    ints.value(i).into()
                }
            })
            .collect());
    }
    if float {
        let fl = cast(col, &DataType::Float64).map_err(err)?;
        let fl = fl.as_primitive::<Float64Type>();
        return Ok((0..col.len())
            .map(|i| {
                if nulls(i) {
                    Value::Null
                } else {
                    serde_json::Number::from_f64(fl.value(i)).map_or(Value::Null, Value::Number)
                }
            })
            .collect());
    }
    if let DataType::Boolean = col.data_type() {
        let b = col.as_boolean();
        return Ok((0..col.len())
            .map(|i| {
                if nulls(i) {
                    Value::Null
                } else {
                    b.value(i).into()
                }
            })
            .collect());
    }
    let fmt = ArrayFormatter::try_new(col.as_ref(), &FormatOptions::default()).map_err(err)?;
    Ok((0..col.len())
        .map(|i| {
            if nulls(i) {
                Value::Null
            } else {
                Value::String(fmt.value(i).to_string())
            }
        })
        .collect())
}

/// A DuckDB error in one line (its first line: the message, without the
/// caret drawing under the SQL).
fn query_error(e: duckdb::Error) -> FleetError {
    let text = e.to_string();
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("unknown DuckDB error");
    FleetError::Query(line.to_owned())
}

/// Whether `dir` holds a `.parquet` file within `depth` levels.
fn has_parquet(dir: &Path, depth: u32) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        let p = e.path();
        if p.is_dir() {
            depth > 0 && has_parquet(&p, depth - 1)
        } else {
            p.extension().is_some_and(|x| x == "parquet")
        }
    })
}
