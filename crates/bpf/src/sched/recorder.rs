//! [`SchedRecorder`]: on a thread of its own, loads `sched.bpf.c` and attaches its programs
//! (`super::attach`: the scheduler tracepoints, the syscalls', the block tracepoints, the
//! faults, and the perf events of the CPU samples and major faults; a tracepoint the kernel
//! lacks is left out and named in [`SchedStats::unattached`]), and drains the ring buffer
//! into a scheduler recording (see [`super::format`]) until stopped; then it writes the
//! stack map's stacks and the counts of what was lost.
//!
//! Beside the records the drain (`super::drain`) writes what they need to be read: the
//! threads alive at the start and any thread first seen later (from `/proc`), and each
//! process's executable mappings, as the kernel reports them (`super::mmaps`; where it
//! cannot, from `/proc/PID/maps` at the exec, which then wakes the drain, and again at its
//! user stacks until one comes 20 ms after it), for naming user frames later.
//!
//! Stacks cost most of a record (a kernel walk ~2 us here), so by default a thread that
//! blocks, or wakes another, where it did the last time reuses that time's stacks
//! ([`SchedOptions::reuse_sites`]).
//!
//! In ring mode ([`SchedRecorder::start_ring`]) nothing is written while it records: the
//! drain keeps the last seconds in memory (`super::ring`), [`SchedRecorder::snapshot`]
//! writes them into a file, and the stop writes the last into the output. Every 5 s the
//! recording thread (`super::recording_thread`) also empties the kernel's stack map of
//! the stacks nothing in the window names, so that a recording of days keeps finding room
//! for new stacks. Without the ring, the stacks are moved from the map into the file every
//! 10 s, for the same reason. Either is done sooner when the programs have added half the
//! map's entries since the last time.
//!
//! It does not symbolize, build a trace, or filter processes: it records system-wide.
//! The programs belong to this process (nothing is pinned), so the kernel detaches them
//! when it dies.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use slowlab_model::bundle::partial_file;

use super::options::{SchedOptions, SchedStats};
use super::recording_thread;
use super::ring::{RingOptions, SnapshotInfo, Spill};
use crate::error::BpfError;
use crate::nudge::Nudge;
use crate::sys;
use crate::worker::Worker;

/// The default ring buffer: 16 MiB. A record takes 40 bytes in the ring (32 and the
/// ring's 8-byte head); a pipe ping-pong of ~230,000 switches a second (about 350,000
/// records) fills 14 MB a second, so this holds a second of it for a drain thread that
/// is kept off the CPU.
pub const DEFAULT_SCHED_RING_BYTES: u32 = 16 << 20;

/// The default size of the stack map: distinct stacks kept (each takes ~1 KiB of kernel
/// memory, so 32 MiB). A stack that does not fit is lost (counted) and its record has no
/// stack: a second of the pipe ping-pong system-wide makes ~4,500 distinct stacks. (The
/// map is keyed by a 64-bit hash of the stack, so stacks no longer collide; with
/// `bpf_get_stackid`'s map the same run lost 944 stacks to collisions with 16,384
/// entries.)
pub const DEFAULT_STACK_ENTRIES: u32 = 32768;

/// What the drain thread is asked while it records.
pub(super) enum Ask {
    /// Ring mode: a snapshot into the path, about a process (its pid and arguments) or
    /// the recording's command, answered on the sender.
    Snapshot(
        PathBuf,
        Option<(u32, Vec<String>)>,
        mpsc::Sender<Result<SnapshotInfo, BpfError>>,
    ),
    /// The command the recording runs: its pid and arguments.
    Command(u32, Vec<String>),
    /// Ring mode: the bytes of records the window holds now, answered on the sender.
    WindowBytes(mpsc::Sender<u64>),
    /// Ring mode: let go of every record so far, answered on the sender once done.
    Forget(mpsc::Sender<()>),
}

/// The program wakes the reader once `ring_bytes / WAKEUP_FRACTION` bytes are waiting.
pub(crate) const WAKEUP_FRACTION: u32 = 4;

