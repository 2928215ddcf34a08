//! `linear-probe-names`: launches of a program that each check
//! sequentially numbered names (`x.0`, `x.1`, …: a stat that finds the file,
//! or an exclusive create failing with EEXIST) before creating the first
//! free one, the number of checks rising launch after launch: N launches
//! cost O(N²) checks.
//!
//! Signature and thresholds, per program name (comm):
//! - at least `MIN_LAUNCHES` processes that probed;
//! - the probes per launch rise with the launch order: Spearman correlation
//!   at least `MIN_TREND`, the last quarter's mean at least twice the first
//!   quarter's plus 5, and at least `MIN_MAX_PROBES` in the last launch.
//!
//! With captured paths, a probe is a check of a path whose numbers fold into
//! one pattern (`log.N.dat`); without, every stat-family call and failing
//! exclusive create of the process counts (and the finding says the names
//! were not captured).
//!
//! On a Windows trace (ETL), the probes are the file creates (calls whose
//! `file_op` is `FileOp::Create`, named `FileIO/Create`) on numbered names
//! that find the file (or clash with it), with the paths the trace names.
//!
//! Cost so far: the summed duration of the probes. Projections: the probes
//! of N launches grow as N², so 2× and 10× as many launches cost 4× and
//! 100× the probing time.

use std::collections::{BTreeMap, HashMap};

use slowlab_model::findings::Finding;
use slowlab_model::syscalls::open_flags_arg;
use slowlab_model::trace::{FileOp, ProcIdx, StackIdx};

use super::{heaviest, trend, Context};
use crate::evidence;
use crate::select::BuildFx;
use crate::syscalls::{fold_numbers, is_existence_check};

pub const MIN_LAUNCHES: usize = 10;
pub const MIN_TREND: f64 = 0.8;
pub const MIN_MAX_PROBES: u64 = 20;
const O_CREAT: u64 = 0o100;
const O_EXCL: u64 = 0o200;
const EEXIST: i64 = 17;

/// Flags argument of an open-family syscall.
fn open_flags(name: &str, args: &[u64; 6]) -> Option<u64> {
    open_flags_arg(name).map(|i| args[i])
}

#[derive(Default)]
struct Launch {
    first_ns: u64,
    /// pattern (or "" without paths) → (probes, probe ns)
    probes: BTreeMap<String, (u64, u64)>,
    sites: HashMap<Option<StackIdx>, u64, BuildFx>,
}

/// One launch's probing of one pattern: (first call ns, process, probes, probe ns).
type ProbingLaunch = (u64, ProcIdx, u64, u64);

