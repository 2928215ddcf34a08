//! Reads the real perf.data fixtures in `tests/fixtures/` (see the README
//! there for the commands that made them) and damaged copies of them:
//! truncation, random bytes, an empty file, another architecture, another
//! byte order. Symbolization is off: the fixtures' binaries and kernel are
//! not on the test machine; structure and counts are what is checked.

use std::path::PathBuf;

use slowlab_model::trace::{EventKind, Trace};
use slowlab_perf::{read_bytes, read_file, PerfError, ReadOptions};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn read(name: &str) -> Trace {
    let opts = ReadOptions {
        symbolize: false,
        ..Default::default()
    };
    read_file(&fixture(name), &opts, &|_, _, _| {}).expect(name)
}

fn bytes(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).expect(name)
}

#[test]
fn frame_pointer_fixture_has_samples_with_stacks() {
    let t = read("hot-fp.perfdata");
    assert_eq!(t.samples.len(), 37);
    assert!(t.stats.warnings.is_empty(), "{:?}", t.stats.warnings);
    assert_eq!(t.meta.arch.as_deref(), Some("x86_64"));
    assert_eq!(t.meta.sample_freq, Some(499));
    let p = t.processes.iter().find(|p| t.str(p.comm) == "hot").unwrap();
    assert!(!p.threads.is_empty());
    // Every sample has a stack, and stacks have callers.
    assert!(t.samples.stack.iter().all(Option::is_some));
    assert!(t
        .samples
        .stack
        .iter()
        .any(|&s| t.stack_frames(s).count() >= 3));
    assert!(t.modules.iter().any(|m| t.str(m.name) == "hot"));
}

#[test]
fn compressed_fixture_reads_like_the_plain_one() {
    let t = read("hot-zstd.perfdata");
    assert_eq!(t.samples.len(), 37);
    assert!(t.modules.iter().any(|m| t.str(m.name) == "hot"));
}

#[test]
fn pipe_mode_fixture_reads_through_the_fallback_path() {
    let t = read("hot-pipe.perfdata");
    assert_eq!(t.samples.len(), 31);
    assert!(t.stats.warnings.is_empty(), "{:?}", t.stats.warnings);
    assert!(t.samples.stack.iter().all(Option::is_some));
    assert!(t.modules.iter().any(|m| t.str(m.name) == "hot"));
    assert!(t.samples.time_ns.windows(2).all(|w| w[0] <= w[1]));
}

#[test]
fn scheduler_fixture_decodes_tracepoints() {
    let t = read("sched.perfdata");
    let count = |f: &dyn Fn(&EventKind) -> bool| t.events.iter().filter(|e| f(&e.kind)).count();
    assert!(count(&|k| matches!(k, EventKind::Switch { .. })) > 0);
    assert!(count(&|k| matches!(k, EventKind::Waking { .. })) > 0);
    // `cat /nonexistent-file` fails with ENOENT.
    let enoent = t
        .events
        .iter()
        .filter(|e| matches!(&e.kind, EventKind::SyscallExit { name, ret, .. } if t.str(*name) == "openat" && *ret == -2))
        .count();
    assert!(enoent >= 1);
    // A Linux trace leaves the Windows fields empty.
    assert!(t.events.iter().all(|e| match e.kind {
        EventKind::Switch { windows, .. } => windows.is_none(),
        EventKind::PageFault { windows_kind, .. } => windows_kind.is_none(),
        EventKind::SyscallEnter { file_op, .. } | EventKind::SyscallExit { file_op, .. } =>
            file_op.is_none(),
        _ => true,
    }));
    // Switch records name real threads.
    assert!(t.events.iter().any(|e| matches!(e.kind, EventKind::Switch { prev_tid, next_tid, .. } if prev_tid > 0 || next_tid > 0)));
    // sh forked children: lifetimes with parents.
    assert!(t
        .processes
        .iter()
        .any(|p| p.ppid.is_some() && p.start_ns.is_some()));
}

#[test]
fn killed_recording_is_read_with_a_warning() {
    let t = read("killed.perfdata");
    assert!(t.stats.unfinished_file);
    assert!(t.samples.len() > 100, "{}", t.samples.len());
    assert!(t.stats.warnings.iter().any(|w| w.contains("not finished")));
}