pub(crate) const COUNTER_DROPS: u32 = 0;
pub(crate) const COUNTER_STACK_LOST: u32 = 1;
pub(crate) const COUNTER_REUSED: u32 = 2;

/// Frames of a stack in the stack map (the kernel's PERF_MAX_STACK_DEPTH).
pub(crate) const STACK_DEPTH: usize = 127;

/// A running scheduler recording. Start it with [`SchedRecorder::start`], stop it with
/// [`SchedRecorder::stop`] (dropping it also stops it, discarding the statistics).
///
/// Needs root (or CAP_BPF and CAP_PERFMON), kernel BTF (`/sys/kernel/btf/vmlinux`) for
/// the `tp_btf` programs, and the BPF ring buffer (Linux 5.8).
#[derive(Debug)]
pub struct SchedRecorder {
    worker: Worker<SchedStats>,
    output: PathBuf,
    /// Where the drain thread is asked for snapshots and told of the command, and what
    /// wakes it to look.
    asks: mpsc::Sender<Ask>,
    nudge: Nudge,
    ring: bool,
}

impl SchedRecorder {
    /// Starts recording into `output` (through `OUTPUT.partial`, renamed when the stop has
    /// finished it). Returns once every program is attached, so a workload started right
    /// after is seen from its start.
    pub fn start(output: &Path, options: &SchedOptions) -> Result<SchedRecorder, BpfError> {
        SchedRecorder::start_with(output, options, None)
    }

    /// Starts recording in ring mode: the last seconds `ring` says are kept in memory,
    /// written by [`SchedRecorder::snapshot`] and, at the stop, into `output`.
    pub fn start_ring(
        output: &Path,
        options: &SchedOptions,
        ring: RingOptions,
    ) -> Result<SchedRecorder, BpfError> {
        SchedRecorder::start_with(output, options, Some(ring))
    }

