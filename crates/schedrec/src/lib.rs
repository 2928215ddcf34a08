//! Reads a scheduler recording (`slowlab record --backend bpf`, the format of
//! [`slowlab_bpf::sched::format`]) into slowlab's trace model, so that every view and the
//! critical path work on it as on a perf.data trace.
//!
//! - [`read_file`] / [`build_trace`]: the records in time order become, in `events`, the model's
//!   samples, `Switch` and `Waking` events, process and thread lifetimes (`lifetimes`),
//!   and the `SyscallEnter`/`SyscallExit` events of the waiting syscalls (futex, wait4,
//!   waitid, flock), stackless and with the arguments the analysis reads, as the perf
//!   reader makes them of `syscalls:sys_enter_NAME`/`sys_exit_NAME` (the arguments not
//!   recorded are 0), and the `BlockRequest` and `MajorFault` events of disk requests
//!   and major faults, as perf's reader makes them of `block:block_rq_issue`/`_complete`
//!   and `major-faults`, and the `PageFault` events of `exceptions:page_fault_user` and
//!   `_kernel`, and the `SyscallEnter` events (with all six arguments and the user stack)
//!   and `SyscallExit` events of the detectors' syscalls (openat, the stat family, mmap,
//!   unlink, clone, kill, …);
//!   the PATH records, apart, become the paths those calls took ([`captured_paths`]);
//!   each (kernel stack id, user stack id) pair becomes one stack of the prefix tree, user
//!   frames outermost (`stacks`).
//! - Frames are named by `slowlab_perf`'s symbolizer, as a perf.data trace's are: kernel
//!   frames from `/proc/kallsyms` read now (the recording is read on the machine and boot
//!   that made it; another boot's KASLR offset would misname them), user frames from the
//!   files in the process's mappings as the recorder saw them, read from disk now, or
//!   their separate debug files (also from debuginfod when asked).
//!
//! It does not record (that is `slowlab_bpf::sched`) and does not analyze. Lost records and
//! lost stacks become counts and warnings in the trace's `ReadStats`.

mod events;
mod lifetimes;
mod stacks;

use std::path::Path;

use slowlab_bpf::sched::format::{path_flags, RecordAt, RecordKind};
use slowlab_bpf::sched::{RecordedSyscall, SchedLog};
use slowlab_model::bundle::CapturedPath;
use slowlab_model::trace::{Trace, TraceMeta, WallClock};

use events::Events;

/// The crate's one error type: the recording could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum SchedRecError {
    #[error("{0}")]
    Read(#[from] slowlab_bpf::BpfError),
}

/// How to read a recording: how its frames are named (whether, from which kallsyms, with
/// which symbol cache and debuginfod servers, on how many threads), as for perf.data.
#[derive(Clone, Debug, Default)]
pub struct ReadOptions {
    pub symbols: slowlab_perf::ReadOptions,
}

/// Whether the file at `path` is a scheduler recording (by its magic).
pub fn is_sched_file(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && slowlab_bpf::sched::is_sched_recording(&magic)
}

/// Reads the recording at `path` into a trace and the paths its syscalls took.
pub fn read_file(
    path: &Path,
    opts: &ReadOptions,
) -> Result<(Trace, Vec<CapturedPath>), SchedRecError> {
    let log = slowlab_bpf::sched::read_sched(path)?;
    Ok((build_trace(&log, opts), captured_paths(&log)))
}

/// The paths of the recording's PATH records that could be read, each with its call's
/// thread, syscall and time (the time of the `SyscallEnter` event it belongs to), as the
/// perf backend's path capture gives them.
pub fn captured_paths(log: &SchedLog) -> Vec<CapturedPath> {
    log.records
        .of_kind(RecordKind::Path)
        .filter(|r| r.value & path_flags::UNREADABLE == 0)
        .filter_map(|r| {
            let path = r.path().filter(|p| !p.is_empty())?;
            Some(CapturedPath {
                time_ns: r.time_ns,
                tid: r.tid as i32,
                syscall: RecordedSyscall::from_u8(r.c)?.name().to_string(),
                path: path.to_string(),
            })
        })
        .collect()
}

