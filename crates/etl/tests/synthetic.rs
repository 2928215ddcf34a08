//! A 32-bit trace built here byte by byte (the fixtures are all 64-bit):
//! two CPUs' buffers, one of them LZ77-compressed, merged in time order;
//! the payload layouts at pointer size 4; and the model built from them
//! (process, threads, modules, a sample with its stack, a context switch
//! and a wake-up). Then every truncation and many corruptions of it, which
//! must read or fail without a panic.

use slowlab_etl::synth::{
    buffer, image, logfile_header, perfinfo_event, process, system_event, thread, FREQ,
};
use slowlab_etl::{read_bytes, to_trace};
use slowlab_model::trace::{EventKind, WindowsSwitchOut, WindowsThreadState, WindowsWaitReason};

const T0: i64 = 1_000_000;

fn trace_bytes() -> Vec<u8> {
    let t = |ms: i64| T0 + ms * (FREQ as i64 / 1000);
    let sample_time = t(5);
    let mut sample = 0x0040_1234u32.to_le_bytes().to_vec();
    sample.extend_from_slice(&101u32.to_le_bytes());
    sample.extend_from_slice(&[1, 0, 0, 0]);
    let mut stack = sample_time.to_le_bytes().to_vec();
    stack.extend_from_slice(&100u32.to_le_bytes());
    stack.extend_from_slice(&101u32.to_le_bytes());
    for f in [0x8040_1000u32, 0x0040_1234, 0x0040_2000] {
        stack.extend_from_slice(&f.to_le_bytes());
    }
    // CSwitch: new 102, old 101, new priority 9, old waiting (5) for
    // WrPageIn (9): an uninterruptible-like wait.
    let mut cswitch = 102u32.to_le_bytes().to_vec();
    cswitch.extend_from_slice(&101u32.to_le_bytes());
    cswitch.extend_from_slice(&[9, 8, 0, 0, 9, 0, 5, 0]);
    cswitch.extend_from_slice(&[0; 8]);
    let ready = [101u32.to_le_bytes().to_vec(), vec![0; 4]].concat();
    let cpu0 = vec![
        system_event(1, 0x0000, 2, 0, 0, T0, &logfile_header(2, 3)),
        system_event(
            1,
            0x0303,
            4,
            u32::MAX,
            u32::MAX,
            t(1),
            &process(100, 4, "app.exe", "app.exe -x"),
        ),
        system_event(1, 0x0503, 3, 101, 100, t(2), &thread(100, 101, "worker")),
        system_event(
            1,
            0x030a,
            3,
            101,
            100,
            t(3),
            &image(100, 0x0040_0000, 0x10000, "\\Windows\\app.exe"),
        ),
        perfinfo_event(0x0f2e, sample_time, &sample),
        system_event(3, 0x0524, 2, 102, 100, t(7), &cswitch),
    ];
    let cpu1 = vec![
        system_event(
            1,
            0x0503,
            3,
            102,
            100,
            t(2) + 1,
            &thread(100, 102, "worker"),
        ),
        system_event(
            1,
            0x1403,
            3,
            0,
            0,
            t(4),
            &image(
                0,
                0x8040_0000,
                0x10000,
                "\\SystemRoot\\system32\\ntoskrnl.exe",
            ),
        ),
        system_event(1, 0x1820, 2, 101, 100, sample_time + 10, &stack),
        system_event(3, 0x0532, 2, 102, 100, t(8), &ready),
    ];
    [buffer(0, &cpu0, false), buffer(1, &cpu1, true)].concat()
}

