//! Event names as Microsoft's TraceEvent library prints them, so that counts
//! can be checked against its published baselines: classic kernel events as
//! `Windows Kernel/Task/Opcode` (`Windows Kernel/Process/DCStart`,
//! `Windows Kernel/PerfInfo/Sample`; opcode 0 is just the task), unknown
//! opcodes as `Task/Opcode(N)`; KernelTraceControl's events;
//! manifest-based events as `Provider/EventID(N)` with the provider's name
//! when it is a well-known one (its GUID otherwise); TraceLogging events as
//! `Provider/EventName` from their own metadata.
//!
//! The table of kernel task and opcode names is facts about the format
//! (TraceEvent's `KernelTraceEventParser` registers the same numbers and
//! names, MIT-licensed); no decoding happens here.

use crate::guid::{guid, Guid};
use crate::header::Source;

/// The kernel's event groups (the high byte of a classic hook id).
pub mod group {
    pub const EVENT_TRACE: u8 = 0x00;
    pub const DISK_IO: u8 = 0x01;
    pub const MEMORY: u8 = 0x02;
    pub const PROCESS: u8 = 0x03;
    pub const FILE_IO: u8 = 0x04;
    pub const THREAD: u8 = 0x05;
    pub const TCP_IP: u8 = 0x06;
    pub const UDP_IP: u8 = 0x08;
    pub const REGISTRY: u8 = 0x09;
    pub const SYSTEM_CONFIG: u8 = 0x0b;
    pub const PERF_INFO: u8 = 0x0f;
    pub const HEAP: u8 = 0x10;
    pub const OBJECT: u8 = 0x11;
    pub const IMAGE: u8 = 0x14;
    pub const CRIT_SEC: u8 = 0x17;
    pub const STACK_WALK: u8 = 0x18;
    pub const ALPC: u8 = 0x1a;
    pub const SPLIT_IO: u8 = 0x1b;
    pub const THREAD_POOL: u8 = 0x1c;
    /// Not a hook group: xperf's `SysConfig` events (full headers with the
    /// GUID below) share the kernel's provider name.
    pub const SYS_CONFIG: u8 = 0xf0;
}
use group::*;

/// The kernel's task GUIDs, for classic events written with a full header
/// instead of a hook id.
const TASK_GUIDS: &[(Guid, u8)] = &[
    (guid("68fdd900-4a3e-11d1-84f4-0000f80464e3"), EVENT_TRACE),
    (guid("3d6fa8d4-fe05-11d0-9dda-00c04fd7ba7c"), DISK_IO),
    (guid("3d6fa8d3-fe05-11d0-9dda-00c04fd7ba7c"), MEMORY),
    (guid("3d6fa8d0-fe05-11d0-9dda-00c04fd7ba7c"), PROCESS),
    (guid("90cbdc39-4a3e-11d1-84f4-0000f80464e3"), FILE_IO),
    (guid("3d6fa8d1-fe05-11d0-9dda-00c04fd7ba7c"), THREAD),
    (guid("9a280ac0-c8e0-11d1-84e2-00c04fb998a2"), TCP_IP),
    (guid("bf3a50c5-a9c9-4988-a005-2df0b7c80f80"), UDP_IP),
    (guid("ae53722e-c863-11d2-8659-00c04fa321a1"), REGISTRY),
    (guid("01853a65-418f-4f36-aefc-dc0f1d2fd235"), SYSTEM_CONFIG),
    (guid("ce1dbfb4-137e-4da6-87b0-3f59aa102cbc"), PERF_INFO),
    (guid("222962ab-6180-4b88-a825-346b75f2a24a"), HEAP),
    (guid("89497f50-effe-4440-8cf2-ce6b1cdcaca7"), OBJECT),
    (guid("2cb15d1d-5fc1-11d2-abe1-00a0c911f518"), IMAGE),
    (guid("3ac66736-cc59-4cff-8115-8df50e39816b"), CRIT_SEC),
    (guid("def2fe46-7bd6-4b80-bd94-f57fe20d0ce3"), STACK_WALK),
    (guid("45d8cccd-539f-4b72-a8b7-5c683142609a"), ALPC),
    (guid("d837ca92-12b9-44a5-ad6a-3a65b3578aa8"), SPLIT_IO),
    (guid("c861d0e2-a2c1-4d36-9f9c-970bab943a12"), THREAD_POOL),
    (guid("9b79ee91-b5fd-41c0-a243-4248e266e9d0"), SYS_CONFIG),
];

