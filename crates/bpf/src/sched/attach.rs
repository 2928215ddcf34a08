//! Loading `sched.bpf.c` and attaching its programs as [`SchedOptions`] asks: the ring
//! buffer and stack map sized, the load-time switches set, each program attached to its
//! tracepoint (a syscall or block tracepoint the kernel lacks is left out and named), and
//! the perf events of the CPU samples and major faults opened per CPU. It drains nothing
//! (`recorder`, `drain`).

use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};
use std::path::Path;

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{ErrorKind, Link, OpenObject};

use super::options::{SampleClock, SchedOptions};
use super::recorder::{STACK_DEPTH, WAKEUP_FRACTION};
use super::tick::{KernelSymbols, TickSource};
use crate::error::BpfError;
use crate::libbpf_log::load_error;
use crate::sched_skel::{SchedSkel, SchedSkelBuilder};

/// The loaded programs, attached: what must live while they record.
pub(crate) struct Attached<'obj> {
    pub(crate) skel: SchedSkel<'obj>,
    /// The programs' links, the perf events' with them (each link owns its event).
    pub(crate) links: Vec<Link>,
    /// Tracepoints not attached, each with why.
    pub(crate) unattached: Vec<String>,
    /// CPU samples a second per busy CPU (0: none): `sample_freq`, or the tick's rate.
    pub(crate) sample_freq: u32,
    /// Whether the samples are taken on the scheduler's tick.
    pub(crate) samples_on_tick: bool,
}

