//! Little-endian integers at a byte offset, for the readers of binary
//! formats (perf ring snapshots, eBPF capture files, ETL). std's
//! `from_le_bytes` does the decoding; this names the slicing once, in two
//! flavours:
//! - `u32_at` and its kin, for offsets the caller has already checked
//!   against the length: they panic past the end, as slice indexing does;
//! - `get_u32` and its kin, for offsets that come from the input: `None`
//!   past the end, with checked arithmetic, never a panic.
//!
//! No cursor, no big-endian, no I/O.

macro_rules! readers {
    ($($int:ident: $at:ident, $get:ident;)*) => {$(
        #[doc = concat!("The little-endian `", stringify!($int), "` at `at`; panics past the end of `b`.")]
        pub fn $at(b: &[u8], at: usize) -> $int {
            $get(b, at).unwrap_or_else(|| {
                panic!("{} at {at} is past the end of {} bytes", stringify!($int), b.len())
            })
        }

        #[doc = concat!("The little-endian `", stringify!($int), "` at `at`, or `None` past the end of `b`.")]
        pub fn $get(b: &[u8], at: usize) -> Option<$int> {
            const N: usize = std::mem::size_of::<$int>();
            let bytes = b.get(at..at.checked_add(N)?)?;
            Some($int::from_le_bytes(bytes.try_into().ok()?))
        }
    )*};
}

readers! {
    u16: u16_at, get_u16;
    u32: u32_at, get_u32;
    u64: u64_at, get_u64;
    i64: i64_at, get_i64;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_little_endian_at_an_offset() {
        let b = [0xff, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08];
        assert_eq!(u16_at(&b, 1), 0x0201);
        assert_eq!(u32_at(&b, 1), 0x0403_0201);
        assert_eq!(u64_at(&b, 1), 0x0807_0605_0403_0201);
        assert_eq!(get_i64(&[0xff; 8], 0), Some(-1));
    }

    #[test]
    fn checked_reads_past_the_end_are_none() {
        let b = [0u8; 8];
        assert_eq!(get_u64(&b, 0), Some(0));
        assert_eq!(get_u64(&b, 1), None);
        assert_eq!(get_u32(&b, usize::MAX - 1), None);
        assert_eq!(get_u16(&b, 7), None);
    }

    #[test]
    #[should_panic(expected = "u32 at 6 is past the end of 8 bytes")]
    fn unchecked_reads_past_the_end_panic_like_indexing() {
        u32_at(&[0u8; 8], 6);
    }
}
