//! The symbol cache: work done on symbols, kept on disk between runs so
//! that the next analysis of a trace from the same machine skips it. It
//! keeps four kinds of file, each named by a key that is a hash of
//! everything the work read, so an entry is never stale:
//!
//! - `index/KEY`: a big symbol table's sorted index, one symbol per
//!   address, keyed by `Elf::table_key` (the table's bytes and its
//!   names'; build ids are not enough: rustup's `librustc_driver` has
//!   none, and a binary and its debug file share one);
//! - `kallsyms/KEY`: the kernel's parsed symbols, keyed by a hash of the
//!   kallsyms text;
//! - `names/KEY`: the names of a binary demangled so far, by their offset
//!   in the file, keyed by its table and by this build of slowlab
//!   (demangled text depends on the demanglers' versions);
//! - `files/KEY`: for a file as it is on disk ([`FileIdentity`]: device,
//!   inode, size, modification and change times), the key computed from
//!   its bytes before, so that a run with a cold page cache need not read
//!   a binary's whole symbol and string tables (tens of MB for libLLVM and
//!   librustc_driver) or a kallsyms copy just to find its key. The change
//!   time moves with every write and cannot be set by any program; a file
//!   changed within the last [`SETTLED`] is not trusted by identity (a
//!   second write in the same tick of the file system's clock could leave
//!   its times as they were). Only setting the system clock back can make
//!   such an entry name old bytes.
//!
//! Files live in `DIR/v1/` and are framed: kind, key, length and a
//! checksum, written to a temporary file and renamed into place, so a
//! reader sees a whole file or none; one that fails any check is ignored
//! (and rewritten). Deleting the directory is always safe. Files unused
//! for 30 days are removed when others are written. Failing to read or
//! write the cache changes nothing but speed: it is never an error.
//!
//! It decides nothing about which work to keep (`binaries`, `jobs` and
//! `kernel` do) and knows nothing of the formats inside (`symbols`).

use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::symbols::{DemangledNames, Kallsyms, SortedSymbols};

/// Where symbol work is kept between runs; [`SymbolCache::off`] keeps
/// nothing.
#[derive(Clone, Debug, Default)]
pub struct SymbolCache {
    dir: Option<PathBuf>,
}

/// What a cache file holds.
#[derive(Clone, Copy)]
enum Kind {
    Index,
    Kallsyms,
    Names,
    File,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Index => "index",
            Kind::Kallsyms => "kallsyms",
            Kind::Names => "names",
            Kind::File => "files",
        }
    }
}

/// The first bytes of every cache file.
const MAGIC: &[u8; 8] = b"slowlab\x01";
/// Magic, kind (8 bytes), key (16), payload length (8).
const HEADER: usize = 40;
/// The checksum after the payload.
const TRAILER: usize = 8;
/// Files untouched this long are removed.
const UNUSED: Duration = Duration::from_secs(30 * 24 * 3600);

impl SymbolCache {
    /// A cache that keeps nothing.
    pub fn off() -> SymbolCache {
        SymbolCache { dir: None }
    }

    /// A cache in `dir` (made when first written).
    pub fn in_dir(dir: PathBuf) -> SymbolCache {
        SymbolCache { dir: Some(dir) }
    }

    /// The directory, when the cache is on.
    pub(crate) fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Whether anything is kept.
    pub(crate) fn is_on(&self) -> bool {
        self.dir.is_some()
    }

    /// The sorted index kept for the table whose `Elf::table_key` is `key`,
    /// if there is one.
    pub(crate) fn kept_index(&self, key: u128) -> Option<SortedSymbols> {
        self.load(Kind::Index, key).and_then(|f| {
            let payload = f.payload_range();
            SortedSymbols::in_place(Box::new(f.bytes), payload)
        })
    }

    /// Keeps `index` for the table whose key is `key` (made with
    /// [`SortedSymbols::winners`]: a run that reads it back reads no name
    /// to choose among symbols at one address).
    pub(crate) fn keep_index(&self, key: u128, index: &SortedSymbols) {
        self.store(Kind::Index, key, &index.to_bytes());
    }

