//! A binary's demangled names as the symbol cache keeps them
//! ([`DemangledNames`]): read in place from the bytes of a cache file
//! (offsets and text ends checked when read), with the names a run adds
//! kept beside them and merged in order when written again. It does no
//! I/O (`symbolize::cache` reads and writes the files) and demangles
//! nothing (`symbolize::jobs` does).

use super::stored::{TableAndBlob, Writer};
use crate::intern::FxMap;

/// A binary's names as demangled before, by the file offset of the
/// mangled name (the names the traces analyzed so far hit: tens of
/// thousands for a big binary after a few traces). Kept under the key of
/// the table the offsets are in ([`Elf::table_key`], which covers the
/// names' bytes), so a name found here is read from no file.
///
/// [`Elf::table_key`]: crate::symbols::Elf::table_key
///
/// Those read from the cache are searched in place, in the bytes they
/// were read from: a run looks up a few thousand of them, and making a map
/// of all (one string each) took longer than the whole lookup as the
/// cache grew. Names added by this run are kept beside them.
#[derive(Default)]
pub struct DemangledNames {
    kept: Option<KeptNames>,
    added: FxMap<u32, String>,
}

/// Names read from the cache: `count` entries (the name's offset and the
/// end of its demangled form in the text, both u32, ascending) at
/// `entries`, then the demangled forms one after the other at `text`.
struct KeptNames {
    bytes: Box<dyn AsRef<[u8]> + Send + Sync>,
    entries: usize,
    count: usize,
    text: usize,
}

/// Bytes of one stored entry: the name's offset and its text's end.
const NAME_ENTRY_BYTES: usize = 8;

impl KeptNames {
    fn all(&self) -> &[u8] {
        (*self.bytes).as_ref()
    }

    /// Entry `i`: the name's offset and its text's end.
    fn entry(&self, i: usize) -> (u32, u32) {
        let at = self.entries + i * NAME_ENTRY_BYTES;
        let e = &self.all()[at..at + NAME_ENTRY_BYTES];
        (
            u32::from_le_bytes(e[..4].try_into().expect("4 bytes")),
            u32::from_le_bytes(e[4..].try_into().expect("4 bytes")),
        )
    }

    /// The bytes of entry `i`'s demangled form.
    fn text(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.entry(i - 1).1 };
        let end = self.entry(i).1;
        &self.all()[self.text + start as usize..self.text + end as usize]
    }

    fn find(&self, name: u32) -> Option<usize> {
        let i = super::first_above(0, self.count, |i| self.entry(i).0 < name);
        (i < self.count && self.entry(i).0 == name).then_some(i)
    }

    /// The demangled form of `name`; `None` if not kept or not UTF-8
    /// (then demangled again).
    fn get(&self, name: u32) -> Option<&str> {
        std::str::from_utf8(self.text(self.find(name)?)).ok()
    }
}

impl DemangledNames {
    /// The demangled form of the name at file offset `name`, if kept.
    pub fn get(&self, name: u32) -> Option<&str> {
        self.kept
            .as_ref()
            .and_then(|k| k.get(name))
            .or_else(|| self.added.get(&name).map(String::as_str))
    }

    /// Keeps a name; whether it was new.
    pub fn insert(&mut self, name: u32, demangled: &str) -> bool {
        if self.get(name).is_some() {
            return false;
        }
        self.added.insert(name, demangled.to_owned());
        true
    }

