//! What a scheduler recording is asked to record ([`SchedOptions`], [`StackMode`]) and
//! what it says it did ([`SchedStats`], [`ProgramCost`], read from the kernel by
//! [`program_cost`]). It starts nothing.

use std::os::fd::AsRawFd;
use std::path::PathBuf;

use super::recorder::{DEFAULT_SCHED_RING_BYTES, DEFAULT_STACK_ENTRIES, STACK_DEPTH};

/// Which stacks the programs take (the walks are most of what a record costs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StackMode {
    /// No stacks.
    None,
    /// Kernel stacks only, on every switch, wake-up and sample.
    Kernel,
    /// Kernel and user stacks only where the critical path reads them: switches whose
    /// previous task blocks (not runnable, not preempted), wake-ups by a task (not the
    /// idle task), and samples. The default: what the critical path reads, at about two
    /// thirds of `All`'s cost on a pipe ping-pong (bench/record/README.md).
    #[default]
    Blocking,
    /// Kernel and user stacks on every switch, wake-up and sample.
    All,
}

impl StackMode {
    /// The value of `stack_mode` in sched.bpf.c.
    pub(crate) fn bpf_value(self) -> u32 {
        match self {
            StackMode::None => 0,
            StackMode::Kernel => 1,
            StackMode::Blocking => 2,
            StackMode::All => 3,
        }
    }
}

/// What the CPU samples are taken on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SampleClock {
    /// A perf event's timer of its own (`cpu-clock`) at [`SchedOptions::sample_freq`] on
    /// every CPU, idle or not, as perf samples: an interrupt each time, which on a VM costs
    /// more than the sample's program (bench/record/README.md).
    #[default]
    Timer,
    /// The scheduler's tick, which comes anyway to a busy CPU (`CONFIG_HZ` times a second;
    /// an idle CPU stops it, so idle time is not sampled): no interrupts of its own.
    /// `sample_freq` is then the tick's rate. Where the tick cannot be found, the timer is
    /// used, and the recording says so.
    Tick,
}

/// Recording options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedOptions {
    /// Size of the kernel ring buffer in bytes: a power of two, at least one page.
    pub ring_bytes: u32,
    /// Entries of the stack map.
    pub stack_entries: u32,
    /// CPU samples per second per CPU (0: none) with [`SampleClock::Timer`].
    pub sample_freq: u32,
    /// What the samples are taken on (with `sample_freq` above 0).
    pub sample_clock: SampleClock,
    /// Which stacks are taken.
    pub stacks: StackMode,
    /// Frames a kernel stack keeps at most (1 to 127): the walk stops there. (It saves
    /// little: a kernel walk costs ~1.8 us at 4 frames and ~2.2 us at 127 on the pipe
    /// ping-pong, bench/record/README.md; kept to measure that.)
    pub kernel_frames: u32,
    /// With [`StackMode::Blocking`]: a thread that blocks, or wakes another, where it did
    /// the last time reuses that time's stacks instead of walking them again (see
    /// `take_stacks` in sched.bpf.c), and one that calls a detector's syscall from where it
    /// called it the last time reuses that call's user stack (`call_ustack`). The default:
    /// a fifth of the cost of the walks on a loop that blocks at one site; 1.3 against
    /// 2.2 µs a call of `openat` in a `tar xf`.
    pub reuse_sites: bool,
    /// Record the waiting syscalls (futex, wait4, waitid, flock: entry and exit), which
    /// name what a wait waits for (a mutex and its holder). On by default; off, to
    /// measure what they cost.
    pub syscalls: bool,
    /// Record the detectors' syscalls (openat, the stat family, mmap/munmap, unlink,
    /// unshare, clone, kill, …: what `slowlab record` asks perf for with stacks): entry
    /// with all arguments and the user stack, exit with the return value. On by default.
    pub detector_syscalls: bool,
    /// With `detector_syscalls`: record the path argument of those that take one (openat,
    /// the stat family, access, unlink) as a PATH record beside the call's, what perf's
    /// backend captures into `OUTPUT.paths`. On by default.
    pub paths: bool,
    /// Take the syscalls (`syscalls` and `detector_syscalls`) from two programs on the raw
    /// `sys_enter`/`sys_exit` tracepoints, which run for every syscall and pick the
    /// recorded ones by number (x86-64 only; elsewhere this is ignored), instead of a
    /// program on each syscall's own tracepoints. A recording's end then detaches 2
    /// programs at once where it waits ~40 ms for each of 46, but every syscall not
    /// recorded costs ~40 ns more (two programs run through retpolines, where the
    /// per-syscall tracepoints test a bitmap) and one recorded ~100 ns less. Off by
    /// default; `slowlab-record` asks for it around commands (bench/record/README.md).
    pub raw_syscalls: bool,
    /// Record disk requests (`block:block_rq_issue` and `block_rq_complete`, without
    /// stacks), major faults and every page fault (`exceptions:page_fault_user` and
    /// `_kernel`; both with their stacks), as perf's event set does. On by default.
    pub faults_and_block: bool,
    /// Whether this process's threads are recorded as any other's, but the recorder's own
    /// draining thread: for a caller whose other threads do the work recorded (`lab
    /// --trace`). Otherwise the whole process is the recorder's: its syscalls and faults
    /// are left out and its switches and wake-ups have no stacks.
    pub record_own_process: bool,
}