    /// The kernel's symbols from the kallsyms file at `path`: kept for the
    /// file as it is (not read then), or for its text (read, and its
    /// identity kept), or parsed (and kept). `None` if the file cannot be
    /// mapped (`/proc/kallsyms`, whose size reads as 0: read it and call
    /// [`SymbolCache::kallsyms`]).
    pub(crate) fn kallsyms_file(&self, path: &Path) -> Option<Kallsyms> {
        self.kallsyms_file_at(path, SystemTime::now())
    }

    /// [`SymbolCache::kallsyms_file`] at time `now`.
    fn kallsyms_file_at(&self, path: &Path, now: SystemTime) -> Option<Kallsyms> {
        let file = std::fs::File::open(path).ok()?;
        let meta = file.metadata().ok()?;
        let identity = self.dir.as_ref().and(FileIdentity::at(&meta, now));
        let known = identity
            .as_ref()
            .and_then(|id| self.key_of_file(id, FileKey::Kallsyms));
        if let Some(k) = known.and_then(|key| self.kept_kallsyms(key)) {
            return Some(k);
        }
        let text = map_open(&file, &meta)?;
        if self.dir.is_none() {
            return Some(Kallsyms::parse(&text));
        }
        let key = twox_hash::XxHash3_128::oneshot(&text);
        if let Some(id) = &identity {
            self.keep_key_of_file(id, FileKey::Kallsyms, key);
        }
        Some(self.kallsyms_keyed(&text, key))
    }

    /// The kernel's symbols parsed from kallsyms `text`: kept, or parsed
    /// (and kept).
    pub(crate) fn kallsyms(&self, text: &[u8]) -> Kallsyms {
        if self.dir.is_none() {
            return Kallsyms::parse(text);
        }
        self.kallsyms_keyed(text, twox_hash::XxHash3_128::oneshot(text))
    }

    /// [`SymbolCache::kallsyms`] for `text` whose hash is `key` (the cache
    /// on: its callers parse at once when it is off).
    fn kallsyms_keyed(&self, text: &[u8], key: u128) -> Kallsyms {
        if let Some(k) = self.kept_kallsyms(key) {
            return k;
        }
        let k = Kallsyms::parse(text);
        self.store(Kind::Kallsyms, key, &k.to_bytes());
        k
    }

    fn kept_kallsyms(&self, key: u128) -> Option<Kallsyms> {
        self.load(Kind::Kallsyms, key).and_then(|f| {
            let payload = f.payload_range();
            Kallsyms::in_place(Box::new(f.bytes), payload)
        })
    }

    /// The key of kind `what` an earlier run computed from the bytes of
    /// the file whose identity is `id`.
    pub(crate) fn key_of_file(&self, id: &FileIdentity, what: FileKey) -> Option<u128> {
        let f = self.load(Kind::File, id.key(what))?;
        Some(u128::from_le_bytes(f.payload().try_into().ok()?))
    }

    /// Keeps `key`, computed from the bytes of the file whose identity is
    /// `id`.
    pub(crate) fn keep_key_of_file(&self, id: &FileIdentity, what: FileKey, key: u128) {
        self.store(Kind::File, id.key(what), &key.to_le_bytes());
    }

    /// The names demangled so far for the binary whose table has key
    /// `table` (empty when none are kept).
    pub(crate) fn demangled(&self, table: u128) -> DemangledNames {
        self.load(Kind::Names, names_key(table))
            .and_then(|f| {
                let payload = f.payload_range();
                DemangledNames::in_place(Box::new(f.bytes), payload)
            })
            .unwrap_or_default()
    }

    /// Keeps the names demangled for the binary whose table has key
    /// `table` (all of them: those read by [`SymbolCache::demangled`] and
    /// the new ones).
    pub(crate) fn keep_demangled(&self, table: u128, names: &DemangledNames) {
        if self.dir.is_some() {
            self.store(Kind::Names, names_key(table), &names.to_bytes());
        }
    }

