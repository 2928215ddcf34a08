//! Tests of the ring sizing: the pipe stream parsed from made-up bytes fed
//! in awkward pieces, and the power-of-two choice.

use super::*;

const TYPE: u64 = SAMPLE_IDENTIFIER | SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | 0x100;

fn record(kind: u32, body: &[u8]) -> Vec<u8> {
    let mut r = kind.to_le_bytes().to_vec();
    r.extend_from_slice(&0u16.to_le_bytes());
    r.extend_from_slice(&((8 + body.len()) as u16).to_le_bytes());
    r.extend_from_slice(body);
    r
}

fn attr(sample_type: u64, id_all: bool, ids: &[u64]) -> Vec<u8> {
    let mut a = vec![0u8; 128];
    a[4..8].copy_from_slice(&128u32.to_le_bytes());
    a[24..32].copy_from_slice(&sample_type.to_le_bytes());
    let flags: u64 = if id_all { 1 << 18 } else { 0 };
    a[40..48].copy_from_slice(&flags.to_le_bytes());
    for id in ids {
        a.extend_from_slice(&id.to_le_bytes());
    }
    record(HEADER_ATTR, &a)
}

/// A sample of `pad` extra bytes (its call chain, say).
fn sample(id: u64, time: u64, cpu: u32, pad: usize) -> Vec<u8> {
    let mut b = Vec::new();
    for v in [id, 0xffff_8000, 7 | (7 << 32), time] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.extend_from_slice(&cpu.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&1u64.to_le_bytes());
    b.resize(b.len() + pad, 0);
    record(RECORD_SAMPLE, &b)
}

/// A COMM-like record with the sample id trailer (tid, time, cpu, id).
fn comm(id: u64, time: u64, cpu: u32) -> Vec<u8> {
    let mut b = vec![0u8; 24];
    for v in [7 | (7 << 32), time, u64::from(cpu), id] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    record(3, &b)
}

/// CPU 1 gets twice CPU 0's bytes, for 3 s; perf's start-up burst in the
/// first 0.1 s is left out.
fn stream() -> Vec<u8> {
    let mut s = b"PERFILE2".to_vec();
    s.extend_from_slice(&16u64.to_le_bytes());
    s.extend(attr(TYPE, true, &[10, 11]));
    s.extend(attr(TYPE | 0x400, true, &[12, 13]));
    let mut tracing = 13u32.to_le_bytes().to_vec();
    tracing.extend_from_slice(&[0u8; 4]);
    s.extend(record(HEADER_TRACING_DATA, &tracing));
    s.extend_from_slice(b"tracing data!");
    let t0 = 5_000_000_000u64;
    s.extend(sample(10, t0, 0, 0));
    for i in 0..100 {
        s.extend(sample(12, t0 + i * 1_000_000, 0, 2000));
    }
    for ms in 0..3000u64 {
        let t = t0 + ms * 1_000_000;
        // 1,000 bytes a ms on CPU 0, 2,000 on CPU 1 (one sample of each
        // event, and a COMM).
        s.extend(sample(10, t, 0, 1000 - 56));
        s.extend(sample(13, t, 1, 1000 - 56));
        s.extend(comm(11, t, 1));
        s.extend(sample(10, t, 1, 1000 - 56 - 64));
    }
    s
}

#[test]
fn the_average_cpus_rate_is_read_from_the_pipe_stream() {
    let bytes = stream();
    let mut rates = PipeRates::default();
    // Pieces that cut headers, records and the tracing payload.
    for piece in bytes.chunks(777) {
        rates.feed(piece);
    }
    assert!(!rates.broken);
    assert_eq!(rates.attrs.len(), 2);
    let rate = rates.per_cpu(SETTLE_NS).expect("3 s of events");
    // 1,000 bytes a ms on CPU 0 and 2,000 on CPU 1.
    assert!((rate - 1_500_000.0).abs() < 15_000.0, "{rate}");
    let cpu0: u64 = rates.bins[&0].iter().sum();
    assert!(cpu0 > 3_000_000);
}

#[test]
fn too_short_or_foreign_streams_have_no_rate() {
    let mut short = PipeRates::default();
    let bytes = stream();
    short.feed(&bytes[..bytes.len() / 5]);
    assert_eq!(short.per_cpu(SETTLE_NS), None);
    let mut foreign = PipeRates::default();
    foreign.feed(b"PERFFILE but not a pipe stream");
    assert!(foreign.broken);
    assert_eq!(foreign.per_cpu(SETTLE_NS), None);
}

#[test]
fn pages_hold_three_quarters_to_one_and_a_half_times_the_seconds_asked() {
    // 1 MB/s for 3 s: 732 pages exactly; 512 hold 2.1 s (too few), 1024
    // hold 4.2 s.
    let (pages, secs) = pages_for(1e6, 3, 1 << 20);
    assert_eq!(pages, 1024);
    assert!((secs - 4.194).abs() < 0.01, "{secs}");
    assert_eq!(pages_for(0.9e6, 3, 1 << 20).0, 512);
    for rate in [3e5, 7e5, 1.3e6, 2.9e6, 3.95e6, 1e7] {
        let (_, secs) = pages_for(rate, 3, 1 << 20);
        assert!((2.25..4.5).contains(&secs), "{rate}: {secs}");
    }
    // Bounds: at least 16 pages, at most the limit.
    assert_eq!(pages_for(10.0, 1, 1 << 20).0, 16);
    assert_eq!(pages_for(0.0, 1, 1 << 20), (16, 1.0));
    let (pages, secs) = pages_for(1e9, 60, 1 << 10);
    assert_eq!(pages, 1 << 10);
    assert!(secs < 0.01);
}

#[test]
fn the_page_limit_is_a_power_of_two() {
    let limit = max_pages(2);
    assert!(
        limit.is_power_of_two() && (16..=1 << 18).contains(&limit),
        "{limit}"
    );
}