impl Default for SchedOptions {
    fn default() -> Self {
        SchedOptions {
            ring_bytes: DEFAULT_SCHED_RING_BYTES,
            stack_entries: DEFAULT_STACK_ENTRIES,
            sample_freq: 1000,
            sample_clock: SampleClock::default(),
            stacks: StackMode::default(),
            kernel_frames: STACK_DEPTH as u32,
            reuse_sites: true,
            syscalls: true,
            detector_syscalls: true,
            paths: true,
            raw_syscalls: false,
            faults_and_block: true,
            record_own_process: false,
        }
    }
}

/// What a recording did, returned by [`SchedRecorder::stop`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SchedStats {
    /// Records written.
    pub records: u64,
    /// Records lost in the kernel because the ring buffer was full.
    pub dropped: u64,
    /// Stacks lost because the stack map could not take them (full, or its allocator
    /// empty for a moment) and the ring buffer, where they go then, was full too.
    pub stacks_lost: u64,
    /// Distinct stacks written.
    pub stacks: u64,
    /// Stacks the stack map could not take (full, or its allocator empty for a moment),
    /// sent in the ring instead: not lost, but each took a record of the ring.
    pub stacks_in_ring: u64,
    /// Events whose stacks were reused from the thread's last event at the same site
    /// instead of walked (see [`SchedOptions::reuse_sites`]).
    pub stacks_reused: u64,
    /// Bytes of the file.
    pub bytes: u64,
    /// The recording file.
    pub output: PathBuf,
    /// What each program cost in the kernel, when the kernel counted it
    /// (`sysctl kernel.bpf_stats_enabled=1` during the recording), and the runs it missed;
    /// a program with neither is left out.
    pub programs: Vec<ProgramCost>,
    /// Tracepoints that could not be attached, so their events are missing (a syscall
    /// tracepoint the kernel does not have), each with why.
    pub unattached: Vec<String>,
    /// The machine's CPU time over what the file holds, and the host's steal of it (as
    /// its STEAL section says), when the counters could be read.
    pub cpu_times: Option<slowlab_model::host_steal::CpuTimes>,
}

/// The kernel's count of one program's runs and the time they took
/// (`bpf_prog_info.run_cnt` and `run_time_ns`, counted while `kernel.bpf_stats_enabled` is 1).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProgramCost {
    /// The program's name in sched.bpf.c (`on_switch`, …).
    pub name: String,
    /// Times it ran.
    pub runs: u64,
    /// Nanoseconds it ran in all.
    pub run_ns: u64,
    /// Times the kernel did not run it because it was already running on that CPU (a
    /// wake-up from an interrupt that came while the program ran for another): events
    /// lost without a record (`bpf_prog_info.recursion_misses`, counted whatever
    /// `kernel.bpf_stats_enabled` says).
    pub recursion_misses: u64,
}

impl ProgramCost {
    /// Nanoseconds a run took on average (0 without runs).
    pub fn mean_ns(&self) -> u64 {
        self.run_ns.checked_div(self.runs).unwrap_or(0)
    }

    /// The events the program records, to say what its missed runs lost (`wake-ups`, …);
    /// `None` for the page-fault programs, whose missed runs are faults raised inside them
    /// by their own reads of user memory: the recorder's, not the work's (perf does not
    /// record its own either).
    pub fn events(&self) -> Option<&'static str> {
        let name = self.name.as_str();
        Some(match name {
            "on_switch" => "context switches",
            "on_waking" => "wake-ups",
            "on_sample" | "on_tick" => "CPU samples",
            "on_fork" | "on_exec" | "on_exit" | "on_rename" => "process lifetimes",
            "on_block_issue" | "on_block_complete" => "disk requests",
            "on_major_fault" => "major faults",
            "on_page_fault_user" | "on_page_fault_kernel" => return None,
            _ if super::attach::is_detector_syscall_program(name)
                || ["enter_", "exit_", "on_raw_sys_"]
                    .iter()
                    .any(|p| name.starts_with(p)) =>
            {
                "syscalls"
            }
            _ => "events",
        })
    }
}

/// The kernel's run count and run time of a loaded program; `None` when they cannot be read
/// or were not counted.
pub(crate) fn program_cost(name: &str, prog: &libbpf_rs::Program) -> Option<ProgramCost> {
    use std::os::fd::AsFd;
    let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: `info` is a bpf_prog_info of `len` bytes, written by the kernel; the
    // descriptor is the loaded program's, alive for this call.
    let ret = unsafe {
        libbpf_rs::libbpf_sys::bpf_obj_get_info_by_fd(
            prog.as_fd().as_raw_fd(),
            (&mut info as *mut libbpf_rs::libbpf_sys::bpf_prog_info).cast(),
            &mut len,
        )
    };
    (ret == 0 && (info.run_cnt > 0 || info.recursion_misses > 0)).then(|| ProgramCost {
        name: name.to_string(),
        runs: info.run_cnt,
        run_ns: info.run_time_ns,
        recursion_misses: info.recursion_misses,
    })
}