#[test]
fn a_32_bit_trace_reads_into_the_model() {
    let bytes = trace_bytes();
    let etl = read_bytes(&bytes).expect("reads");
    let h = etl.header.as_ref().unwrap();
    assert_eq!(
        (h.pointer_size, h.number_of_processors, h.events_lost),
        (4, 2, 3)
    );
    assert_eq!(h.logger_name, "Synthetic");
    assert_eq!(etl.stats().compressed_buffers, 1);
    // The two CPUs' events, merged in time order.
    let times: Vec<i64> = etl.events().iter().map(|e| e.header.time).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(times.len(), 10);
    let counts = etl.event_counts();
    assert_eq!(counts["Windows Kernel/Thread/CSwitch"], 1);
    assert_eq!(counts["Windows Kernel/Dispatcher/ReadyThread"], 1);
    assert_eq!(counts["Windows Kernel/Image/Load"], 1);
    assert!(etl.warnings().iter().any(|w| w.contains("lost 3 events")));

    let t = to_trace(&etl);
    let app = t
        .processes
        .iter()
        .find(|p| p.pid == 100)
        .expect("process 100");
    assert_eq!(t.str(app.comm), "app.exe");
    assert_eq!(app.ppid, Some(4));
    assert_eq!(app.threads.len(), 2);
    assert_eq!(t.str(t.threads[app.threads[0].ix()].comm), "worker");
    // One sample, 5 ms in, with the stack walked for it: kernel frame
    // innermost, then the program's.
    assert_eq!(t.samples.len(), 1);
    assert_eq!(t.samples.time_ns[0], 5_000_000);
    let names: Vec<&str> = t
        .stack_frames(t.samples.stack[0])
        .map(|f| t.function_name(t.frame_function(f)))
        .collect();
    assert_eq!(
        names,
        ["ntoskrnl.exe+0x1000", "app.exe+0x1234", "app.exe+0x2000"]
    );
    assert_eq!(t.stats.samples_without_stack, 0);
    // The switch away from 101 (blocked in a paging wait) and its wake-up by 102.
    let kinds: Vec<&EventKind> = t.events.iter().map(|e| &e.kind).collect();
    assert!(
        matches!(
            kinds[..],
            [
                EventKind::Switch {
                    prev_tid: 101,
                    next_tid: 102,
                    next_prio: 119,
                    prev_state: 2,
                    windows: Some(WindowsSwitchOut {
                        state: WindowsThreadState::WAITING,
                        wait_reason: WindowsWaitReason::WR_PAGE_IN,
                    }),
                },
                EventKind::Waking { tid: 101, .. }
            ]
        ),
        "{kinds:?}"
    );
    assert_eq!(t.threads[t.events[1].thread.ix()].tid, 102);
}

#[test]
fn truncated_and_corrupted_traces_never_panic() {
    let bytes = trace_bytes();
    for len in 0..bytes.len() {
        if let Ok(etl) = read_bytes(&bytes[..len]) {
            let _ = to_trace(&etl);
        }
    }
    // Deterministic corruption: flip bytes across the file, one at a time.
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..3000 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let mut damaged = bytes.clone();
        let at = (seed % damaged.len() as u64) as usize;
        damaged[at] ^= (seed >> 32) as u8 | 1;
        if let Ok(etl) = read_bytes(&damaged) {
            let _ = to_trace(&etl);
        }
    }
}

/// A compressed buffer claiming to hold more than the trace's buffer size
/// (the header event says 64 KiB) is corrupt: it is skipped with a warning
/// before anything is decompressed, and the other buffers still read. Its
/// honest twin reads.
#[test]
fn a_compressed_buffer_larger_than_the_traces_buffers_is_skipped() {
    let header = buffer(
        0,
        &[system_event(1, 0x0000, 2, 0, 0, T0, &logfile_header(1, 0))],
        false,
    );
    let thread_event = system_event(1, 0x0503, 3, 101, 100, T0 + 10, &thread(100, 101, "worker"));
    let compressed = buffer(0, &[thread_event.clone(), thread_event], true);
    let with_filled = |filled: u32| {
        let mut c = compressed.clone();
        c[0x30..0x34].copy_from_slice(&filled.to_le_bytes());
        [header.clone(), c].concat()
    };
    let honest = read_bytes(&[header.clone(), compressed.clone()].concat()).unwrap();
    assert_eq!(honest.events().len(), 3);
    assert!(honest.warnings().is_empty(), "{:?}", honest.warnings());

    let claims = 0x10000 + 8;
    let etl = read_bytes(&with_filled(claims)).unwrap();
    assert_eq!(etl.events().len(), 1, "only the header event is read");
    let warnings = etl.warnings();
    assert!(
        warnings.iter().any(|w| w.contains(&format!(
            "claims {claims} bytes, more than the trace's 65536-byte buffers"
        ))),
        "{warnings:?}"
    );
}
