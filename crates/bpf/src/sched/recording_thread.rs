//! The recording thread of a [`super::SchedRecorder`]: loads and attaches the programs
//! (`super::attach`), says it is ready, then drains the ring buffer (`super::drain`) until
//! stopped — sleeping until there are records, mappings, a question or the stop — and
//! answers the recorder's questions (a snapshot, a forget, the window's bytes) between two
//! passes; it keeps the kernel's stack map from filling (evicting, or moving stacks into
//! the file) and, in ring mode, reads the machine's CPU times for each window's steal.
//! At the stop it detaches the programs, reads what is left, and finishes the file (or
//! writes the last window) with the counts of what was lost.
//!
//! It does not decide what is recorded (`super::options`, `super::attach`) nor how records
//! are written (`super::drain`, `super::ring`).

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::mem::MaybeUninit;
use std::os::fd::BorrowedFd;
use std::path::PathBuf;
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
use super::recorder::{Ask, COUNTER_DROPS, COUNTER_REUSED, COUNTER_STACK_LOST, STACK_DEPTH};
use super::ring::{Header, RingOptions, Sink, Spill, Window};
use crate::counters::read_counter;
use crate::error::BpfError;
use crate::globals;
use crate::libbpf_log::{libbpf_print, take_libbpf_log};
use crate::links::detach_in_background;
use crate::nudge::{sleep_until_readable, Nudge};
use crate::sys;
use crate::worker::{setup, Ready};

/// How long the drain thread sleeps at most between two reads of the ring buffer. It
/// wakes sooner when a quarter of the ring is full ([`super::recorder::WAKEUP_FRACTION`]), when half a
/// CPU's ring of mappings is (`mmaps`), when asked something and at the stop (a
/// [`Nudge`]). (It woke every 50 ms before, 20 times a second with nothing to read on an
/// idle machine; `bench/record/idle_cost.sh`.)
const POLL_INTERVAL: Duration = Duration::from_millis(250);

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
pub(super) fn run(
    sink: Result<File, (RingOptions, Option<Spill>)>,
    requests: mpsc::Receiver<Ask>,
    output: PathBuf,
    options: SchedOptions,
    (stop, nudge): (Arc<AtomicBool>, Nudge),
    ready: Ready<()>,
) -> Result<SchedStats, BpfError> {
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
    } = setup!(ready, load_and_attach(&mut object, &options));
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
    let mut writer = setup!(
        ready,
        header.writer(sink).map_err(|e| BpfError::io(&output, e))
    );
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
    setup!(
        ready,
        builder
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
            .map_err(BpfError::ring_buffer)
    );
    let ring = setup!(ready, builder.build().map_err(BpfError::ring_buffer));
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
    // Whether the last pass was cut short with records left: the next one reads at once.
    // (Records the programs did not wake the drain for do not make the ring readable, so
    // the sleep would wait them out.)
    let mut records_left = false;
    while !stop.load(Ordering::SeqCst) {
        pass.set(Some(0));
        // Until there are records, mappings, a question or the stop (each found below:
        // what woke it is not needed).
        if !records_left {
            // SAFETY: the ring buffer's epoll descriptor lives as long as `ring`, which
            // outlives this borrow.
            let records = unsafe { BorrowedFd::borrow_raw(ring.epoll_fd()) };
            let mut fds = vec![records, nudge.fd()];
            if let Some(rings) = mmap_rings.as_ref() {
                fds.extend(rings.fds());
            }
            sleep_until_readable(&fds, POLL_INTERVAL);
        }
        nudge.clear();
        // Interrupted: a pass cut short (above) or a signal; either way, look up.
        let read = ring.consume();
        records_left = pass.get().is_some_and(|taken| taken >= RECORDS_PER_PASS);
        if let Some(e) = read.err().filter(|e| e.kind() != ErrorKind::Interrupted) {
            failure = Some(BpfError::ring_buffer(e));
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
        failure.get_or_insert(BpfError::ring_buffer(e));
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
