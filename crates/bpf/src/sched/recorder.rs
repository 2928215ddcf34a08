//! [`SchedRecorder`]: on a thread of its own, loads `sched.bpf.c` and attaches its programs
//! (`super::attach`: the scheduler tracepoints, the syscalls', the block tracepoints, the
//! faults, and the perf events of the CPU samples and major faults; a tracepoint the kernel
//! lacks is left out and named in [`SchedStats::unattached`]), and drains the ring buffer
//! into a scheduler recording (see [`super::format`]) until stopped; then it writes the
//! stack map's stacks and the counts of what was lost.
//!
//! Beside the records the drain (`super::drain`) writes what they need to be read: the threads alive at the
//! start and any thread first seen later (from `/proc`), and each process's executable
//! mappings at its exec (an exec wakes the drain) and again at its user stacks until one
//! comes 20 ms after the exec (the loader maps the libraries meanwhile), for naming user
//! frames later. What a process that has exited by then had mapped since its last read
//! is missing: those user frames stay addresses.
//!
//! Stacks cost most of a record (a kernel walk ~2 us here), so by default a thread that
//! blocks, or wakes another, where it did the last time reuses that time's stacks
//! ([`SchedOptions::reuse_sites`]).
//!
//! In ring mode ([`SchedRecorder::start_ring`]) nothing is written while it records: the
//! drain keeps the last seconds in memory (`super::ring`), [`SchedRecorder::snapshot`]
//! writes them into a file, and the stop writes the last into the output. Every
//! [`EVICT_EVERY`] it also empties the kernel's stack map of the stacks nothing in the
//! window names, so that a recording of days keeps finding room for new stacks. Without
//! the ring, the stacks are moved from the map into the file every
//! [`FLUSH_STACKS_EVERY`], for the same reason. Either is done sooner when the programs
//! have added half the map's entries since the last time.
//!
//! It does not symbolize, build a trace, or filter processes: it records system-wide.
//! The programs belong to this process (nothing is pinned), so the kernel detaches them
//! when it dies.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use libbpf_rs::skel::Skel;
use libbpf_rs::{ErrorKind, PrintLevel, RingBufferBuilder};
use slowlab_model::bundle::partial_file;

use super::attach::{load_and_attach, possible_cpus, Attached};
use super::drain::{evict_stacks, flush_stacks, new_stack_generation, write_window, Drain};
use super::format::SchedEnd;
use super::mmaps::MmapRings;
use super::options::{program_cost, ProgramCost, SchedOptions, SchedStats};
use super::ring::{Header, RingOptions, Sink, SnapshotInfo, Spill, Window};
use crate::counters::read_counter;
use crate::error::BpfError;
use crate::globals;
use crate::libbpf_log::{libbpf_print, take_libbpf_log};
use crate::links::detach_in_background;
use crate::sys;
use crate::worker::{Ready, Worker};

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

/// How long the drain thread sleeps at most between two reads of the ring buffer.
const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// The most records one pass of the drain takes before it looks up: at the stop, at the
/// stack map, at snapshot requests. (libbpf reads a ring buffer until it is empty; on a
/// busy machine the programs refill it as fast as a starved drain empties it, and one read
/// went on for seconds after the command had ended, the stack map filling meanwhile.)
const RECORDS_PER_PASS: u32 = 4096;

/// The most passes a snapshot waits for the records to catch up (`catch_up`): ~0.25 M
/// records, a fraction of a second of the drain's time.
const CATCH_UP_PASSES: u32 = 64;

/// Ring mode: how often the stacks nothing in the window names leave the kernel's map …
const EVICT_EVERY: Duration = Duration::from_secs(5);

/// How often ring mode reads the machine's CPU time counters (`/proc/stat`, ~20 µs), for
/// each snapshot's steal time over its window: to the second, as the counters count in
/// hundredths.
const READ_CPU_TIMES_EVERY: Duration = Duration::from_secs(1);

/// … or, when half the map's entries were added since, at most this often (each eviction
/// reads the whole map).
const EVICT_FILLING_EVERY: Duration = Duration::from_secs(1);