/// Task names of the groups, for opcodes the table does not list.
const GROUP_TASKS: &[(u8, &str)] = &[
    (EVENT_TRACE, "EventTrace"),
    (DISK_IO, "DiskIO"),
    (MEMORY, "Memory"),
    (PROCESS, "Process"),
    (FILE_IO, "FileIO"),
    (THREAD, "Thread"),
    (TCP_IP, "TcpIp"),
    (UDP_IP, "UdpIp"),
    (REGISTRY, "Registry"),
    (SYSTEM_CONFIG, "SystemConfig"),
    (PERF_INFO, "PerfInfo"),
    (HEAP, "HeapTrace"),
    (OBJECT, "Object"),
    (IMAGE, "Image"),
    (CRIT_SEC, "CritSecTrace"),
    (STACK_WALK, "StackWalk"),
    (ALPC, "ALPC"),
    (SPLIT_IO, "SplitIo"),
    (THREAD_POOL, "ThreadPoolTrace"),
    (SYS_CONFIG, "SysConfig"),
];

/// `(group, opcode, task name, opcode name)`, sorted by group and opcode.
const KERNEL_OPCODES: &[(u8, u8, &str, &str)] = &[
    (EVENT_TRACE, 0, "EventTrace", "Header"),
    (EVENT_TRACE, 5, "EventTrace", "Extension"),
    (EVENT_TRACE, 8, "EventTrace", "RundownComplete"),
    (EVENT_TRACE, 32, "EventTrace", "EndExtension"),
    (DISK_IO, 10, "DiskIO", "Read"),
    (DISK_IO, 11, "DiskIO", "Write"),
    (DISK_IO, 12, "DiskIO", "ReadInit"),
    (DISK_IO, 13, "DiskIO", "WriteInit"),
    (DISK_IO, 14, "DiskIO", "FlushBuffers"),
    (DISK_IO, 15, "DiskIO", "FlushInit"),
    (DISK_IO, 34, "DiskIO", "DriverMajorFunctionCall"),
    (DISK_IO, 35, "DiskIO", "DriverMajorFunctionReturn"),
    (DISK_IO, 37, "DiskIO", "DriverCompletionRoutine"),
    (DISK_IO, 52, "DiskIO", "DriverCompleteRequest"),
    (DISK_IO, 53, "DiskIO", "DriverCompleteRequestReturn"),
    (MEMORY, 10, "Memory", "TransitionFault"),
    (MEMORY, 11, "Memory", "DemandZeroFault"),
    (MEMORY, 12, "Memory", "CopyOnWrite"),
    (MEMORY, 13, "Memory", "GuardMemory"),
    (MEMORY, 14, "Memory", "HardMemory"),
    (MEMORY, 15, "Memory", "AccessViolation"),
    (MEMORY, 32, "Memory", "HardFault"),
    (MEMORY, 35, "Memory", "InMemory"),
    (MEMORY, 73, "Memory", "PFMappedSectionCreate"),
    (MEMORY, 76, "Memory", "SessionDCStop"),
    (MEMORY, 79, "Memory", "PFMappedSectionDelete"),
    (MEMORY, 98, "VirtualMem", "Alloc"),
    (MEMORY, 99, "VirtualMem", "Free"),
    (MEMORY, 100, "Memory", "HeapRangeRundown"),
    (MEMORY, 101, "Memory", "HeapRangeCreate"),
    (MEMORY, 102, "Memory", "HeapRangeReserve"),
    (MEMORY, 103, "Memory", "HeapRangeRelease"),
    (MEMORY, 104, "Memory", "HeapRangeDestroy"),
    (MEMORY, 105, "Memory", "ImageLoadBacked"),
    (MEMORY, 112, "Memory", "SystemMemInfo"),
    (MEMORY, 115, "Memory", "InMemoryStoreFault"),
    (MEMORY, 117, "Memory", "InMemoryActive"),
    (MEMORY, 118, "Memory", "PageAccess"),
    (MEMORY, 119, "Memory", "PageRelease"),
    (MEMORY, 120, "Memory", "RangeAccess"),
    (MEMORY, 121, "Memory", "RangeRelease"),
    (MEMORY, 122, "Memory", "Combine"),
    (MEMORY, 123, "Memory", "KernelMemUsage"),
    (MEMORY, 124, "Memory", "MMStats"),
    (MEMORY, 125, "Memory", "ProcessMemInfo"),
    (MEMORY, 126, "Memory", "MemInfoSessionWS"),
    (MEMORY, 127, "Memory", "VirtualRotate"),
    (MEMORY, 128, "Memory", "VirtualAllocDCStart"),
    (MEMORY, 129, "Memory", "VirtualAllocDCStop"),
    (MEMORY, 130, "Memory", "PageAccess"),
    (MEMORY, 131, "Memory", "RemoveFromWS"),
    (MEMORY, 132, "Memory", "WSSharableRundown"),
    (MEMORY, 133, "Memory", "InMemoryActiveRundown"),
    (PROCESS, 1, "Process", "Start"),
    (PROCESS, 2, "Process", "Stop"),
    (PROCESS, 3, "Process", "DCStart"),
    (PROCESS, 4, "Process", "DCStop"),
    (PROCESS, 32, "Process", "PerfCtr"),
    (PROCESS, 33, "Process", "PerfCtrRundown"),
    (PROCESS, 39, "Process", "Defunct"),
    (FILE_IO, 0, "FileIO", "Name"),
    (FILE_IO, 32, "FileIO", "FileCreate"),
    (FILE_IO, 35, "FileIO", "FileDelete"),
    (FILE_IO, 36, "FileIO", "FileRundown"),
    (FILE_IO, 37, "FileIO", "MapFile"),
    (FILE_IO, 38, "FileIO", "UnmapFile"),
    (FILE_IO, 39, "FileIO", "MapFileDCStart"),
    (FILE_IO, 40, "FileIO", "MapFileDCStop"),
    (FILE_IO, 64, "FileIO", "Create"),
    (FILE_IO, 65, "FileIO", "Cleanup"),
    (FILE_IO, 66, "FileIO", "Close"),
    (FILE_IO, 67, "FileIO", "Read"),
    (FILE_IO, 68, "FileIO", "Write"),
    (FILE_IO, 69, "FileIO", "SetInfo"),
    (FILE_IO, 70, "FileIO", "Delete"),
    (FILE_IO, 71, "FileIO", "Rename"),
    (FILE_IO, 72, "FileIO", "DirEnum"),
    (FILE_IO, 73, "FileIO", "Flush"),
    (FILE_IO, 74, "FileIO", "QueryInfo"),
    (FILE_IO, 75, "FileIO", "FSControl"),
    (FILE_IO, 76, "FileIO", "OperationEnd"),
    (FILE_IO, 77, "FileIO", "DirNotify"),
    (THREAD, 1, "Thread", "Start"),
    (THREAD, 2, "Thread", "Stop"),
    (THREAD, 3, "Thread", "DCStart"),
    (THREAD, 4, "Thread", "DCStop"),
    (THREAD, 36, "Thread", "CSwitch"),
    (THREAD, 37, "Thread", "CompCS"),
    (THREAD, 50, "Dispatcher", "ReadyThread"),
    (THREAD, 62, "Thread", "Enqueue"),
    (THREAD, 63, "Thread", "Dequeue"),
    (THREAD, 72, "Thread", "SetName"),
    (TCP_IP, 10, "TcpIp", "Send"),
    (TCP_IP, 11, "TcpIp", "Recv"),
    (TCP_IP, 12, "TcpIp", "Connect"),
    (TCP_IP, 13, "TcpIp", "Disconnect"),
    (TCP_IP, 14, "TcpIp", "Retransmit"),
    (TCP_IP, 15, "TcpIp", "Accept"),
    (TCP_IP, 16, "TcpIp", "Reconnect"),
    (TCP_IP, 17, "TcpIp", "Fail"),
    (TCP_IP, 18, "TcpIp", "TCPCopy"),
    (TCP_IP, 19, "TcpIp", "ARPCopy"),
    (TCP_IP, 20, "TcpIp", "FullACK"),
    (TCP_IP, 21, "TcpIp", "PartACK"),
    (TCP_IP, 22, "TcpIp", "DupACK"),
    (TCP_IP, 26, "TcpIp", "SendIPV6"),
    (TCP_IP, 27, "TcpIp", "RecvIPV6"),
    (TCP_IP, 28, "TcpIp", "ConnectIPV6"),
    (TCP_IP, 29, "TcpIp", "DisconnectIPV6"),
    (TCP_IP, 30, "TcpIp", "RetransmitIPV6"),
    (TCP_IP, 31, "TcpIp", "AcceptIPV6"),
    (TCP_IP, 32, "TcpIp", "ReconnectIPV6"),
    (TCP_IP, 34, "TcpIp", "TCPCopyIPV6"),
    (UDP_IP, 10, "UdpIp", "Send"),
    (UDP_IP, 11, "UdpIp", "Recv"),
    (UDP_IP, 17, "UdpIp", "Fail"),
    (UDP_IP, 26, "UdpIp", "SendIPV6"),
    (UDP_IP, 27, "UdpIp", "RecvIPV6"),
    (REGISTRY, 10, "Registry", "Create"),
    (REGISTRY, 11, "Registry", "Open"),
    (REGISTRY, 12, "Registry", "Delete"),
    (REGISTRY, 13, "Registry", "Query"),
    (REGISTRY, 14, "Registry", "SetValue"),
    (REGISTRY, 15, "Registry", "DeleteValue"),
    (REGISTRY, 16, "Registry", "QueryValue"),
    (REGISTRY, 17, "Registry", "EnumerateKey"),
    (REGISTRY, 18, "Registry", "EnumerateValueKey"),
    (REGISTRY, 19, "Registry", "QueryMultipleValue"),
    (REGISTRY, 20, "Registry", "SetInformation"),
    (REGISTRY, 21, "Registry", "Flush"),
    (REGISTRY, 22, "Registry", "KCBCreate"),
    (REGISTRY, 23, "Registry", "KCBDelete"),
    (REGISTRY, 24, "Registry", "KCBRundownBegin"),
    (REGISTRY, 25, "Registry", "KCBRundownEnd"),
    (REGISTRY, 26, "Registry", "Virtualize"),
    (REGISTRY, 27, "Registry", "Close"),
    (SYSTEM_CONFIG, 10, "SystemConfig", "CPU"),
    (SYSTEM_CONFIG, 11, "SystemConfig", "PhyDisk"),
    (SYSTEM_CONFIG, 12, "SystemConfig", "LogDisk"),
    (SYSTEM_CONFIG, 13, "SystemConfig", "NIC"),
    (SYSTEM_CONFIG, 14, "SystemConfig", "Video"),
    (SYSTEM_CONFIG, 15, "SystemConfig", "Services"),
    (SYSTEM_CONFIG, 16, "SystemConfig", "Power"),
    (SYSTEM_CONFIG, 17, "SystemConfig", "Network"),
    (SYSTEM_CONFIG, 21, "SystemConfig", "IRQ"),
    (SYSTEM_CONFIG, 22, "SystemConfig", "PnP"),
    (SYSTEM_CONFIG, 23, "SystemConfig", "IDEChannel"),
    (PERF_INFO, 34, "PerfInfo", "Mark"),
    (PERF_INFO, 46, "PerfInfo", "Sample"),
    (PERF_INFO, 47, "PerfInfo", "PMCSample"),
    (PERF_INFO, 50, "PerfInfo", "ISR"),
    (PERF_INFO, 51, "PerfInfo", "SysClEnter"),
    (PERF_INFO, 52, "PerfInfo", "SysClExit"),
    (PERF_INFO, 55, "PerfInfo", "BatchedSample"),
    (PERF_INFO, 58, "PerfInfo", "DebuggerEnabled"),
    (PERF_INFO, 66, "PerfInfo", "ThreadedDPC"),
    (PERF_INFO, 67, "PerfInfo", "ISR"),
    (PERF_INFO, 68, "PerfInfo", "DPC"),
    (PERF_INFO, 69, "PerfInfo", "TimerDPC"),
    (PERF_INFO, 72, "PerfInfo", "SetInterval"),
    (PERF_INFO, 73, "PerfInfo", "CollectionStart"),
    (PERF_INFO, 74, "PerfInfo", "CollectionEnd"),
    (HEAP, 32, "HeapTrace", "Create"),
    (HEAP, 33, "HeapTrace", "Alloc"),
    (HEAP, 34, "HeapTrace", "ReAlloc"),
    (HEAP, 35, "HeapTrace", "Destroy"),
    (HEAP, 36, "HeapTrace", "Free"),
    (HEAP, 37, "HeapTrace", "Expand"),
    (HEAP, 38, "HeapTrace", "SnapShot"),
    (HEAP, 42, "HeapTrace", "Contract"),
    (HEAP, 43, "HeapTrace", "Lock"),
    (HEAP, 44, "HeapTrace", "Unlock"),
    (HEAP, 45, "HeapTrace", "Validate"),
    (HEAP, 46, "HeapTrace", "Walk"),
    (OBJECT, 32, "Object", "CreateHandle"),
    (OBJECT, 33, "Object", "CloseHandle"),
    (OBJECT, 34, "Object", "DuplicateHandle"),
    (OBJECT, 37, "Object", "TypeDCEnd"),
    (OBJECT, 39, "Object", "HandleDCEnd"),
    (IMAGE, 2, "Image", "Unload"),
    (IMAGE, 3, "Image", "DCStart"),
    (IMAGE, 4, "Image", "DCStop"),
    (IMAGE, 10, "Image", "Load"),
    (CRIT_SEC, 34, "CritSecTrace", "Collision"),
    (CRIT_SEC, 35, "CritSecTrace", "Initialize"),
    (STACK_WALK, 32, "StackWalk", "Stack"),
    (STACK_WALK, 35, "StackWalk", "KeyDelete"),
    (STACK_WALK, 36, "StackWalk", "KeyRundown"),
    (STACK_WALK, 37, "StackWalk", "StackKeyKernel"),
    (STACK_WALK, 38, "StackWalk", "StackKeyUser"),
    (ALPC, 33, "ALPC", "SendMessage"),
    (ALPC, 34, "ALPC", "ReceiveMessage"),
    (ALPC, 35, "ALPC", "WaitForReply"),
    (ALPC, 36, "ALPC", "WaitForNewMessage"),
    (ALPC, 37, "ALPC", "Unwait"),
    (SPLIT_IO, 32, "SplitIo", "VolMgr"),
    (THREAD_POOL, 32, "ThreadPoolTrace", "CBEnqueue"),
    (THREAD_POOL, 33, "ThreadPoolTrace", "CBDequeue"),
    (THREAD_POOL, 34, "ThreadPoolTrace", "CBStart"),
    (THREAD_POOL, 35, "ThreadPoolTrace", "CBStop"),
    (THREAD_POOL, 36, "ThreadPoolTrace", "CBCancel"),
    (THREAD_POOL, 37, "ThreadPoolTrace", "PoolCreate"),
    (THREAD_POOL, 38, "ThreadPoolTrace", "PoolClose"),
    (THREAD_POOL, 39, "ThreadPoolTrace", "ThreadMinSet"),
    (THREAD_POOL, 40, "ThreadPoolTrace", "ThreadMaxSet"),
    (SYS_CONFIG, 32, "SysConfig", "BuildInfo"),
    (SYS_CONFIG, 33, "SysConfig", "SystemPaths"),
    (SYS_CONFIG, 34, "SysConfig", "UnknownVolume"),
    (SYS_CONFIG, 35, "SysConfig", "VolumeMapping"),
];