pub fn detect(cx: &Context) -> Vec<Finding> {
    let trace = cx.trace;
    let with_paths = cx.captured.is_some_and(|c| !c.is_empty());
    let mut launches: HashMap<ProcIdx, Launch, BuildFx> = HashMap::default();
    for call in cx.calls() {
        let name = trace.str(call.name);
        // Windows (an ETL trace's file create): an open that finds the
        // file, or an exclusive create that clashes.
        let windows_probe = call.file_op == Some(FileOp::Create)
            && (call.ret == Some(0) || call.ret == Some(-EEXIST));
        let found = (is_existence_check(name) && call.ret == Some(0)) || windows_probe;
        let exclusive_clash = open_flags(name, &call.args)
            .is_some_and(|f| f & (O_CREAT | O_EXCL) == (O_CREAT | O_EXCL))
            && call.ret == Some(-EEXIST);
        if !(found || exclusive_clash) {
            continue;
        }
        let pattern = match (with_paths, call.path, cx.captured) {
            (true, Some(i), Some(cap)) => {
                let folded = fold_numbers(&cap[i].path);
                if folded == cap[i].path {
                    continue; // no number in the name: not a numbered probe
                }
                folded
            }
            (true, _, _) => continue,
            (false, _, _) => String::new(),
        };
        let proc = cx.process_of(call.thread);
        let l = launches.entry(proc).or_insert_with(|| Launch {
            first_ns: call.enter_ns.unwrap_or(u64::MAX),
            ..Launch::default()
        });
        l.first_ns = l.first_ns.min(call.enter_ns.unwrap_or(u64::MAX));
        let e = l.probes.entry(pattern).or_default();
        e.0 += 1;
        e.1 += call.duration_ns().unwrap_or(0);
        *l.sites.entry(call.stack).or_default() += 1;
    }
    // Group launches by program name and probe pattern.
    let mut series: BTreeMap<(String, String), Vec<ProbingLaunch>> = BTreeMap::new();
    for (proc, l) in &launches {
        let comm = trace.str(trace.processes[proc.ix()].comm).to_string();
        for (pattern, &(probes, ns)) in &l.probes {
            series
                .entry((comm.clone(), pattern.clone()))
                .or_default()
                .push((l.first_ns, *proc, probes, ns));
        }
    }
    let mut findings = Vec::new();
    for ((comm, pattern), mut runs) in series {
        if runs.len() < MIN_LAUNCHES {
            continue;
        }
        runs.sort_by_key(|r| r.0);
        let probes: Vec<f64> = runs.iter().map(|r| r.2 as f64).collect();
        let quarter = (runs.len() / 4).max(1);
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let first = mean(&probes[..quarter]);
        let last = mean(&probes[probes.len() - quarter..]);
        let rho = trend(&probes);
        let max_last = runs.last().map_or(0, |r| r.2);
        if rho < MIN_TREND || last < 2.0 * first + 5.0 || max_last < MIN_MAX_PROBES {
            continue;
        }
        let total_probes: u64 = runs.iter().map(|r| r.2).sum();
        let cost_s = runs.iter().map(|r| r.3).sum::<u64>() as f64 / 1e9;
        let check_us = cost_s / total_probes.max(1) as f64 * 1e6;
        let last_proc = runs.last().map(|r| r.1);
        let mut sites: HashMap<Option<StackIdx>, u64> = HashMap::new();
        for r in &runs {
            if let Some(l) = launches.get(&r.1) {
                for (s, n) in &l.sites {
                    *sites.entry(*s).or_default() += n;
                }
            }
        }
        let site = heaviest(sites)
            .map(|(s, _)| cx.user_names(s))
            .unwrap_or_default();
        let culprit = last_proc.map(|p| cx.culprit(p)).unwrap_or_default();
        let what = if pattern.is_empty() {
            "existence checks (names not captured)".to_string()
        } else {
            format!("checks of {pattern}")
        };
        findings.push(cx.finding(
            "linear-probe-names",
            format!(
                "{comm} probes numbered names for a free one: {} launches made {total_probes} {what}, \
                 {first:.0} → {last:.0} per launch; 10× as many launches would take {:.0}× as long",
                runs.len(),
                100.0
            ),
            cost_s,
            culprit,
            evidence! {
                "launches" => runs.len(),
                "probes_total" => total_probes,
                "probes_first_launches" => first,
                "probes_last_launches" => last,
                "trend" => rho,
                "pattern" => if pattern.is_empty() { None } else { Some(pattern.clone()) },
                "names_captured" => !pattern.is_empty(),
                "check_us" => check_us,
                "cost_so_far_s" => cost_s,
                "projected_2x_launches_s" => cost_s * 4.0,
                "projected_10x_launches_s" => cost_s * 100.0,
            },
            site,
            "give each log a unique name (pid and time) or keep the next free number in a \
             counter file, instead of probing from 0 at every launch",
        ));
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syscalls::CapturedPath;
    use crate::testutil::{trend_edge, TraceBuilder};
    use slowlab_model::trace::Trace;

    const AT_FDCWD: u64 = -100i64 as u64;
    const O_WRONLY: u64 = 0o1;
    const ENOENT: i64 = 2;
    const PROBE_NS: u64 = 5_000;

    fn numbered(k: u64) -> String {
        format!("/var/log/app/log.{k}.dat")
    }

    /// How a launch checks a name.
    #[derive(Clone, Copy, PartialEq)]
    enum Check {
        /// `newfstatat`: 0 for a taken name, ENOENT for the free one, which
        /// is then created.
        Stat,
        /// `openat(O_CREAT|O_EXCL)`: EEXIST for a taken name.
        ExclusiveCreate,
    }

    /// The user frames of the probing call site.
    const PROBE_SITE: &[&str] = &["main", "open_log", "next_free_name"];

    /// Launches of `logger` by `sh` (pid 100), one every 10 ms, launch i
    /// finding the names `name(0..probes[i])` taken before creating
    /// `name(probes[i])`; each check takes 5 µs. Returns the trace and the
    /// paths the eBPF probe would have captured.
    fn launches(
        probes: &[u64],
        check: Check,
        name: fn(u64) -> String,
    ) -> (Trace, Vec<CapturedPath>) {
        launches_from(probes, check, name, &[PROBE_SITE])
    }

    /// [`launches`] whose checks take turns among call sites `sites` (user
    /// frames, stacks made in this order), the first check from the second.
    fn launches_from(
        probes: &[u64],
        check: Check,
        name: fn(u64) -> String,
        sites: &[&[&str]],
    ) -> (Trace, Vec<CapturedPath>) {
        let mut b = TraceBuilder::default();
        b.process(100, "sh");
        let kernel = match check {
            Check::Stat => "__x64_sys_newfstatat",
            Check::ExclusiveCreate => "__x64_sys_openat",
        };
        let sites: Vec<_> = sites
            .iter()
            .map(|user| b.mixed_stack(user, &["entry_SYSCALL_64", "do_syscall_64", kernel]))
            .collect();
        let create_site = b.mixed_stack(&["main", "open_log"], &["entry_SYSCALL_64"]);
        let mut paths = Vec::new();
        for (i, &taken) in probes.iter().enumerate() {
            let pid = 200 + i as i32;
            let mut t = 10_000_000 * (i as u64 + 1);
            let logger = b.process(pid, "logger");
            b.lifetime(logger, Some(100), t, Some(t + 5_000_000));
            let mut call = |b: &mut TraceBuilder, stack, sys: &str, args, path: String, ret| {
                t += 10_000;
                paths.push(CapturedPath {
                    time_ns: t - 1_000,
                    tid: pid,
                    syscall: sys.to_string(),
                    path,
                });
                b.syscall(t, logger, stack, sys, args, ret, PROBE_NS);
            };
            let exclusive = [AT_FDCWD, 0x1000, O_CREAT | O_EXCL | O_WRONLY, 0o644, 0, 0];
            for k in 0..=taken {
                let site = sites[(k as usize + 1) % sites.len()];
                match check {
                    Check::Stat => {
                        let ret = if k < taken { 0 } else { -ENOENT };
                        call(
                            &mut b,
                            site,
                            "newfstatat",
                            [AT_FDCWD, 0x1000, 0x2000, 0, 0, 0],
                            name(k),
                            ret,
                        );
                    }
                    Check::ExclusiveCreate => {
                        let ret = if k < taken { -EEXIST } else { 3 };
                        call(&mut b, site, "openat", exclusive, name(k), ret);
                    }
                }
            }
            if check == Check::Stat {
                let create = [AT_FDCWD, 0x1000, O_CREAT | O_WRONLY, 0o644, 0, 0];
                call(&mut b, create_site, "openat", create, name(taken), 3);
            }
        }
        (b.build(), paths)
    }

    fn findings_with(
        probes: &[u64],
        check: Check,
        name: fn(u64) -> String,
        captured: bool,
    ) -> Vec<Finding> {
        let (trace, paths) = launches(probes, check, name);
        let captured = captured.then_some(paths.as_slice());
        detect(&Context::new(&trace, captured, None))
    }

    fn findings(probes: &[u64]) -> Vec<Finding> {
        findings_with(probes, Check::Stat, numbered, true)
    }

    /// `n` launches whose probes rise evenly to `top`.
    fn ramp(n: usize, top: u64) -> Vec<u64> {
        (1..=n as u64).map(|i| top * i / n as u64).collect()
    }

    #[test]
    fn the_site_of_tied_probes_is_the_same_on_every_run() {
        // Two call sites make exactly half of the probes each; the stack made
        // first wins the tie, though the other one probes first.
        let probes: Vec<u64> = (1..=12).map(|i| 2 * i).collect();
        let other: &[&str] = &["main", "open_log", "find_unused_name"];
        for (sites, expected) in [
            ([PROBE_SITE, other], PROBE_SITE),
            ([other, PROBE_SITE], other),
        ] {
            let (trace, paths) = launches_from(&probes, Check::Stat, numbered, &sites);
            let f = detect(&Context::new(&trace, Some(&paths), None));
            assert_eq!(f.len(), 1, "{f:?}");
            let innermost_first: Vec<&str> = expected.iter().rev().copied().collect();
            assert_eq!(f[0].stack, innermost_first);
        }
    }

    #[test]
    fn launches_probing_ever_more_numbered_names_are_found() {
        let probes: Vec<u64> = (1..=12).map(|i| 2 * i).collect();
        let f = findings(&probes);
        assert_eq!(f.len(), 1, "{f:?}");
        let f = &f[0];
        assert_eq!(f.id, "linear-probe-names");
        assert_eq!(f.culprit.pid, Some(211), "the last launch");
        assert_eq!(f.culprit.comm.as_deref(), Some("logger"));
        assert_eq!(f.evidence["launches"], 12);
        assert_eq!(f.evidence["probes_total"], 156);
        assert_eq!(f.evidence["probes_first_launches"], 4.0);
        assert_eq!(f.evidence["probes_last_launches"], 22.0);
        assert_eq!(f.evidence["trend"], 1.0);
        assert_eq!(f.evidence["pattern"], "/var/log/app/log.N.dat");
        assert_eq!(f.evidence["names_captured"], true);
        let check_us = f.evidence["check_us"].as_f64().unwrap();
        assert!((check_us - 5.0).abs() < 1e-9, "{check_us}");
        assert!((f.cost_s - 156.0 * 5e-6).abs() < 1e-12, "{}", f.cost_s);
        assert_eq!(f.stack, ["next_free_name", "open_log", "main"]);
    }

    #[test]
    fn without_captured_paths_every_found_check_counts() {
        let probes: Vec<u64> = (1..=12).map(|i| 2 * i).collect();
        let f = findings_with(&probes, Check::Stat, numbered, false);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].evidence["probes_total"], 156);
        assert_eq!(f[0].evidence["pattern"], serde_json::Value::Null);
        assert_eq!(f[0].evidence["names_captured"], false);
        assert!(f[0].title.contains("names not captured"), "{}", f[0].title);
    }

    #[test]
    fn exclusive_creates_failing_with_eexist_are_probes_too() {
        let probes: Vec<u64> = (1..=12).map(|i| 2 * i).collect();
        for captured in [true, false] {
            let f = findings_with(&probes, Check::ExclusiveCreate, numbered, captured);
            assert_eq!(f.len(), 1, "captured {captured}: {f:?}");
            assert_eq!(f[0].evidence["probes_total"], 156);
        }
    }

    #[test]
    fn launches_checking_the_same_files_each_time_are_not_probing() {
        // Every launch finds the same five numbered files.
        let f = findings(&[5; 20]);
        assert!(f.is_empty(), "{f:?}");
    }

    #[test]
    fn growing_checks_of_unnumbered_names_are_not_probes_when_names_are_captured() {
        fn lettered(k: u64) -> String {
            format!("/etc/app/conf.d/{}", "x".repeat(k as usize + 1))
        }
        let probes: Vec<u64> = (1..=12).map(|i| 2 * i).collect();
        let f = findings_with(&probes, Check::Stat, lettered, true);
        assert!(f.is_empty(), "{f:?}");
        // Without the names, the same calls look like probing.
        assert_eq!(
            findings_with(&probes, Check::Stat, lettered, false).len(),
            1
        );
    }

    #[test]
    fn min_launches_is_the_edge() {
        let top = 2 * MIN_MAX_PROBES;
        assert_eq!(findings(&ramp(MIN_LAUNCHES, top)).len(), 1);
        assert!(findings(&ramp(MIN_LAUNCHES - 1, top)).is_empty());
    }

    #[test]
    fn min_max_probes_is_the_edge() {
        // 1, 2, 3, … then the last launch at the threshold or just below.
        let n = MIN_LAUNCHES as u64 + 2;
        let mut probes: Vec<u64> = (1..n).collect();
        probes.push(MIN_MAX_PROBES);
        assert_eq!(findings(&probes).len(), 1);
        *probes.last_mut().unwrap() -= 1;
        assert!(findings(&probes).is_empty());
    }

    #[test]
    fn min_trend_is_the_edge() {
        // 20 launches; launches of the middle half out of order.
        let rising: Vec<f64> = (1..=20).map(|i| 2.0 * i as f64).collect();
        let (above, below) = trend_edge(&rising, 5, MIN_TREND);
        let as_probes = |v: &[f64]| v.iter().map(|&p| p as u64).collect::<Vec<_>>();
        let f = findings(&as_probes(&above));
        assert_eq!(f.len(), 1, "{above:?}");
        let rho = f[0].evidence["trend"].as_f64().unwrap();
        assert!((MIN_TREND..MIN_TREND + 0.05).contains(&rho), "{rho}");
        assert!(findings(&as_probes(&below)).is_empty(), "{below:?}");
    }

    #[test]
    fn the_last_launches_must_probe_twice_as_much_plus_five() {
        // First quarter 10 on average, so the last must reach 25.
        let mut probes = vec![9, 10, 11, 12, 14, 16, 18, 20, 22, 24, 25, 26];
        let f = findings(&probes);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].evidence["probes_last_launches"], 25.0);
        probes[9] = 23;
        assert!(findings(&probes).is_empty());
    }

    /// A Windows trace as `slowlab-etl` reads it: each launch of
    /// verifier.exe opens `C:\Logs\app.N.dat` for N = 0, 1, … (the taken
    /// names open: 0; the free one is then created), each a file create
    /// (`FileIO/Create`) with its path at its start.
    fn windows_launches(probes: &[u64]) -> (Trace, Vec<CapturedPath>) {
        windows_launches_of(probes, Some(FileOp::Create))
    }

    /// As `windows_launches`, the creates' `file_op` being `op`.
    fn windows_launches_of(probes: &[u64], op: Option<FileOp>) -> (Trace, Vec<CapturedPath>) {
        const CREATE: &str = "FileIO/Create";
        let mut b = TraceBuilder::default();
        let mut paths = Vec::new();
        for (i, &taken) in probes.iter().enumerate() {
            let pid = 500 + i as i32;
            let mut t = 10_000_000 * (i as u64 + 1);
            let p = b.process(pid, "verifier.exe");
            b.lifetime(p, Some(4), t, Some(t + 5_000_000));
            for k in 0..=taken {
                t += 100_000;
                paths.push(CapturedPath {
                    time_ns: t,
                    tid: pid,
                    syscall: CREATE.to_string(),
                    path: format!("C:\\Logs\\app.{k}.dat"),
                });
                match op {
                    Some(op) => b.file_op(t, p, op, CREATE, 0, 80_000),
                    None => b.syscall(t, p, None, CREATE, [0; 6], 0, 80_000),
                }
            }
        }
        (b.build(), paths)
    }

    #[test]
    fn windows_file_creates_of_numbered_names_are_probes() {
        let probes: Vec<u64> = (0..12).map(|i| 2 * i + 1).collect();
        let (t, paths) = windows_launches(&probes);
        let f = detect(&Context::new(&t, Some(&paths), None));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].culprit.comm.as_deref(), Some("verifier.exe"));
        assert!(f[0].title.contains("app.N.dat"), "{}", f[0].title);
        // The same launches probing a constant number of names: no growth.
        let (t, paths) = windows_launches(&[23; 12]);
        assert!(detect(&Context::new(&t, Some(&paths), None)).is_empty());
        // The reader's `file_op` says what a create is, not the name.
        for op in [None, Some(FileOp::Close)] {
            let (t, paths) = windows_launches_of(&probes, op);
            assert!(detect(&Context::new(&t, Some(&paths), None)).is_empty());
        }
    }
}