    pub fn len(&self) -> usize {
        self.all().count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every name, ascending by offset: those kept and those added (an
    /// added name replaces a kept one that was not UTF-8).
    fn all(&self) -> impl Iterator<Item = (u32, &[u8])> {
        let kept = self.kept.iter().flat_map(|k| {
            (0..k.count)
                .map(move |i| (k.entry(i).0, k.text(i)))
                .filter(|&(_, text)| std::str::from_utf8(text).is_ok())
        });
        let mut added: Vec<(u32, &[u8])> = self
            .added
            .iter()
            .map(|(&name, d)| (name, d.as_bytes()))
            .collect();
        added.sort_unstable_by_key(|&(name, _)| name);
        let mut kept = kept.peekable();
        let mut added = added.into_iter().peekable();
        std::iter::from_fn(move || match (kept.peek(), added.peek()) {
            (Some(k), Some(a)) if k.0 == a.0 => {
                kept.next();
                added.next()
            }
            (Some(k), Some(a)) if a.0 < k.0 => added.next(),
            (Some(_), _) => kept.next(),
            (None, _) => added.next(),
        })
    }

    /// The names as bytes, for [`DemangledNames::in_place`].
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut entries = Writer::default();
        let mut text = Vec::new();
        let mut count = 0u64;
        for (name, demangled) in self.all() {
            // Ends are u32: a text past 4 GB (a binary's names are tens
            // of MB at most) keeps the names that fit.
            let Ok(end) = u32::try_from(text.len() + demangled.len()) else {
                break;
            };
            entries.u32(name);
            entries.u32(end);
            text.extend_from_slice(demangled);
            count += 1;
        }
        let mut w = Writer::default();
        w.u64(count);
        w.0.extend_from_slice(&entries.0);
        w.bytes(&text);
        w.0
    }

    /// The names whose [`DemangledNames::to_bytes`] are `bytes[range]`,
    /// searched in place (not copied); `None` if they are not such names
    /// (wrong length, offsets not ascending, a text outside the texts).
    pub fn in_place(
        bytes: Box<dyn AsRef<[u8]> + Send + Sync>,
        range: std::ops::Range<usize>,
    ) -> Option<DemangledNames> {
        let all: &[u8] = (*bytes).as_ref();
        let TableAndBlob {
            count,
            entries,
            blob: text,
            rest,
        } = TableAndBlob::read(all, range, NAME_ENTRY_BYTES)?;
        rest.end()?;
        let (mut last_name, mut last_end) = (None, 0);
        for e in all[entries.clone()].chunks_exact(NAME_ENTRY_BYTES) {
            let name = u32::from_le_bytes(e[..4].try_into().ok()?);
            let text_end = u32::from_le_bytes(e[4..].try_into().ok()?);
            if last_name.is_some_and(|last| name <= last) || text_end < last_end {
                return None;
            }
            (last_name, last_end) = (Some(name), text_end);
        }
        if last_end as usize != text.len() {
            return None;
        }
        Some(DemangledNames {
            kept: Some(KeptNames {
                bytes,
                entries: entries.start,
                count,
                text: text.start,
            }),
            added: FxMap::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangled_names_read_back() {
        let mut names = DemangledNames::default();
        assert!(names.insert(4096, "foo::bar"));
        assert!(!names.insert(4096, "other"));
        assert!(names.insert(0, "memset"));
        let bytes = names.to_bytes();
        let len = bytes.len();
        let back = DemangledNames::in_place(Box::new(bytes), 0..len).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back.get(4096), Some("foo::bar"));
        assert_eq!(back.get(0), Some("memset"));
        assert_eq!(back.get(4097), None);
        // Names added to those read: all kept, in one file, ascending.
        let mut more = back;
        assert!(!more.insert(0, "other"));
        assert!(more.insert(2048, "between"));
        assert!(more.insert(9000, "after"));
        assert_eq!(more.len(), 4);
        let bytes = more.to_bytes();
        let len = bytes.len();
        let again = DemangledNames::in_place(Box::new(bytes), 0..len).unwrap();
        let all: Vec<(u32, &[u8])> = again.all().collect();
        assert_eq!(
            all,
            [
                (0, &b"memset"[..]),
                (2048, b"between"),
                (4096, b"foo::bar"),
                (9000, b"after")
            ]
        );
        // Damaged: offsets out of order, a text end past the texts.
        let good = again.to_bytes();
        let mut swapped = good.clone();
        swapped[8..12].copy_from_slice(&5000u32.to_le_bytes());
        let mut past = good.clone();
        past[8 + 4..8 + 8].copy_from_slice(&u32::MAX.to_le_bytes());
        for bad in [swapped, past] {
            let len = bad.len();
            assert!(DemangledNames::in_place(Box::new(bad), 0..len).is_none());
        }
        // A kept text that is not UTF-8 is not given, and is replaced by
        // a name inserted for it.
        let mut broken = good;
        let text_at = 8 + 4 * 8 + 8;
        broken[text_at] = 0xff;
        let len = broken.len();
        let mut broken = DemangledNames::in_place(Box::new(broken), 0..len).unwrap();
        assert_eq!(broken.get(0), None);
        assert!(broken.insert(0, "memset"));
        let bytes = broken.to_bytes();
        let len = bytes.len();
        let fixed = DemangledNames::in_place(Box::new(bytes), 0..len).unwrap();
        assert_eq!(fixed.get(0), Some("memset"));
        assert_eq!(fixed.len(), 4);
    }
}
