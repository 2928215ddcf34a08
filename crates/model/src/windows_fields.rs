//! The typed fields of Windows traces that the Linux model leaves `None`:
//! a context switch's thread state and wait reason, a page fault's kind,
//! and which file operation a syscall event is. Kernel numbers with their
//! names; the ETW reader fills them, the Windows detectors read them.
//! Re-exported from [`crate::trace`].

use serde::{Deserialize, Serialize};

/// What a Windows trace records of the thread a context switch switched
/// out (ETW `Thread/CSwitch`: `OldThreadState`, `OldThreadWaitReason`), as
/// the kernel's numbers. Linux traces have none: their `prev_state` says
/// it all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WindowsSwitchOut {
    pub state: WindowsThreadState,
    /// Why it waits; meaningful when `state` is [`WindowsThreadState::WAITING`].
    pub wait_reason: WindowsWaitReason,
}

/// A Windows thread state (`KTHREAD_STATE`), kept as the kernel's number
/// so that a value this list does not know survives; [`Self::name`] names
/// the known ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct WindowsThreadState(pub u8);

impl WindowsThreadState {
    pub const INITIALIZED: Self = Self(0);
    pub const READY: Self = Self(1);
    pub const RUNNING: Self = Self(2);
    pub const STANDBY: Self = Self(3);
    pub const TERMINATED: Self = Self(4);
    pub const WAITING: Self = Self(5);
    pub const TRANSITION: Self = Self(6);
    pub const DEFERRED_READY: Self = Self(7);
    pub const GATE_WAIT_OBSOLETE: Self = Self(8);
    pub const WAITING_FOR_PROCESS_IN_SWAP: Self = Self(9);

    /// The state's name as WPA shows it (`Waiting`); `None` for a number
    /// this list does not know.
    pub fn name(self) -> Option<&'static str> {
        const NAMES: [&str; 10] = [
            "Initialized",
            "Ready",
            "Running",
            "Standby",
            "Terminated",
            "Waiting",
            "Transition",
            "DeferredReady",
            "GateWaitObsolete",
            "WaitingForProcessInSwap",
        ];
        NAMES.get(self.0 as usize).copied()
    }
}

/// Why a Windows thread waits (`KWAIT_REASON`), kept as the kernel's number
/// (new Windows versions add reasons); [`Self::name`] names the known ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct WindowsWaitReason(pub u8);

impl WindowsWaitReason {
    pub const EXECUTIVE: Self = Self(0);
    pub const FREE_PAGE: Self = Self(1);
    pub const PAGE_IN: Self = Self(2);
    pub const POOL_ALLOCATION: Self = Self(3);
    pub const WR_FREE_PAGE: Self = Self(8);
    pub const WR_PAGE_IN: Self = Self(9);
    pub const WR_POOL_ALLOCATION: Self = Self(10);
    pub const WR_QUEUE: Self = Self(15);

    /// The reason's name as WPA shows it (`WrQueue`); `None` for a number
    /// this list does not know.
    pub fn name(self) -> Option<&'static str> {
        const NAMES: [&str; 42] = [
            "Executive",
            "FreePage",
            "PageIn",
            "PoolAllocation",
            "DelayExecution",
            "Suspended",
            "UserRequest",
            "WrExecutive",
            "WrFreePage",
            "WrPageIn",
            "WrPoolAllocation",
            "WrDelayExecution",
            "WrSuspended",
            "WrUserRequest",
            "WrEventPair",
            "WrQueue",
            "WrLpcReceive",
            "WrLpcReply",
            "WrVirtualMemory",
            "WrPageOut",
            "WrRendezvous",
            "WrKeyedEvent",
            "WrTerminated",
            "WrProcessInSwap",
            "WrCpuRateControl",
            "WrCalloutStack",
            "WrKernel",
            "WrResource",
            "WrPushLock",
            "WrMutex",
            "WrQuantumEnd",
            "WrDispatchInt",
            "WrPreempted",
            "WrYieldExecution",
            "WrFastMutex",
            "WrGuardedMutex",
            "WrRundown",
            "WrAlertByThreadId",
            "WrDeferredPreempt",
            "WrPhysicalFault",
            "WrIoRing",
            "WrMdlCache",
        ];
        NAMES.get(self.0 as usize).copied()
    }

    /// A wait for the memory manager (`FreePage`, `PageIn`,
    /// `PoolAllocation` and their `Wr` twins): what Linux calls an
    /// uninterruptible sleep.
    pub fn is_paging(self) -> bool {
        matches!(self.0, 1..=3 | 8..=10)
    }
}

/// The kind of a Windows soft page fault: which `PageFault` event the
/// kernel emitted (its opcode in brackets).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowsFaultKind {
    /// The page was on the standby or modified list (10): still in memory,
    /// just out of the working set.
    Transition,
    /// A page of zeroes was handed out (11).
    DemandZero,
    /// A shared page was copied on write (12).
    CopyOnWrite,
    /// A guard page was touched (13).
    GuardPage,
    /// An access violation (15).
    AccessViolation,
}

/// A Windows file operation (ETW `FileIO`): a request to the file system
/// for an open file object. Linux traces leave it empty: their syscalls'
/// names say what they are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileOp {
    /// An open or create (`NtCreateFile`): fails when the file is missing
    /// (open) or exists (exclusive create).
    Create,
    /// The last handle to the file object was closed.
    Cleanup,
    /// The file object was freed.
    Close,
    Read,
    Write,
    SetInfo,
    Delete,
    Rename,
    DirEnum,
    Flush,
    QueryInfo,
    FsControl,
    DirNotify,
}