/// Loads the programs into `object` and attaches them as `options` asks.
pub(crate) fn load_and_attach<'obj>(
    object: &'obj mut MaybeUninit<OpenObject>,
    options: &SchedOptions,
) -> Result<Attached<'obj>, BpfError> {
    let ring_bytes = options.ring_bytes;
    crate::sys::mount_tracefs_if_absent();
    let mut unattached = Vec::new();
    let tick_asked = options.sample_clock == SampleClock::Tick && options.sample_freq > 0;
    // x86-64 only: sched.bpf.c reads x86-64's pt_regs and 16 KiB kernel stacks.
    let reuse = options.reuse_sites && cfg!(target_arch = "x86_64");
    // Read only when kernel addresses are needed (the file is some 200,000 lines).
    let symbols = if tick_asked || reuse {
        KernelSymbols::read()
    } else {
        None
    };
    // The samples on the tick where it can be found, else on a timer of their own.
    let tick = if tick_asked {
        TickSource::find(symbols.as_ref())
            .map_err(|why| {
                unattached.push(format!(
                    "the CPU samples on the scheduler's tick: {why}; taken on a timer at {} Hz",
                    options.sample_freq
                ))
            })
            .ok()
    } else {
        None
    };
    let mut open = SchedSkelBuilder::default()
        .open(object)
        .map_err(|e| load_error(e, ring_bytes))?;
    open.maps
        .events
        .set_max_entries(ring_bytes)
        .map_err(|e| load_error(e, ring_bytes))?;
    open.maps
        .stacks
        .set_max_entries(options.stack_entries)
        .map_err(|e| load_error(e, ring_bytes))?;
    if let Some(rodata) = open.maps.rodata_data.as_deref_mut() {
        rodata.wakeup_bytes = u64::from(ring_bytes / WAKEUP_FRACTION);
        rodata.stack_mode = options.stacks.bpf_value();
        rodata.kernel_frames = options.kernel_frames.clamp(1, STACK_DEPTH as u32);
        rodata.capture_paths = options.paths;
        // What the raw syscall programs record, if they load (below).
        rodata.raw_waits = options.syscalls;
        rodata.raw_calls = options.detector_syscalls;
        rodata.user_min_addr = crate::sys::mmap_min_addr();
        // This process drains the ring and reads /proc: its own syscalls and faults are
        // left out, its switches and wake-ups have no stacks (sched.bpf.c). Or only this
        // thread's, the one that drains (the programs are loaded on it).
        if options.record_own_process {
            rodata.recorder_tid = crate::sys::gettid();
        } else {
            rodata.recorder_tgid = std::process::id();
        }
        rodata.reuse_sites = reuse;
        if reuse {
            // Without the kernel's text range, no stack is reused.
            if let Some((start, end)) = symbols.as_ref().and_then(kernel_text) {
                rodata.text_start = start;
                rodata.text_end = end;
            }
        }
        if let Some(tick) = tick {
            rodata.tick_function = tick.function;
            (rodata.irq_entry_start, rodata.irq_entry_end) = tick.entry;
        }
    }
    if options.sample_freq == 0 || tick.is_some() {
        open.progs.on_sample.set_autoload(false);
    }
    if tick.is_none() {
        open.progs.on_tick.set_autoload(false);
    }
    if !options.faults_and_block {
        open.progs.on_major_fault.set_autoload(false);
    }
    // tp_btf programs name their tracepoint at load: one the kernel lacks (the page-fault
    // tracepoints are x86's, the block ones need CONFIG_BLOCK) would fail the whole load,
    // so it is not loaded.
    for (category, name, prog) in [
        ("block", "block_rq_issue", &mut open.progs.on_block_issue),
        (
            "block",
            "block_rq_complete",
            &mut open.progs.on_block_complete,
        ),
        (
            "exceptions",
            "page_fault_user",
            &mut open.progs.on_page_fault_user,
        ),
        (
            "exceptions",
            "page_fault_kernel",
            &mut open.progs.on_page_fault_kernel,
        ),
    ] {
        if !options.faults_and_block || !kernel_has_tracepoint(category, name) {
            prog.set_autoload(false);
        }
    }
    // The syscalls from the two raw programs (x86-64), or from their own tracepoints.
    let raw = options.raw_syscalls
        && cfg!(target_arch = "x86_64")
        && (options.syscalls || options.detector_syscalls);
    if !raw {
        open.progs.on_raw_sys_enter.set_autoload(false);
        open.progs.on_raw_sys_exit.set_autoload(false);
    }
    for mut prog in open.open_object_mut().progs_mut() {
        let name = prog.name().to_string_lossy().into_owned();
        let wanted = if is_detector_syscall_program(&name) {
            options.detector_syscalls
        } else if is_wait_syscall_program(&name) {
            options.syscalls
        } else {
            continue;
        };
        if raw || !wanted {
            prog.set_autoload(false);
        }
    }
    let skel = open.load().map_err(|e| load_error(e, ring_bytes))?;

    let mut links: Vec<Link> = Vec::new();
    let tracepoints = [
        ("sched_switch", &skel.progs.on_switch),
        ("sched_waking", &skel.progs.on_waking),
        ("sched_process_fork", &skel.progs.on_fork),
        ("sched_process_exec", &skel.progs.on_exec),
        ("sched_process_exit", &skel.progs.on_exit),
        ("task_rename", &skel.progs.on_rename),
    ];
    for (name, prog) in tracepoints {
        links.push(prog.attach().map_err(|e| attach_err(name, e))?);
    }
    // The syscalls: a kernel without one of their tracepoints (CONFIG_FTRACE_SYSCALLS
    // off) records the rest, and says which are missing.
    if raw {
        for (name, prog) in [
            ("raw_syscalls:sys_enter", &skel.progs.on_raw_sys_enter),
            ("raw_syscalls:sys_exit", &skel.progs.on_raw_sys_exit),
        ] {
            links.push(prog.attach().map_err(|e| attach_err(name, e))?);
        }
    } else {
        for prog in skel.object().progs_mut() {
            let name = prog.name().to_string_lossy().into_owned();
            if prog.autoload()
                && (is_detector_syscall_program(&name) || is_wait_syscall_program(&name))
            {
                attach_or_note(&prog, &name, &mut links, &mut unattached)?;
            }
        }
    }
    if options.faults_and_block {
        let block = [
            ("block:block_rq_issue", &skel.progs.on_block_issue),
            ("block:block_rq_complete", &skel.progs.on_block_complete),
            ("exceptions:page_fault_user", &skel.progs.on_page_fault_user),
            (
                "exceptions:page_fault_kernel",
                &skel.progs.on_page_fault_kernel,
            ),
        ];
        for (name, prog) in block {
            if !prog.autoload() {
                unattached.push(format!("{name}: the kernel has no such tracepoint"));
                continue;
            }
            attach_or_note(prog, name, &mut links, &mut unattached)?;
        }
    }
    if tick.is_some() {
        links.push(
            skel.progs
                .on_tick
                .attach()
                .map_err(|e| attach_err("timer:hrtimer_expire_entry", e))?,
        );
    } else if options.sample_freq > 0 {
        let mut opened = 0;
        for cpu in 0..possible_cpus() {
            // An offline CPU has no event: skip it.
            let Ok(fd) = open_cpu_clock(cpu as i32, options.sample_freq) else {
                continue;
            };
            links.push(attach_perf_event(&skel.progs.on_sample, fd, "cpu-clock")?);
            opened += 1;
        }
        if opened == 0 {
            return Err(BpfError::Unsupported {
                reason: "no CPU-clock perf event could be opened for the CPU samples \
                         (perf_event_open failed on every CPU)"
                    .into(),
            });
        }
    }
    if options.faults_and_block {
        let mut opened = 0;
        for cpu in 0..possible_cpus() {
            // PERF_COUNT_SW_PAGE_FAULTS_MAJ, every one.
            let Ok(fd) = open_software_event(cpu as i32, 6, 1, false) else {
                continue;
            };
            links.push(attach_perf_event(
                &skel.progs.on_major_fault,
                fd,
                "major-faults",
            )?);
            opened += 1;
        }
        if opened == 0 {
            unattached.push("major-faults: perf_event_open failed on every CPU".into());
        }
    }

    Ok(Attached {
        skel,
        links,
        unattached,
        sample_freq: tick.map_or(options.sample_freq, |t| t.hz),
        samples_on_tick: tick.is_some(),
    })
}