    fn path(&self, kind: Kind, key: u128) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        Some(dir.join("v1").join(kind.name()).join(format!("{key:032x}")))
    }

    /// The file for `kind` and `key`, if it is there and whole.
    fn load(&self, kind: Kind, key: u128) -> Option<Framed> {
        let path = self.path(kind, key)?;
        let file = std::fs::File::open(&path).ok()?;
        let meta = file.metadata().ok()?;
        let framed = Framed::check(map_open(&file, &meta)?, kind, key)?;
        // Used: not to be removed as unused for another 30 days (marked
        // at most once a day; the owner may set the time through a file
        // opened for reading).
        if age(&meta).is_none_or(|age| age > Duration::from_secs(24 * 3600)) {
            let _ = file.set_modified(SystemTime::now());
        }
        Some(framed)
    }

    /// Writes the file for `kind` and `key` whole, or not at all.
    fn store(&self, kind: Kind, key: u128, payload: &[u8]) {
        let Some(path) = self.path(kind, key) else {
            return;
        };
        let Some(dir) = path.parent() else {
            return;
        };
        // Only the user may read it: kallsyms addresses would tell others
        // where the kernel sits.
        let made = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir);
        if made.is_err() {
            return;
        }
        let frame = Framed::frame(kind, key, payload);
        // A name no other writer uses; renamed over the file only once it
        // is all written, so readers never see part of one.
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let tmp = dir.join(format!(".{key:032x}.{}.{nanos}.tmp", std::process::id()));
        let written = std::fs::write(&tmp, &frame).and_then(|_| std::fs::rename(&tmp, &path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
            return;
        }
        remove_unused(dir);
    }
}

/// What a file's metadata tells of its bytes without reading them:
/// device, inode, size, and the times of its last modification and of its
/// last change (which every write moves, and no program can set). See
/// the module's notes for when it is trusted.
pub(crate) struct FileIdentity([u8; 56]);

/// Which key of a file [`SymbolCache::key_of_file`] keeps.
#[derive(Clone, Copy)]
pub(crate) enum FileKey {
    /// `Elf::table_key` of its symbol table.
    Table,
    /// The hash of its kallsyms text.
    Kallsyms,
}

/// How long ago a file must have last changed for its identity to be
/// trusted.
const SETTLED: Duration = Duration::from_secs(2);

impl FileIdentity {
    /// The identity of the regular file with metadata `meta`; `None` if it
    /// changed less than [`SETTLED`] ago (or in the future), or is empty.
    pub(crate) fn of(meta: &std::fs::Metadata) -> Option<FileIdentity> {
        FileIdentity::at(meta, SystemTime::now())
    }

    /// [`FileIdentity::of`] at time `now`.
    fn at(meta: &std::fs::Metadata, now: SystemTime) -> Option<FileIdentity> {
        if !meta.is_file() || meta.len() == 0 {
            return None;
        }
        let changed = SystemTime::UNIX_EPOCH
            + Duration::new(
                u64::try_from(meta.ctime()).ok()?,
                u32::try_from(meta.ctime_nsec()).ok()?,
            );
        if now.duration_since(changed).ok()? < SETTLED {
            return None;
        }
        let fields = [
            meta.dev(),
            meta.ino(),
            meta.size(),
            meta.mtime() as u64,
            meta.mtime_nsec() as u64,
            meta.ctime() as u64,
            meta.ctime_nsec() as u64,
        ];
        let mut id = [0u8; 56];
        for (at, f) in id.chunks_exact_mut(8).zip(fields) {
            at.copy_from_slice(&f.to_le_bytes());
        }
        Some(FileIdentity(id))
    }

    /// The cache key of this file's key of kind `what`.
    fn key(&self, what: FileKey) -> u128 {
        let mut h = twox_hash::XxHash3_128::new();
        h.write(&self.0);
        // With the form of what a table's key keeps: a file's key from an
        // older form is not found.
        h.write(&[what as u8, crate::symbols::TABLE_FORM]);
        h.finish_128()
    }
}

