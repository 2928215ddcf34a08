//! The analysis behind `slowlab diagnose` and `slowlab lab --trace`: for a
//! trace and its side files, the command's critical path, every detector's
//! findings, and the views of the report — the command's process tree for
//! the CPU, waits, faults and syscalls, the whole system for the CPU
//! summary and the processes. Pure: the caller reads the files and renders
//! and writes the result.

use slowlab_model::bundle::TraceBundle;
use slowlab_model::critical_path::CriticalPath;
use slowlab_model::findings::Finding;

use crate::cpu::{summary, Summary};
use crate::critical_path::{command_root, process_tree};
use crate::detect::{run_all, RootPath};
use crate::export::collapsed_lines;
use crate::faults::{faults_view, FaultsView};
use crate::procs::{procs_view, ProcsView};
use crate::select::{Filter, Selection};
use crate::syscalls::{syscalls_view, SyscallsView};
use crate::waits::{offcpu_collapsed_lines, waits_view, WaitsView};

/// Everything `diagnose` shows.
pub struct Diagnosis {
    pub critical_path: Option<CriticalPath>,
    /// Why there is no critical path, when there is none.
    pub no_path: Option<String>,
    /// Ranked, most costly first.
    pub findings: Vec<Finding>,
    /// The pids of the command's process tree (empty when the command was
    /// not found: the views then cover the whole system).
    pub command_pids: Vec<i32>,
    /// CPU of the command's tree, and of the whole system.
    pub command_cpu: Summary,
    pub system_cpu: Summary,
    pub waits: WaitsView,
    pub faults: FaultsView,
    pub procs: ProcsView,
    pub syscalls: SyscallsView,
    /// Folded stacks of the command's samples, and of its blocked time (µs).
    pub cpu_lines: Vec<String>,
    pub offcpu_lines: Vec<String>,
}

/// Analyzes a trace recorded while `command` ran (`perf record -- command`).
pub fn diagnose(bundle: &TraceBundle, command: &[String]) -> Diagnosis {
    let trace = &bundle.trace;
    let root = command_root(trace, command);
    let (root_path, no_path) = match RootPath::new(trace, root) {
        Ok(rp) => (Some(rp), None),
        Err(e) => (None, Some(e.to_string())),
    };
    let findings = run_all(
        trace,
        bundle.paths.as_deref(),
        bundle.cgroups.as_ref(),
        root_path.as_ref(),
    );
    let command_pids: Vec<i32> = root
        .map(|r| {
            process_tree(trace, r)
                .into_iter()
                .map(|p| trace.processes[p.ix()].pid)
                .collect()
        })
        .unwrap_or_default();
    let all = Selection::default();
    let tree = Selection {
        filters: command_pids.iter().map(|&p| Filter::Pid(p)).collect(),
        ..Selection::default()
    };
    Diagnosis {
        critical_path: root_path.map(|rp| rp.path),
        no_path,
        findings,
        command_cpu: summary(trace, &tree, Some(25)),
        system_cpu: summary(trace, &all, Some(25)),
        waits: waits_view(trace, &tree, Some(3)),
        faults: faults_view(trace, &tree, 1.0, Some(5)),
        procs: procs_view(trace, &all, 1.0, 10),
        syscalls: syscalls_view(trace, &tree, bundle.paths.as_deref(), 3),
        cpu_lines: collapsed_lines(trace, &tree),
        offcpu_lines: offcpu_collapsed_lines(trace, &tree),
        command_pids,
    }
}
