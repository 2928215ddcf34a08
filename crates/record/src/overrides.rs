//! Settings the tests (and a curious user) can change through the environment, each read
//! where it is used: `SLOWLAB_PERF_GROWTH_LIMIT_BYTES`, `SLOWLAB_BPF_RING_MAX_BYTES`,
//! `SLOWLAB_PATH_RING_MAX_BYTES`, `SLOWLAB_SNAPSHOT_NEED_BYTES`, `SLOWLAB_STOP_GRACE_SECS`.
//! A value that does not parse is ignored: the default stands. Nothing here knows what
//! the values mean.

use std::str::FromStr;

/// The value of the environment variable `name`, if set and parseable as `T`.
pub(crate) fn from_env<T: FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}