/// The key of a binary's demangled names: its table's key and this build
/// of slowlab (its executable's size and time), because the demangled text
/// of a name depends on the demanglers built in.
fn names_key(table: u128) -> u128 {
    static BUILD: std::sync::OnceLock<u128> = std::sync::OnceLock::new();
    let build = *BUILD.get_or_init(|| {
        let exe = std::env::current_exe().and_then(std::fs::metadata);
        let (len, time) = match exe {
            Ok(m) => (
                m.len(),
                m.modified()
                    .ok()
                    .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos()),
            ),
            Err(_) => (0, 0),
        };
        let mut id = Vec::with_capacity(40);
        id.extend_from_slice(env!("CARGO_PKG_VERSION").as_bytes());
        id.extend_from_slice(&len.to_le_bytes());
        id.extend_from_slice(&time.to_le_bytes());
        twox_hash::XxHash3_128::oneshot(&id)
    });
    let mut both = [0u8; 32];
    both[..16].copy_from_slice(&table.to_le_bytes());
    both[16..].copy_from_slice(&build.to_le_bytes());
    twox_hash::XxHash3_128::oneshot(&both)
}

/// Removes the files of `dir` unused for [`UNUSED`], and temporary files
/// left by writers that died (older than an hour).
fn remove_unused(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let age = e.metadata().ok().and_then(|m| age(&m)).unwrap_or_default();
        let tmp = e.file_name().to_string_lossy().ends_with(".tmp");
        if age > UNUSED || (tmp && age > Duration::from_secs(3600)) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// How long ago a file was last modified; `None` if unknown (or in the
/// future).
fn age(meta: &std::fs::Metadata) -> Option<Duration> {
    meta.modified().ok()?.elapsed().ok()
}

/// A file's bytes, mapped: read in place from the page cache, not copied
/// (the files are megabytes); `None` for an empty file or one that cannot
/// be read. `meta` is the open file's metadata.
fn map_open(f: &std::fs::File, meta: &std::fs::Metadata) -> Option<memmap2::Mmap> {
    if meta.len() == 0 {
        return None;
    }
    // SAFETY: a read-only private map. A file replaced while mapped stays
    // the old one (writers rename a new file into place); one truncated in
    // place by someone else may raise SIGBUS, as for every mapped reader.
    let map = unsafe { memmap2::Mmap::map(f) }.ok()?;
    // It is read whole (checksum, key), from the start: ask the disk for
    // all of it at once rather than a page-fault's read-around at a time.
    // Only hints.
    let _ = map.advise(memmap2::Advice::Sequential);
    let _ = map.advise(memmap2::Advice::WillNeed);
    Some(map)
}

/// A cache file's bytes, checked: magic, kind, key, length, checksum.
struct Framed {
    bytes: memmap2::Mmap,
}

impl Framed {
    fn frame(kind: Kind, key: u128, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER + payload.len() + TRAILER);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&kind_tag(kind));
        out.extend_from_slice(&key.to_le_bytes());
        out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        out.extend_from_slice(payload);
        let sum = twox_hash::XxHash3_64::oneshot(&out);
        out.extend_from_slice(&sum.to_le_bytes());
        out
    }

    fn check(bytes: memmap2::Mmap, kind: Kind, key: u128) -> Option<Framed> {
        let body = bytes.len().checked_sub(TRAILER)?;
        let len = usize::try_from(u64::from_le_bytes(bytes.get(32..40)?.try_into().ok()?)).ok()?;
        let whole = bytes.get(..8)? == MAGIC
            && bytes.get(8..16)? == kind_tag(kind)
            && bytes.get(16..32)? == key.to_le_bytes()
            && HEADER.checked_add(len) == Some(body)
            && bytes.get(body..)? == twox_hash::XxHash3_64::oneshot(&bytes[..body]).to_le_bytes();
        whole.then_some(Framed { bytes })
    }

    fn payload_range(&self) -> std::ops::Range<usize> {
        HEADER..self.bytes.len() - TRAILER
    }

    fn payload(&self) -> &[u8] {
        &self.bytes[self.payload_range()]
    }
}