/// The times a record of `log` can have: from a minute before the header's start to a
/// minute after the END's stop (no bound without one). Records come up to a few
/// milliseconds before the start (the programs are attached before it is taken) and none
/// after the stop; one far outside is damage, a time whose bits were flipped, that would
/// stretch the trace over centuries.
fn plausible_times(log: &SchedLog) -> (u64, u64) {
    const SLACK_NS: u64 = 60_000_000_000;
    let from = log.start_mono_ns.saturating_sub(SLACK_NS);
    let to = log.end.map_or(u64::MAX, |end| {
        end.stop_ns.max(log.start_mono_ns).saturating_add(SLACK_NS)
    });
    (from, to)
}

/// Builds the trace of a parsed recording.
pub fn build_trace(log: &SchedLog, opts: &ReadOptions) -> Trace {
    let mut trace = Trace::default();
    let mut warnings = log.warnings.clone();

    // The ring takes records in the order they were reserved, which across CPUs is
    // nearly but not quite time order.
    let (from, to) = plausible_times(log);
    // Each record's time and place, sorted by time, equal times in the file's order (a
    // stable sort, which also finds the ring's runs of records already in order); sorted
    // as pairs, not places with their times looked up, which reads the records at random
    // once a comparison. Then the places alone, in half the memory, while the trace is
    // built.
    let mut timed: Vec<(u64, RecordAt)> = log
        .records
        .positions()
        .filter_map(|at| Some((log.records.time_at(at)?, at)))
        .filter(|&(t, _)| (from..=to).contains(&t))
        .collect();
    timed.sort_by_key(|&(t, _)| t);
    let (first, last) = (timed.first().map(|p| p.0), timed.last().map(|p| p.0));
    let mut order: Vec<RecordAt> = timed.into_iter().map(|(_, at)| at).collect();
    order.shrink_to_fit();
    let outside = log.records.len() - order.len();
    if outside > 0 {
        let records = match outside {
            1 => "a record has its time".to_string(),
            n => format!("{n} records have times"),
        };
        warnings.push(format!(
            "{records} far outside the recording's (a damaged file?): skipped"
        ));
    }

    let mut events = Events::new(log);
    for record in order.iter().filter_map(|&at| log.records.get(at)) {
        events.add(&mut trace, &record);
    }
    let (event_names, unknown_syscalls) = events.finish(&mut trace, log);
    if unknown_syscalls > 0 {
        warnings.push(format!(
            "{unknown_syscalls} syscall records name a syscall this slowlab does not know \
             (a newer recorder's?): skipped"
        ));
    }

    let end = log.end.unwrap_or_default();
    trace.meta = TraceMeta {
        nr_cpus: Some(log.nr_cpus),
        start_ns: first.unwrap_or(log.start_mono_ns),
        end_ns: last.unwrap_or(end.stop_ns).max(first.unwrap_or(0)),
        sample_event: (log.sample_freq > 0).then(|| {
            if log.samples_on_tick {
                "sched-tick".to_string()
            } else {
                "cpu-clock".to_string()
            }
        }),
        sample_freq: (log.sample_freq > 0).then_some(u64::from(log.sample_freq)),
        events: event_names,
        wall_clock: Some(WallClock {
            clock_ns: log.start_mono_ns,
            unix_ns: log.start_real_ns,
        }),
        command_pid: log
            .command
            .as_ref()
            .and_then(|(pid, _)| i32::try_from(*pid).ok()),
        cmdline: log
            .command
            .as_ref()
            .map(|(_, args)| args.clone())
            .unwrap_or_default(),
        ..TraceMeta::default()
    };
    trace.stats.records = log.records.len() as u64;
    trace.stats.lost_events = end.dropped;
    if end.dropped > 0 {
        warnings.push(format!(
            "{} events were lost: the BPF ring buffer was full (the recorder's reader fell \
             behind); waits and wake-ups around them may be misread. Record with a bigger \
             ring, or on a less loaded machine",
            end.dropped
        ));
    }
    if end.stacks_lost > 0 {
        warnings.push(format!(
            "{} events have no stack: the kernel's stack map could not take it and the BPF \
             ring buffer was full",
            end.stacks_lost
        ));
    }
    warnings.extend(log.cpu_times.and_then(|t| t.steal_warning()));
    trace.stats.warnings = warnings;
    if opts.symbols.symbolize {
        slowlab_perf::symbolize::symbolize(&mut trace, &opts.symbols, &|_, _, _| {});
    }
    trace
}