    fn start_with(
        output: &Path,
        options: &SchedOptions,
        window: Option<RingOptions>,
    ) -> Result<SchedRecorder, BpfError> {
        let ring = options.ring_bytes;
        let page = sys::page_size();
        if !ring.is_power_of_two() || u64::from(ring) < page {
            return Err(BpfError::Options {
                reason: format!(
                    "the ring buffer size must be a power of two of at least one page \
                     ({page} bytes), not {ring}"
                ),
            });
        }
        if options.stack_entries == 0 {
            return Err(BpfError::Options {
                reason: "the stack map needs at least one entry".into(),
            });
        }
        SchedRecorder::available()?;
        // Written as `OUTPUT.partial` and renamed once finished: a recording cut short
        // (slowlab killed, a full disk) is never named as a finished one.
        let partial = partial_file(output);
        // Read too: a spilling window reads its chunks back from it.
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&partial)
            .map_err(|e| BpfError::io(output, e))?;
        let sink = match window {
            // Nothing is written until a snapshot: the file only showed it can be, or, when
            // the window spills, it is the spill, unlinked so that it goes with the recorder
            // however that ends.
            Some(ring) => {
                let _ = fs::remove_file(&partial);
                Err((ring, ring.spill.then(|| Spill::new(file))))
            }
            None => Ok(file),
        };
        let (asks, requests) = mpsc::channel();
        let output_path = output.to_path_buf();
        let options = options.clone();
        let nudge = Nudge::new().map_err(|e| BpfError::RingBuffer {
            message: format!("cannot make the drain's eventfd: {e}"),
        })?;
        let woken = nudge.clone();
        let (mut worker, ()) =
            Worker::start("slowlab-sched", "recording thread", move |stop, ready| {
                recording_thread::run(sink, requests, output_path, options, (stop, woken), ready)
            })?;
        worker.nudged_by(nudge.clone());
        Ok(SchedRecorder {
            worker,
            output: output.to_path_buf(),
            asks,
            nudge,
            ring: window.is_some(),
        })
    }

    /// Asks the drain thread `ask` and wakes it; `Err` once it has ended.
    fn ask(&self, ask: Ask) -> Result<(), mpsc::SendError<Ask>> {
        let sent = self.asks.send(ask);
        self.nudge.nudge();
        sent
    }

    /// Notes the command the recording runs (its process, by pid, is the analysis's
    /// default root), in the file or, in ring mode, in every snapshot.
    pub fn note_command(&self, pid: u32, args: &[String]) {
        let _ = self.ask(Ask::Command(pid, args.to_vec()));
    }

    /// Whether a recording can start here: root (or CAP_BPF and CAP_PERFMON), and kernel
    /// BTF for the `tp_btf` programs; the error says what is missing.
    pub fn available() -> Result<(), BpfError> {
        sys::check_privileges()?;
        if !Path::new("/sys/kernel/btf/vmlinux").exists() {
            return Err(BpfError::Unsupported {
                reason: "no kernel BTF (/sys/kernel/btf/vmlinux): the scheduler recorder's \
                         tp_btf programs need a kernel built with CONFIG_DEBUG_INFO_BTF=y; \
                         use `--backend perf`"
                    .into(),
            });
        }
        Ok(())
    }

    /// Ring mode: writes the seconds kept into `path` (through `PATH.partial`, which a
    /// failure removes) and says what it holds; the recording goes on either way.
    pub fn snapshot(&self, path: &Path) -> Result<SnapshotInfo, BpfError> {
        self.snapshot_about(path, None)
    }

    /// [`Self::snapshot`], naming the process `about` (pid and arguments) as the
    /// snapshot's command, in place of the recording's: its analysis's default root (a
    /// slow process a trigger fired for).
    pub fn snapshot_about(
        &self,
        path: &Path,
        about: Option<(u32, Vec<String>)>,
    ) -> Result<SnapshotInfo, BpfError> {
        if !self.ring {
            return Err(BpfError::Options {
                reason: "snapshots are taken only in ring mode".into(),
            });
        }
        let (answer, answered) = mpsc::channel();
        self.ask(Ask::Snapshot(path.to_path_buf(), about, answer))
            .map_err(|_| BpfError::ThreadPanicked)?;
        answered.recv().map_err(|_| BpfError::ThreadPanicked)?
    }

    /// Ring mode: lets go of every record so far, those of the moment it is asked for
    /// included, and of the losses counted so far: the next snapshot holds what comes
    /// after (and the threads and mappings alive then). So one recording gives a trace of
    /// each of several runs, each snapshot taken at a run's end with a `forget` at its
    /// start, loading and attaching the programs once (`lab --trace`).
    pub fn forget(&self) -> Result<(), BpfError> {
        if !self.ring {
            return Err(BpfError::Options {
                reason: "only a ring's records can be let go of".into(),
            });
        }
        let (answer, answered) = mpsc::channel();
        self.ask(Ask::Forget(answer))
            .map_err(|_| BpfError::ThreadPanicked)?;
        answered.recv().map_err(|_| BpfError::ThreadPanicked)
    }

    /// Ring mode: the bytes of records the window holds now (what a snapshot writes,
    /// besides its stacks and mappings); `None` outside ring mode or once it has ended.
    pub fn window_bytes(&self) -> Option<u64> {
        if !self.ring {
            return None;
        }
        let (answer, answered) = mpsc::channel();
        self.ask(Ask::WindowBytes(answer)).ok()?;
        answered.recv().ok()
    }

    /// The recording file.
    pub fn output(&self) -> &Path {
        &self.output
    }

    /// Whether the recording has ended by itself: it failed (a full disk, an unreadable
    /// ring buffer) and records nothing more; [`stop`](Self::stop) says why.
    pub fn has_failed(&self) -> bool {
        self.worker.has_ended()
    }

    /// Detaches the programs, drains the ring, writes the stacks and the end, and returns
    /// the statistics.
    pub fn stop(mut self) -> Result<SchedStats, BpfError> {
        self.worker.finish()
    }
}
