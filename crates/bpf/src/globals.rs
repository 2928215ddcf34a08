//! The programs' global variables as the recorders read and write them: the skeletons map
//! `sched.bpf.c`'s and `paths.bpf.c`'s `.bss` and `.data` into this process, and the
//! programs change them on any CPU at any time, so every access is one volatile load or
//! store, here and nowhere else. It does not know which globals there are or what they
//! mean: its callers do.

/// The value of a global the programs may change at any time.
pub(crate) fn load<T: Copy>(global: &T) -> T {
    // SAFETY: a reference is valid and aligned for a read. Volatile keeps the compiler from
    // caching or eliding a read of memory the programs change behind its back; the
    // globals are u32s and bools, which a CPU reads and writes whole (never torn).
    unsafe { std::ptr::read_volatile(global) }
}

/// Sets a global the programs read at any time.
pub(crate) fn store<T: Copy>(global: &mut T, value: T) {
    // SAFETY: as in `load`, for a write.
    unsafe { std::ptr::write_volatile(global, value) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_value_is_the_one_loaded() {
        let mut global = 7u32;
        let old = load(&global);
        store(&mut global, old.wrapping_add(u32::MAX));
        assert_eq!(load(&global), 6);
    }
}