#[cfg(test)]
mod tests {
    use super::*;
    use slowlab_bpf::sched::format::{RecordExtra, SchedEnd, SchedRecord, SchedThread};
    use slowlab_model::trace::EventKind;

    fn record(
        kind: RecordKind,
        time_ns: u64,
        tid: u32,
        c: u8,
        a: u32,
        b: u32,
        value: u64,
    ) -> SchedRecord {
        SchedRecord {
            time_ns,
            tid,
            a,
            b,
            cpu: 1,
            kind,
            c,
            kstack: None,
            ustack: None,
            value,
            ip: 0,
            extra: None,
        }
    }

    #[test]
    fn readable_paths_become_captured_paths_of_their_call() {
        let path = |time, c, flags, p: &str| SchedRecord {
            extra: Some(Box::new(RecordExtra::Path(p.to_string()))),
            ..record(RecordKind::Path, time, 12, c, 10, p.len() as u32, flags)
        };
        let log = SchedLog {
            records: vec![
                record(RecordKind::SysCall, 100, 12, 5, 10, 0, 0),
                path(100, 5, 0, "/etc/hosts"),
                path(200, 9, path_flags::UNREADABLE, ""),
                path(300, 9, 0, ""), // fstat's AT_EMPTY_PATH
                path(400, 99, 0, "/a newer recorder's syscall"),
                path(500, 9, path_flags::TRUNCATED, "/long/cut"),
            ]
            .into(),
            ..SchedLog::default()
        };
        let got: Vec<_> = captured_paths(&log)
            .into_iter()
            .map(|p| (p.time_ns, p.tid, p.syscall, p.path))
            .collect();
        assert_eq!(
            got,
            [
                (100, 12, "openat".to_string(), "/etc/hosts".to_string()),
                (500, 12, "newfstatat".to_string(), "/long/cut".to_string())
            ]
        );
    }

    /// A thread /proc named at the start.
    fn thread(pid: u32, tid: u32, comm: &str) -> SchedThread {
        SchedThread {
            pid,
            tid,
            comm: comm.into(),
        }
    }

    /// The trace of `log`, its addresses left unsymbolized.
    fn unsymbolized_trace(log: &SchedLog) -> Trace {
        let mut opts = ReadOptions::default();
        opts.symbols.symbolize = false;
        build_trace(log, &opts)
    }