/// Providers whose manifest events appear in common traces, by GUID.
const PROVIDERS: &[(Guid, &str)] = &[
    (
        guid("e13c0d23-ccbc-4e12-931b-d9cc2eee27e4"),
        "Microsoft-Windows-DotNETRuntime",
    ),
    (
        guid("763fd754-7086-4dfe-95eb-c01a46faf4ca"),
        "Microsoft-Windows-DotNETRuntimePrivate",
    ),
    (
        guid("a669021c-c450-4609-a035-5af59af4df18"),
        "Microsoft-Windows-DotNETRuntimeRundown",
    ),
    (
        guid("edd08927-9cc4-4e65-b970-c2560fb5c289"),
        "Microsoft-Windows-Kernel-File",
    ),
    (
        guid("22fb2cd6-0e7b-422b-a0c7-2fad1fd0e716"),
        "Microsoft-Windows-Kernel-Process",
    ),
    (
        guid("b675ec37-bdb6-4648-bc92-f3fdc74d3ca2"),
        "Microsoft-Windows-Kernel-EventTracing",
    ),
    (
        guid("1c95126e-7eea-49a9-a3fe-a378b03ddb4d"),
        "Microsoft-Windows-DNS-Client",
    ),
    (
        guid("315a8872-923e-4ea2-9889-33cd4754bf64"),
        "Microsoft-Windows-Immersive-Shell",
    ),
    (guid("a8a71ac1-040f-54a2-07ca-00a89b5ab761"), "PerfView"),
    (
        guid("8e9f5090-2d75-4d03-8a81-e5afbf85daf1"),
        "System.Diagnostics.Eventing.FrameworkEventSource",
    ),
    (
        guid("2e5dba47-a3d2-4d16-8ee0-6671ffdcd7b5"),
        "System.Threading.Tasks.TplEventSource",
    ),
    (
        guid("9e814aad-3204-11d2-9a82-006008a86939"),
        "Windows Kernel",
    ),
];

