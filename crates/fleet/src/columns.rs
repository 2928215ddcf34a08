//! Arrow arrays from plain vectors, one helper per column type of the
//! schemas (`schema.rs`). Does not know about tables or traces.

use std::sync::Arc;

use arrow_array::{
    ArrayRef, BooleanArray, Float64Array, Int32Array, Int64Array, StringArray,
    TimestampMicrosecondArray,
};

pub fn strings(v: Vec<String>) -> ArrayRef {
    Arc::new(StringArray::from(v))
}
pub fn opt_strings(v: Vec<Option<String>>) -> ArrayRef {
    Arc::new(StringArray::from(v))
}
pub fn int32s(v: Vec<i32>) -> ArrayRef {
    Arc::new(Int32Array::from(v))
}
pub fn opt_int32s(v: Vec<Option<i32>>) -> ArrayRef {
    Arc::new(Int32Array::from(v))
}
pub fn int64s(v: Vec<i64>) -> ArrayRef {
    Arc::new(Int64Array::from(v))
}
pub fn opt_int64s(v: Vec<Option<i64>>) -> ArrayRef {
    Arc::new(Int64Array::from(v))
}
pub fn floats(v: Vec<f64>) -> ArrayRef {
    Arc::new(Float64Array::from(v))
}
pub fn floats_opt(v: Vec<Option<f64>>) -> ArrayRef {
    Arc::new(Float64Array::from(v))
}
pub fn bools(v: Vec<bool>) -> ArrayRef {
    Arc::new(BooleanArray::from(v))
}
/// Microseconds since the Unix epoch, UTC.
pub fn timestamps(v: Vec<Option<i64>>) -> ArrayRef {
    Arc::new(TimestampMicrosecondArray::from(v).with_timezone("UTC"))
}

/// A count as `INT64` (Parquet readers such as Spark have no unsigned
/// 64-bit type); counts past `i64::MAX` saturate.
pub fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