    #[test]
    fn a_record_whose_time_is_far_outside_the_recording_is_skipped_as_damage() {
        const S: u64 = 1_000_000_000;
        let sample = |time_ns| record(RecordKind::Sample, time_ns, 11, 0, 10, 0, 0);
        let log = |end| SchedLog {
            nr_cpus: 1,
            sample_freq: 1000,
            start_mono_ns: 100 * S,
            end,
            // 6 ms before the start (the programs attach first) and at the stop: kept.
            records: vec![
                sample(100 * S - 6_000_000),
                sample(101 * S),
                sample(u64::MAX),
                sample(7),
                sample(102 * S),
            ]
            .into(),
            ..SchedLog::default()
        };
        let end = SchedEnd {
            stop_ns: 102 * S,
            ..SchedEnd::default()
        };
        let trace = unsymbolized_trace(&log(Some(end)));
        assert_eq!(trace.samples.len(), 3);
        assert_eq!(
            (trace.meta.start_ns, trace.meta.end_ns),
            (100 * S - 6_000_000, 102 * S)
        );
        assert!(
            trace
                .stats
                .warnings
                .iter()
                .any(|w| w.starts_with("2 records have times far")),
            "{:?}",
            trace.stats.warnings
        );

        // Without an END (the recorder died), only the start bounds them.
        let trace = unsymbolized_trace(&log(None));
        assert_eq!(trace.samples.len(), 4);
        assert_eq!(trace.meta.end_ns, u64::MAX);
    }

    #[test]
    fn the_hosts_steal_over_the_recording_is_a_warning_of_the_trace_when_worth_saying() {
        use slowlab_model::host_steal::CpuTimes;
        let with = |wanted, stolen| SchedLog {
            nr_cpus: 1,
            records: vec![record(RecordKind::Sample, 100, 11, 0, 10, 0, 0)].into(),
            cpu_times: Some(CpuTimes { wanted, stolen }),
            ..SchedLog::default()
        };
        let said = |log: &SchedLog| {
            unsymbolized_trace(log)
                .stats
                .warnings
                .into_iter()
                .find(|w| w.contains("steal time"))
        };
        let w = said(&with(200, 40)).expect("a fifth stolen is said");
        assert!(w.contains("kept 20% of the CPU time"), "{w}");
        assert_eq!(said(&with(200, 4)), None, "2% is not");
        let without = SchedLog {
            cpu_times: None,
            ..with(200, 40)
        };
        assert_eq!(said(&without), None, "no STEAL section, nothing said");
    }

    #[test]
    fn a_thread_alive_at_the_start_that_never_runs_is_in_the_trace() {
        let log = SchedLog {
            nr_cpus: 1,
            threads: vec![
                thread(10, 11, "busy"),
                thread(50, 50, "hung"),
                thread(50, 51, "hung-io"),
            ],
            records: vec![record(RecordKind::Sample, 100, 11, 0, 10, 0, 0)].into(),
            ..SchedLog::default()
        };
        let trace = unsymbolized_trace(&log);
        let hung = trace
            .processes
            .iter()
            .find(|p| p.pid == 50)
            .expect("the hung process");
        assert_eq!(trace.str(hung.comm), "hung");
        let tids: Vec<i32> = hung
            .threads
            .iter()
            .map(|t| trace.threads[t.ix()].tid)
            .collect();
        assert_eq!(tids, [50, 51]);
        assert_eq!(trace.threads.iter().filter(|t| t.tid == 11).count(), 1);
    }

    #[test]
    fn a_process_first_seen_through_a_worker_thread_is_named_after_its_leader() {
        let log = SchedLog {
            nr_cpus: 1,
            threads: vec![thread(10, 12, "slowlab-sched"), thread(10, 10, "slowlab")],
            // The worker runs first; the leader later.
            records: vec![
                record(RecordKind::Sample, 100, 12, 0, 10, 0, 0),
                record(RecordKind::Sample, 200, 10, 0, 10, 0, 0),
            ]
            .into(),
            ..SchedLog::default()
        };
        let trace = unsymbolized_trace(&log);
        let p = trace.processes.iter().find(|p| p.pid == 10).unwrap();
        assert_eq!(trace.str(p.comm), "slowlab");
        let worker = trace.threads.iter().find(|t| t.tid == 12).unwrap();
        assert_eq!(trace.str(worker.comm), "slowlab-sched");
    }