/// Otherwise, how often the stacks in the kernel's map are moved into the file (sooner
/// when half the map's entries were added). Not every second: each move deletes the
/// entries, the kernel frees them in deferred work, and a stack walked again after it is
/// added and written again; every second cost the drain a fifth more CPU on
/// `bench/record/overhead.sh`'s tar workload (25 against 20 ms for five runs).
const FLUSH_STACKS_EVERY: Duration = Duration::from_secs(10);

/// What the drain thread is asked while it records.
enum Ask {
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
const COUNTER_REUSED: u32 = 2;

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
    /// Where the drain thread is asked for snapshots and told of the command.
    asks: mpsc::Sender<Ask>,
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
        let (worker, ()) =
            Worker::start("slowlab-sched", "recording thread", move |stop, ready| {
                run(sink, requests, output_path, options, stop, ready)
            })?;
        Ok(SchedRecorder {
            worker,
            output: output.to_path_buf(),
            asks,
            ring: window.is_some(),
        })
    }

    /// Notes the command the recording runs (its process, by pid, is the analysis's
    /// default root), in the file or, in ring mode, in every snapshot.
    pub fn note_command(&self, pid: u32, args: &[String]) {
        let _ = self.asks.send(Ask::Command(pid, args.to_vec()));
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
        self.asks
            .send(Ask::Snapshot(path.to_path_buf(), about, answer))
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
        self.asks
            .send(Ask::Forget(answer))
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
        self.asks.send(Ask::WindowBytes(answer)).ok()?;
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

/// Before a snapshot: reads records until they reach `until_ns` (when it was asked for) or
/// the ring is empty, at most [`CATCH_UP_PASSES`] passes. A pass takes at most
/// [`RECORDS_PER_PASS`] records, and the kernel's reports of mappings are read whole: under
/// process churn the records lagged behind, and a snapshot missed its last 0.03–0.16 s
/// and held the mappings of hundreds of processes its records did not reach yet.
fn catch_up(
    ring: &libbpf_rs::RingBuffer,
    pass: &std::cell::Cell<Option<u32>>,
    drain: &std::cell::RefCell<Drain>,
    until_ns: u64,
) {
    for _ in 0..CATCH_UP_PASSES {
        let newest = drain
            .borrow_mut()
            .window()
            .map_or(u64::MAX, |w| w.newest_ns());
        if newest >= until_ns {
            return;
        }
        pass.set(Some(0));
        // A pass cut short says so (EINTR); another error the next read reports.
        let _ = ring.consume();
        if pass.get().is_some_and(|taken| taken < RECORDS_PER_PASS) {
            return;
        }
    }
}

/// How many stack ids the programs have handed out (`next_stack_id`).
fn stacks_issued(skel: &crate::sched_skel::SchedSkel) -> u32 {
    skel.maps
        .bss_data
        .as_deref()
        .map_or(0, |bss| globals::load(&bss.next_stack_id))
}

/// Tells the programs to record nothing more (`recording_stopped`).
fn stop_recording(skel: &mut crate::sched_skel::SchedSkel) {
    if let Some(bss) = skel.maps.bss_data.as_deref_mut() {
        globals::store(&mut bss.recording_stopped, true);
    }
}

/// The recording thread: sets up, reports readiness, drains until `stop`, finishes the file.
fn run(
    sink: Result<File, (RingOptions, Option<Spill>)>,
    requests: mpsc::Receiver<Ask>,
    output: PathBuf,
    options: SchedOptions,
    stop: Arc<AtomicBool>,
    ready: Ready<()>,
) -> Result<SchedStats, BpfError> {
    macro_rules! setup {
        ($e:expr) => {
            match $e {
                Ok(v) => v,
                Err(err) => {
                    let _ = ready.send(Err(err));
                    return Ok(SchedStats::default());
                }
            }
        };
    }
    let ring_bytes = options.ring_bytes;
    let stack_bytes = u64::from(options.stack_entries) * (STACK_DEPTH as u64 * 8 + 64);
    sys::raise_memlock(u64::from(ring_bytes) + stack_bytes + (1 << 20));
    libbpf_rs::set_print(Some((PrintLevel::Warn, libbpf_print)));
    take_libbpf_log();

    let mut object = MaybeUninit::uninit();
    let Attached {
        mut skel,
        links,
        mut unattached,
        sample_freq,
        samples_on_tick,
    } = setup!(load_and_attach(&mut object, &options));
    // The executable mappings processes make from now on, as the kernel reports them.
    let mut mmap_rings = match MmapRings::open(0..possible_cpus() as i32) {
        Ok(rings) => {
            // The mappings of a new image come in them: no need to wake at each exec.
            if let Some(data) = skel.maps.data_data.as_deref_mut() {
                globals::store(&mut data.wake_at_exec, 0);
            }
            Some(rings)
        }
        Err(e) => {
            unattached.push(format!(
                "executable mappings (a perf event with mmap tracking): {e}; a process gone \
                 before the recorder read its /proc/PID/maps keeps its code unnamed"
            ));
            None
        }
    };
    // The recorder's own mappings are left out, as its records are (but with `lab
    // --trace`'s own process recorded).
    let own_pid = if options.record_own_process {
        0
    } else {
        std::process::id()
    };

    let start_mono = sys::monotonic_ns();
    let start_real = sys::clock_ns(libc::CLOCK_REALTIME);
    let cpu_at_start = sys::cpu_times_now();
    let header = Header {
        start_mono_ns: start_mono,
        start_real_ns: start_real,
        nr_cpus: possible_cpus(),
        sample_freq,
        samples_on_tick,
    };
    let sink = match sink {
        Ok(file) => Sink::File(BufWriter::with_capacity(1 << 20, file)),
        Err((ring, spill)) => Sink::Window(Box::new(Window::new(header, ring, spill))),
    };
    let mut writer = setup!(header.writer(sink).map_err(|e| BpfError::io(&output, e)));
    if let Sink::Window(w) = writer.out_mut() {
        // Each snapshot writes its own header.
        w.clear_written();
    }
    let mut drain = Drain::new(writer);
    // The threads alive now; later ones come with their fork.
    drain.name_threads_alive();
    let drain = std::cell::RefCell::new(drain);

    // Records taken in this pass; past RECORDS_PER_PASS, or once stopped, the pass ends
    // (the record taken, -EINTR to libbpf). `None` for the last read, after the programs
    // are detached, which takes everything left.
    let pass = std::cell::Cell::new(Some(0u32));
    let mut builder = RingBufferBuilder::new();
    setup!(builder
        .add(&skel.maps.events, |data: &[u8]| {
            let taken = drain.borrow_mut().on_record(data);
            match pass.get() {
                Some(n) if taken == 0 => {
                    pass.set(Some(n + 1));
                    if n + 1 >= RECORDS_PER_PASS || stop.load(Ordering::Relaxed) {
                        return -libc::EINTR;
                    }
                    0
                }
                _ => taken,
            }
        })
        .map_err(|e| BpfError::RingBuffer {
            message: format!("{e:#}"),
        }));
    let ring = setup!(builder.build().map_err(|e| BpfError::RingBuffer {
        message: format!("{e:#}"),
    }));
    if ready.send(Ok(())).is_err() {
        stop.store(true, Ordering::SeqCst);
    }

    let mut failure: Option<BpfError> = None;
    let mut evicted_at = Instant::now();
    // When the machine's CPU time counters were last read for a window's steal time.
    let mut cpu_read_at: Option<Instant> = None;
    let mut forgot_at = evicted_at;
    let mut added_at_pass = 0u32;
    let mut stacks_written = 0u64;
    // The losses counted when the last snapshot was written: each says what it lost since.
    let mut lost_before = (0, 0);
    while !stop.load(Ordering::SeqCst) {
        pass.set(Some(0));
        // Interrupted: a pass cut short (above) or a signal; either way, look up.
        let read = ring.poll(POLL_INTERVAL).and_then(|()| ring.consume());
        if let Some(e) = read.err().filter(|e| e.kind() != ErrorKind::Interrupted) {
            failure = Some(BpfError::RingBuffer {
                message: format!("{e:#}"),
            });
            break;
        }
        let mut d = drain.borrow_mut();
        if let Some(rings) = mmap_rings.as_mut() {
            rings.read(own_pid, u64::MAX, |m| d.mapping(m));
        }
        if d.error.is_some() {
            break;
        }
        let now = Instant::now();
        d.forget_exited(now);
        if cpu_read_at.is_none_or(|at| now.duration_since(at) >= READ_CPU_TIMES_EVERY) {
            if let (Some(window), Some(times)) = (d.window(), sys::cpu_times_now()) {
                cpu_read_at = Some(now);
                window.note_cpu_times(sys::monotonic_ns(), times);
            }
        }
        // Stacks added to the map since the last pass: half the map's entries call for one
        // now. Added: ids handed out, but those of the stacks the map could not take, which
        // came through the ring. (Under process churn a ring's map stays full of stacks
        // its window names and most new stacks come through the ring; counting every id
        // called for a pass each second, each reading the whole map's keys to find few
        // new ones.)
        let added = stacks_issued(&skel).wrapping_sub(d.stacks_in_ring as u32);
        let filling = added.wrapping_sub(added_at_pass) >= options.stack_entries / 2;
        let since = now.duration_since(evicted_at);
        let keeps_stacks = d.stack_book().is_some();
        let unnamed = d.stack_book().map_or(0, |book| book.maybe_unnamed());
        if keeps_stacks && (since >= EVICT_EVERY || (filling && since >= EVICT_FILLING_EVERY)) {
            (evicted_at, forgot_at, added_at_pass) = (now, now, added);
            evict_stacks(&mut skel, &mut d, true);
        } else if unnamed >= options.stack_entries as usize / 2
            && now.duration_since(forgot_at) >= EVICT_FILLING_EVERY
        {
            // Many stacks named no more, most of them come through the ring (process
            // churn): forgotten without reading the map, which the next pass does.
            forgot_at = now;
            evict_stacks(&mut skel, &mut d, false);
        } else if !keeps_stacks && (filling || since >= FLUSH_STACKS_EVERY) {
            (evicted_at, added_at_pass) = (now, added);
            match flush_stacks(&mut skel, &mut d) {
                Ok(n) => stacks_written += n,
                Err(e) => {
                    d.error.get_or_insert(e);
                }
            }
        }
        drop(d);
        for ask in requests.try_iter() {
            match ask {
                Ask::Command(pid, args) => {
                    drain.borrow_mut().command(pid, &args);
                    continue;
                }
                Ask::WindowBytes(answer) => {
                    let bytes = drain.borrow_mut().window().map_or(0, |w| w.bytes());
                    let _ = answer.send(bytes);
                    continue;
                }
                Ask::Snapshot(..) | Ask::Forget(_) => {}
            }
            // A spilling window's stacks go with what it forgets: from here on no thread
            // names one of them again from its last site (what it names before comes
            // before the forget).
            if matches!(ask, Ask::Forget(_))
                && drain.borrow_mut().window().is_some_and(|w| w.spills())
            {
                new_stack_generation(&mut skel);
            }
            // A snapshot or a forget: the records up to the moment it was asked for, then
            // the mappings up to theirs.
            catch_up(&ring, &pass, &drain, sys::monotonic_ns());
            let mut d = drain.borrow_mut();
            if let Some(rings) = mmap_rings.as_mut() {
                let newest = d.window().map_or(u64::MAX, |w| w.newest_ns());
                rings.read(own_pid, newest, |m| d.mapping(m));
            }
            let lost = (
                read_counter(&skel.maps.counters, COUNTER_DROPS),
                read_counter(&skel.maps.counters, COUNTER_STACK_LOST),
            );
            match ask {
                Ask::Snapshot(path, about, answer) => {
                    let about = about.as_ref();
                    let written = write_window(&mut skel, &mut d, &path, lost, lost_before, about);
                    if written.is_ok() {
                        lost_before = lost;
                    }
                    let _ = answer.send(written);
                }
                Ask::Forget(answer) => {
                    if let Err(e) = d.writer.flush_events() {
                        d.error.get_or_insert(e);
                    }
                    if let Some(Err(e)) = d.window().map(|w| w.forget()) {
                        d.error.get_or_insert(e);
                    }
                    lost_before = lost;
                    let _ = answer.send(());
                }
                Ask::Command(..) | Ask::WindowBytes(_) => {}
            }
        }
    }

    // Nothing is recorded from here on; the programs are detached after, in the background.
    stop_recording(&mut skel);
    let stop_ns = sys::monotonic_ns();
    // What each program cost (with `sysctl kernel.bpf_stats_enabled=1`), those that ran;
    // before the detach, during which they run on, recording nothing.
    let programs: Vec<ProgramCost> = skel
        .object()
        .progs()
        .filter_map(|prog| program_cost(&prog.name().to_string_lossy(), &prog))
        .collect();
    detach_in_background(links);
    pass.set(None);
    if let Err(e) = ring.consume() {
        failure.get_or_insert(BpfError::RingBuffer {
            message: format!("{e:#}"),
        });
    }
    drop(ring);
    let mut drain = drain.into_inner();
    if let Some(mut rings) = mmap_rings.take() {
        // Not those made after the stop: their processes' records are not in the file.
        rings.read(own_pid, stop_ns, |m| drain.mapping(m));
        if rings.lost > 0 {
            unattached.push(format!(
                "executable mappings: {} reports lost (the drain fell behind); processes that \
                 mapped code then may have frames unnamed",
                rings.lost
            ));
        }
    }
    // A file that cannot be finished is removed: it has neither the stacks nor the end,
    // and on a full disk it holds the space the user needs back. (In ring mode there is
    // none here: the window's writes go through partial files of their own, which they
    // remove.)
    let remove_unfinished = || {
        let _ = fs::remove_file(partial_file(&output));
    };
    let unfinished = |e: io::Error| {
        remove_unfinished();
        BpfError::io(&output, e)
    };
    if let Some(e) = drain.error.take() {
        return Err(unfinished(e));
    }
    if let Some(f) = failure {
        remove_unfinished();
        return Err(f);
    }

    let lost = (
        read_counter(&skel.maps.counters, COUNTER_DROPS),
        read_counter(&skel.maps.counters, COUNTER_STACK_LOST),
    );
    let stacks_reused = read_counter(&skel.maps.counters, COUNTER_REUSED);
    let stacks_in_ring = drain.stacks_in_ring;
    let stats = |records, stacks, bytes, (dropped, stacks_lost), cpu_times| SchedStats {
        records,
        dropped,
        stacks_lost,
        stacks,
        stacks_in_ring,
        stacks_reused,
        bytes,
        output: output.clone(),
        programs: programs.clone(),
        unattached: unattached.clone(),
        cpu_times,
    };
    if drain.window().is_some() {
        // The last seconds, into the output.
        let info = write_window(&mut skel, &mut drain, &output, lost, lost_before, None)?;
        let since = (
            lost.0.saturating_sub(lost_before.0),
            lost.1.saturating_sub(lost_before.1),
        );
        return Ok(stats(
            info.records,
            info.stacks,
            info.bytes,
            since,
            info.cpu_times,
        ));
    }

    // The stacks still in the map.
    let stacks = stacks_written
        + stacks_in_ring
        + flush_stacks(&mut skel, &mut drain).map_err(unfinished)?;
    let cpu_times = sys::cpu_times_since(cpu_at_start);
    if let Some(times) = cpu_times {
        drain.writer.steal(times).map_err(unfinished)?;
    }
    let records = drain.writer.records();
    let end = SchedEnd {
        stop_ns,
        dropped: lost.0,
        stacks_lost: lost.1,
        records,
    };
    let mut out = drain.writer.finish(end).map_err(unfinished)?;
    out.flush().map_err(unfinished)?;
    drop(out);
    fs::rename(partial_file(&output), &output).map_err(unfinished)?;
    let bytes = fs::metadata(&output).map(|m| m.len()).unwrap_or(0);
    Ok(stats(records, stacks, bytes, lost, cpu_times))
}
