//! Replays the committed corpus of the `sched_trace` fuzz target (`fuzz/corpus/sched_trace`
//! and the inputs that crashed it, `fuzz/regressions/sched_trace`) through the target's own
//! steps (the read of an SLSCHED recording, then the analysis of its trace: the files are
//! included from `fuzz/fuzz_targets`), and fails if any input panics. Also: the cut seeds
//! read with the warning that says how they were cut (one cut in its header: an error),
//! and files whose fields claim far more than they hold read quickly, with one line each
//! for what was skipped.
//! It does not fuzz: `fuzz/run.sh sched_trace` does (see `fuzz/README.md`).

#[path = "../../../fuzz/fuzz_targets/analysis_steps.rs"]
mod analysis_steps;
#[path = "../../../fuzz/fuzz_targets/sched_trace_steps.rs"]
mod steps;

use std::time::{Duration, Instant};

use steps::read_and_analyze;

#[test]
fn every_corpus_input_reads_and_analyzes_without_a_panic() {
    let corpus = slowlab_testkit::fuzz_corpus("sched_trace");
    let regressions = slowlab_testkit::fuzz_regressions("sched_trace");
    assert!(
        !regressions.is_empty(),
        "fuzz/regressions/sched_trace holds the inputs that crashed the analysis"
    );
    let mut panicked = Vec::new();
    let mut recordings = 0;
    for path in corpus.iter().chain(&regressions) {
        let data = std::fs::read(path).expect("a corpus file");
        match std::panic::catch_unwind(|| read_and_analyze(&data)) {
            Ok(read) => recordings += usize::from(read.is_some()),
            Err(_) => panicked.push(path.display().to_string()),
        }
    }
    assert!(panicked.is_empty(), "panicked: {}", panicked.join(", "));
    assert!(
        recordings > corpus.len() / 2,
        "only {recordings} of {} inputs read as recordings: the corpus lost its seeds",
        corpus.len() + regressions.len()
    );
    println!(
        "replayed {} inputs ({recordings} read as recordings)",
        corpus.len() + regressions.len()
    );
}

/// The named seed `name` of the corpus.
fn seed(name: &str) -> Vec<u8> {
    let path = slowlab_testkit::fuzz_corpus("sched_trace")
        .into_iter()
        .find(|p| p.ends_with(name))
        .unwrap_or_else(|| panic!("fuzz/corpus/sched_trace/{name} is missing"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn warnings_of(data: &[u8]) -> Vec<String> {
    read_and_analyze(data).expect("reads as a recording")
}

fn has(warnings: &[String], text: &str) -> bool {
    warnings.iter().any(|w| w.contains(text))
}

#[test]
fn the_cut_seeds_say_how_they_were_cut() {
    let whole = warnings_of(&seed("true"));
    assert!(
        !has(&whole, "end section") && !has(&whole, "cut"),
        "{whole:?}"
    );
    let no_end = warnings_of(&seed("true-no-end"));
    assert!(has(&no_end, "has no end section"), "{no_end:?}");
    let in_section = warnings_of(&seed("true-cut-in-a-section"));
    assert!(
        has(&in_section, "last section is cut short"),
        "{in_section:?}"
    );
    let in_head = warnings_of(&seed("true-cut-in-a-head"));
    assert!(has(&in_head, "ends inside a section head"), "{in_head:?}");

    // Cut inside its header: an error that says so, named as a scheduler recording.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("cut.data");
    std::fs::write(&file, &seed("header-only")[..20]).expect("write");
    let opts = slowlab_schedrec::ReadOptions::default();
    let err = slowlab_schedrec::read_file(&file, &opts).expect_err("a cut header");
    assert!(
        err.to_string().ends_with(
            "cut.data: not a readable slowlab scheduler recording: its header is cut short \
             (20 of 32 bytes): the recorder stopped before it wrote any record; record again"
        ),
        "{err}"
    );
}

/// The bytes of a section: tag, length, body.
fn section(tag: u32, body: &[u8]) -> Vec<u8> {
    let mut s = tag.to_le_bytes().to_vec();
    s.extend_from_slice(&(body.len() as u32).to_le_bytes());
    s.extend_from_slice(body);
    s
}

#[test]
fn fields_that_claim_more_than_the_file_holds_read_quickly() {
    let started = Instant::now();
    let header = seed("header-only");
    assert_eq!(header.len(), 32, "magic and header");

    // 100,000 sections of a tag no slowlab writes: one warning, not 100,000.
    let mut b = header.clone();
    for _ in 0..100_000 {
        b.extend(section(99, &[]));
    }
    let w = warnings_of(&b);
    let skipped: Vec<&String> = w.iter().filter(|w| w.contains("skipped")).collect();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert!(
        skipped[0].starts_with("skipped 100000 sections"),
        "{skipped:?}"
    );

    // A section that claims 4 GiB, in a file that holds 16 bytes of it.
    let mut b = header.clone();
    b.extend_from_slice(&1u32.to_le_bytes());
    b.extend_from_slice(&u32::MAX.to_le_bytes());
    b.extend_from_slice(&[0; 16]);
    assert!(has(&warnings_of(&b), "last section is cut short"));

    // A PATH record whose path claims 4 GiB: its batch ends there, said once.
    let mut record = [0u8; 32];
    record[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
    record[22] = 14; // PATH
    let mut b = header.clone();
    b.extend(section(1, &record));
    let w = warnings_of(&b);
    assert!(
        has(&w, "a batch of records ends in a damaged record"),
        "{w:?}"
    );

    // A megabyte of samples, half at times of centuries, before an END a second after
    // the start: those are skipped as damage, and the views' buckets stay few.
    let mut events = Vec::new();
    for i in 0..(1u64 << 20) / 32 {
        let mut r = [0u8; 32];
        let time = if i % 2 == 0 { u64::MAX - i } else { i };
        r[..8].copy_from_slice(&time.to_le_bytes());
        r[8..12].copy_from_slice(&7u32.to_le_bytes());
        r[22] = 3; // SAMPLE
        r[24..32].fill(0xff); // no stacks
        events.extend_from_slice(&r);
    }
    let mut end = [0u8; 32];
    end[..8].copy_from_slice(&1_000_000_000u64.to_le_bytes());
    let mut b = header.clone();
    b[8..16].fill(0); // started at 0 ns
    b.extend(section(1, &events));
    b.extend(section(5, &end));
    let w = warnings_of(&b);
    assert!(has(&w, "16384 records have times far outside"), "{w:?}");

    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
}
