//! One analysis per trace: everything derived from a trace bundle that more
//! than one consumer reads, each computed lazily and at most once, and
//! borrowed by every view, detector, export and page of one command — the
//! scheduler replay (and its sums), the paired syscalls, the root's critical
//! path and the findings. A command opens its input once, makes one
//! [`Analysis`], and asks it for what it shows.
//!
//! What it does not do: read files (the bundle is opened by the caller),
//! render, or cache across traces. Views that need only the trace (the CPU
//! summary and trees, the butterfly, faults, processes) stay plain functions
//! of the trace.

use std::borrow::Cow;
use std::sync::OnceLock;

use slowlab_model::bundle::TraceBundle;
use slowlab_model::findings::Finding;
use slowlab_model::trace::{ProcIdx, Trace};

use crate::critical_path::{command_root, default_root, process_tree, PathError};
use crate::detect::{run_all_with, Context, RootPath};
use crate::report_data::{self, ReportData};
use crate::select::Selection;
use crate::states::{Schedule, ThreadStates};

/// Which process the critical path (and the detectors of everyday waits)
/// is about.
#[derive(Debug, Clone, PartialEq)]
pub enum Root {
    /// The longest-running process that started during the trace.
    Default,
    /// One process (`--root PID`).
    Process(ProcIdx),
    /// The process that ran this command under `perf record -- CMD`
    /// (`slowlab diagnose`), else the default.
    Command(Vec<String>),
}

/// The analysis of one trace bundle.
pub struct Analysis<'a> {
    bundle: &'a TraceBundle,
    root: Option<ProcIdx>,
    context: OnceLock<Context<'a>>,
    root_path: OnceLock<Result<RootPath, PathError>>,
    findings: OnceLock<Vec<Finding>>,
}

/// What the interactive page shows besides the analysis.
pub struct Page<'a> {
    pub title: &'a str,
    /// The diagnosed command, when there is one.
    pub command: &'a [String],
    /// Which threads and what time the page covers.
    pub selection: &'a Selection,
    /// Filters as the user gave them, for the page's header.
    pub filter_text: &'a [String],
    pub warnings: &'a [String],
}

impl<'a> Analysis<'a> {
    /// The analysis of `bundle` about `root`. Computes nothing yet.
    pub fn new(bundle: &'a TraceBundle, root: Root) -> Analysis<'a> {
        let trace = &bundle.trace;
        let root = match root {
            Root::Default => default_root(trace),
            Root::Process(p) => Some(p),
            Root::Command(command) => command_root(trace, &command),
        };
        Analysis {
            bundle,
            root,
            context: OnceLock::new(),
            root_path: OnceLock::new(),
            findings: OnceLock::new(),
        }
    }

    pub fn bundle(&self) -> &'a TraceBundle {
        self.bundle
    }

