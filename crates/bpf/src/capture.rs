//! [`PathCapture`]: loads `paths.bpf.c`, attaches it to the `syscalls:sys_enter_*`
//! tracepoints the running kernel has (or, with [`CaptureOptions::raw_enter`], to the raw
//! `sys_enter` tracepoint), and drains its ring buffer on a thread of its own
//! until stopped: into a capture file (see [`crate::format`]) as the records come, or, in
//! ring mode ([`CaptureOptions::ring`]), into the window of the last seconds
//! ([`crate::ring`]) that [`PathCapture::snapshot`] and the stop write as files.
//!
//! It does not interpret paths or match them to perf's events (see [`crate::correlate`]),
//! and it captures system-wide: it does not filter processes. The probes belong to this
//! process (nothing is pinned): when it dies, however it dies, the kernel detaches them.

use std::cell::RefCell;
use std::fs::File;
use std::io::BufWriter;
use std::mem::MaybeUninit;
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};

use crate::counters::read_counter;
use libbpf_rs::{ErrorKind, Link, PrintLevel, RingBufferBuilder};

use crate::error::BpfError;
use crate::format::{PathLogWriter, RECORD_HEAD_LEN};
use crate::globals;
use crate::libbpf_log::{libbpf_print, load_error, take_libbpf_log};
use crate::links::{detach, detach_in_background};
use crate::nudge::{sleep_until_readable, Nudge};
use crate::ring::{PathRing, RingOptions};
use crate::sink::{write_ring_file, Sink, Store, RING_HEAD_LEN};
use crate::skel::PathsSkelBuilder;
use crate::sys;
use crate::syscall::Syscall;
use crate::syscall_numbers::x86_64_number;
use crate::worker::{setup, Ready, Worker};

/// The default ring buffer size: 32 MiB, allocated in the kernel for the capture's life.
///
/// Measured on a 2-core VM (`examples/stress.rs`, release build, 200,000 `stat`s of a
/// missing 34-byte name per thread, 72 bytes a record in the ring): one thread makes
/// ~500,000 records a second (~35 MB/s); the drain thread loses 9% of them with a 16 KiB
/// ring, 2% with 64 KiB, none from 256 KiB up; two threads together make ~900,000 a
/// second and lose none with 32 MiB. A clean `cargo build` of a small crate makes ~4,000
/// path records a second on average. 32 MiB holds about a second of the worst case and
/// several seconds of a busy build, so a drain thread descheduled for a while on a loaded
/// machine still loses nothing.
pub const DEFAULT_RING_BYTES: u32 = 32 << 20;

/// How long the drain thread sleeps at most between two reads of the ring buffer. The BPF
/// program wakes it early only when a quarter of the ring is full ([`WAKEUP_FRACTION`]),
/// and its owner when it asks for a snapshot or stops (a [`Nudge`]), so on a quiet system
/// it reads every `POLL_INTERVAL` (50 ms before: 20 wake-ups a second with nothing to read).
const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// The program wakes the reader once `ring_bytes / WAKEUP_FRACTION` bytes are waiting.
const WAKEUP_FRACTION: u32 = 4;

/// How long [`PathCapture::snapshot`] waits for the capture thread to write a snapshot.
const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(60);

/// Index of the drop counter in the `counters` map.
const COUNTER_DROPS: u32 = 0;

/// Capture options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureOptions {
    /// Size of the kernel ring buffer in bytes: a power of two, at least one page. A record
    /// takes 32 bytes plus its path, rounded up to a multiple of 8.
    pub ring_bytes: u32,
    /// Read a path again at the syscall's exit when its page was not in memory at entry
    /// (typically a string literal of a program that just started, such as ld.so's
    /// `/etc/ld.so.cache`); otherwise such a path is recorded as unreadable. On by
    /// default. It hooks the exit of *every* syscall, which costs about 0.2 µs per syscall
    /// system-wide on a 2-core VM (a path syscall costs ~1 µs more either way).
    pub retry_at_exit: bool,
    /// Ring mode: keep only the paths of the last window (see [`RingOptions`]) instead of
    /// streaming every path to the file. The file is then written by
    /// [`PathCapture::stop`] (and each [`PathCapture::snapshot`] writes one of its own),
    /// never while capturing. Off by default.
    pub ring: Option<RingOptions>,
    /// On x86-64, take the path syscalls' entries with one program on the raw `sys_enter`
    /// tracepoint, not one program per syscall on its own tracepoint; all but those perf
    /// records too (`SyscallInfo::recorded_by_perf`), which keep their own. The raw
    /// program's detach is immediate, where each syscall tracepoint's waits for an RCU
    /// grace period (~40 ms here), one after the other. Those perf records keep theirs
    /// because perf's close of its own event on a tracepoint waits for one too unless
    /// another event is still on it: with the capture's on it, perf's stop does not wait,
    /// and the capture's detach does, after the analysis has begun. A capture around a
    /// command then ends ~1 s sooner with the answer as soon. It runs for every syscall of
    /// the machine: ~50 ns more for each it does not take (`getpid` under `slowlab
    /// record --backend perf`, medians of 6: 231 against 283 ns). A 32-bit program's
    /// syscalls are left out (their code segment says so); a 64-bit program's `int 0x80`
    /// ones are not, and come as the 64-bit syscall of their number, which no call of
    /// perf's is paired with (its syscall events leave them out). Off by default (a
    /// capture of the machine, which runs long); ignored elsewhere than on x86-64.
    pub raw_enter: bool,
}

