//! The recorded syscalls: each `sys_enter_X` paired with its `sys_exit_X`
//! on the same thread, giving a duration and a result; per process the
//! count, time and failures (by errno) of each syscall, its call sites, and
//! the paths the calls touched grouped by pattern with numbers folded
//! (`log.N.dat` × 6,999: 6,998 found, 1 missing).
//!
//! perf's syscall tracepoints carry only a pointer to a path, so the path
//! strings come from a separate capture (slowlab's eBPF probe on the same
//! tracepoints, `CapturedPath`), matched to the calls by thread, syscall and
//! time. When there is no capture, or nothing matched, the view says so.
//! Pure: reads the trace and the capture, prints nothing.

use std::collections::{BTreeMap, HashMap};

use slowlab_model::trace::{EventKind, FileOp, StackIdx, StrIdx, ThreadIdx, Trace};

use crate::faults::StackCount;
use crate::function_stacks::FunctionStacks;
use crate::select::{BuildFx, Selection};
use crate::waits::stack_names;

pub use slowlab_model::bundle::CapturedPath;
use slowlab_model::syscalls::names_no_path;
/// Which syscalls check a path exists or take one: `slowlab_model::syscalls`' table.
pub use slowlab_model::syscalls::{is_existence_check, takes_path};
pub use slowlab_model::views::syscalls::{PathPattern, ProcSyscalls, SyscallStat, SyscallsView};

/// One syscall of one thread.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub thread: ThreadIdx,
    pub name: StrIdx,
    pub enter_ns: Option<u64>,
    pub exit_ns: Option<u64>,
    /// The raw result: negative errno on failure.
    pub ret: Option<i64>,
    /// The user (and kernel) stack at entry.
    pub stack: Option<StackIdx>,
    pub args: [u64; 6],
    /// Index into the capture, when a path was matched.
    pub path: Option<usize>,
    /// Which Windows file operation the call is (an ETL trace's
    /// `FileIO/…`); `None` for Linux syscalls and other calls.
    pub file_op: Option<FileOp>,
}

impl Call {
    pub fn duration_ns(&self) -> Option<u64> {
        Some(self.exit_ns?.saturating_sub(self.enter_ns?))
    }

    pub fn failed(&self) -> bool {
        self.ret.is_some_and(is_error_return)
    }
}

/// Pairs entries and exits per thread, in time order of entry (an exit
/// whose entry predates the trace becomes a call without entry time).
pub fn pair_calls(trace: &Trace) -> Vec<Call> {
    let mut calls: Vec<Call> = Vec::new();
    let mut pending: HashMap<ThreadIdx, usize, BuildFx> = HashMap::default();
    for ev in &trace.events {
        match ev.kind {
            EventKind::SyscallEnter {
                name,
                ref args,
                file_op,
            } => {
                pending.insert(ev.thread, calls.len());
                calls.push(Call {
                    thread: ev.thread,
                    name,
                    enter_ns: Some(ev.time_ns),
                    exit_ns: None,
                    ret: None,
                    stack: ev.stack,
                    args: **args,
                    path: None,
                    file_op,
                });
            }
            EventKind::SyscallExit { name, ret, file_op } => match pending.remove(&ev.thread) {
                Some(i) if calls[i].name == name => {
                    calls[i].exit_ns = Some(ev.time_ns);
                    calls[i].ret = Some(ret);
                }
                _ => calls.push(Call {
                    thread: ev.thread,
                    name,
                    enter_ns: None,
                    exit_ns: Some(ev.time_ns),
                    ret: Some(ret),
                    stack: ev.stack,
                    args: [0; 6],
                    path: None,
                    file_op,
                }),
            },
            _ => {}
        }
    }
    calls
}

/// How much earlier than its call's entry a captured path may be.
const MATCH_WINDOW_NS: u64 = 2_000_000;

