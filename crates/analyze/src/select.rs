//! Which samples a view counts: a filter by process name, pid or tid and a
//! time range, applied once to produce the samples aggregated by
//! (thread, stack) — the unit every view works on, so that a view walks each
//! distinct stack once instead of once per sample.
//!
//! It does not interpret stacks; the views do.

use std::collections::HashMap;
use std::str::FromStr;

/// FxHash (the `rustc-hash` crate, as in rustc and Firefox): fast for
/// small integer keys.
pub type BuildFx = rustc_hash::FxBuildHasher;

use slowlab_model::trace::{StackIdx, ThreadIdx, Trace};

use crate::AnalyzeError;

/// One filter term.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Filter {
    /// Process command name, exact (or, if nothing matches exactly, a
    /// substring).
    Process(String),
    Pid(i32),
    Tid(i32),
}

impl FromStr for Filter {
    type Err = AnalyzeError;
    fn from_str(s: &str) -> Result<Self, AnalyzeError> {
        let bad = || AnalyzeError::BadFilter(s.to_owned());
        let (k, v) = s.split_once('=').ok_or_else(bad)?;
        match k.trim() {
            "process" | "comm" => Ok(Filter::Process(v.to_owned())),
            "pid" => v.trim().parse().map(Filter::Pid).map_err(|_| bad()),
            "tid" => v.trim().parse().map(Filter::Tid).map_err(|_| bad()),
            _ => Err(bad()),
        }
    }
}

/// Which samples to count: all filters must hold (terms of the same kind
/// are alternatives), and the sample must lie in `[from_s, to_s)` seconds
/// after the trace start.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    pub filters: Vec<Filter>,
    pub from_s: Option<f64>,
    pub to_s: Option<f64>,
}

/// Samples aggregated by (thread, stack).
#[derive(Debug, Default)]
pub struct Aggregate {
    /// ((thread, stack), sample count), in first-seen order.
    pub groups: Vec<((ThreadIdx, Option<StackIdx>), u64)>,
    /// Samples selected.
    pub total: u64,
}

impl Selection {
    /// The selection of a command line: `filters` as `process=NAME`,
    /// `pid=N` or `tid=N`, and the time range in seconds.
    pub fn parse(
        filters: &[String],
        from_s: Option<f64>,
        to_s: Option<f64>,
    ) -> Result<Selection, AnalyzeError> {
        if let (Some(from), Some(to)) = (from_s, to_s) {
            if from >= to {
                return Err(AnalyzeError::EmptyRange { from, to });
            }
        }
        Ok(Selection {
            filters: filters
                .iter()
                .map(|f| f.parse())
                .collect::<Result<_, _>>()?,
            from_s,
            to_s,
        })
    }

    fn thread_ok(&self, trace: &Trace, thread: ThreadIdx) -> bool {
        let th = &trace.threads[thread.ix()];
        let p = &trace.processes[th.process.ix()];
        let mut by_kind = [None::<bool>; 3];
        for f in &self.filters {
            let (k, hit) = match f {
                Filter::Process(name) => {
                    let comm = trace.str(p.comm);
                    let tcomm = trace.str(th.comm);
                    (
                        0,
                        comm == name || tcomm == name || self.substring(trace, name, comm),
                    )
                }
                Filter::Pid(pid) => (1, p.pid == *pid),
                Filter::Tid(tid) => (2, th.tid == *tid),
            };
            let slot = &mut by_kind[k];
            *slot = Some(slot.unwrap_or(false) || hit);
        }
        by_kind.iter().all(|s| s.unwrap_or(true))
    }

    /// A process filter matches by substring only when no process has
    /// exactly that name.
    fn substring(&self, trace: &Trace, name: &str, comm: &str) -> bool {
        !trace.processes.iter().any(|p| trace.str(p.comm) == name) && comm.contains(name)
    }

    /// For every thread of the trace, whether the filters keep it.
    pub fn thread_mask(&self, trace: &Trace) -> Vec<bool> {
        (0..trace.threads.len())
            .map(|i| self.filters.is_empty() || self.thread_ok(trace, ThreadIdx(i as u32)))
            .collect()
    }

    /// The selected time range as absolute nanoseconds `[from, to)`.
    pub fn time_range_ns(&self, trace: &Trace) -> (u64, u64) {
        let start = trace.meta.start_ns;
        let at = |s: f64| start.saturating_add((s.max(0.0) * 1e9) as u64);
        (self.from_s.map_or(0, at), self.to_s.map_or(u64::MAX, at))
    }

    /// Aggregates the selected samples.
    pub fn aggregate(&self, trace: &Trace) -> Aggregate {
        let start = trace.meta.start_ns;
        let from = self
            .from_s
            .map(|s| start.saturating_add((s.max(0.0) * 1e9) as u64));
        let to = self
            .to_s
            .map(|s| start.saturating_add((s.max(0.0) * 1e9) as u64));
        let thread_ok: Vec<bool> = if self.filters.is_empty() {
            vec![true; trace.threads.len()]
        } else {
            (0..trace.threads.len())
                .map(|i| self.thread_ok(trace, ThreadIdx(i as u32)))
                .collect()
        };
        let s = &trace.samples;
        // (thread, stack) packed in one word; most samples of a build start
        // a group, so one probe each (`entry`) and room for them up front.
        let mut index: HashMap<u64, usize, BuildFx> =
            HashMap::with_capacity_and_hasher(s.len(), BuildFx::default());
        let mut agg = Aggregate::default();
        for i in 0..s.len() {
            let th = s.thread[i];
            if !thread_ok.get(th.ix()).copied().unwrap_or(false) {
                continue;
            }
            let t = s.time_ns[i];
            if from.is_some_and(|f| t < f) || to.is_some_and(|e| t >= e) {
                continue;
            }
            let key = (th, s.stack[i]);
            let packed = (th.0 as u64) << 32 | key.1.map_or(u32::MAX, |x| x.0) as u64;
            agg.total += 1;
            match index.entry(packed) {
                std::collections::hash_map::Entry::Occupied(g) => agg.groups[*g.get()].1 += 1,
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(agg.groups.len());
                    agg.groups.push((key, 1));
                }
            }
        }
        agg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_filters() {
        assert_eq!("pid=12".parse::<Filter>().unwrap(), Filter::Pid(12));
        assert_eq!(
            "process=cc1".parse::<Filter>().unwrap(),
            Filter::Process("cc1".into())
        );
        assert!("pid=x".parse::<Filter>().is_err());
        assert!("nope".parse::<Filter>().is_err());
    }

    #[test]
    fn a_range_that_ends_before_it_starts_is_an_error() {
        assert!(Selection::parse(&[], Some(1.0), Some(2.0)).is_ok());
        assert!(Selection::parse(&[], Some(2.0), None).is_ok());
        let e = Selection::parse(&[], Some(2.0), Some(1.0)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--from 2 is not before --to 1: give a range that starts before it ends"
        );
        assert!(Selection::parse(&[], Some(1.0), Some(1.0)).is_err());
    }
}
