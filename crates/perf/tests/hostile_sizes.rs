//! perf.data files whose headers or records claim gigabytes (or
//! petabytes) read quickly, as an error or as a trace with a warning, and
//! never allocate what they claim: each case is made from a real fixture
//! (`tests/fixtures/`) with one field changed. The cases run twice: in
//! this process, timed, and again in a child limited to 1 GiB of address
//! space (`prlimit --as`), where any allocation of gigabytes would abort.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use slowlab_model::trace::Trace;
use slowlab_perf::{read_unsymbolized, PerfError};

fn fixture(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// A record: type, misc 0, size, body.
fn record(ty: u32, body: &[u8]) -> Vec<u8> {
    let mut r = ty.to_le_bytes().to_vec();
    r.extend_from_slice(&0u16.to_le_bytes());
    r.extend_from_slice(&u16::try_from(body.len() + 8).expect("small").to_le_bytes());
    r.extend_from_slice(body);
    r
}

/// `hot-fp.perfdata` cut after its data section, with `extra` records
/// appended and the header left unfinished (data size 0, no features), as
/// a killed `perf record` leaves it: every complete record is read.
fn unfinished_with(extra: &[u8]) -> Vec<u8> {
    let mut b = fixture("hot-fp.perfdata");
    let end = (u64_at(&b, 40) + u64_at(&b, 48)) as usize;
    b.truncate(end);
    b.extend_from_slice(extra);
    put_u64(&mut b, 48, 0);
    for at in (72..104).step_by(8) {
        put_u64(&mut b, at, 0);
    }
    b
}

/// Where the section of feature `bit` lies in a (little-endian) file, as
/// the offset of its (offset, size) entry in the feature table.
fn feature_entry(b: &[u8], bit: usize) -> usize {
    let bits = |i: usize| u64_at(b, 72 + i / 64 * 8) >> (i % 64) & 1 == 1;
    assert!(bits(bit), "the fixture has feature {bit}");
    let index = (0..bit).filter(|&i| bits(i)).count();
    (u64_at(b, 40) + u64_at(b, 48)) as usize + index * 16
}

/// A zstd frame of `blocks` RLE blocks of 128 KiB of zeros each: four
/// bytes per block, so a few kilobytes claim gigabytes.
fn zstd_bomb(blocks: usize) -> Vec<u8> {
    let mut f = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x38];
    for i in 0..blocks {
        let last = u32::from(i + 1 == blocks);
        let head = (128u32 << 10) << 3 | 1 << 1 | last;
        f.extend_from_slice(&head.to_le_bytes()[..3]);
        f.push(0);
    }
    f
}