impl Default for CaptureOptions {
    fn default() -> Self {
        CaptureOptions {
            ring_bytes: DEFAULT_RING_BYTES,
            retry_at_exit: true,
            ring: None,
            raw_enter: false,
        }
    }
}

/// What a capture did, returned by [`PathCapture::stop`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CaptureStats {
    /// Records written to the output file.
    pub events: u64,
    /// Records lost in the kernel because the ring buffer was full.
    pub drops: u64,
    /// Records whose path could not be read (written with an empty path).
    pub unreadable: u64,
    /// Records whose path was cut at 256 bytes.
    pub truncated: u64,
    /// Syscalls whose tracepoint was attached.
    pub attached: Vec<Syscall>,
    /// Syscalls whose tracepoint this kernel does not have (skipped).
    pub missing: Vec<Syscall>,
    /// The capture file.
    pub output: PathBuf,
}

/// A running path capture. Create it with [`PathCapture::start`]; stop it with
/// [`PathCapture::stop`] (dropping it also stops it, discarding the statistics).
///
/// Needs root, or CAP_BPF and CAP_PERFMON. Kernel BTF is not needed; the kernel needs BPF,
/// the BPF ring buffer (Linux 5.8) and syscall tracepoints (`CONFIG_FTRACE_SYSCALLS`).
///
/// Times are CLOCK_MONOTONIC nanoseconds. To match them with perf's syscall events, run
/// `perf record` with `-k monotonic` (`--clockid monotonic`); see [`crate::correlate`].
#[derive(Debug)]
pub struct PathCapture {
    /// First: stopped and joined before the rest goes.
    worker: Worker<CaptureStats>,
    attached: Vec<Syscall>,
    missing: Vec<Syscall>,
    output: PathBuf,
    /// Ring mode: where [`PathCapture::snapshot`] sends its requests, and what wakes the
    /// capture thread to read them.
    snapshots: Option<(mpsc::Sender<SnapshotRequest>, Nudge)>,
}

/// A request to the capture thread to write the ring's window to `path`, or with no path
/// to let go of it ([`PathCapture::forget`]).
#[derive(Debug)]
struct SnapshotRequest {
    path: Option<PathBuf>,
    reply: mpsc::SyncSender<Result<u64, BpfError>>,
}

/// What the capture thread reports once the probes are attached (or setup failed).
type Attached = (Vec<Syscall>, Vec<Syscall>);

impl PathCapture {
    /// Starts a capture into `output` (created or truncated) with default options.
    ///
    /// Returns once every available probe is attached, so a workload started right after
    /// is seen from its first syscall.
    pub fn start(output: &Path) -> Result<PathCapture, BpfError> {
        PathCapture::start_with(output, &CaptureOptions::default())
    }