fn kind_tag(kind: Kind) -> [u8; 8] {
    let mut tag = [0u8; 8];
    let name = kind.name().as_bytes();
    tag[..name.len()].copy_from_slice(name);
    tag
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &[u8] = b"ffffffff81000000 T _text\nffffffff81000100 t do_thing\n";

    fn files(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut todo = vec![dir.to_owned()];
        while let Some(d) = todo.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                if e.path().is_dir() {
                    todo.push(e.path());
                } else {
                    out.push(e.path());
                }
            }
        }
        out
    }

    #[test]
    fn kept_kallsyms_are_read_back_and_damaged_files_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let cache = SymbolCache::in_dir(dir.path().to_owned());
        let parsed = cache.kallsyms(TEXT);
        let kept = files(dir.path());
        assert_eq!(kept.len(), 1, "{kept:?}");
        let again = cache.kallsyms(TEXT);
        assert_eq!(again.to_bytes(), parsed.to_bytes());
        // Every single damaged byte, and the file cut short, is noticed:
        // the table is parsed again (same result) and the file rewritten.
        let good = std::fs::read(&kept[0]).unwrap();
        for i in (0..good.len()).step_by(7).chain([good.len() - 1]) {
            let mut bad = good.clone();
            bad[i] ^= 0x20;
            std::fs::write(&kept[0], &bad).unwrap();
            assert!(cache
                .load(Kind::Kallsyms, twox_hash::XxHash3_128::oneshot(TEXT))
                .is_none());
            assert_eq!(cache.kallsyms(TEXT).to_bytes(), parsed.to_bytes());
            assert_eq!(std::fs::read(&kept[0]).unwrap(), good, "byte {i}");
        }
        std::fs::write(&kept[0], &good[..good.len() / 2]).unwrap();
        assert_eq!(cache.kallsyms(TEXT).to_bytes(), parsed.to_bytes());
        assert_eq!(std::fs::read(&kept[0]).unwrap(), good);
        // Other text, another file.
        let other = cache.kallsyms(b"ffffffff81000000 T _text\nffffffff81000200 t other\n");
        assert_eq!(other.lookup(0xffff_ffff_8100_0201).unwrap().name, "other");
        assert_eq!(files(dir.path()).len(), 2);
    }

    #[test]
    fn a_cache_that_cannot_be_written_changes_nothing_but_speed() {
        let dir = tempfile::tempdir().unwrap();
        // A file where the cache's directory would be.
        let blocked = dir.path().join("blocked");
        std::fs::write(&blocked, "").unwrap();
        let cache = SymbolCache::in_dir(blocked.clone());
        let k = cache.kallsyms(TEXT);
        assert_eq!(k.lookup(0xffff_ffff_8100_0101).unwrap().name, "do_thing");
        assert!(blocked.is_file());
        let off = SymbolCache::off().kallsyms(TEXT);
        assert_eq!(off.to_bytes(), k.to_bytes());
    }

    #[test]
    fn kept_index_and_names_are_read_back() {
        let bytes = crate::symbols::test_binary();
        let elf = crate::symbols::Elf::parse(&bytes).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let cache = SymbolCache::in_dir(dir.path().to_owned());
        let key = elf.table_key();
        assert!(cache.kept_index(key).is_none());
        let winners = elf.sorted().winners(&elf);
        cache.keep_index(key, &winners);
        assert_eq!(
            cache.kept_index(key).unwrap().to_bytes(),
            winners.to_bytes()
        );
        assert!(cache.kept_index(key ^ 1).is_none());
        assert!(cache.demangled(key).is_empty());
        let mut names = DemangledNames::default();
        names.insert(4096, "foo::bar");
        cache.keep_demangled(key, &names);
        assert_eq!(cache.demangled(key).get(4096), Some("foo::bar"));
        assert!(cache.demangled(key ^ 1).is_empty());
        // Only the user may read it.
        use std::os::unix::fs::PermissionsExt;
        let v1 = dir.path().join("v1");
        assert_eq!(
            std::fs::metadata(&v1).unwrap().permissions().mode() & 0o777,
            0o700
        );
        // No temporary file is left behind.
        let left = files(dir.path());
        assert_eq!(left.len(), 2, "{left:?}");
        assert!(left.iter().all(|p| !p.to_string_lossy().ends_with(".tmp")));
    }

    /// A file's identity is trusted only once it has settled, and changes
    /// with any write, even one that keeps its size and modification time;
    /// a key is kept per identity and per kind.
    #[test]
    fn a_file_is_known_by_identity_only_as_it_was_when_its_key_was_kept() {
        let dir = tempfile::tempdir().unwrap();
        let cache = SymbolCache::in_dir(dir.path().join("cache"));
        let path = dir.path().join("binary");
        std::fs::write(&path, b"first bytes").unwrap();
        let meta = || std::fs::metadata(&path).unwrap();
        let later = |m: &std::fs::Metadata| m.modified().unwrap() + Duration::from_secs(3);
        // Just written: not trusted.
        assert!(FileIdentity::of(&meta()).is_none());
        assert!(FileIdentity::at(&meta(), meta().modified().unwrap()).is_none());
        let first = FileIdentity::at(&meta(), later(&meta())).unwrap();
        assert!(cache.key_of_file(&first, FileKey::Table).is_none());
        cache.keep_key_of_file(&first, FileKey::Table, 42);
        assert_eq!(cache.key_of_file(&first, FileKey::Table), Some(42));
        assert!(cache.key_of_file(&first, FileKey::Kallsyms).is_none());
        // Rewritten with as many bytes, its modification time set back:
        // another identity (its change time moved), so the key is not found.
        let modified = meta().modified().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        std::fs::write(&path, b"other bytes").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(modified)
            .unwrap();
        assert_eq!(meta().modified().unwrap(), modified);
        let second = FileIdentity::at(&meta(), later(&meta())).unwrap();
        assert_ne!(first.0, second.0);
        assert!(cache.key_of_file(&second, FileKey::Table).is_none());
        // Not a regular file, or empty: no identity.
        assert!(
            FileIdentity::at(&std::fs::metadata(dir.path()).unwrap(), later(&meta())).is_none()
        );
        std::fs::write(&path, b"").unwrap();
        assert!(FileIdentity::at(&meta(), later(&meta())).is_none());
    }

    /// A kallsyms file is parsed the first time, then found by its
    /// identity (once settled) without reading its text; rewritten, it is
    /// read again.
    #[test]
    fn a_kallsyms_file_is_found_by_identity_and_read_again_once_changed() {
        let dir = tempfile::tempdir().unwrap();
        let cache = SymbolCache::in_dir(dir.path().join("cache"));
        let path = dir.path().join("kallsyms");
        std::fs::write(&path, TEXT).unwrap();
        let settled = || std::fs::metadata(&path).unwrap().modified().unwrap() + SETTLED * 2;
        let name = |k: Kallsyms| k.lookup(0xffff_ffff_8100_0101).unwrap().name.to_string();
        // Just written: parsed, kept by its text only.
        assert_eq!(name(cache.kallsyms_file(&path).unwrap()), "do_thing");
        assert_eq!(files(&dir.path().join("cache")).len(), 1);
        // Settled: parsed (or taken by its text), and its key kept by
        // identity.
        assert_eq!(
            name(cache.kallsyms_file_at(&path, settled()).unwrap()),
            "do_thing"
        );
        assert_eq!(files(&dir.path().join("cache")).len(), 2);
        // Found by identity, the text not read: the table kept under the
        // key kept for the file comes back (here, as if the file's key were
        // another text's).
        let meta = std::fs::metadata(&path).unwrap();
        let id = FileIdentity::at(&meta, settled()).unwrap();
        let key = twox_hash::XxHash3_128::oneshot(TEXT);
        assert_eq!(cache.key_of_file(&id, FileKey::Kallsyms), Some(key));
        let other = Kallsyms::parse(b"ffffffff81000000 T _text\nffffffff81000100 t kept\n");
        cache.store(Kind::Kallsyms, key ^ 1, &other.to_bytes());
        cache.keep_key_of_file(&id, FileKey::Kallsyms, key ^ 1);
        assert_eq!(
            name(cache.kallsyms_file_at(&path, settled()).unwrap()),
            "kept"
        );
        // Rewritten (another text): another identity, read again.
        std::thread::sleep(Duration::from_millis(50));
        std::fs::write(&path, b"ffffffff81000000 T _text\nffffffff81000100 t new\n").unwrap();
        assert_eq!(
            name(cache.kallsyms_file_at(&path, settled()).unwrap()),
            "new"
        );
        // An empty file cannot be mapped: the caller reads it.
        let empty = dir.path().join("empty");
        std::fs::write(&empty, b"").unwrap();
        assert!(cache.kallsyms_file(&empty).is_none());
        assert_eq!(
            name(SymbolCache::off().kallsyms_file(&path).unwrap()),
            "new"
        );
    }
}