#[test]
fn truncated_mid_record_counts_skipped_bytes() {
    let mut b = bytes("killed.perfdata");
    b.truncate(b.len() - 37);
    let t = read_bytes(&b, &|_, _, _| {}).unwrap();
    assert!(t.stats.truncated_bytes > 0);
    assert!(t.samples.len() > 100);
    // A finished file cut short (here inside its trailing feature
    // sections) is read with a warning.
    let mut b = bytes("hot-fp.perfdata");
    b.truncate(b.len() / 2);
    let t = read_bytes(&b, &|_, _, _| {}).unwrap();
    assert!(!t.stats.warnings.is_empty());
}

#[test]
fn a_file_of_several_events_cut_short_keeps_its_records_apart() {
    // Cut inside the data section: the header is whole but claims more records than
    // there are, and the feature sections (EVENT_DESC, with the events' ids) are gone;
    // the ids are then read from the attribute section.
    let full = read("sched.perfdata");
    let mut b = bytes("sched.perfdata");
    let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap()) as usize;
    let (data_off, data_size) = (u64_at(40), u64_at(48));
    b.truncate(data_off + data_size * 3 / 5);
    let t = read_bytes(&b, &|_, _, _| {}).unwrap();
    assert!(
        t.stats
            .warnings
            .iter()
            .any(|w| w.contains("the file is cut short")),
        "{:?}",
        t.stats.warnings
    );
    // Every sample of the cut file is a sample of the whole one (a switch or a
    // fault counted as a sample of cpu-clock would not be).
    let samples: std::collections::HashSet<u64> = full.samples.time_ns.iter().copied().collect();
    assert!(
        t.samples.len() <= full.samples.len()
            && t.samples.time_ns.iter().all(|ns| samples.contains(ns)),
        "{} samples, the whole file has {}",
        t.samples.len(),
        full.samples.len()
    );
    assert!(!t.events.is_empty(), "the other events are events");
}

