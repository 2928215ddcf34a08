//! The 64-bit PerfView fixture against TraceEvent's own baseline for it
//! (`fixtures/perfview-net.4.5.2.x64.baseline.txt`, the output of
//! TraceEvent's `GeneralParsing` test): event counts and the first events'
//! fields.
//!
//! TraceEvent reads through `TraceLog`, which drops some events that this
//! reader counts (it reports every event in the file):
//! - `Thread/DCStart` and `Thread/DCStop` (rundown "bookkeeping" events);
//! - `PerfInfo/Sample` on the idle thread (thread id 0) unless the CPU ran
//!   a DPC or an interrupt;
//! - `FileIO` name events (`FileCreate`, `FileDelete`, `FileRundown`) and
//!   all `StackWalk` events, which it folds into file names and stacks;
//! - classic events it leaves to the OS's parser, named `MSNT_SystemTrace/…`
//!   (only `Image/KernelBase` and `SystemConfig/Platform` kept).
//!
//! The comparison below removes exactly those before comparing.

use std::collections::BTreeMap;
use std::path::PathBuf;

use slowlab_etl::names::group;
use slowlab_etl::{header::Source, kernel, Etl};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn read_net452() -> Etl {
    slowlab_etl::read_file(&fixture("perfview-net.4.5.2.x64.etl.zip")).expect("fixture reads")
}

fn baseline() -> String {
    std::fs::read_to_string(fixture("perfview-net.4.5.2.x64.baseline.txt")).unwrap()
}

/// `COUNT name:N` lines of the baseline.
fn baseline_counts(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| l.strip_prefix("COUNT "))
        .filter_map(|l| {
            let (name, n) = l.rsplit_once(':')?;
            Some((name.to_string(), n.parse().ok()?))
        })
        .collect()
}

const COMPARED: &[&str] = &[
    "Windows Kernel/Process/",
    "Windows Kernel/Thread/",
    "Windows Kernel/Image/",
    "Windows Kernel/DiskIO/",
    "Windows Kernel/Memory/HardFault",
    "Windows Kernel/TcpIp/",
    "Windows Kernel/UdpIp/",
    "Windows Kernel/PerfInfo/",
    "Windows Kernel/EventTrace",
    "Windows Kernel/SystemConfig/",
    "Windows Kernel/SysConfig/",
    "KernelTraceControl/",
];

fn compared(counts: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    counts
        .iter()
        .filter(|(name, _)| COMPARED.iter().any(|p| name.starts_with(p)))
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

#[test]
fn kernel_event_counts_equal_traceevents_after_its_documented_drops() {
    let etl = read_net452();
    let mut ours = etl.event_counts();
    // TraceLog's drops (see the module doc).
    ours.remove("Windows Kernel/Thread/DCStart");
    ours.remove("Windows Kernel/Thread/DCStop");
    let idle_samples = etl
        .events()
        .iter()
        .filter(|e| {
            e.header.source
                == Source::Kernel {
                    group: group::PERF_INFO,
                }
                && e.header.opcode == 46
        })
        .filter_map(|e| kernel::sample(etl.payload(e)))
        .filter(|s| s.tid == 0 && !s.in_dpc_or_isr)
        .count() as u64;
    assert!(idle_samples > 0);
    *ours.get_mut("Windows Kernel/PerfInfo/Sample").unwrap() -= idle_samples;
    // Events TraceEvent names from the OS's MOF (`MSNT_SystemTrace/…`);
    // it keeps Image/KernelBase (Image opcode 33) and drops the others.
    ours.remove("Windows Kernel/Image/Opcode(33)");
    ours.remove("Windows Kernel/Image/Opcode(34)");
    for op in [18, 25, 28] {
        ours.remove(&format!("Windows Kernel/SystemConfig/Opcode({op})"));
    }

    let theirs = baseline_counts(&baseline());
    assert_eq!(compared(&ours), compared(&theirs));
    // The named ones the issue asks for, explicitly.
    for name in [
        "Windows Kernel/Process/DCStart",
        "Windows Kernel/Thread/Start",
        "Windows Kernel/Image/Load",
        "Windows Kernel/DiskIO/Read",
        "Windows Kernel/Memory/HardFault",
        "Windows Kernel/TcpIp/SendIPV6",
        "Windows Kernel/PerfInfo/Sample",
    ] {
        assert_eq!(ours.get(name), theirs.get(name), "{name}");
    }
}

#[test]
fn the_logfile_header_matches_the_baselines_eventtrace_line() {
    let etl = read_net452();
    let h = etl.header.as_ref().expect("header");
    let line = baseline()
        .lines()
        .find(|l| l.starts_with("EVENT 0.000: Windows Kernel/EventTrace "))
        .unwrap()
        .to_string();
    for (field, value) in [
        ("BufferSize", h.buffer_size.to_string()),
        ("NumberOfProcessors", h.number_of_processors.to_string()),
        ("PointerSize", h.pointer_size.to_string()),
        ("EventsLost", h.events_lost.to_string()),
        ("BuffersLost", h.buffers_lost.to_string()),
        ("PerfFreq", h.clock_frequency.to_string()),
        ("SessionName", h.logger_name.clone()),
    ] {
        let expected = field_of(&line, field).unwrap();
        assert_eq!(expected.replace(',', ""), value, "{field}");
    }
    assert!(etl.stats().compressed_buffers > 300);
}

/// The value of `Name=value;` in a baseline line.
fn field_of<'a>(line: &'a str, field: &str) -> Option<&'a str> {
    line.split("; ").find_map(|kv| {
        let (key, value) = kv.split_once('=')?;
        (key.rsplit(' ').next() == Some(field)).then(|| value.trim_end_matches(';'))
    })
}