/// KernelTraceControl (xperf's rundown of image identities and event
/// metadata): `(GUID, task, [(opcode, name)])`.
/// `(GUID, task name, opcode names)` of one KernelTraceControl task.
type ControlTask = (Guid, &'static str, &'static [(u8, &'static str)]);

const KERNEL_TRACE_CONTROL: &[ControlTask] = &[
    (
        guid("b3e675d7-2554-4f18-830b-2762732560de"),
        "ImageID",
        &[
            (32, "None"),
            (36, "DbgID_RSDS"),
            (37, "DbgID_ILRSDS"),
            (64, "FileVersion"),
        ],
    ),
    (
        guid("bbccf6c1-6cd1-48c4-80ff-839482e37671"),
        "MetaData",
        &[(32, "EventInfo"), (33, "EventMapInfo")],
    ),
];

/// The kernel group a classic event belongs to, from a hook id or a task
/// GUID. Image loads are logged in the process group (hook 0x030A) for
/// history's sake; they are `Image/Load`.
pub fn kernel_group(source: Source, opcode: u8) -> Option<u8> {
    let g = match source {
        Source::Kernel { group } => group,
        Source::Classic { guid } => TASK_GUIDS
            .iter()
            .find(|(g, _)| *g == guid)
            .map(|&(_, grp)| grp)?,
        Source::Manifest { .. } => return None,
    };
    Some(if g == PROCESS && opcode == 10 {
        IMAGE
    } else {
        g
    })
}

/// A provider's name when it is one this crate knows.
pub fn provider_name(guid: Guid) -> Option<&'static str> {
    PROVIDERS
        .iter()
        .find(|(g, _)| *g == guid)
        .map(|&(_, name)| name)
}

/// TraceEvent's name of an event. `tl_name` is `(provider, event)` from
/// TraceLogging metadata when the event has it.
pub fn event_name(source: Source, opcode: u8, tl_name: Option<(&str, &str)>) -> String {
    if let Some(group) = kernel_group(source, opcode) {
        return kernel_event_name(group, opcode);
    }
    match source {
        Source::Classic { guid } => {
            if let Some((_, task, ops)) = KERNEL_TRACE_CONTROL.iter().find(|(g, _, _)| *g == guid) {
                return match ops.iter().find(|(op, _)| *op == opcode) {
                    _ if opcode == 0 => format!("KernelTraceControl/{task}"),
                    Some((_, name)) => format!("KernelTraceControl/{task}/{name}"),
                    None => format!("KernelTraceControl/{task}/Opcode({opcode})"),
                };
            }
            let provider = provider_name(guid).map_or_else(|| guid.to_string(), str::to_string);
            format!("{provider}/Opcode({opcode})")
        }
        Source::Manifest { guid, id, .. } => match tl_name {
            Some((provider, event)) if !event.is_empty() => format!("{provider}/{event}"),
            _ => {
                let provider = provider_name(guid).map_or_else(|| guid.to_string(), str::to_string);
                format!("{provider}/EventID({id})")
            }
        },
        Source::Kernel { .. } => unreachable!("kernel_group always names a kernel source"),
    }
}

fn kernel_event_name(group: u8, opcode: u8) -> String {
    let at = KERNEL_OPCODES.partition_point(|&(g, op, _, _)| (g, op) < (group, opcode));
    if let Some(&(g, op, task, name)) = KERNEL_OPCODES.get(at) {
        if (g, op) == (group, opcode) {
            return if opcode == 0 {
                format!("Windows Kernel/{task}")
            } else {
                format!("Windows Kernel/{task}/{name}")
            };
        }
    }
    match GROUP_TASKS.iter().find(|(g, _)| *g == group) {
        Some((_, task)) if opcode == 0 => format!("Windows Kernel/{task}"),
        Some((_, task)) => format!("Windows Kernel/{task}/Opcode({opcode})"),
        None => format!("Windows Kernel/Group({group:#04x})/Opcode({opcode})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_opcode_table_is_sorted_for_binary_search() {
        assert!(KERNEL_OPCODES
            .windows(2)
            .all(|w| (w[0].0, w[0].1) < (w[1].0, w[1].1)));
    }

    #[test]
    fn kernel_events_are_named_like_traceevent() {
        let k = |group| Source::Kernel { group };
        assert_eq!(
            event_name(k(PROCESS), 3, None),
            "Windows Kernel/Process/DCStart"
        );
        assert_eq!(
            event_name(k(PROCESS), 10, None),
            "Windows Kernel/Image/Load"
        );
        assert_eq!(
            event_name(k(PERF_INFO), 46, None),
            "Windows Kernel/PerfInfo/Sample"
        );
        assert_eq!(
            event_name(k(THREAD), 50, None),
            "Windows Kernel/Dispatcher/ReadyThread"
        );
        assert_eq!(
            event_name(k(EVENT_TRACE), 0, None),
            "Windows Kernel/EventTrace"
        );
        assert_eq!(
            event_name(k(DISK_IO), 16, None),
            "Windows Kernel/DiskIO/Opcode(16)"
        );
        let sys = guid("9b79ee91-b5fd-41c0-a243-4248e266e9d0");
        assert_eq!(
            event_name(Source::Classic { guid: sys }, 37, None),
            "Windows Kernel/SysConfig/Opcode(37)"
        );
    }

    #[test]
    fn manifest_events_are_named_by_provider_and_id() {
        let clr = guid("e13c0d23-ccbc-4e12-931b-d9cc2eee27e4");
        let src = Source::Manifest {
            guid: clr,
            id: 10,
            task: 1,
        };
        assert_eq!(
            event_name(src, 11, None),
            "Microsoft-Windows-DotNETRuntime/EventID(10)"
        );
        assert_eq!(
            event_name(src, 11, Some(("MySource", "TestEvent"))),
            "MySource/TestEvent"
        );
    }
}
