//! The syscalls that say what a wait waits for, as the scheduler replay
//! ([`crate::states`]) pairs them: a futex call (its word, operation and
//! expected value), a `wait4`/`waitid` (the child), a `flock` (the file
//! descriptor). `slowlab record` records their entries and exits without
//! stacks; a blocked span keeps the call its thread was in when it blocked,
//! and the call its waker was in when it woke it (a mutex's unlock, a
//! condition variable's signal).
//!
//! Only the calls' arguments live here; what the resource is, and who held
//! it, is [`crate::resources`]. Traces recorded before these syscalls were
//! recorded have no calls: the analyses then go by the stacks alone.

use slowlab_model::trace::{StrIdx, ThreadIdx, Trace};

/// An index into [`crate::states::ThreadStates::calls`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallIdx(pub u32);

impl CallIdx {
    pub fn ix(self) -> usize {
        self.0 as usize
    }
}

/// `futex(2)` operations (the command, `op & FUTEX_CMD_MASK`).
pub mod futex_op {
    pub const WAIT: u32 = 0;
    pub const WAKE: u32 = 1;
    pub const REQUEUE: u32 = 3;
    pub const CMP_REQUEUE: u32 = 4;
    pub const WAKE_OP: u32 = 5;
    pub const LOCK_PI: u32 = 6;
    pub const UNLOCK_PI: u32 = 7;
    pub const TRYLOCK_PI: u32 = 8;
    pub const WAIT_BITSET: u32 = 9;
    pub const WAKE_BITSET: u32 = 10;
    pub const WAIT_REQUEUE_PI: u32 = 11;
    pub const CMP_REQUEUE_PI: u32 = 12;
    pub const LOCK_PI2: u32 = 13;
    /// `FUTEX_PRIVATE_FLAG`: the word is private to its process.
    pub const PRIVATE: u32 = 128;
    /// `FUTEX_CLOCK_REALTIME`.
    pub const CLOCK_REALTIME: u32 = 256;
    pub const CMD_MASK: u32 = !(PRIVATE | CLOCK_REALTIME);
}

/// What a waiting syscall was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitSyscall {
    Futex {
        uaddr: u64,
        op: u32,
        val: u32,
    },
    /// `wait4(pid, …)`: the child (`pid > 0`), any child (`-1`), a group.
    Wait4 {
        pid: i32,
    },
    /// `waitid(which, id, …)`.
    Waitid {
        which: u32,
        id: u32,
    },
    Flock {
        fd: u32,
        operation: u32,
    },
}

impl WaitSyscall {
    /// The futex command (`op & FUTEX_CMD_MASK`), for a futex call.
    pub fn futex_cmd(&self) -> Option<u32> {
        match *self {
            WaitSyscall::Futex { op, .. } => Some(op & futex_op::CMD_MASK),
            _ => None,
        }
    }

    /// A futex call that waits or locks (rather than wakes or unlocks).
    pub fn futex_waits(&self) -> bool {
        use futex_op::*;
        matches!(
            self.futex_cmd(),
            Some(WAIT | WAIT_BITSET | LOCK_PI | LOCK_PI2 | TRYLOCK_PI | WAIT_REQUEUE_PI)
        )
    }

    /// A futex call that wakes or unlocks (a release of the word).
    pub fn futex_wakes(&self) -> bool {
        use futex_op::*;
        matches!(
            self.futex_cmd(),
            Some(WAKE | WAKE_BITSET | WAKE_OP | UNLOCK_PI | REQUEUE | CMP_REQUEUE | CMP_REQUEUE_PI)
        )
    }
}

/// One waiting syscall of one thread: entered at `enter_ns`, returned at
/// `exit_ns` (`u64::MAX`: not in the trace).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WaitCall {
    pub thread: ThreadIdx,
    pub enter_ns: u64,
    pub exit_ns: u64,
    pub call: WaitSyscall,
}

/// Which of the trace's syscall names are waiting syscalls: looked up
/// once per name, not per event.
#[derive(Default)]
pub(crate) struct Names {
    known: Vec<Option<u8>>,
}

const FUTEX: u8 = 1;
const WAIT4: u8 = 2;
const WAITID: u8 = 3;
const FLOCK: u8 = 4;

impl Names {
    fn kind(&mut self, trace: &Trace, name: StrIdx) -> u8 {
        let i = name.0 as usize;
        if self.known.len() <= i {
            self.known.resize(i + 1, None);
        }
        *self.known[i].get_or_insert_with(|| match trace.str(name) {
            "futex" => FUTEX,
            "wait4" => WAIT4,
            "waitid" => WAITID,
            "flock" => FLOCK,
            _ => 0,
        })
    }

    /// The waiting call a syscall entry with `args` makes, if it is one.
    pub(crate) fn call(
        &mut self,
        trace: &Trace,
        name: StrIdx,
        args: &[u64; 6],
    ) -> Option<WaitSyscall> {
        Some(match self.kind(trace, name) {
            FUTEX => WaitSyscall::Futex {
                uaddr: args[0],
                op: args[1] as u32,
                val: args[2] as u32,
            },
            WAIT4 => WaitSyscall::Wait4 {
                pid: args[0] as i32,
            },
            WAITID => WaitSyscall::Waitid {
                which: args[0] as u32,
                id: args[1] as u32,
            },
            FLOCK => WaitSyscall::Flock {
                fd: args[0] as u32,
                operation: args[1] as u32,
            },
            _ => return None,
        })
    }

    /// Whether a syscall exit ends a waiting call.
    pub(crate) fn is_wait(&mut self, trace: &Trace, name: StrIdx) -> bool {
        self.kind(trace, name) != 0
    }
}