type ReadResult = Result<Trace, PerfError>;
/// A hostile file: what it is, its bytes, and what reading it must give.
type Case = (&'static str, Vec<u8>, fn(ReadResult));

/// Every case: a name, the bytes, and what reading them must give.
fn cases() -> Vec<Case> {
    let mut out: Vec<Case> = Vec::new();

    let mut b = fixture("hot-fp.perfdata");
    put_u64(&mut b, 48, 1 << 40);
    out.push(("data section of 2^40 bytes", b, |r: ReadResult| {
        let t = r.expect("read as an unfinished file");
        assert_eq!(t.samples.len(), 37);
        assert!(t.stats.unfinished_file);
    }));

    let mut b = fixture("hot-fp.perfdata");
    put_u64(&mut b, 32, 1 << 40);
    out.push(("attribute section of 2^40 bytes", b, |r: ReadResult| {
        assert!(matches!(r, Err(PerfError::NotPerfData(_))), "{r:?}");
    }));

    let mut b = fixture("sched.perfdata");
    let at = feature_entry(&b, 2); // HEADER_HOSTNAME
    put_u64(&mut b, at + 8, 1 << 40);
    out.push(("feature section of 2^40 bytes", b, dropped_features));

    // Every feature section spans the whole file: each lies inside it,
    // together they claim 21 times its size.
    let mut b = fixture("sched.perfdata");
    let len = b.len() as u64;
    for bit in [
        1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 16, 20, 21, 22, 25, 26, 31,
    ] {
        let at = feature_entry(&b, bit);
        put_u64(&mut b, at, 0);
        put_u64(&mut b, at + 8, len);
    }
    out.push(("feature sections overlapping", b, dropped_features));

    for (name, field) in [
        ("event descriptions: 2^32 - 1 events", 0),
        ("event descriptions: 2^32 - 1 ids", 1),
    ] {
        let mut b = fixture("sched.perfdata");
        let section = u64_at(&b, feature_entry(&b, 12)) as usize; // HEADER_EVENT_DESC
        let attr_size = u32::from_le_bytes(b[section + 4..section + 8].try_into().expect("4"));
        let at = match field {
            0 => section,
            _ => section + 8 + attr_size as usize,
        };
        b[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        out.push((name, b, dropped_features));
    }

    // Pipe mode: the event descriptions come as a HEADER_FEATURE record
    // (at offset 1420 of the fixture: header, feature id 12, section).
    let mut b = fixture("hot-pipe.perfdata");
    assert_eq!(
        u64_at(&b, 1428),
        12,
        "the pipe fixture's event descriptions"
    );
    b[1436..1440].copy_from_slice(&u32::MAX.to_le_bytes());
    out.push((
        "pipe: event descriptions of 2^32 - 1 events",
        b,
        |r: ReadResult| {
            assert!(matches!(r, Err(PerfError::Header(_))), "{r:?}");
        },
    ));

    // Pipe mode: an AUX trace record whose data claims 2^56 bytes.
    let mut b = fixture("hot-pipe.perfdata");
    let mut aux = (1u64 << 56).to_le_bytes().to_vec();
    aux.extend_from_slice(&[0; 32]);
    b.extend_from_slice(&record(71, &aux));
    out.push(("pipe: AUX trace data of 2^56 bytes", b, |r: ReadResult| {
        let t = r.expect("the records before it read");
        assert_eq!(t.samples.len(), 31);
        assert!(
            t.stats.warnings.iter().any(|w| w.contains("AUX trace")),
            "{:?}",
            t.stats.warnings
        );
    }));

    // The same in a file's data section.
    out.push((
        "AUX trace data of 2^56 bytes",
        unfinished_with(&record(71, &aux)),
        |r: ReadResult| {
            let t = r.expect("the records before it read");
            assert_eq!(t.samples.len(), 37);
            assert!(
                t.stats.warnings.iter().any(|w| w.contains("AUX trace")),
                "{:?}",
                t.stats.warnings
            );
        },
    ));

    // Compressed records of 4-byte zstd blocks that decompress to 128 KiB
    // each: 60 KB that claim 2 GB.
    let bomb = zstd_bomb(15_000);
    let mut recs = Vec::new();
    for chunk in bomb.chunks(30_000) {
        recs.extend(record(81, chunk));
    }
    out.push((
        "zstd records that decompress to 2 GB",
        unfinished_with(&recs),
        |r: ReadResult| {
            let t = r.expect("the records before them read");
            assert_eq!(t.samples.len(), 37);
            assert!(
                t.stats
                    .warnings
                    .iter()
                    .any(|w| w.contains("decompress to more than")),
                "{:?}",
                t.stats.warnings
            );
        },
    ));
    out
}

fn dropped_features(r: ReadResult) {
    let t = r.expect("read without its feature sections");
    assert!(
        t.stats
            .warnings
            .iter()
            .any(|w| w.contains("feature sections")),
        "{:?}",
        t.stats.warnings
    );
}

#[test]
fn headers_and_records_claiming_gigabytes_read_quickly() {
    // On one thread the records are indexed then read; on two, streamed.
    for (name, bytes, check) in cases() {
        for threads in [1, 2] {
            let started = Instant::now();
            let before = slowlab_perf::caught_panics();
            let result = read_unsymbolized(&bytes, threads);
            assert_eq!(
                slowlab_perf::caught_panics(),
                before,
                "{name}: a caught panic"
            );
            check(result);
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "{name} on {threads} threads: took {:?}",
                started.elapsed()
            );
        }
    }
}

#[test]
fn headers_and_records_claiming_gigabytes_read_in_1_gib_of_address_space() {
    if std::env::var_os("SLOWLAB_HOSTILE_CHILD").is_some() {
        return; // the child runs only the test above
    }
    let exe = std::env::current_exe().expect("the test binary");
    let out = Command::new("prlimit")
        .arg(format!("--as={}", 1u64 << 30))
        .arg("--")
        .arg(&exe)
        .args([
            "--exact",
            "headers_and_records_claiming_gigabytes_read_quickly",
        ])
        .args(["--test-threads=1", "--nocapture"])
        .env("SLOWLAB_HOSTILE_CHILD", "1")
        .output()
        .expect("prlimit (util-linux) runs");
    assert!(
        out.status.success(),
        "under a 1 GiB address-space limit: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("1 passed"),
        "the child ran no test: {stdout}"
    );
}