/// Attaches `prog` to the perf event `fd`, which the link then owns: libbpf closes the
/// event when the link is detached (kept here too, it was closed twice, and a number
/// reused meanwhile by another thread's file could have been closed with it).
fn attach_perf_event(
    prog: &libbpf_rs::ProgramMut<'_>,
    fd: OwnedFd,
    what: &str,
) -> Result<Link, BpfError> {
    let link = prog
        .attach_perf_event(fd.as_raw_fd())
        .map_err(|e| attach_err(what, e))?;
    let _owned_by_the_link = fd.into_raw_fd();
    Ok(link)
}

/// An attach failure as the error the recording stops with.
fn attach_err(what: &str, e: libbpf_rs::Error) -> BpfError {
    match e.kind() {
        ErrorKind::PermissionDenied => BpfError::NotPermitted {
            detail: format!("attaching {what}: {e:#}"),
        },
        _ => BpfError::Attach {
            tracepoint: what.to_string(),
            message: format!("{e:#}"),
        },
    }
}

/// Attaches an optional program (`name`, its tracepoint): its link kept, or why not noted
/// in `unattached` (the kernel lacks the tracepoint); a refusal stops the recording.
fn attach_or_note(
    prog: &libbpf_rs::ProgramMut<'_>,
    name: &str,
    links: &mut Vec<Link>,
    unattached: &mut Vec<String>,
) -> Result<(), BpfError> {
    match prog.attach() {
        Ok(link) => links.push(link),
        Err(e) if e.kind() == ErrorKind::PermissionDenied => return Err(attach_err(name, e)),
        Err(e) => unattached.push(format!("{name}: {e:#}")),
    }
    Ok(())
}

/// Opens a `PERF_COUNT_SW_CPU_CLOCK` sampling event at `freq` Hz on `cpu`, for all tasks.
fn open_cpu_clock(cpu: i32, freq: u32) -> std::io::Result<OwnedFd> {
    open_software_event(cpu, 0, u64::from(freq), true)
}

/// Opens a software perf event (`config`: PERF_COUNT_SW_*) on `cpu` for all tasks,
/// sampling at `freq` Hz, or every `period` events when `freq` is false.
fn open_software_event(cpu: i32, config: u64, period: u64, freq: bool) -> std::io::Result<OwnedFd> {
    // struct perf_event_attr (PERF_ATTR_SIZE_VER5, 112 bytes): type, size, config,
    // sample_freq or sample_period, sample_type, read_format, then the flag bits (bit 10:
    // freq).
    let mut attr = [0u64; 14];
    attr[0] = 1 | (112u64 << 32); // PERF_TYPE_SOFTWARE, size
    attr[1] = config;
    attr[2] = period;
    attr[5] = if freq { 1 << 10 } else { 0 };
    crate::sys::perf_event_open_cpu(&attr, cpu)
}

/// The number of CPUs that may exist (`/sys/devices/system/cpu/possible`).
pub(crate) fn possible_cpus() -> u32 {
    libbpf_rs::num_possible_cpus()
        .ok()
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(1)
}

/// The kernel's text, `_stext` to `_etext`.
fn kernel_text(symbols: &KernelSymbols) -> Option<(u64, u64)> {
    let (start, end) = (symbols.address("_stext")?, symbols.address("_etext")?);
    (end > start).then_some((start, end))
}

/// Whether a program of sched.bpf.c is one of the detectors' syscalls' (`call_NAME` on
/// `sys_enter_NAME`, `ret_NAME` on `sys_exit_NAME`).
pub(crate) fn is_detector_syscall_program(name: &str) -> bool {
    name.starts_with("call_") || name.starts_with("ret_")
}

/// Whether `name` is a waiting syscall's program on its own tracepoint (`enter_futex`, …).
pub(crate) fn is_wait_syscall_program(name: &str) -> bool {
    name.starts_with("enter_") || name.starts_with("exit_")
}

/// Whether the kernel has the tracepoint `category:name`, as tracefs lists it; true when
/// tracefs cannot be read (then the load says).
fn kernel_has_tracepoint(category: &str, name: &str) -> bool {
    let roots = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];
    let Some(root) = roots.iter().find(|r| Path::new(r).join("events").is_dir()) else {
        return true;
    };
    Path::new(root)
        .join("events")
        .join(category)
        .join(name)
        .is_dir()
}
