//! File operations, soft page faults, VirtualAlloc/VirtualFree and
//! context-switch stacks of a 32-bit trace written here byte by byte
//! (`slowlab_etl::synth`; the fixtures hold none of these events) read into
//! the model: syscall-like pairs with their results and paths, fault kinds,
//! allocation flags, and the switched-in thread's stack on the switch that
//! blocked it.

use slowlab_etl::synth::*;
use slowlab_etl::{read_bytes, to_trace_and_paths};
use slowlab_model::trace::{EventKind, FileOp, Trace, WindowsFaultKind};

const T0: i64 = 1_000_000;
const NOT_FOUND: u32 = 0xC000_0034;

fn t(us: i64) -> i64 {
    T0 + us * (FREQ as i64 / 1_000_000)
}

fn trace_bytes() -> Vec<u8> {
    let (pid, tid, other) = (100u32, 101u32, 102u32);
    let sys = |hook, tid, time, payload: &[u8]| system_event(1, hook, 2, tid, pid, time, payload);
    let mut cswitch_out = other.to_le_bytes().to_vec(); // new 102, old 101 waiting
    cswitch_out.extend_from_slice(&tid.to_le_bytes());
    cswitch_out.extend_from_slice(&[9, 8, 0, 0, 6, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    let mut cswitch_in = tid.to_le_bytes().to_vec(); // new 101, old 102 waiting
    cswitch_in.extend_from_slice(&other.to_le_bytes());
    cswitch_in.extend_from_slice(&[9, 8, 0, 0, 6, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    let events = vec![
        header_event(T0, 1, 0),
        system_event(1, 0x0303, 4, 0, 0, t(1), &process(pid, 4, "app.exe", "app")),
        system_event(1, 0x0503, 3, tid, pid, t(2), &thread(pid, tid, "main")),
        system_event(1, 0x0503, 3, other, pid, t(3), &thread(pid, other, "")),
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
        // A create that fails, one that succeeds, then a close of the file
        // named only by a rundown at the end of the trace.
        sys(
            0x0440,
            tid,
            t(10),
            &file_create(0x1, tid, 0xf1, "\\Windows\\x.0.dat"),
        ),
        sys(0x044c, tid, t(30), &file_op_end(0x1, NOT_FOUND)),
        sys(
            0x0440,
            tid,
            t(40),
            &file_create(0x2, tid, 0xf2, "\\Windows\\x.1.dat"),
        ),
        sys(0x044c, tid, t(50), &file_op_end(0x2, 0)),
        sys(0x0442, tid, t(60), &file_simple_op(0x3, tid, 0xf3, 0xa3)),
        sys(0x044c, tid, t(61), &file_op_end(0x3, 0)),
        // Faults and a top-down reservation, then its release.
        sys(0x020a, tid, t(70), &soft_fault(0x0001_0000, 0x0040_1000)),
        sys(0x020b, tid, t(71), &soft_fault(0x0002_0000, 0x8040_2000)),
        sys(
            0x0262,
            tid,
            t(80),
            &virtual_alloc(0x7ff0_0000, 0x10000, pid, 0x10_2000),
        ),
        sys(
            0x0263,
            tid,
            t(90),
            &virtual_alloc(0x7ff0_0000, 0x10000, pid, 0x8000),
        ),
        // 101 blocks, 102 runs, 101 comes back: its stack is walked then.
        system_event(3, 0x0524, 2, other, pid, t(100), &cswitch_out),
        system_event(3, 0x0524, 2, tid, pid, t(200), &cswitch_in),
        sys(
            0x1820,
            tid,
            t(200) + 1,
            &stack(t(200), pid, tid, &[0x8040_3000]),
        ),
        sys(0x0424, 0, t(300), &file_name(0xa3, "\\Windows\\later.log")),
    ];
    buffer(0, &events, false)
}

fn read() -> (Trace, Vec<slowlab_model::bundle::CapturedPath>) {
    let etl = read_bytes(&trace_bytes()).expect("reads");
    to_trace_and_paths(&etl)
}

#[test]
fn file_operations_become_calls_with_results_and_paths() {
    let (t, paths) = read();
    let calls: Vec<(String, Option<FileOp>, Option<i64>)> = t
        .events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::SyscallEnter { name, file_op, .. } => {
                Some((t.str(name).to_string(), file_op, None))
            }
            EventKind::SyscallExit { name, ret, file_op } => {
                Some((t.str(name).to_string(), file_op, Some(ret)))
            }
            _ => None,
        })
        .collect();
    let (create, close) = (Some(FileOp::Create), Some(FileOp::Close));
    let expected = [
        ("FileIO/Create", create, None),
        ("FileIO/Create", create, Some(-2)),
        ("FileIO/Create", create, None),
        ("FileIO/Create", create, Some(0)),
        ("FileIO/Close", close, None),
        ("FileIO/Close", close, Some(0)),
        ("VirtualAlloc", None, None),
        ("VirtualAlloc", None, Some(0)),
        ("VirtualFree", None, None),
        ("VirtualFree", None, Some(0)),
    ];
    let got: Vec<(&str, Option<FileOp>, Option<i64>)> = calls
        .iter()
        .map(|(n, op, r)| (n.as_str(), *op, *r))
        .collect();
    assert_eq!(got, expected);
    let named: Vec<(&str, &str)> = paths
        .iter()
        .map(|p| (p.syscall.as_str(), p.path.as_str()))
        .collect();
    assert_eq!(
        named,
        [
            ("FileIO/Create", "C:\\Windows\\x.0.dat"),
            ("FileIO/Create", "C:\\Windows\\x.1.dat"),
            ("FileIO/Close", "C:\\Windows\\later.log"),
        ]
    );
    assert!(paths.iter().all(|p| p.tid == 101));
    assert_eq!(paths[0].time_ns, 10_000);
}

#[test]
fn faults_keep_their_kind_and_allocations_their_flags() {
    let (t, _) = read();
    let faults: Vec<_> = t
        .events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::PageFault {
                error_code,
                user,
                windows_kind,
                ..
            } => Some((windows_kind, error_code, user)),
            _ => None,
        })
        .collect();
    assert_eq!(
        faults,
        [
            (Some(WindowsFaultKind::Transition), 4, true),
            (Some(WindowsFaultKind::DemandZero), 0, false)
        ]
    );
    let alloc = t.events.iter().find_map(|e| match e.kind {
        EventKind::SyscallEnter { name, ref args, .. } if t.str(name) == "VirtualAlloc" => {
            Some(args)
        }
        _ => None,
    });
    assert_eq!(
        alloc.map(|a| (a[0], a[1], a[2], a[3])),
        Some((0x7ff0_0000, 0x10000, 0x10_2000, 100))
    );
}

#[test]
fn a_switch_in_stack_is_the_blocking_stack_of_the_earlier_switch_out() {
    let (t, _) = read();
    let switches: Vec<_> = t
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Switch { .. }))
        .collect();
    assert_eq!(switches.len(), 2);
    assert!(matches!(
        switches[0].kind,
        EventKind::Switch { prev_tid: 101, .. }
    ));
    let names: Vec<&str> = t
        .stack_frames(switches[0].stack)
        .map(|f| t.function_name(t.frame_function(f)))
        .collect();
    assert_eq!(names, ["ntoskrnl.exe+0x3000"]);
    assert!(switches[1].stack.is_none());
}
