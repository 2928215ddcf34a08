//! Content-hash ids of frames and stacks, the same on every host that ran
//! the same code, so stacks join across a fleet's exports.
//!
//! The hash is XXH3-64 with seed 0 (the `twox-hash` crate; the algorithm
//! is specified at <https://github.com/Cyan4973/xxHash>), its 64 bits
//! stored as a signed `INT64` (Parquet engines such as Spark read no
//! unsigned 64-bit columns). Frame ids hash the frame's text fields; stack
//! ids hash the caller's stack id and the frame id. Nothing that differs
//! between hosts running the same binary (addresses under ASLR or KASLR,
//! table indices) goes into an id. Does not read traces or write files.

use twox_hash::XxHash3_64;

/// Separates fields in the hashed bytes (a byte no name contains).
const FIELD_END: u8 = 0xff;

/// The id of a frame: XXH3-64 of `module ␟ build_id ␟ function ␟ kernel`
/// (each field followed by the byte 0xFF; `kernel` as `k` or `u`).
pub fn frame_id(module: &str, build_id: Option<&str>, function: &str, kernel: bool) -> i64 {
    let mut bytes = Vec::with_capacity(module.len() + function.len() + 48);
    for field in [module, build_id.unwrap_or(""), function] {
        bytes.extend_from_slice(field.as_bytes());
        bytes.push(FIELD_END);
    }
    bytes.push(if kernel { b'k' } else { b'u' });
    XxHash3_64::oneshot(&bytes) as i64
}

/// The id of a stack node: XXH3-64 of the caller's stack id (8 bytes,
/// little-endian; nothing for an outermost frame) and the frame id (8
/// bytes, little-endian), behind a one-byte tag (`r` root, `c` called).
pub fn stack_id(parent: Option<i64>, frame: i64) -> i64 {
    let mut bytes = [0u8; 17];
    let len = match parent {
        Some(p) => {
            bytes[0] = b'c';
            bytes[1..9].copy_from_slice(&p.to_le_bytes());
            bytes[9..17].copy_from_slice(&frame.to_le_bytes());
            17
        }
        None => {
            bytes[0] = b'r';
            bytes[1..9].copy_from_slice(&frame.to_le_bytes());
            9
        }
    };
    XxHash3_64::oneshot(&bytes[..len]) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_depend_on_every_field_and_on_nothing_else() {
        let a = frame_id("libc.so.6", Some("ab12"), "memcpy", false);
        assert_eq!(a, frame_id("libc.so.6", Some("ab12"), "memcpy", false));
        assert_ne!(a, frame_id("libc.so.6", Some("ab13"), "memcpy", false));
        assert_ne!(a, frame_id("libc.so.6", None, "memcpy", false));
        assert_ne!(a, frame_id("libc.so.6", Some("ab12"), "memmove", false));
        assert_ne!(a, frame_id("libc.so.6", Some("ab12"), "memcpy", true));
        // Field boundaries count: "ab" + "c" is not "a" + "bc".
        assert_ne!(
            frame_id("ab", None, "c", false),
            frame_id("a", None, "bc", false)
        );
        let root = stack_id(None, a);
        assert_eq!(root, stack_id(None, a));
        assert_ne!(stack_id(Some(root), a), root);
        assert_ne!(stack_id(Some(1), 2), stack_id(Some(2), 1));
    }

    #[test]
    fn the_hash_is_xxh3_64_with_seed_0() {
        // XXH3-64 of the empty input, from the reference implementation.
        assert_eq!(XxHash3_64::oneshot(b""), 0x2d06_8005_38d3_94c2);
    }
}