#[test]
fn empty_and_random_files_are_errors_not_panics() {
    assert!(matches!(
        read_bytes(&[], &|_, _, _| {}),
        Err(PerfError::Empty)
    ));
    let mut x: u64 = 0x9e3779b97f4a7c15;
    let random: Vec<u8> = (0..100_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    assert!(matches!(
        read_bytes(&random, &|_, _, _| {}),
        Err(PerfError::NotPerfData(_))
    ));
    // Random bytes behind a valid magic and header.
    let mut b = bytes("hot-fp.perfdata");
    for (i, v) in b.iter_mut().enumerate().skip(400) {
        *v = (i * 7919 % 251) as u8;
    }
    let _ = read_bytes(&b, &|_, _, _| {});
    // Every prefix length of a real file: never a panic.
    let b = bytes("sched.perfdata");
    for len in (0..b.len()).step_by(997) {
        let _ = read_bytes(&b[..len], &|_, _, _| {});
    }
}

#[test]
fn every_prefix_and_flipped_byte_of_a_real_file_reads_without_panic() {
    // The hand-written record parser (samples decoded in place) against
    // every way a file can be cut short, and against damaged bytes in the
    // header, the attributes, the records and the feature sections.
    for name in ["hot-fp.perfdata", "hot-zstd.perfdata", "hot-pipe.perfdata"] {
        let b = bytes(name);
        for len in 0..b.len() {
            let _ = read_bytes(&b[..len], &|_, _, _| {});
        }
    }
    for (name, step) in [
        ("sched.perfdata", 7),
        ("hot-fp.perfdata", 1),
        ("hot-zstd.perfdata", 3),
    ] {
        let b = bytes(name);
        let mut damaged = b.clone();
        for i in (0..b.len()).step_by(step) {
            for v in [0x00, 0xff, b[i] ^ 0x80] {
                damaged[i] = v;
                let _ = read_bytes(&damaged, &|_, _, _| {});
            }
            damaged[i] = b[i];
        }
    }
    // Runs of random bytes anywhere in a bigger recording.
    let b = bytes("killed.perfdata");
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..300 {
        let mut damaged = b.clone();
        let at = (next() as usize) % b.len();
        let end = (at + 1 + (next() as usize) % 64).min(b.len());
        for byte in &mut damaged[at..end] {
            *byte = next() as u8;
        }
        let _ = read_bytes(&damaged, &|_, _, _| {});
    }
}

#[test]
fn samples_come_out_in_time_order() {
    // perf writes per-CPU buffers one after another; the reader sorts.
    let t = read("killed.perfdata");
    assert!(t.samples.time_ns.windows(2).all(|w| w[0] <= w[1]));
    let t = read("sched.perfdata");
    assert!(t.events.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
}

#[test]
fn file_from_another_architecture_is_read_unsymbolized_with_a_warning() {
    let mut b = bytes("hot-fp.perfdata");
    // Rewrite the arch string in the header's feature section.
    let pos = b
        .windows(7)
        .position(|w| w == b"x86_64\0")
        .expect("arch string");
    b[pos..pos + 7].copy_from_slice(b"armv7l\0");
    let map = b.clone();
    let mut t = read_bytes(&map, &|_, _, _| {}).unwrap();
    assert_eq!(t.meta.arch.as_deref(), Some("armv7l"));
    assert!(t.stats.warnings.iter().any(|w| w.contains("armv7l")));
    slowlab_perf::symbolize::symbolize(&mut t, &ReadOptions::default(), &|_, _, _| {});
    assert!(t.functions.iter().all(|f| t.str(f.name) == "[unknown]"));
}

#[test]
fn big_endian_magic_on_little_endian_data_does_not_panic() {
    let mut b = bytes("hot-fp.perfdata");
    b[..8].copy_from_slice(b"2ELIFREP");
    assert!(read_bytes(&b, &|_, _, _| {}).is_err());
}

/// Each sample's and event's stack as function names (modules here: the
/// fixtures are read unsymbolized, so a module's frames are one function).
fn named_stacks(t: &Trace) -> Vec<Vec<String>> {
    let names = |s| {
        t.stack_frames(s)
            .map(|f| {
                let func = t.frame_function(f);
                format!("{}@{}", t.function_name(func), t.function_module(func))
            })
            .collect()
    };
    let samples = t.samples.stack.iter().map(|&s| names(s));
    samples
        .chain(t.events.iter().map(|e| names(e.stack)))
        .collect()
}

#[test]
fn a_trace_over_the_memory_budget_is_read_by_function_with_the_same_stacks() {
    for name in [
        "hot-fp.perfdata",
        "hot-zstd.perfdata",
        "hot-pipe.perfdata",
        "sched.perfdata",
        "killed.perfdata",
    ] {
        let read_with = |memory_budget| {
            let opts = ReadOptions {
                symbolize: false,
                memory_budget,
                ..Default::default()
            };
            read_file(&fixture(name), &opts, &|_, _, _| {}).expect(name)
        };
        let (whole, by_function) = (read_with(None), read_with(Some(1)));
        assert!(whole.samples.len() + whole.events.len() > 20, "{name}");
        assert_eq!(whole.samples.time_ns, by_function.samples.time_ns, "{name}");
        assert_eq!(whole.samples.thread, by_function.samples.thread, "{name}");
        assert_eq!(whole.events.len(), by_function.events.len(), "{name}");
        assert_eq!(named_stacks(&whole), named_stacks(&by_function), "{name}");
        // One frame per function, and no more stack nodes than before.
        assert_eq!(
            by_function.frames.len(),
            by_function.functions.len(),
            "{name}"
        );
        assert!(by_function.frames.len() < whole.frames.len(), "{name}");
        assert!(by_function.stacks.len() < whole.stacks.len(), "{name}");
        // The trace says how it was read, once; the rest is as before.
        let (said, rest): (Vec<_>, Vec<_>) = by_function
            .stats
            .warnings
            .iter()
            .partition(|w| w.contains("read in two passes"));
        assert_eq!(said.len(), 1, "{name}: {:?}", by_function.stats.warnings);
        assert!(said[0].contains("SLOWLAB_MEMORY="), "{}", said[0]);
        assert_eq!(
            rest,
            whole.stats.warnings.iter().collect::<Vec<_>>(),
            "{name}"
        );
        // Under the budget, one pass; over it by a byte, one pass too,
        // its projected memory (a fraction of the file) fitting.
        let small = std::fs::metadata(fixture(name)).unwrap().len();
        for budget in [small, small - 1] {
            let within = read_with(Some(budget));
            assert_eq!(within.stacks.len(), whole.stacks.len(), "{name}");
            assert_eq!(within.stats.warnings, whole.stats.warnings, "{name}");
        }
    }
}