/// TraceEvent's rendering of an address: at least 8 hex digits.
fn hex(v: u64) -> String {
    format!("0x{v:08x}")
}

/// TraceEvent's rendering of a string field: at most 20 characters, then `...`.
fn shown(s: &str) -> String {
    if s.chars().count() > 20 {
        format!("{}...", s.chars().take(20).collect::<String>())
    } else {
        s.to_string()
    }
}

/// The baseline's first lines for an event name, as `(time ms, fields)`.
fn baseline_lines(text: &str, name: &str) -> Vec<(String, String)> {
    let marker = format!(": {name} ");
    text.lines()
        .filter(|l| l.starts_with("EVENT ") && l.contains(&marker))
        .map(|l| {
            let time = l["EVENT ".len()..l.find(':').unwrap()].replace(',', "");
            (time, l.to_string())
        })
        .collect()
}

fn ms(etl: &Etl, time: i64) -> String {
    format!("{:.3}", etl.ns(time) as f64 / 1e6)
}

#[test]
fn the_first_process_events_equal_the_baselines_lines() {
    let etl = read_net452();
    let text = baseline();
    for (opcode, name) in [
        (1u8, "Start"),
        (2, "Stop"),
        (3, "DCStart"),
        (4, "DCStop"),
        (39, "Defunct"),
    ] {
        let theirs = baseline_lines(&text, &format!("Windows Kernel/Process/{name}"));
        let ours: Vec<_> = etl
            .events()
            .iter()
            .filter(|e| {
                e.header.source
                    == Source::Kernel {
                        group: group::PROCESS,
                    }
                    && e.header.opcode == opcode
            })
            .take(5)
            .collect();
        assert_eq!(ours.len(), theirs.len(), "Process/{name}");
        for (e, (time, line)) in ours.iter().zip(&theirs) {
            let p = kernel::process(etl.payload(e), e.header.version).expect("decodes");
            assert_eq!(&ms(&etl, e.header.time), time, "{line}");
            assert_eq!(
                field_of(line, "ProcessID").unwrap().replace(',', ""),
                p.pid.to_string(),
                "{line}"
            );
            assert_eq!(
                field_of(line, "ParentID").unwrap().replace(',', ""),
                p.parent_pid.to_string(),
                "{line}"
            );
            assert_eq!(
                field_of(line, "ImageFileName").unwrap(),
                shown(&p.image_file_name),
                "{line}"
            );
            assert_eq!(
                field_of(line, "CommandLine").unwrap(),
                shown(&p.command_line),
                "{line}"
            );
            assert_eq!(
                field_of(line, "UniqueProcessKey").unwrap(),
                hex(p.unique_key),
                "{line}"
            );
        }
    }
}

#[test]
fn the_first_thread_events_equal_the_baselines_lines() {
    let etl = read_net452();
    let text = baseline();
    for (opcode, name) in [(1u8, "Start"), (2, "Stop")] {
        let theirs = baseline_lines(&text, &format!("Windows Kernel/Thread/{name}"));
        let ours: Vec<_> = etl
            .events()
            .iter()
            .filter(|e| {
                e.header.source
                    == Source::Kernel {
                        group: group::THREAD,
                    }
                    && e.header.opcode == opcode
            })
            .take(5)
            .collect();
        assert_eq!(ours.len(), theirs.len(), "Thread/{name}");
        for (e, (time, line)) in ours.iter().zip(&theirs) {
            let t = kernel::thread(etl.payload(e), e.header.version).expect("decodes");
            assert_eq!(&ms(&etl, e.header.time), time, "{line}");
            assert_eq!(field_of(line, "TID").unwrap(), t.tid.to_string(), "{line}");
            assert_eq!(field_of(line, "PID").unwrap(), t.pid.to_string(), "{line}");
            assert_eq!(
                field_of(line, "Win32StartAddr").unwrap(),
                hex(t.win32_start_addr),
                "{line}"
            );
        }
    }
}

#[test]
fn the_first_image_events_equal_the_baselines_lines() {
    let etl = read_net452();
    let text = baseline();
    let paths = slowlab_etl::model::VolumeMap::from_etl(&etl);
    for (grp, opcode, name) in [
        (group::PROCESS, 10u8, "Load"),
        (group::IMAGE, 2, "Unload"),
        (group::IMAGE, 3, "DCStart"),
        (group::IMAGE, 4, "DCStop"),
    ] {
        let theirs = baseline_lines(&text, &format!("Windows Kernel/Image/{name}"));
        let ours: Vec<_> = etl
            .events()
            .iter()
            .filter(|e| {
                e.header.source == Source::Kernel { group: grp } && e.header.opcode == opcode
            })
            .take(5)
            .collect();
        assert_eq!(ours.len(), theirs.len(), "Image/{name}");
        for (e, (time, line)) in ours.iter().zip(&theirs) {
            let img = kernel::image(etl.payload(e), e.header.version).expect("decodes");
            assert_eq!(&ms(&etl, e.header.time), time, "{line}");
            assert_eq!(
                field_of(line, "ImageBase").unwrap(),
                hex(img.base),
                "{line}"
            );
            assert_eq!(
                field_of(line, "ImageSize").unwrap().replace(',', ""),
                img.size.to_string(),
                "{line}"
            );
            assert_eq!(
                field_of(line, "FileName").unwrap(),
                shown(&paths.to_dos(&img.file_name)),
                "{line}"
            );
        }
    }
}