    /// Starts a capture into `output` with `options`. See [`PathCapture::start`].
    pub fn start_with(output: &Path, options: &CaptureOptions) -> Result<PathCapture, BpfError> {
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
        if let Some(r) = &options.ring {
            if r.keep.is_zero() || r.max_bytes < 4096 {
                return Err(BpfError::Options {
                    reason: format!(
                        "ring mode needs a window of more than 0 s and at least 4096 bytes, \
                         not {:?} and {} bytes",
                        r.keep, r.max_bytes
                    ),
                });
            }
        }
        sys::check_privileges()?;
        let syscalls_dir = sys::syscall_events_dir()?;
        let (available, missing) = sys::available_syscalls(&syscalls_dir);
        if available.is_empty() {
            return Err(BpfError::Unsupported {
                reason: format!(
                    "none of the path syscalls' tracepoints exist under {}",
                    syscalls_dir.display()
                ),
            });
        }
        // Ring mode writes its file at the stop; streaming writes from the start.
        let (snapshot_tx, snapshot_rx) = mpsc::channel::<SnapshotRequest>();
        let target = match options.ring {
            Some(window) => Target::Ring(window, snapshot_rx),
            None => Target::File(File::create(output).map_err(|e| BpfError::io(output, e))?),
        };

        let output_path = output.to_path_buf();
        let ring = options.ring_bytes;
        let retry_at_exit = options.retry_at_exit;
        let raw_enter = options.raw_enter && cfg!(target_arch = "x86_64");
        let nudge = Nudge::new().map_err(|e| BpfError::RingBuffer {
            message: format!("cannot make the capture thread's eventfd: {e}"),
        })?;
        let woken = nudge.clone();
        let (mut worker, (attached, missing)) =
            Worker::start("slowlab-bpf", "capture thread", move |stop, ready| {
                let probes = Probes {
                    available,
                    missing,
                    retry_at_exit,
                    raw_enter,
                };
                run(target, output_path, ring, probes, (stop, woken), ready)
            })?;
        worker.nudged_by(nudge.clone());
        Ok(PathCapture {
            worker,
            attached,
            missing,
            output: output.to_path_buf(),
            snapshots: options.ring.map(|_| (snapshot_tx, nudge)),
        })
    }

    /// Syscalls whose tracepoints are attached.
    pub fn attached(&self) -> &[Syscall] {
        &self.attached
    }

    /// Syscalls skipped because this kernel has no tracepoint for them.
    pub fn missing(&self) -> &[Syscall] {
        &self.missing
    }

    /// The capture file.
    pub fn output(&self) -> &Path {
        &self.output
    }

    /// Ring mode: writes the paths of the window ending now to `path` (a complete capture
    /// file, written under a temporary name and renamed) and keeps capturing; returns the
    /// records written. Fails with [`BpfError::Options`] when the capture is not in ring
    /// mode.
    pub fn snapshot(&self, path: &Path) -> Result<u64, BpfError> {
        self.ask(Some(path))
    }

    /// Ring mode: lets go of the paths captured so far; the next snapshot's window starts
    /// now (one capture gives the paths of each of several runs: `lab --trace`). Fails as
    /// [`PathCapture::snapshot`] does.
    pub fn forget(&self) -> Result<(), BpfError> {
        self.ask(None).map(|_| ())
    }

    /// Sends the capture thread a snapshot request (or, without a path, a forget) and
    /// waits for its answer.
    fn ask(&self, path: Option<&Path>) -> Result<u64, BpfError> {
        let Some((requests, nudge)) = &self.snapshots else {
            return Err(BpfError::Options {
                reason: "snapshots need a capture in ring mode (CaptureOptions::ring)".into(),
            });
        };
        let (reply, answer) = mpsc::sync_channel(1);
        let request = SnapshotRequest {
            path: path.map(Path::to_path_buf),
            reply,
        };
        if requests.send(request).is_err() {
            return Err(BpfError::ThreadPanicked);
        }
        nudge.nudge();
        match answer.recv_timeout(SNAPSHOT_TIMEOUT) {
            Ok(result) => result,
            Err(mpsc::RecvTimeoutError::Timeout) => Err(BpfError::RingBuffer {
                message: format!(
                    "the capture thread did not answer within {} s{}",
                    SNAPSHOT_TIMEOUT.as_secs(),
                    path.map(|p| format!(" (the snapshot {})", p.display()))
                        .unwrap_or_default()
                ),
            }),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(BpfError::ThreadPanicked),
        }
    }

    /// Stops recording, drains what is left in the ring buffer, writes the end record,
    /// flushes the file, and returns the statistics; the probes are detached in the
    /// background meanwhile (the process's exit waits for that).
    pub fn stop(mut self) -> Result<CaptureStats, BpfError> {
        self.worker.finish()
    }
}

/// Which tracepoints to attach.
struct Probes {
    /// Syscalls whose `sys_enter_*` tracepoint exists.
    available: Vec<Syscall>,
    /// Syscalls whose `sys_enter_*` tracepoint does not.
    missing: Vec<Syscall>,
    /// Attach `exit_any`.
    retry_at_exit: bool,
    /// Attach `enter_any` in place of the `enter_<name>` programs it takes.
    raw_enter: bool,
}

/// Where one of the object's programs attaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AttachPoint {
    /// `enter_<name>`: tracepoint `syscalls:sys_enter_<name>`.
    Enter(Syscall),
    /// `exit_any`: raw tracepoint `sys_exit` (reads parked paths).
    RawSysExit,
    /// `enter_any`: raw tracepoint `sys_enter` (the entries of the syscalls in `raw_ids`).
    RawSysEnter,
}