    pub fn trace(&self) -> &'a Trace {
        &self.bundle.trace
    }

    /// What the detectors share: the one scheduler replay, its sums and the
    /// paired syscalls (replayed on first use).
    pub fn context(&self) -> &Context<'a> {
        self.context.get_or_init(|| {
            Context::new(
                &self.bundle.trace,
                self.bundle.paths.as_deref(),
                self.bundle.cgroups.as_ref(),
            )
        })
    }

    /// The one replay of the scheduler events.
    pub fn states(&self) -> &ThreadStates {
        &self.context().states
    }

    /// The replay's sums: every thread's times and every wait that ended.
    pub fn schedule(&self) -> &Schedule {
        &self.context().schedule
    }

    /// The replay's sums over the selection's time range (the whole replay's when it
    /// has none): what `--waits` and the off-CPU flame graph count.
    pub fn schedule_in(&self, sel: &Selection) -> Cow<'_, Schedule> {
        if sel.from_s.is_none() && sel.to_s.is_none() {
            return Cow::Borrowed(self.schedule());
        }
        let (from, to) = sel.time_range_ns(self.trace());
        Cow::Owned(Schedule::within(self.states(), from, to))
    }

    /// The root process, if the trace has one.
    pub fn root(&self) -> Option<ProcIdx> {
        self.root
    }

    /// The root's process tree (the root first); empty without a root.
    pub fn root_tree(&self) -> Vec<ProcIdx> {
        self.root
            .map(|r| process_tree(self.trace(), r))
            .unwrap_or_default()
    }

    /// The critical path of the root, or why there is none.
    pub fn root_path(&self) -> Result<&RootPath, &PathError> {
        self.root_path
            .get_or_init(|| match self.root {
                Some(root) => RootPath::with_locks(
                    self.trace(),
                    self.states(),
                    self.context().locks(),
                    Some(root),
                ),
                None => Err(PathError::NoRoot),
            })
            .as_ref()
    }

    /// Every detector's findings, most costly first (those of everyday
    /// waits on the root's critical path, when it has one).
    pub fn findings(&self) -> &[Finding] {
        self.findings
            .get_or_init(|| run_all_with(self.context(), || self.root_path().ok()))
    }

    /// The data of the interactive page: the selection's events, the
    /// root's critical path and process tree, every finding (and, among its
    /// warnings, why there is no path). What is not computed yet of the
    /// replay, the path and the findings is, on a thread of its own, while
    /// the page's tables are made on this one: on two cores, the page waits
    /// for neither (bench/analysis/README.md).
    pub fn report_data(&self, page: &Page) -> ReportData {
        let tree = self.root_tree();
        let inputs = report_data::Inputs {
            title: page.title,
            command: page.command,
            critical_path: None,
            findings: &[],
            command_processes: &tree,
            selection: page.selection,
            filter_text: page.filter_text,
            warnings: page.warnings,
        };
        std::thread::scope(|s| {
            let derived = s.spawn(|| (self.findings(), crate::states::replays()));
            let derived = report_data::Derived {
                context: || self.context(),
                critical_path: || match self.root_path() {
                    Ok(rp) => Ok(Some(&rp.path)),
                    Err(why) => Err(why.to_string()),
                },
                findings: || {
                    let (findings, replays) = derived
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                    crate::states::credit_replays(replays);
                    findings
                },
            };
            report_data::report_data_with(self.trace(), &inputs, derived)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TraceBuilder;

    fn ms(v: u64) -> u64 {
        v * 1_000_000
    }

    /// `a` blocks on a futex until `w` wakes it.
    fn bundle() -> TraceBundle {
        let mut b = TraceBuilder::default();
        let a = b.process(10, "a");
        let w = b.process(20, "w");
        let blk = b.stack(&["schedule", "futex_wait"]);
        let wk = b.stack(&["futex_wake"]);
        b.switch(ms(1), 0, 20, 0, 10, None);
        b.switch(ms(5), 0, 10, 1, 20, blk);
        b.waking(ms(9), 0, w, 10, wk);
        b.switch(ms(12), 0, 20, 0, 10, None);
        b.end(ms(20));
        let mut t = b.build();
        t.processes[a.ix()].start_ns = Some(0);
        TraceBundle {
            trace: t,
            paths: None,
            cgroups: None,
            warnings: Vec::new(),
        }
    }

    #[test]
    fn every_product_is_computed_once_from_one_replay() {
        let bundle = bundle();
        let analysis = Analysis::new(&bundle, Root::Default);
        let before = crate::states::replays();
        let path = analysis.root_path().expect("a root that started");
        assert_eq!(path.path.root.pid, 10);
        let _ = analysis.findings();
        let _ = analysis.report_data(&Page {
            title: "t",
            command: &[],
            selection: &Selection::default(),
            filter_text: &[],
            warnings: &[],
        });
        let _ = analysis.schedule();
        let _ = analysis.root_path();
        assert_eq!(crate::states::replays() - before, 1);
        // The findings are kept, not run again.
        assert!(std::ptr::eq(
            analysis.findings().as_ptr(),
            analysis.findings().as_ptr()
        ));
    }

    #[test]
    fn the_page_says_why_it_has_no_path_once() {
        let mut bundle = bundle();
        // No process started during the trace: no default root.
        bundle.trace.processes[0].start_ns = None;
        let analysis = Analysis::new(&bundle, Root::Default);
        let Err(why) = analysis.root_path() else {
            panic!("a root without a process that started");
        };
        let why = why.to_string();
        let said = format!("no critical path: {why}");
        let page = |warnings: &[String]| {
            analysis.report_data(&Page {
                title: "t",
                command: &[],
                selection: &Selection::default(),
                filter_text: &[],
                warnings,
            })
        };
        let data = page(&[]);
        assert!(data.critical_path.is_none());
        assert_eq!(data.meta.warnings, vec![said.clone()]);
        // Given by the caller too (diagnose's terminal list): still once.
        assert_eq!(page(std::slice::from_ref(&said)).meta.warnings, vec![said]);
    }
}
