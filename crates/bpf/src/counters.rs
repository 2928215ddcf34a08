//! Reading the programs' per-CPU counters (a `BPF_MAP_TYPE_PERCPU_ARRAY` of u64s indexed by
//! counter): the path capture's drops, the scheduler recorder's drops, lost and reused
//! stacks. It reads; it does not reset or name the counters.

use libbpf_rs::{MapCore, MapFlags};

/// The sum over every CPU of counter `which` (0 when the map cannot be read).
pub(crate) fn read_counter(counters: &dyn MapCore, which: u32) -> u64 {
    match counters.lookup_percpu(&which.to_ne_bytes(), MapFlags::ANY) {
        Ok(Some(per_cpu)) => per_cpu
            .iter()
            .filter_map(|v| v.get(..8))
            .map(|b| {
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                u64::from_ne_bytes(a)
            })
            .sum(),
        _ => 0,
    }
}