impl Probes {
    /// Where the program named `program` attaches, when it should be loaded here.
    fn attach_point(&self, program: &str) -> Option<AttachPoint> {
        match program {
            "exit_any" => return self.retry_at_exit.then_some(AttachPoint::RawSysExit),
            "enter_any" => return self.raw_enter.then_some(AttachPoint::RawSysEnter),
            _ => {}
        }
        let s = Syscall::from_name(program.strip_prefix("enter_")?)?;
        (self.available.contains(&s) && !self.takes_raw(s)).then_some(AttachPoint::Enter(s))
    }

    /// Whether `enter_any` takes `syscall`'s paths (see [`CaptureOptions::raw_enter`]):
    /// those with an x86-64 number in its table, which holds none that perf records
    /// (`build.rs` refuses them, so that perf's own tracepoints keep them).
    fn takes_raw(&self, syscall: Syscall) -> bool {
        self.raw_enter && x86_64_number(syscall.name()).is_some()
    }

    /// The capture ids `enter_any` takes, a bit each (its `raw_ids`).
    fn raw_ids(&self) -> u64 {
        self.taken_by(AttachPoint::RawSysEnter)
            .iter()
            .fold(0, |mask, s| mask | 1 << s.id())
    }

    /// The syscalls `point`'s program takes the paths of: for `enter_any`, those of
    /// `available` it takes ([`Probes::takes_raw`]).
    fn taken_by(&self, point: AttachPoint) -> Vec<Syscall> {
        match point {
            AttachPoint::Enter(syscall) => vec![syscall],
            AttachPoint::RawSysEnter => self
                .available
                .iter()
                .copied()
                .filter(|&s| self.takes_raw(s))
                .collect(),
            AttachPoint::RawSysExit => Vec::new(),
        }
    }
}

/// Where the capture thread puts the records.
enum Target {
    /// Streams them into this file.
    File(File),
    /// Keeps the last window, written to a file on request and at the stop.
    Ring(RingOptions, mpsc::Receiver<SnapshotRequest>),
}

