//! A GUID as ETW stores it (the first three fields little-endian), printed
//! in the usual lower-case form. No parsing of GUID strings beyond
//! [`Guid::parse`] and [`guid`] for the name tables.

use std::fmt;

/// A 128-bit GUID in its canonical field order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Guid(pub u128);

impl Guid {
    /// From the 16 bytes of a Windows `GUID` struct (`bytes_le` order).
    pub fn from_le(b: &[u8]) -> Guid {
        let mut v = [0u8; 16];
        v.copy_from_slice(&b[..16]);
        v[0..4].reverse();
        v[4..6].reverse();
        v[6..8].reverse();
        Guid(u128::from_be_bytes(v))
    }

    /// The 16 bytes of a Windows `GUID` struct (`bytes_le` order), the
    /// inverse of [`Guid::from_le`].
    pub fn to_le(self) -> [u8; 16] {
        let mut v = self.0.to_be_bytes();
        v[0..4].reverse();
        v[4..6].reverse();
        v[6..8].reverse();
        v
    }

    /// Upper-case hex without dashes, as symbol stores spell a PDB's GUID
    /// in its directory name (`name.pdb/<GUID><AGE>/name.pdb`).
    pub fn to_symbol_store_hex(self) -> String {
        format!("{:032X}", self.0)
    }

    /// From `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`; `None` when malformed.
    pub const fn parse(s: &str) -> Option<Guid> {
        let b = s.as_bytes();
        if b.len() != 36 {
            return None;
        }
        let mut v: u128 = 0;
        let mut i = 0;
        while i < 36 {
            let c = b[i];
            if !matches!(i, 8 | 13 | 18 | 23) {
                let d = match c {
                    b'0'..=b'9' => c - b'0',
                    b'a'..=b'f' => c - b'a' + 10,
                    b'A'..=b'F' => c - b'A' + 10,
                    _ => return None,
                };
                v = (v << 4) | d as u128;
            } else if c != b'-' {
                return None;
            }
            i += 1;
        }
        Some(Guid(v))
    }
}

/// A GUID written in the source, parsed when the crate is compiled: the
/// name tables hold values, so looking an event up compares integers, and a
/// malformed literal fails the build.
pub const fn guid(s: &str) -> Guid {
    match Guid::parse(s) {
        Some(g) => g,
        None => panic!("malformed GUID literal"),
    }
}

impl fmt::Display for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        write!(
            f,
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            (v >> 96) as u32,
            (v >> 80) as u16,
            (v >> 64) as u16,
            (v >> 48) as u16,
            v & 0xffff_ffff_ffff
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_the_windows_byte_order() {
        let bytes = [
            0x23, 0x0d, 0x3c, 0xe1, 0xbc, 0xcc, 0x12, 0x4e, 0x93, 0x1b, 0xd9, 0xcc, 0x2e, 0xee,
            0x27, 0xe4,
        ];
        let g = Guid::from_le(&bytes);
        assert_eq!(g.to_string(), "e13c0d23-ccbc-4e12-931b-d9cc2eee27e4");
        assert_eq!(Guid::parse("e13c0d23-ccbc-4e12-931b-d9cc2eee27e4"), Some(g));
        assert_eq!(Guid::parse("e13c0d23-ccbc-4e12-931b"), None);
        assert_eq!(g.to_le(), bytes);
        assert_eq!(g.to_symbol_store_hex(), "E13C0D23CCBC4E12931BD9CC2EEE27E4");
    }
}