/// Matches captured paths to calls: for each call, the latest capture of
/// the same thread and syscall at or before the call's entry time, later
/// than the thread's previous call, within 2 ms; each capture used once.
///
/// "At or before", not "nearest": the eBPF probe runs before perf stamps the
/// same tracepoint hit, and perf's stamp can lag by over 100 µs, so the
/// nearest capture is sometimes the *next* call's path. "Later than the
/// previous call" means a capture the probe dropped gives no match rather
/// than a neighbour's path.
pub fn attach_paths(trace: &Trace, calls: &mut [Call], captured: &[CapturedPath]) -> usize {
    let mut by_tid: HashMap<i32, Vec<usize>, BuildFx> = HashMap::default();
    for (i, c) in captured.iter().enumerate() {
        by_tid.entry(c.tid).or_default().push(i);
    }
    for list in by_tid.values_mut() {
        list.sort_by_key(|&i| captured[i].time_ns);
    }
    // Calls in entry order per thread.
    let mut order: Vec<usize> = (0..calls.len())
        .filter(|&i| calls[i].enter_ns.is_some())
        .collect();
    order.sort_by_key(|&i| calls[i].enter_ns);
    let mut previous_enter: HashMap<ThreadIdx, u64, BuildFx> = HashMap::default();
    let mut used = vec![false; captured.len()];
    let mut matched = 0;
    for i in order {
        let call = &calls[i];
        let Some(enter) = call.enter_ns else { continue };
        let after = previous_enter.insert(call.thread, enter).unwrap_or(0);
        let tid = trace.threads[call.thread.ix()].tid;
        let Some(list) = by_tid.get(&tid) else {
            continue;
        };
        let name = trace.str(call.name);
        // Captures at or before the entry: the prefix of the sorted list.
        let end = list.partition_point(|&c| captured[c].time_ns <= enter);
        let found = list[..end]
            .iter()
            .rev()
            .take_while(|&&c| {
                // Saturating: a damaged capture's time may be near 2^64.
                captured[c].time_ns > after
                    && captured[c].time_ns.saturating_add(MATCH_WINDOW_NS) >= enter
            })
            .find(|&&c| !used[c] && captured[c].syscall == name);
        if let Some(&c) = found {
            used[c] = true;
            calls[i].path = Some(c);
            matched += 1;
        }
    }
    matched
}

/// Replaces every run of digits by `N`: `/logs/name.17.dat` → `/logs/name.N.dat`.
pub fn fold_numbers(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut in_digits = false;
    for c in path.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('N');
            }
            in_digits = true;
        } else {
            out.push(c);
            in_digits = false;
        }
    }
    out
}

/// The error of a syscall's return value, by name (`-2` → `ENOENT`): `None` when the
/// call did not fail. Failures are -4095..=-1, as the kernel's `IS_ERR_VALUE` has them;
/// a value below that is not an errno (and `i64::MIN` has no negation).
pub fn error_of(ret: i64) -> Option<String> {
    is_error_return(ret).then(|| errno_name(-ret))
}

/// Whether a syscall's return value is a failure: -4095..=-1 ([`error_of`]).
fn is_error_return(ret: i64) -> bool {
    (-4095..0).contains(&ret)
}

/// The symbolic name of an errno value (`2` → `ENOENT`).
pub fn errno_name(errno: i64) -> String {
    const NAMES: [&str; 41] = [
        "0",
        "EPERM",
        "ENOENT",
        "ESRCH",
        "EINTR",
        "EIO",
        "ENXIO",
        "E2BIG",
        "ENOEXEC",
        "EBADF",
        "ECHILD",
        "EAGAIN",
        "ENOMEM",
        "EACCES",
        "EFAULT",
        "ENOTBLK",
        "EBUSY",
        "EEXIST",
        "EXDEV",
        "ENODEV",
        "ENOTDIR",
        "EISDIR",
        "EINVAL",
        "ENFILE",
        "EMFILE",
        "ENOTTY",
        "ETXTBSY",
        "EFBIG",
        "ENOSPC",
        "ESPIPE",
        "EROFS",
        "EMLINK",
        "EPIPE",
        "EDOM",
        "ERANGE",
        "EDEADLK",
        "ENAMETOOLONG",
        "ENOLCK",
        "ENOSYS",
        "ENOTEMPTY",
        "ELOOP",
    ];
    match usize::try_from(errno).ok().and_then(|i| NAMES.get(i)) {
        Some(name) if errno > 0 => name.to_string(),
        _ if errno == 95 => "EOPNOTSUPP".into(),
        _ if errno == 110 => "ETIMEDOUT".into(),
        _ => format!("E{errno}"),
    }
}

