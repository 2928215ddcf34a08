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
//! Cost so far: the summed duration of the probes. Projections: the probes
//! of N launches grow as N², so 2× and 10× as many launches cost 4× and
//! 100× the probing time.

use std::collections::{BTreeMap, HashMap};

use slowlab_model::findings::Finding;
use slowlab_model::trace::{ProcIdx, StackIdx};

use super::{trend, Context};
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
    match name {
        "open" => Some(args[1]),
        "openat" => Some(args[2]),
        _ => None,
    }
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
    for call in &cx.calls {
        let name = trace.str(call.name);
        let found = is_existence_check(name) && call.ret == Some(0);
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
        let site = sites
            .into_iter()
            .max_by_key(|(_, n)| *n)
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
