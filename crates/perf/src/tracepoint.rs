//! Tracepoint formats: where each field of a tracepoint's raw record lies.
//!
//! Formats come from the tracing-data section perf stores in the file (the
//! text of `/sys/kernel/tracing/events/SYSTEM/NAME/format` for every
//! recorded tracepoint), or, for a file that has none (`perf record` was
//! killed before writing it), from this machine's tracefs. This module only
//! finds field offsets in that text; it does not read files.

use std::collections::HashMap;

/// One field: byte offset, size, signedness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
}

/// The fields of one tracepoint, by name.
#[derive(Clone, Debug, Default)]
pub struct Format {
    pub fields: HashMap<String, Field>,
}

impl Format {
    /// Parses the `field:` lines of a format text.
    pub fn parse(text: &str) -> Format {
        let mut fields = HashMap::new();
        for line in text.lines() {
            let line = line.trim();
            let Some(rest) = line.strip_prefix("field:") else {
                continue;
            };
            let mut parts = rest.split(';').map(str::trim);
            let Some(decl) = parts.next() else { continue };
            // `unsigned short common_type`, `char prev_comm[16]`
            let name = decl
                .rsplit(|c: char| c.is_whitespace() || c == '*')
                .next()
                .unwrap_or("")
                .split('[')
                .next()
                .unwrap_or("");
            let mut offset = None;
            let mut size = None;
            let mut signed = false;
            for p in parts {
                if let Some(v) = p.strip_prefix("offset:") {
                    offset = v.parse().ok();
                } else if let Some(v) = p.strip_prefix("size:") {
                    size = v.parse().ok();
                } else if let Some(v) = p.strip_prefix("signed:") {
                    signed = v == "1";
                }
            }
            if let (Some(offset), Some(size)) = (offset, size) {
                if !name.is_empty() {
                    fields.insert(
                        name.to_owned(),
                        Field {
                            offset,
                            size,
                            signed,
                        },
                    );
                }
            }
        }
        Format { fields }
    }

    /// Finds the format of tracepoint `name` (without system) in perf's
    /// tracing-data blob, which holds the format texts one after another.
    pub fn find_in_tracing_data(blob: &[u8], name: &str) -> Option<Format> {
        let needle = format!("name: {name}\n");
        let start = memfind(blob, needle.as_bytes())?;
        let rest = &blob[start..];
        let end = memfind(rest, b"print fmt:").unwrap_or(rest.len());
        let text = String::from_utf8_lossy(&rest[..end]);
        Some(Format::parse(&text))
    }

    /// The field called `name`, to read many records without looking the
    /// name up each time.
    pub fn field(&self, name: &str) -> Option<Field> {
        self.fields.get(name).copied()
    }

    /// Reads an unsigned integer field from a raw record (little-endian
    /// or big-endian as given). Missing or odd-sized fields read as `None`.
    pub fn get_u64(&self, raw: &[u8], field: &str, big_endian: bool) -> Option<u64> {
        self.fields.get(field)?.read(raw, big_endian)
    }

    /// Reads a signed integer field.
    pub fn get_i64(&self, raw: &[u8], field: &str, big_endian: bool) -> Option<i64> {
        self.get_u64(raw, field, big_endian).map(|v| v as i64)
    }
}

impl Field {
    /// Reads this integer field from a raw record; 4-byte signed fields are
    /// sign-extended. `None` when the record is too short or the size odd.
    #[inline]
    pub fn read(&self, raw: &[u8], big_endian: bool) -> Option<u64> {
        let b = raw.get(self.offset..self.offset.checked_add(self.size)?)?;
        let v = match self.size {
            1 => b[0] as u64,
            2 => {
                let a = [b[0], b[1]];
                (if big_endian {
                    u16::from_be_bytes(a)
                } else {
                    u16::from_le_bytes(a)
                }) as u64
            }
            4 => {
                let a = [b[0], b[1], b[2], b[3]];
                let v = if big_endian {
                    u32::from_be_bytes(a)
                } else {
                    u32::from_le_bytes(a)
                };
                if self.signed {
                    v as i32 as i64 as u64
                } else {
                    v as u64
                }
            }
            8 => {
                let a: [u8; 8] = b.try_into().ok()?;
                if big_endian {
                    u64::from_be_bytes(a)
                } else {
                    u64::from_le_bytes(a)
                }
            }
            _ => return None,
        };
        Some(v)
    }
}

fn memfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SWITCH: &str = "name: sched_switch
ID: 316
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;
\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;

print fmt: \"prev_comm=%s\"
";

    #[test]
    fn parses_fields() {
        let f = Format::parse(SWITCH);
        assert_eq!(
            f.fields["prev_pid"],
            Field {
                offset: 24,
                size: 4,
                signed: true
            }
        );
        assert_eq!(f.fields["prev_comm"].size, 16);
        let mut raw = vec![0u8; 64];
        raw[24..28].copy_from_slice(&(-5i32).to_le_bytes());
        raw[56..60].copy_from_slice(&77i32.to_le_bytes());
        assert_eq!(f.get_i64(&raw, "prev_pid", false), Some(-5));
        assert_eq!(f.get_i64(&raw, "next_pid", false), Some(77));
        assert_eq!(f.get_u64(&raw[..30], "next_pid", false), None);
    }

    #[test]
    fn finds_format_in_blob() {
        let blob = format!("\x17\x08Dtracing0.6\0junk{SWITCH}name: other\n");
        let f = Format::find_in_tracing_data(blob.as_bytes(), "sched_switch").unwrap();
        assert!(f.fields.contains_key("next_pid"));
        assert!(Format::find_in_tracing_data(blob.as_bytes(), "nope").is_none());
    }
}