/// The capture thread: sets up, reports readiness, drains until `stop`, finishes the file.
fn run(
    target: Target,
    output: PathBuf,
    ring_bytes: u32,
    probes: Probes,
    (stop, nudge): (Arc<AtomicBool>, Nudge),
    ready: Ready<Attached>,
) -> Result<CaptureStats, BpfError> {
    sys::raise_memlock(u64::from(ring_bytes) + (1 << 20));
    libbpf_rs::set_print(Some((PrintLevel::Warn, libbpf_print)));
    take_libbpf_log();

    let mut object = MaybeUninit::uninit();
    let mut open = setup!(
        ready,
        PathsSkelBuilder::default()
            .open(&mut object)
            .map_err(|e| load_error(e, ring_bytes))
    );
    setup!(
        ready,
        open.maps
            .events
            .set_max_entries(ring_bytes)
            .map_err(|e| load_error(e, ring_bytes))
    );
    if let Some(rodata) = open.maps.rodata_data.as_deref_mut() {
        rodata.wakeup_bytes = u64::from(ring_bytes / WAKEUP_FRACTION);
        rodata.retry_at_exit = probes.retry_at_exit;
        rodata.raw_ids = probes.raw_ids();
    }
    for mut prog in open.open_object_mut().progs_mut() {
        let wanted = probes
            .attach_point(&prog.name().to_string_lossy())
            .is_some();
        prog.set_autoload(wanted);
    }
    let mut skel = setup!(ready, open.load().map_err(|e| load_error(e, ring_bytes)));

    let mut links: Vec<Link> = Vec::with_capacity(probes.available.len() + 1);
    let mut attached = Vec::with_capacity(probes.available.len());
    for prog in skel.object().progs_mut() {
        if !prog.autoload() {
            continue;
        }
        let Some(point) = probes.attach_point(&prog.name().to_string_lossy()) else {
            continue;
        };
        let (what, link) = match point {
            AttachPoint::Enter(syscall) => {
                let tracepoint = syscall.tracepoint().to_string();
                let link =
                    prog.attach_tracepoint(libbpf_rs::TracepointCategory::Syscalls, &tracepoint);
                (format!("syscalls:{tracepoint}"), link)
            }
            AttachPoint::RawSysExit => (
                "raw_syscalls:sys_exit".to_string(),
                prog.attach_raw_tracepoint("sys_exit"),
            ),
            AttachPoint::RawSysEnter => (
                "raw_syscalls:sys_enter".to_string(),
                prog.attach_raw_tracepoint("sys_enter"),
            ),
        };
        let link = match link {
            Ok(link) => link,
            Err(e) => {
                let err = match e.kind() {
                    ErrorKind::PermissionDenied => BpfError::NotPermitted {
                        detail: format!("attaching {what}: {e:#}"),
                    },
                    _ => BpfError::Attach {
                        tracepoint: what,
                        message: format!("{e:#}"),
                    },
                };
                detach(std::mem::take(&mut links));
                setup!(ready, Err(err))
            }
        };
        links.push(link);
        attached.extend(probes.taken_by(point));
    }
    attached.sort();

    let start_mono = sys::monotonic_ns();
    let start_real = sys::clock_ns(libc::CLOCK_REALTIME);
    let (store, requests) = match target {
        Target::File(file) => {
            let writer = setup!(
                ready,
                PathLogWriter::new(
                    BufWriter::with_capacity(1 << 20, file),
                    start_mono,
                    start_real,
                    &attached
                )
                .map_err(|e| BpfError::io(&output, e))
            );
            (Store::File(writer), None)
        }
        Target::Ring(window, requests) => (Store::Ring(PathRing::new(&window)), Some(requests)),
    };
    let sink = RefCell::new(Sink::new(store));

    let mut builder = RingBufferBuilder::new();
    setup!(
        ready,
        builder
            .add(&skel.maps.events, |data: &[u8]| sink
                .borrow_mut()
                .on_record(data))
            .map_err(BpfError::ring_buffer)
    );
    let ring = setup!(ready, builder.build().map_err(BpfError::ring_buffer));

    let missing = probes.missing;
    if ready.send(Ok((attached.clone(), missing.clone()))).is_err() {
        // The starter is gone; nobody will ever stop us, so stop now.
        stop.store(true, Ordering::SeqCst);
    }

    let mut failure: Option<BpfError> = None;
    while !stop.load(Ordering::SeqCst) {
        // Until the program or the owner wakes it, or the time-out: records below the
        // wake-up mark are read then.
        {
            // SAFETY: the ring buffer's epoll descriptor lives as long as `ring`, which
            // outlives this borrow.
            let records = unsafe { BorrowedFd::borrow_raw(ring.epoll_fd()) };
            sleep_until_readable(&[records, nudge.fd()], POLL_INTERVAL);
        }
        nudge.clear();
        let read = ring.consume();
        if let Err(e) = read {
            if e.kind() == ErrorKind::Interrupted {
                continue;
            }
            failure = Some(BpfError::ring_buffer(e));
            break;
        }
        if sink.borrow().error.is_some() {
            break;
        }
        if let (Store::Ring(window), Some(requests)) = (&mut sink.borrow_mut().store, &requests) {
            let now = sys::monotonic_ns();
            window.expire(now);
            while let Ok(request) = requests.try_recv() {
                let Some(path) = &request.path else {
                    window.forget(now);
                    let _ = request.reply.send(Ok(0));
                    continue;
                };
                let drops = read_counter(&skel.maps.counters, COUNTER_DROPS);
                let written = write_ring_file(
                    window,
                    path,
                    now,
                    (start_mono, start_real),
                    &attached,
                    drops,
                );
                let _ = request.reply.send(written);
            }
        }
    }

    // Nothing new is recorded from here on; what is left is drained and the file finished
    // while the programs are detached, in the background.
    if let Some(bss) = skel.maps.bss_data.as_deref_mut() {
        globals::store(&mut bss.capture_stopped, true);
    }
    let stop_ns = sys::monotonic_ns();
    detach_in_background(links);
    if sink.borrow().error.is_none() {
        if let Err(e) = ring.consume() {
            failure.get_or_insert(BpfError::ring_buffer(e));
        }
    }
    drop(ring);

    let drops = read_counter(&skel.maps.counters, COUNTER_DROPS);
    let sink = sink.into_inner();
    if let Some(e) = sink.error {
        return Err(BpfError::io(&output, e));
    }
    if let Some(f) = failure {
        return Err(f);
    }
    let events = match sink.store {
        Store::File(writer) => {
            let events = writer.records();
            writer
                .finish(stop_ns, drops)
                .map_err(|e| BpfError::io(&output, e))?;
            events
        }
        Store::Ring(mut window) => {
            window.expire(stop_ns);
            let start = (start_mono, start_real);
            write_ring_file(&window, &output, stop_ns, start, &attached, drops)?
        }
    };
    Ok(CaptureStats {
        events,
        drops,
        unreadable: sink.unreadable,
        truncated: sink.truncated,
        attached,
        missing,
        output,
    })
}

// The file format's record head and the ring's are the same size by design.
const _: () = assert!(RECORD_HEAD_LEN == RING_HEAD_LEN);
