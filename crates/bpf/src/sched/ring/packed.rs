//! A ring window's chunks kept compressed in memory (zstd at level 1): a minute of
//! records under process churn took ~300 MB as they came, and their fixed-size records
//! (a time, thread ids, stack ids) pack about five times (4.9 on a churn recording's
//! 64 KiB chunks, at ~440 MB/s: about 1% of a CPU at 5 MB of records a second). A chunk
//! is unpacked only when a snapshot writes it. It does not know what the bytes are.

use std::io;

use zstd_safe::{CCtx, DCtx};

/// zstd's fastest level with its usual ratio (its negative levels pack ~4.2 times).
const LEVEL: i32 = 1;

/// Bytes as kept: packed, or as they came when packing failed (it does not, given room).
pub(super) struct Packed {
    bytes: Box<[u8]>,
    raw_len: usize,
    packed: bool,
}

impl Packed {
    /// The bytes as they came.
    pub(super) fn raw_len(&self) -> usize {
        self.raw_len
    }

    /// The bytes held in memory.
    #[cfg(test)]
    pub(super) fn kept_len(&self) -> usize {
        self.bytes.len()
    }
}

/// Packs chunks, with one compression context and buffer for all of them.
pub(super) struct Packer {
    cctx: CCtx<'static>,
    scratch: Vec<u8>,
}

impl Packer {
    pub(super) fn new() -> Packer {
        Packer {
            cctx: CCtx::create(),
            scratch: Vec::new(),
        }
    }

    pub(super) fn pack(&mut self, raw: &[u8]) -> Packed {
        self.scratch.clear();
        self.scratch.reserve(zstd_safe::compress_bound(raw.len()));
        match self.cctx.compress(&mut self.scratch, raw, LEVEL) {
            Ok(_) => Packed {
                bytes: self.scratch.as_slice().into(),
                raw_len: raw.len(),
                packed: true,
            },
            Err(_) => Packed {
                bytes: raw.into(),
                raw_len: raw.len(),
                packed: false,
            },
        }
    }
}

/// Unpacks chunks for a snapshot, with one decompression context and buffer.
pub(super) struct Unpacker {
    dctx: DCtx<'static>,
    out: Vec<u8>,
}

impl Unpacker {
    pub(super) fn new() -> Unpacker {
        Unpacker {
            dctx: DCtx::create(),
            out: Vec::new(),
        }
    }

    /// The bytes of `p` as they came.
    pub(super) fn unpack<'a>(&'a mut self, p: &'a Packed) -> io::Result<&'a [u8]> {
        if !p.packed {
            return Ok(&p.bytes);
        }
        self.out.clear();
        self.out.reserve(p.raw_len);
        let n = self
            .dctx
            .decompress(&mut self.out, &p.bytes)
            .map_err(|code| {
                io::Error::other(format!(
                    "a chunk of the window cannot be unpacked: {}",
                    zstd_safe::get_error_name(code)
                ))
            })?;
        if n != p.raw_len {
            return Err(io::Error::other(format!(
                "a chunk of the window unpacked to {n} bytes, not {}",
                p.raw_len
            )));
        }
        Ok(&self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_pack_smaller_and_unpack_as_they_came() {
        // 2,048 records of 32 bytes: times 100 us apart, a few threads and stacks.
        let raw: Vec<u8> = (0u64..2048)
            .flat_map(|i| {
                let mut r = Vec::with_capacity(32);
                r.extend((1_000_000_000 + i * 100_000).to_le_bytes());
                r.extend((100 + (i % 7) as u32).to_le_bytes());
                r.extend([0u8; 12]);
                r.extend((i as u32 % 50).to_le_bytes());
                r.extend((-1i32).to_le_bytes());
                r
            })
            .collect();
        let packed = Packer::new().pack(&raw);
        assert_eq!(packed.raw_len(), raw.len());
        assert!(
            packed.kept_len() * 3 < raw.len(),
            "{} of {}",
            packed.kept_len(),
            raw.len()
        );
        let mut unpacker = Unpacker::new();
        assert_eq!(unpacker.unpack(&packed).unwrap(), raw.as_slice());
        // Bytes kept as they came (packing failed) come back as they are.
        let unpacked = Packed {
            bytes: raw.as_slice().into(),
            raw_len: raw.len(),
            packed: false,
        };
        assert_eq!(unpacker.unpack(&unpacked).unwrap(), raw.as_slice());
        // Damaged bytes are an error, not a panic or garbage.
        let mut damaged = Packer::new().pack(&raw);
        let n = damaged.bytes.len();
        damaged.bytes[n / 2..].fill(0xa5);
        assert!(unpacker.unpack(&damaged).is_err());
    }
}