    #[test]
    fn syscalls_disk_requests_and_faults_become_the_events_perf_gives() {
        let log = SchedLog {
            nr_cpus: 2,
            threads: vec![SchedThread {
                pid: 10,
                tid: 11,
                comm: "waiter".into(),
            }],
            records: vec![
                // futex(0x7f0012345678, FUTEX_WAIT_PRIVATE, 2), then its return.
                record(RecordKind::SysEnter, 100, 11, 1, 0x80, 2, 0x7f00_1234_5678),
                record(RecordKind::SysExit, 200, 11, 1, 0, 0, (-11i64) as u64),
                // wait4(-1, …) (a 32-bit -1 as the register held it).
                record(RecordKind::SysEnter, 300, 11, 2, 0, 0, 0xffff_ffff),
                // A syscall of a newer recorder: skipped, and said.
                record(RecordKind::SysEnter, 400, 11, 99, 0, 0, 0),
                // A write of 8 sectors at sector 2048 of 8:16 completed.
                record(RecordKind::Block, 500, 0, 3, 8 << 20 | 16, 8, 2048),
                record(RecordKind::MajorFault, 600, 11, 0, 10, 0, 0x7f00_0000_1000),
                // A user write fault (error code 6: write, user).
                record(RecordKind::PageFault, 700, 11, 1, 10, 6, 0x7f00_0000_2000),
            ]
            .into(),
            ..SchedLog::default()
        };
        let mut opts = ReadOptions::default();
        opts.symbols.symbolize = false;
        let trace = build_trace(&log, &opts);
        assert_eq!(trace.meta.command_pid, None, "no COMMAND section");
        let with_command = SchedLog {
            command: Some((11, vec!["waiter".into(), "-n".into()])),
            ..log.clone()
        };
        let t = build_trace(&with_command, &opts);
        assert_eq!(t.meta.command_pid, Some(11));
        assert_eq!(t.meta.cmdline, ["waiter", "-n"]);
        let kinds: Vec<&EventKind> = trace.events.iter().map(|e| &e.kind).collect();
        assert_eq!(kinds.len(), 6, "{kinds:?}");
        assert!(matches!(
            kinds[5],
            EventKind::PageFault {
                address: 0x7f00_0000_2000,
                error_code: 6,
                user: true,
                ..
            }
        ));
        assert!(matches!(
            kinds[3],
            EventKind::BlockRequest {
                dev: 0x80_0010,
                sector: 2048,
                bytes: 4096,
                write: true,
                complete: true
            }
        ));
        assert!(matches!(
            kinds[4],
            EventKind::MajorFault {
                address: Some(0x7f00_0000_1000)
            }
        ));
        assert!(trace
            .meta
            .events
            .iter()
            .any(|e| e == "block:block_rq_complete"));
        match kinds[0] {
            EventKind::SyscallEnter {
                name,
                args,
                file_op,
            } => {
                assert_eq!(trace.str(*name), "futex");
                assert_eq!(**args, [0x7f00_1234_5678, 0x80, 2, 0, 0, 0]);
                assert!(file_op.is_none());
            }
            k => panic!("{k:?}"),
        }
        match kinds[1] {
            EventKind::SyscallExit { name, ret, .. } => {
                assert_eq!((trace.str(*name), *ret), ("futex", -11));
            }
            k => panic!("{k:?}"),
        }
        match kinds[2] {
            EventKind::SyscallEnter { name, args, .. } => {
                assert_eq!((trace.str(*name), args[0] as i32), ("wait4", -1));
            }
            k => panic!("{k:?}"),
        }
        let e = &trace.events[0];
        assert!(e.stack.is_none());
        assert_eq!(trace.threads[e.thread.ix()].tid, 11);
        assert_eq!(trace.str(trace.threads[e.thread.ix()].comm), "waiter");
        assert!(trace
            .meta
            .events
            .iter()
            .any(|e| e == "syscalls:sys_enter_futex"));
        assert!(
            trace
                .stats
                .warnings
                .iter()
                .any(|w| w.contains("1 syscall records")),
            "{:?}",
            trace.stats.warnings
        );
    }
}
