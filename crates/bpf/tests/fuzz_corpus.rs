//! Replays the committed corpus of the `paths_capture` fuzz target
//! (`fuzz/corpus/paths_capture`, and `fuzz/regressions/paths_capture` when
//! fuzzing found a crash) through [`slowlab_bpf::parse_paths`], the function
//! the target calls, and fails if any input panics. Also: capture files whose
//! fields claim far more than they hold read quickly, as errors or warnings.
//! It does not fuzz: `fuzz/run.sh paths_capture` does (see `fuzz/README.md`).

use std::path::Path;
use std::time::{Duration, Instant};

use slowlab_bpf::format::{END_ID, HEADER_LEN, RECORD_HEAD_LEN};
use slowlab_bpf::{parse_paths, PathLogWriter, Syscall};

#[test]
fn every_corpus_input_parses_without_a_panic() {
    let mut inputs = slowlab_testkit::fuzz_corpus("paths_capture");
    inputs.extend(slowlab_testkit::fuzz_regressions("paths_capture"));
    let mut panicked = Vec::new();
    for path in &inputs {
        let data = std::fs::read(path).expect("a corpus file");
        if std::panic::catch_unwind(|| parse_paths(&data, path)).is_err() {
            panicked.push(path.display().to_string());
        }
    }
    assert!(panicked.is_empty(), "panicked: {}", panicked.join(", "));
    println!("replayed {} inputs", inputs.len());
}

/// A capture with one record, as bytes.
fn one_record() -> Vec<u8> {
    let mut w = PathLogWriter::new(Vec::new(), 1, 2, &[Syscall::Openat]).expect("vec write");
    w.record(10, 1, 1, Syscall::Openat.id(), 0, 0, b"/etc/hostname")
        .expect("vec write");
    w.finish(20, 0).expect("vec write")
}

#[test]
fn fields_that_claim_more_than_the_file_holds_read_quickly() {
    let started = Instant::now();
    let name = Path::new("hostile.paths");

    // A header length past the end of the file: an error.
    let mut b = one_record();
    b[10..12].copy_from_slice(&u16::MAX.to_le_bytes());
    assert!(parse_paths(&b, name).is_err());

    // A record whose path claims 65,535 bytes, in a file that holds 13:
    // the record is counted as cut, nothing is read past the end.
    let mut b = one_record();
    b[HEADER_LEN + 20..HEADER_LEN + 22].copy_from_slice(&u16::MAX.to_le_bytes());
    let log = parse_paths(&b, name).expect("a cut capture reads");
    assert_eq!(log.truncated_records, 1);
    assert!(log.events.is_empty());

    // An end record that counts 2^64 - 1 records and drops: only compared
    // and reported, never allocated for.
    let mut b = one_record();
    let end = HEADER_LEN + RECORD_HEAD_LEN + "/etc/hostname".len();
    assert_eq!(
        u16::from_le_bytes([b[end + 16], b[end + 17]]),
        END_ID,
        "the end record is where the test expects it"
    );
    b[end + RECORD_HEAD_LEN..end + RECORD_HEAD_LEN + 16].fill(0xff);
    let log = parse_paths(&b, name).expect("the capture reads");
    assert_eq!(log.events.len(), 1);
    assert_eq!(log.end.map(|e| e.drops), Some(u64::MAX));
    assert!(log.warnings.iter().any(|w| w.contains("counts")));

    // A megabyte of record heads claiming the longest path each: the
    // parse is linear in the bytes, not in what they claim.
    let mut b = one_record();
    b.truncate(HEADER_LEN);
    while b.len() < 1 << 20 {
        let mut head = [0u8; RECORD_HEAD_LEN];
        head[16..18].copy_from_slice(&Syscall::Openat.id().to_le_bytes());
        head[20..22].copy_from_slice(&64u16.to_le_bytes());
        b.extend_from_slice(&head);
        b.extend_from_slice(&[b'a'; 64]);
    }
    b.extend_from_slice(&[0u8; RECORD_HEAD_LEN - 4]);
    let log = parse_paths(&b, name).expect("the capture reads");
    assert_eq!(log.truncated_records, 1);
    assert!(log.events.len() > 10_000);

    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
}
