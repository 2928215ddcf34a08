//! Decompression of ETW's compressed buffers: the "Plain LZ77" variant of
//! Microsoft's XPRESS format, as specified in [MS-XCA] section 2.3/2.4.
//!
//! Written here rather than taken from a crate because it is forty lines,
//! and every read and back-reference must be checked against corrupt input
//! (this runs on files from strangers and under the fuzzer): it never
//! panics, and never writes more than the caller's limit. It does not do
//! the Huffman variant (ETW does not use it).

/// Why a compressed buffer could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Lz77Error {
    #[error("a back-reference points {offset} bytes back but only {written} bytes were written")]
    BadOffset { offset: usize, written: usize },
    #[error("a match length runs past the end of the compressed data")]
    Truncated,
    #[error("a match length is below its minimum")]
    BadLength,
}

/// Expands `input` into a new vector of at most `max_out` bytes. Output past
/// `max_out` is dropped (a corrupt buffer cannot make it grow). The format
/// has no end marker: input that stops between two items (or inside a
/// flag word or a match's first two bytes) is expanded up to there, and
/// input that stops inside a match's longer length is
/// [`Lz77Error::Truncated`].
pub fn decompress(input: &[u8], max_out: usize) -> Result<Vec<u8>, Lz77Error> {
    let mut out: Vec<u8> = Vec::with_capacity(max_out.min(input.len().saturating_mul(8)));
    let mut pos = 0usize;
    let mut flags = 0u32;
    let mut flag_count = 0u32;
    // Position of the byte whose high nibble holds the next shared length.
    let mut half_byte: Option<usize> = None;
    let read_u16 = |pos: usize| -> Option<usize> {
        Some(u16::from_le_bytes(input.get(pos..pos + 2)?.try_into().ok()?) as usize)
    };
    while out.len() < max_out {
        if flag_count == 0 {
            let Some(word) = input.get(pos..pos + 4) else {
                break;
            };
            flags = u32::from_le_bytes(word.try_into().unwrap_or_default());
            pos += 4;
            flag_count = 32;
        }
        flag_count -= 1;
        if flags & (1 << flag_count) == 0 {
            let Some(&b) = input.get(pos) else { break };
            out.push(b);
            pos += 1;
            continue;
        }
        let Some(match_bytes) = read_u16(pos) else {
            break; // the end of the stream: a flag bit set with no match behind it
        };
        pos += 2;
        let mut length = match_bytes % 8;
        let offset = match_bytes / 8 + 1;
        if length == 7 {
            match half_byte.take() {
                None => {
                    length = *input.get(pos).ok_or(Lz77Error::Truncated)? as usize % 16;
                    half_byte = Some(pos);
                    pos += 1;
                }
                Some(at) => {
                    length = *input.get(at).ok_or(Lz77Error::Truncated)? as usize / 16;
                }
            }
            if length == 15 {
                length = *input.get(pos).ok_or(Lz77Error::Truncated)? as usize;
                pos += 1;
                if length == 255 {
                    length = read_u16(pos).ok_or(Lz77Error::Truncated)?;
                    pos += 2;
                    if length == 0 {
                        let word = input.get(pos..pos + 4).ok_or(Lz77Error::Truncated)?;
                        length = u32::from_le_bytes(word.try_into().unwrap_or_default()) as usize;
                        pos += 4;
                    }
                    length = length.checked_sub(15 + 7).ok_or(Lz77Error::BadLength)?;
                }
                length += 15;
            }
            length += 7;
        }
        length += 3;
        if offset > out.len() {
            return Err(Lz77Error::BadOffset {
                offset,
                written: out.len(),
            });
        }
        let length = length.min(max_out - out.len());
        // Byte by byte: a match may overlap the bytes it produces.
        let start = out.len() - offset;
        for i in 0..length {
            let b = out[start + i];
            out.push(b);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_then_an_overlapping_match() {
        // Flags: bit 31..29 literals 'a','b','c'; bit 28 a match of length 3+4=7? No:
        // length field 4 -> 4 + 3 = 7 bytes, offset 3 ("abc" repeated).
        let flags: u32 = 0b0001 << 28;
        let mut input = flags.to_le_bytes().to_vec();
        input.extend_from_slice(b"abc");
        let match_bytes: u16 = ((3 - 1) << 3) | 4;
        input.extend_from_slice(&match_bytes.to_le_bytes());
        let out = decompress(&input, 100).unwrap();
        assert_eq!(out, b"abcabcabca");
    }

    #[test]
    fn a_reference_before_the_start_is_an_error() {
        let flags: u32 = 1 << 31;
        let mut input = flags.to_le_bytes().to_vec();
        input.extend_from_slice(&((5u16 << 3) | 1).to_le_bytes());
        assert!(matches!(
            decompress(&input, 100),
            Err(Lz77Error::BadOffset { .. })
        ));
    }

    #[test]
    fn output_stops_at_the_limit() {
        let flags: u32 = 0b01 << 30;
        let mut input = flags.to_le_bytes().to_vec();
        input.push(b'x');
        // length 7 -> nibble 15 -> byte 200: 200 + 15 + 7 + 3 = 225 bytes.
        input.extend_from_slice(&7u16.to_le_bytes());
        input.push(0x0f);
        input.push(200);
        let out = decompress(&input, 50).unwrap();
        assert_eq!(out.len(), 50);
        assert!(out.iter().all(|&b| b == b'x'));
        let full = decompress(&input, 1000).unwrap();
        assert_eq!(full.len(), 1 + 225);
    }

    #[test]
    fn truncated_input_never_panics() {
        // Literals "abc", a short match (7 bytes), a match whose length
        // takes every extra field (nibble 15, byte 255, u16 0, then a u32:
        // 300 + 3 bytes), a literal "z", and a match whose length is the
        // high nibble of the first one's length byte (2 + 7 + 3 bytes).
        let flags: u32 = 0b0001_1010 << 24;
        let mut input = flags.to_le_bytes().to_vec(); // 0..4
        input.extend_from_slice(b"abc"); // 4..7
        input.extend_from_slice(&(((3 - 1) << 3) | 4u16).to_le_bytes()); // 7..9
        input.extend_from_slice(&7u16.to_le_bytes()); // 9..11: offset 1
        input.push(0x2f); // 11: this match's nibble 15, the next one's 2
        input.push(255); // 12
        input.extend_from_slice(&0u16.to_le_bytes()); // 13..15
        input.extend_from_slice(&300u32.to_le_bytes()); // 15..19
        input.push(b'z'); // 19
        input.extend_from_slice(&(((2 - 1) << 3) | 7u16).to_le_bytes()); // 20..22: offset 2
        let full = decompress(&input, 1000).unwrap();
        assert_eq!(full.len(), 3 + 7 + 303 + 1 + 12);
        assert_eq!(&full[..10], b"abcabcabca");
        assert!(full[10..313].iter().all(|&b| b == b'a'));
        assert_eq!(&full[312..], b"azazazazazazaz");
        // There is no end marker: input cut between two items (or inside a
        // flag word or a match's two bytes) ends the stream with the items
        // before the cut; a cut inside a match's extra length fields is an
        // error, never a match of a wrong length.
        for cut in 0..input.len() {
            let expected = match cut {
                0..=4 => Ok(0),
                5..=7 => Ok(cut - 4),
                8 => Ok(3),
                9 | 10 => Ok(10),
                11..=18 => Err(Lz77Error::Truncated),
                19 => Ok(313),
                20 | 21 => Ok(314),
                _ => unreachable!(),
            };
            let got = decompress(&input[..cut], 1000);
            assert_eq!(
                got.as_ref().map(Vec::len),
                expected.as_ref().copied(),
                "cut at {cut}"
            );
            if let Ok(out) = got {
                assert_eq!(out, full[..out.len()], "cut at {cut}");
            }
        }
    }
}