/// Builds the view. `captured` is the path capture, if there is one.
pub fn syscalls_view(
    trace: &Trace,
    calls: &[Call],
    sel: &Selection,
    captured: Option<&[CapturedPath]>,
    top_sites: usize,
) -> SyscallsView {
    let matched = calls.iter().filter(|c| c.path.is_some()).count();
    let keep = sel.thread_mask(trace);
    let (from, to) = sel.time_range_ns(trace);

    #[derive(Default)]
    struct Stat {
        count: u64,
        time_ns: u64,
        errors: BTreeMap<String, u64>,
        sites: HashMap<Option<StackIdx>, u64, BuildFx>,
    }
    #[derive(Default)]
    struct Proc {
        stats: BTreeMap<String, Stat>,
        paths: BTreeMap<String, PathPattern>,
    }
    let mut per: BTreeMap<usize, Proc> = BTreeMap::new();
    let mut missing = 0u64;
    let mut shown = FunctionStacks::new(trace);
    for call in calls {
        let t = call.enter_ns.or(call.exit_ns).unwrap_or(0);
        if !keep.get(call.thread.ix()).copied().unwrap_or(false) || t < from || t >= to {
            continue;
        }
        let name = trace.str(call.name).to_string();
        let proc = per
            .entry(trace.threads[call.thread.ix()].process.ix())
            .or_default();
        let errno = call.ret.and_then(error_of);
        let stat = proc.stats.entry(name.clone()).or_default();
        stat.count += 1;
        stat.time_ns += call.duration_ns().unwrap_or(0);
        if let Some(e) = &errno {
            *stat.errors.entry(e.clone()).or_default() += 1;
        }
        *stat.sites.entry(shown.of(call.stack)).or_default() += 1;
        match (call.path, captured) {
            (Some(i), Some(cap)) => {
                let path = &cap[i].path;
                let pattern = fold_numbers(path);
                let entry = proc
                    .paths
                    .entry(pattern.clone())
                    .or_insert_with(|| PathPattern {
                        pattern,
                        count: 0,
                        found: 0,
                        failed: 0,
                        errors: BTreeMap::new(),
                        first: path.clone(),
                        last: path.clone(),
                    });
                entry.count += 1;
                entry.last = path.clone();
                match &errno {
                    Some(e) => {
                        entry.failed += 1;
                        *entry.errors.entry(e.clone()).or_default() += 1;
                    }
                    None => entry.found += 1,
                }
            }
            // An fstat (AT_EMPTY_PATH) names no path: none is missing.
            _ if takes_path(&name) && !names_no_path(&name, &call.args) => missing += 1,
            _ => {}
        }
    }
    let mut processes: Vec<ProcSyscalls> = per
        .into_iter()
        .map(|(pi, p)| {
            let process = &trace.processes[pi];
            let mut syscalls: Vec<SyscallStat> = p
                .stats
                .into_iter()
                .map(|(name, s)| {
                    let mut sites: Vec<StackCount> = s
                        .sites
                        .into_iter()
                        .map(|(stack, count)| StackCount {
                            stack: stack_names(trace, stack),
                            count,
                        })
                        .collect();
                    sites.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.stack.cmp(&b.stack)));
                    sites.truncate(top_sites);
                    SyscallStat {
                        name,
                        count: s.count,
                        time_s: s.time_ns as f64 / 1e9,
                        errors: s.errors,
                        sites,
                    }
                })
                .collect();
            syscalls.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.name.cmp(&b.name)));
            let mut paths: Vec<PathPattern> = p.paths.into_values().collect();
            paths.sort_by(|a, b| {
                b.count
                    .cmp(&a.count)
                    .then_with(|| a.pattern.cmp(&b.pattern))
            });
            ProcSyscalls {
                pid: process.pid,
                comm: trace.str(process.comm).to_string(),
                syscalls,
                paths,
            }
        })
        .collect();
    processes.sort_by(|a, b| {
        let total = |p: &ProcSyscalls| p.syscalls.iter().map(|s| s.count).sum::<u64>();
        total(b).cmp(&total(a)).then(a.pid.cmp(&b.pid))
    });
    let paths_note = match captured {
        None if missing > 0 => Some(format!(
            "paths not captured: {missing} calls took a path, but this trace has no path capture \
             (record with `slowlab record`, as root, to capture them with eBPF)"
        )),
        Some(_) if missing > 0 && matched == 0 => Some(format!(
            "paths captured but none matched the {missing} calls: the capture and the trace must \
             come from the same recording (perf with -k monotonic)"
        )),
        Some(_) if missing > 0 => {
            Some(format!("{missing} calls took a path that was not captured"))
        }
        _ => None,
    };
    SyscallsView {
        processes,
        paths_matched: matched as u64,
        paths_missing: missing,
        paths_note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::small_trace;
    use slowlab_model::trace::Event;

    fn push(t: &mut Trace, time: u64, kind: EventKind) {
        t.events.push(Event {
            time_ns: time,
            cpu: 0,
            thread: ThreadIdx(0),
            stack: Some(StackIdx(1)),
            kind,
        });
    }

    /// `app` stats name.0 … name.4 (found) and name.5 (missing), then
    /// opens name.5.
    fn probing() -> (Trace, Vec<CapturedPath>) {
        let mut t = small_trace();
        t.strings.push("newfstatat".into());
        t.strings.push("openat".into());
        let (stat, open) = (StrIdx(8), StrIdx(9));
        let mut cap = Vec::new();
        for i in 0..6u64 {
            let at = 10_000_000 + i * 10_000;
            push(
                &mut t,
                at,
                EventKind::SyscallEnter {
                    name: stat,
                    args: Box::new([0; 6]),
                    file_op: None,
                },
            );
            push(
                &mut t,
                at + 2_000,
                EventKind::SyscallExit {
                    name: stat,
                    ret: if i == 5 { -2 } else { 0 },
                    file_op: None,
                },
            );
            cap.push(CapturedPath {
                time_ns: at - 700,
                tid: 10,
                syscall: "newfstatat".into(),
                path: format!("/logs/name.{i}.dat"),
            });
        }
        push(
            &mut t,
            20_000_000,
            EventKind::SyscallEnter {
                name: open,
                args: Box::new([0; 6]),
                file_op: None,
            },
        );
        push(
            &mut t,
            20_005_000,
            EventKind::SyscallExit {
                name: open,
                ret: 3,
                file_op: None,
            },
        );
        cap.push(CapturedPath {
            time_ns: 19_999_300,
            tid: 10,
            syscall: "openat".into(),
            path: "/logs/name.5.dat".into(),
        });
        (t, cap)
    }

    fn view(t: &Trace, cap: Option<&[CapturedPath]>) -> SyscallsView {
        let mut calls = pair_calls(t);
        if let Some(c) = cap {
            attach_paths(t, &mut calls, c);
        }
        syscalls_view(t, &calls, &Selection::default(), cap, 3)
    }

    #[test]
    fn calls_are_paired_counted_and_errors_named() {
        let (t, cap) = probing();
        let v = view(&t, Some(&cap));
        let app = &v.processes[0];
        let stat = app
            .syscalls
            .iter()
            .find(|s| s.name == "newfstatat")
            .unwrap();
        assert_eq!(stat.count, 6);
        assert_eq!(stat.errors.get("ENOENT"), Some(&1));
        assert!((stat.time_s - 6.0 * 2e-6).abs() < 1e-12);
        assert_eq!(stat.sites[0].stack, vec!["work", "main"]);
        assert_eq!(v.paths_matched, 7);
        assert_eq!(v.paths_note, None);
    }

    #[test]
    fn paths_fold_numbers_into_patterns() {
        let (t, cap) = probing();
        let v = view(&t, Some(&cap));
        let p = &v.processes[0].paths[0];
        assert_eq!(p.pattern, "/logs/name.N.dat");
        assert_eq!((p.count, p.found, p.failed), (7, 6, 1));
        assert_eq!(p.errors.get("ENOENT"), Some(&1));
        assert_eq!(p.first, "/logs/name.0.dat");
        assert_eq!(p.last, "/logs/name.5.dat");
    }

    #[test]
    fn without_a_capture_the_view_says_why_paths_are_missing() {
        let (t, _) = probing();
        let v = view(&t, None);
        assert!(v.processes[0].paths.is_empty());
        assert_eq!(v.paths_missing, 7);
        assert!(v.paths_note.as_deref().unwrap().contains("not captured"));
    }

    #[test]
    fn an_fstat_by_empty_path_is_not_a_path_missing() {
        let (mut t, cap) = probing();
        // glibc's fstat(3): newfstatat(3, "", buf, AT_EMPTY_PATH), after every other call.
        let stat = t.strings.iter().position(|s| s == "newfstatat").unwrap();
        let stat = StrIdx(stat as u32);
        let fstat = [3, 0, 0, slowlab_model::syscalls::AT_EMPTY_PATH, 0, 0];
        for (at, args) in [(30_000_000, fstat), (31_000_000, [3, 0, 0, 0, 0, 0])] {
            push(
                &mut t,
                at,
                EventKind::SyscallEnter {
                    name: stat,
                    args: Box::new(args),
                    file_op: None,
                },
            );
            push(
                &mut t,
                at + 1_000,
                EventKind::SyscallExit {
                    name: stat,
                    ret: 0,
                    file_op: None,
                },
            );
        }
        let v = view(&t, Some(&cap));
        // The 7 matched as before; the call without the flag named a path the capture
        // does not have; the fstat named none.
        assert_eq!((v.paths_matched, v.paths_missing), (7, 1));
        assert_eq!(
            v.paths_note.as_deref(),
            Some("1 calls took a path that was not captured")
        );
    }

    #[test]
    fn a_capture_after_the_entry_or_before_the_previous_call_is_not_matched() {
        let (t, mut cap) = probing();
        // The capture of name.2 arrives after perf's entry stamp of that
        // call: it must not be taken, nor given to the next call.
        cap[2].time_ns = 10_020_000 + 500;
        let mut calls = pair_calls(&t);
        attach_paths(&t, &mut calls, &cap);
        let paths: Vec<Option<&str>> = calls
            .iter()
            .filter(|c| c.enter_ns.is_some())
            .map(|c| c.path.map(|i| cap[i].path.as_str()))
            .collect();
        assert_eq!(paths[2], None, "{paths:?}");
        assert_eq!(paths[3], Some("/logs/name.3.dat"), "{paths:?}");
    }

    #[test]
    fn errno_names_and_folding() {
        assert_eq!(errno_name(2), "ENOENT");
        assert_eq!(errno_name(17), "EEXIST");
        assert_eq!(errno_name(110), "ETIMEDOUT");
        assert_eq!(errno_name(500), "E500");
        assert_eq!(error_of(-2).as_deref(), Some("ENOENT"));
        assert_eq!(error_of(-4095).as_deref(), Some("E4095"));
        assert_eq!(error_of(0), None);
        assert_eq!(error_of(-4096), None, "not an errno");
        assert_eq!(error_of(i64::MIN), None, "no negation");
        assert_eq!(fold_numbers("/run.123/log.7.dat"), "/run.N/log.N.dat");
    }
}
